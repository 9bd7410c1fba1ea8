"""Watch-driven: the informers list and watch the strict API server; a target and its pods
appear; the shell issues the expected resize through pods/{name}/resize, and the server
accepts it (valid JSON patch, resources only)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.handlers import WATCHED, parse_foresize
from foresize.shells.kube.informer import Informer, Informers
from foresize.shells.kube.shell import KubeShell
from foresize.shells.kube.state import ClusterState
from support.kube_objects import SUGGESTION, seed_workload, target, wait_for_resizes, web_pod


async def test_target_and_pods_appear_and_the_shell_resizes(apiserver, caplog):
    caplog.set_level(logging.DEBUG)
    seed_workload(apiserver)
    url = apiserver.url
    state = ClusterState(target_parser=parse_foresize)
    api = KubeApi.from_url(url)
    executor = KubeExecutor(api, server_version=(1, 34), pod_lookup=state.pod)
    shell = KubeShell(state, executor)
    informers = Informers([Informer(api, state, w) for w in WATCHED if not w.optional])
    stop = asyncio.Event()
    watching = informers.tasks(stop)
    loop_stop = asyncio.Event()
    loop = None
    try:
        assert await asyncio.wait_for(informers.wait_synced(stop), 10)
        loop = asyncio.create_task(shell.run(loop_stop, interval=0.1))
        # Nothing to do yet: no target, no pods.
        await asyncio.sleep(0.3)
        assert apiserver.calls("PATCH", r"/resize$") == []
        # The target appears (a create drops status, as on a real server: the recommender
        # writes the suggestion through the status subresource), then the pods.
        answer = await api.request(
            "POST", "/apis/foresize.io/v1/namespaces/shop/aiscaletargets", target()
        )
        assert answer.code == 201, answer.body
        answer = await api.request(
            "PATCH",
            "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status",
            {"status": {"hasEnoughDataToScale": True, "vertical_suggestion": SUGGESTION}},
            "application/merge-patch+json",
        )
        assert answer.code == 200, answer.body
        for name in ("web-1", "web-2"):
            apiserver.seed(web_pod(apiserver, name))
        resized = await wait_for_resizes(apiserver, 2)
        diag = (
            f"pods={sorted(state.pods)} targets={state.foresize['AIScaleTarget']} "
            f"workloads={sorted(state.workloads)} passes={shell.passes} "
            f"requests={[(r.method, r.path, r.code) for r in apiserver.requests][-25:]} "
            f"log={caplog.text[-3000:]}"
        )
        assert {r.path for r in resized} == {
            "/api/v1/namespaces/shop/pods/web-1/resize",
            "/api/v1/namespaces/shop/pods/web-2/resize",
        }, diag
        for r in resized:
            assert r.content_type == "application/json-patch+json"
            ops = [op for op in r.body if op["path"] != "/metadata/uid"]
            assert ops == [
                {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
                {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "600m"},
                {
                    "op": "add",
                    "path": "/spec/containers/0/resources/requests/memory",
                    "value": "256Mi",
                },
            ]
        # The server applied it: the pod's spec changed and its generation went up.
        live = apiserver.get("Pod", "shop", "web-1")
        assert live["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "600m"
        assert live["metadata"]["generation"] == 2
        # The watches saw the target.
        assert state.foresize["AIScaleTarget"][("shop", "web")] is not None
        status_path = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status"
        status_patches, events = [], []
        for _ in range(50):  # the rest of the pass: status write, then the outcome events
            status_patches = [r for r in apiserver.calls("PATCH", status_path) if r.code == 200]
            events = [r.body for r in apiserver.calls("POST", r"^/api/v1/namespaces/shop/events$")]
            if len(status_patches) > 1 and any(e["reason"] == "Resized" for e in events):
                break
            await asyncio.sleep(0.1)
        assert len(status_patches) > 1, "the planner writes the target's status"
        assert any(
            e["reason"] == "Resized" and e["involvedObject"]["name"] == "web-1" for e in events
        ), [(e["reason"], e["involvedObject"]["name"], e["message"]) for e in events]
        # Nothing the operator sent was refused.
        refused = [(r.method, r.path, r.code) for r in apiserver.requests if r.code >= 400]
        assert refused == [], refused
    finally:
        loop_stop.set()
        if loop is not None:
            await asyncio.wait_for(loop, 5)
        stop.set()
        for task in watching:
            task.cancel()  # an idle watch stream is not worth waiting for
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()
