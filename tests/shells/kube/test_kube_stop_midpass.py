"""kube.md N5: a stop in the middle of a pass. The actions not yet sent are not logged one
by one as "resize failed (0 NotLeader)" in the changes log (the audit trail users read):
one line says how many were not sent; what was sent is recorded as usual."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from foresize.core.cluster.actions import ResizePod
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.gate import GatedExecutor
from foresize.shells.kube.handlers import parse_foresize
from foresize.shells.kube.shell import KubeShell
from foresize.shells.kube.state import ClusterState
from support.kube_objects import SUGGESTION, load_state, seed_workload, target, web_pod


class StopAfterFirstResize:
    """The executor, with SIGTERM arriving while the first resize is on the wire."""

    def __init__(self, inner: KubeExecutor, stop: asyncio.Event) -> None:
        self.inner, self.stop = inner, stop

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply_guarded(self, action: Any) -> Any:
        result = await self.inner.apply_guarded(action)
        if isinstance(action, ResizePod):
            self.stop.set()
        return result


async def test_a_stop_mid_pass_logs_one_line_not_a_failure_per_action(apiserver, caplog):
    caplog.set_level(logging.INFO)
    seed_workload(apiserver)
    for i in range(4):
        apiserver.seed(web_pod(apiserver, f"web-{i}"))
    apiserver.seed(target(suggestion=SUGGESTION))
    state = ClusterState(target_parser=parse_foresize)
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    stop = asyncio.Event()
    try:
        inner = KubeExecutor(api, server_version=(1, 34), pod_lookup=state.pod)
        gated = GatedExecutor(StopAfterFirstResize(inner, stop), None, stop)
        await KubeShell(state, gated).run_pass()
    finally:
        await api.close()
    assert len(apiserver.calls("PATCH", "/resize$")) == 1  # then the stop
    changes = [r.getMessage() for r in caplog.records if r.name == "foresize.changes"]
    assert [m for m in changes if "NotLeader" in m or "failed" in m] == []
    assert changes.count("resize ok") == 1, changes  # the one sent
    (summary,) = [r.getMessage() for r in caplog.records if "not sent" in r.getMessage()]
    left = int(re.search(r"stopping: (\d+) planned action", summary)[1])
    assert left >= 3  # the three other resizes at least
