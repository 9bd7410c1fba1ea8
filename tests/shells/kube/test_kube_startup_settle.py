"""The start-up boost that ends when usage settles, in the kube shell (strict API server,
shipped RBAC): the collector's per-pod CPU window (`KubeShell.pod_usage`) is what the pass
reads; a Ready pod still busy keeps its boost, one whose samples since Ready fell under
the unboosted request is resized back in place."""

from __future__ import annotations

import json

from foresize.core.cluster.boost import BOOST_ANNOTATION, PodCpuWindow
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell, Locked
from support.kube import base_state
from support.kube_objects import container, load_state, seed_workload, target, web_pod

READY_AT = "2026-05-28T20:00:00Z"


def seed(server) -> float:
    """A pod boosted at admission to 1 CPU (back to 250m, limit 2 -> 500m), Ready at
    READY_AT, whose boost ends once 2 samples in a row are under 250m."""
    seed_workload(server)
    p = web_pod(server, "web-1")
    p["spec"]["containers"] = [
        container(requests={"cpu": "1", "memory": "256Mi"}, limits={"cpu": "2"})
    ]
    p["status"]["containerStatuses"][0]["resources"] = p["spec"]["containers"][0]["resources"]
    p["status"]["containerStatuses"][0]["allocatedResources"] = {"cpu": "1", "memory": "256Mi"}
    p["status"]["conditions"][0]["lastTransitionTime"] = READY_AT
    p["metadata"]["annotations"] = {
        BOOST_ANNOTATION: json.dumps(
            {
                "containers": {"app": {"request": 250, "limit": 500}},
                "settle": {"samples": 2, "below": 1.0, "timeout": 600.0},
            }
        )
    }
    server.seed(p)
    server.seed(target("web", startup_boost={"cpu_factor": 4, "settle": {"samples": 2}}))
    return 1_779_998_400.0  # READY_AT as epoch seconds


async def run_pass(server, window: PodCpuWindow, now: float) -> list:
    state = base_state()
    load_state(server, state)
    api = KubeApi.from_url(server.url)
    try:
        shell = KubeShell(state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: now)
        shell.pod_usage = Locked(window)
        await shell.run_pass()
    finally:
        await api.close()
    return server.calls("PATCH", "/resize$", code=200)


async def test_a_ready_pod_keeps_its_boost_until_its_usage_settles(apiserver):
    ready = seed(apiserver)
    window = PodCpuWindow()
    window.add("shop/web-1", ready + 60, "app", 0.9)
    window.add("shop/web-1", ready + 120, "app", 0.2)
    assert await run_pass(apiserver, window, ready + 130) == []  # one calm sample only
    window.add("shop/web-1", ready + 180, "app", 0.2)
    (resize,) = await run_pass(apiserver, window, ready + 190)
    assert resize.path == "/api/v1/namespaces/shop/pods/web-1/resize"
    res = apiserver.get("Pod", "shop", "web-1")["spec"]["containers"][0]["resources"]
    assert res["requests"]["cpu"] == "250m" and res["limits"]["cpu"] == "500m"
