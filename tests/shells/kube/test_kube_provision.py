"""The kube shell runs the capacity fallback where a node autoscaler adds nodes
(`core.vertical.provision`) against the strict API server: on a full node of a Karpenter
NodePool an upsize no node has room for is recreated into Pending (an Eviction, under the
shipped RBAC) once it has been held for the target's stall_timeout; told there is no node
autoscaler (`--node-autoscaler off`), the shell never evicts it."""

from __future__ import annotations

from foresize.core.vertical import WorkerConfig
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell
from support.kube import base_state
from support.kube_objects import container, deployment, load_state, node, pod, replicaset, target

NOW = 1_780_000_000.0
# 800m per pod: neither fits the full 1-CPU node beside its sibling, an empty one would.
SUGGESTION = {
    "uid": "sugg-1",
    "containers": [{"name": "app", "requests": {"cpu": "800m", "memory": "256Mi"}}],
}


def seed(server) -> None:
    """A 1-CPU node of NodePool `general` with two 500m pods of Deployment shop/web."""
    n = node(cpu="1")
    n["metadata"]["labels"] = {"karpenter.sh/nodepool": "general"}
    server.seed(n)
    template = [container(requests={"cpu": "500m", "memory": "256Mi"})]
    dep = server.seed(deployment(containers=template))
    rs = replicaset(deployment_uid=dep["metadata"]["uid"])
    rs["spec"]["template"]["spec"]["containers"] = template
    rs_uid = server.seed(rs)["metadata"]["uid"]
    for name in ("web-1", "web-2"):
        server.seed(pod(name, owner=("ReplicaSet", "web-abc", rs_uid), containers=template))
    server.seed(target("web", update_mode="in_place_or_recreate", suggestion=SUGGESTION))


async def evictions_after(apiserver, config: WorkerConfig | None) -> list[int]:
    """Evictions sent at the first pass and at one 2 minutes later."""
    seed(apiserver)
    state = base_state()
    api = KubeApi.from_url(apiserver.url)
    path = "^/api/v1/namespaces/shop/pods/[^/]+/eviction$"
    counts = []
    try:
        now = [NOW]
        shell = KubeShell(
            state,
            KubeExecutor(api, pod_lookup=state.pod),
            clock=lambda: now[0],
            worker_config=config,
        )
        for step in (0.0, 120.0):
            now[0] = NOW + step
            load_state(apiserver, state)
            await shell.run_pass()
            counts.append(len(apiserver.calls("POST", path, code=201)))
    finally:
        await api.close()
    return counts


async def test_on_a_karpenter_node_the_held_upsize_is_recreated_into_pending(apiserver):
    # The default (auto) reads Karpenter's label from the node.
    assert await evictions_after(apiserver, None) == [0, 1]


async def test_told_there_is_no_node_autoscaler_the_shell_never_evicts(apiserver):
    assert await evictions_after(apiserver, WorkerConfig(node_autoscaler=False)) == [0, 0]
