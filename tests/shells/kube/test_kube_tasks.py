"""The webhook's index is rebuilt off the event loop (`kube/tasks.refresh_admission_index`):
the snapshot and the index grow with the cluster, and the loop answers the webhooks.

The snapshot is made slow by waiting for an event that only a coroutine on the loop sets:
on the loop, the rebuild would hold it until HOLD ran out, and the flag would be unset."""

from __future__ import annotations

import asyncio
import threading

from foresize.shells.kube.probes import Health
from foresize.shells.kube.state import ClusterState
from foresize.shells.kube.tasks import refresh_admission_index
from foresize.shells.webhook.server import AdmissionState

HOLD = 10.0


async def test_the_admission_index_is_rebuilt_while_the_loop_runs() -> None:
    state = ClusterState()
    loop_ran = threading.Event()
    rebuilt = threading.Event()
    snapshot = state.snapshot
    waits: list[bool] = []  # each rebuild: did the loop run while it waited?

    def slow_snapshot(now: float):
        waits.append(loop_ran.wait(HOLD))
        rebuilt.set()
        return snapshot(now)

    state.snapshot = slow_snapshot  # type: ignore[method-assign]
    health = Health(120.0)
    health.synced = True
    admission = AdmissionState()
    stop = asyncio.Event()
    task = asyncio.create_task(refresh_admission_index(admission, state, health, stop, 0.05))
    await asyncio.sleep(0.1)
    loop_ran.set()  # only possible while the rebuild runs elsewhere
    assert await asyncio.to_thread(rebuilt.wait, HOLD)
    for _ in range(100):
        if admission() is not None:
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, HOLD)
    assert waits[0] is True  # the first rebuild did not hold the loop
    assert admission() is not None
