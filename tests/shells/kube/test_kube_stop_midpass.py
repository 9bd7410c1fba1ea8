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
from foresize.shells.kube.handlers import accepted_condition, handled, parse_foresize
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


# A pass made slow target by target (in its worker thread), and how long after the stop a
# target may still be started: the one in progress at the stop.
SLOW_TARGETS = 20
SECONDS_A_TARGET = 0.3


async def test_a_stop_while_a_slow_pass_plans_ends_the_pass_at_once_and_sends_nothing(
    apiserver, monkeypatch, operator_options, caplog
):
    """SIGTERM while a pass plans (a 50k-pod pass is a minute of wall time on a loaded
    machine): the pass is given up at its next checkpoint, so the control loop ends within
    the shutdown grace and no worker thread is left for the process' exit to wait on
    (asyncio.run joins them with no bound: the hung shutdown, exit 1); nothing is written
    after the Leases are released."""
    import threading
    import time

    import foresize.core.vertical.planner as planner_module
    import foresize.shells.kube.shell as shell_module
    from foresize.core.reconcile import plan_pass
    from foresize.shells.kube.operator import run_operator
    from support.kube_objects import namespace

    caplog.set_level(logging.INFO)
    apiserver.seed(namespace("foresize"))
    seed_workload(apiserver)
    for i in range(SLOW_TARGETS):  # as Kopf leaves them: its handlers write nothing more
        obj = handled(target(f"web-{i}", suggestion=SUGGESTION))
        obj["status"]["conditions"] = [accepted_condition(None)]
        apiserver.seed(obj)
    started: list[float] = []
    entered = threading.Event()
    start_run = planner_module._start_run

    def slow_start_run(*args: Any, **kwargs: Any) -> Any:
        started.append(time.monotonic())
        entered.set()
        time.sleep(SECONDS_A_TARGET)
        return start_run(*args, **kwargs)

    monkeypatch.setattr(planner_module, "_start_run", slow_start_run)
    passes_left = threading.Event()  # set as the (first) pass returns or raises

    def watched_pass(*args: Any, **kwargs: Any) -> Any:
        try:
            return plan_pass(*args, **kwargs)
        finally:
            passes_left.set()

    monkeypatch.setattr(shell_module, "plan_pass", watched_pass)
    opts = operator_options(server=apiserver.url, shutdown_grace=2.0, suggest_interval=3600)
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    assert await asyncio.to_thread(entered.wait, 30.0), "no pass started"
    stopped_at = time.monotonic()
    stop.set()  # what SIGTERM does
    assert await asyncio.wait_for(task, 20) == 0
    # What asyncio.run waits for before the process can exit: the pass's worker thread.
    assert await asyncio.to_thread(passes_left.wait, 2.0), "the pass still runs"
    after_stop = [t for t in started if t > stopped_at]
    assert len(after_stop) <= 1, f"{len(after_stop)} targets planned after the stop"
    assert not [r for r in caplog.records if "control loop did not stop" in r.getMessage()]
    assert any("pass was given up" in r.getMessage() for r in caplog.records)
    released = [
        r.seq
        for r in apiserver.requests
        if r.resource == "leases"
        and r.method == "PATCH"
        and ((r.body or {}).get("spec") or {}).get("holderIdentity", "") is None
    ]
    assert released, "no Lease released"
    late = [
        (r.method, r.path, r.body)
        for r in apiserver.requests
        if r.seq > released[0] and r.method != "GET" and r.resource != "leases"
    ]
    assert late == []
