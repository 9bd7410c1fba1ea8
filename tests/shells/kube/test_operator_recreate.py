"""`update_mode: recreate` with the real `foresize operator` process against the strict API
server (kube.md, "Surprising": no eviction was seen against an independent emulator).

Why the audit saw none: its suggestion (600m/256Mi on pods at 200m/256Mi) changed CPU only,
and `recreate` evicts only for the resources in `update_policy.recreate_resources`, which
is `[memory]` by default (docs/api.md, docs/vertical.md): a CPU change alone waits for the
pods' natural turnover, where the admission webhook gives the new pods the new requests.
Here both targets run in one process: the one whose memory changes is evicted (in batches,
the last ready replica held by `min_replicas`); the CPU-only one is not, until CPU is named
in `recreate_resources`."""

from __future__ import annotations

import signal

from foresize.bench.chaos.cluster import NAMESPACE, OperatorProcess, wait_until
from foresize.testing.apiserver import StrictApiServer
from support.kube_objects import deployment, namespace, node, pod, replicaset, target


def seed_app(
    server: StrictApiServer, ns: str, memory: str, recreate_resources: list[str] | None = None
) -> None:
    """Deployment web in `ns`, 3 Running pods at 200m/256Mi, and a recreate target whose
    suggestion is 600m CPU and `memory`."""
    server.seed(namespace(ns))
    dep = server.seed(deployment(namespace=ns, replicas=3))
    rs = server.seed(replicaset(namespace=ns, deployment_uid=dep["metadata"]["uid"], replicas=3))
    for i in range(3):
        owner = ("ReplicaSet", "web-abc", rs["metadata"]["uid"])
        server.seed(pod(f"web-{i}", ns, owner=owner))
    suggestion = {
        "uid": f"s-{ns}",
        "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": memory}}],
    }
    obj = target(namespace=ns, update_mode="recreate", suggestion=suggestion)
    if recreate_resources is not None:
        obj["spec"]["vertical"]["update_policy"]["recreate_resources"] = recreate_resources
    server.seed(obj)


async def test_the_operator_process_evicts_in_recreate_mode_for_the_resources_it_names(
    tmp_path,
):
    async with StrictApiServer(bookmark_interval=1.0) as server:
        server.seed(namespace(NAMESPACE))
        server.seed(node(cpu="16", memory="32Gi"))
        seed_app(server, "memory", "512Mi")  # memory changes: evicted
        seed_app(server, "cpu", "256Mi")  # CPU only, default recreate_resources: kept
        seed_app(server, "cpu-named", "256Mi", ["cpu", "memory"])  # CPU named: evicted
        operator = OperatorProcess(tmp_path, "a", server=server.url, args=[])
        await operator.start()
        try:

            def evicted(ns: str) -> list[str]:
                path = f"^/api/v1/namespaces/{ns}/pods/[^/]+/eviction$"
                return sorted(r.path.split("/")[-2] for r in server.calls("POST", path, code=201))

            def status(ns: str) -> dict:
                return server.get("AIScaleTarget", ns, "web").get("status") or {}

            def settled() -> bool:
                counts = [status(ns).get("pods_evicted") for ns in ("memory", "cpu-named", "cpu")]
                return counts == [2, 2, 0]

            assert await wait_until(settled, 40), operator.output()[-3000:]
            # Two of three: the last ready replica is held (min_replicas 2 by default).
            assert len(evicted("memory")) == len(evicted("cpu-named")) == 2
            assert len(status("memory")["pods_held_by_min_replicas"]) == 1
            # The CPU-only change in default recreate mode: passes went by, no eviction.
            assert evicted("cpu") == [] and status("cpu")["pods_held_by_min_replicas"] == []
        finally:
            operator.send(signal.SIGTERM)
            assert await operator.wait(15) == 0
