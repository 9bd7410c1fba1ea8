"""The operator follows the API server's version while it runs: a control plane upgraded
from 1.32 (no `pods/resize`) to 1.34 under a running operator gets in-place resizes
without a restart."""

from __future__ import annotations

import asyncio

from foresize.shells.kube.operator import run_operator
from support.kube_objects import SUGGESTION, namespace, seed_workload, target, web_pod


def _in_place_unsupported(apiserver) -> bool:
    for r in apiserver.calls("PATCH", r"/aiscaletargets/web/status$", code=200):
        conditions = ((r.body or {}).get("status") or {}).get("conditions") or []
        if any(
            c.get("type") == "InPlaceResizeUnsupported" and c.get("status") == "True"
            for c in conditions
        ):
            return True
    return False


async def test_an_upgraded_control_plane_is_noticed_without_a_restart(apiserver, operator_options):
    apiserver.kube_version = (1, 32)
    apiserver.seed(namespace("foresize"))
    seed_workload(apiserver)
    apiserver.seed(target(suggestion=SUGGESTION))
    for name in ("web-1", "web-2"):
        apiserver.seed(web_pod(apiserver, name))
    opts = operator_options(server=apiserver.url, version_check_interval=0.2, suggest_interval=3600)
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    try:
        for _ in range(100):  # 1.32: the target is told why nothing happens
            if _in_place_unsupported(apiserver):
                break
            await asyncio.sleep(0.1)
        assert _in_place_unsupported(apiserver)
        assert not apiserver.calls("PATCH", r"/resize$")
        apiserver.kube_version = (1, 34)  # the control plane is upgraded
        resized = []
        for _ in range(100):
            resized = apiserver.calls("PATCH", r"/resize$", code=200)
            if len(resized) >= 2:
                break
            await asyncio.sleep(0.1)
        assert len(resized) >= 2, [(r.method, r.path, r.code) for r in apiserver.requests][-20:]
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    assert apiserver.internal_errors == []
