"""A run's OOM kill seen on the pod watch brings the control loop's next pass forward
(`kube/tasks.control_loop`, `core.vertical.modes.new_run_oom_kill`): the kubelet restarts
the killed container after 10 s, and the pass's in-place raise must land before that,
where the loop's interval is 30 s or more."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from foresize.shells.kube.probes import Health
from foresize.shells.kube.state import ClusterState
from foresize.shells.kube.tasks import control_loop

INTERVAL = 60.0


def _pod(owner_kind: str, finished_at: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"name": "report", "ready": False, "restartCount": 0}
    if finished_at is not None:
        status["restartCount"] = 1
        status["lastState"] = {"terminated": {"reason": "OOMKilled", "finishedAt": finished_at}}
    return {
        "metadata": {
            "name": "report-1-abcde",
            "namespace": "default",
            "uid": "u1",
            "resourceVersion": "1" if finished_at is None else finished_at[-3:-1],
            "ownerReferences": [{"kind": owner_kind, "name": "report-1", "controller": True}],
        },
        "spec": {
            "nodeName": "n",
            "containers": [{"name": "report", "resources": {"requests": {"memory": "1Gi"}}}],
        },
        "status": {"phase": "Running", "containerStatuses": [status]},
    }


class _Shell:
    def __init__(self) -> None:
        self.state = ClusterState()
        self.passes: list[float] = []

    async def run_pass(self) -> None:
        self.passes.append(asyncio.get_running_loop().time())


class _Metrics:
    def __init__(self) -> None:
        self.cache_synced = SimpleNamespace(set=lambda _v: None)
        self.leader = SimpleNamespace(labels=lambda *_a: SimpleNamespace(set=lambda _v: None))

    def forget_targets(self, _keys: Any) -> None:
        pass


async def _passes_after(owner_kind: str, events: list[str | None]) -> int:
    shell = _Shell()
    health = Health(120.0)
    stop = asyncio.Event()
    informers = SimpleNamespace(synced=True)
    task = asyncio.create_task(
        control_loop(shell, informers, stop, INTERVAL, health, _Metrics(), None)
    )
    await asyncio.sleep(0.05)
    assert len(shell.passes) == 1  # the first pass, then the interval's wait
    for finished_at in events:
        shell.state.apply_event("Pod", "MODIFIED", _pod(owner_kind, finished_at))
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 5.0)
    return len(shell.passes) - 1


async def test_a_jobs_pod_oom_killed_brings_the_pass_forward_once_per_kill() -> None:
    # A status without a kill, the kill, the same kill seen again (another status
    # change), a second kill: two passes brought forward, long before the interval.
    kills = [None, "2026-01-05T02:30:00Z", "2026-01-05T02:30:00Z", "2026-01-05T02:31:00Z"]
    assert await _passes_after("Job", kills) == 2


async def test_a_deployments_oom_kill_waits_for_the_interval() -> None:
    # Not a run: its remediation keeps the loop's cadence (`modes.decide_*`).
    assert await _passes_after("ReplicaSet", [None, "2026-01-05T02:30:00Z"]) == 0
