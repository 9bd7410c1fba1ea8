"""The kube shell publishes what Foresize will do (`cluster.pending`) against the strict
API server: the `foresize.io/coming-resources` annotation on the pod whose upsize waits
for room (a merge patch of its metadata, under the shipped RBAC), the
`foresize_pending_upsize_demand{node_pool,resource}` gauge, and both cleared once the
upsize landed."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell
from support.kube import base_state
from support.kube_objects import (
    SUGGESTION,
    container,
    deployment,
    load_state,
    node,
    pod,
    replicaset,
    target,
)

NOW = 1_780_000_000.0
ANNOTATION = "foresize.io/coming-resources"


def seed(server) -> None:
    """A 1-CPU node of NodePool `general` with two 200m pods; the suggestion is 600m:
    the first upsize fits (400m free after it: 1000 - 600 - 200 = 200m), the second not."""
    n = node(cpu="1")
    n["metadata"]["labels"] = {"karpenter.sh/nodepool": "general"}
    server.seed(n)
    template = [container(requests={"cpu": "200m", "memory": "256Mi"})]
    dep = server.seed(deployment(containers=template))
    rs = replicaset(deployment_uid=dep["metadata"]["uid"])
    rs["spec"]["template"]["spec"]["containers"] = template
    rs_uid = server.seed(rs)["metadata"]["uid"]
    for name in ("web-1", "web-2"):
        server.seed(pod(name, owner=("ReplicaSet", "web-abc", rs_uid)))
    server.seed(target("web", suggestion=SUGGESTION))


def gauge(shell: KubeShell) -> dict[tuple[str, str], float]:
    text = shell.metrics.exposition().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == "foresize_pending_upsize_demand":
            for s in family.samples:
                out[(s.labels["node_pool"], s.labels["resource"])] = s.value
    return out


async def test_the_waiting_pod_is_annotated_and_the_pool_demand_exported(apiserver):
    seed(apiserver)
    state = base_state()
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    try:
        now = [NOW]
        shell = KubeShell(state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: now[0])
        await shell.run_pass()
        resized = {r.path.split("/")[-2] for r in apiserver.calls("PATCH", "/resize$", code=200)}
        (waiting,) = {"web-1", "web-2"} - resized
        annotations = apiserver.get("Pod", "shop", waiting)["metadata"].get("annotations") or {}
        doc = json.loads(annotations[ANNOTATION])
        assert doc["cause"] == "waiting-for-room" and doc["version"] == 1
        assert doc["containers"] == {"app": {"requests": {"cpu": "600m", "memory": "256Mi"}}}
        assert doc["upsize"] == {"cpu": "400m"}
        (other,) = resized
        assert ANNOTATION not in (
            apiserver.get("Pod", "shop", other)["metadata"].get("annotations") or {}
        )
        assert gauge(shell) == {("general", "cpu"): 0.4, ("general", "memory"): 0.0}

        # The other pod went away (room freed): the upsize is sent, the annotation and the
        # demand go (a series at 0 is dropped, one that was not goes to 0 first).
        apiserver.delete("Pod", "shop", other)
        now[0] += 60
        load_state(apiserver, state)
        await shell.run_pass()
        assert waiting in {r.path.split("/")[-2] for r in apiserver.calls("PATCH", "/resize$")}
        annotations = apiserver.get("Pod", "shop", waiting)["metadata"].get("annotations") or {}
        assert ANNOTATION not in annotations
        assert gauge(shell) == {("general", "cpu"): 0.0}
        load_state(apiserver, state)
        await shell.run_pass()
        assert gauge(shell) == {}  # at 0 for one pass, then gone
    finally:
        await api.close()
