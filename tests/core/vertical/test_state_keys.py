"""The worker's state is keyed by kind as well as namespace/name: a DaemonSetAutoscaler's
resize results never count into (or raise Events through) the state of an AIScaleTarget of
the same namespace and name, and an AIScaleTarget's state keeps the key releases before
persisted it under."""

from __future__ import annotations

import dataclasses

from foresize.core.cluster.actions import ActionResult, ContainerResize, ResizePod
from foresize.core.reconcile import ActionQueue
from foresize.core.vertical.results import on_result
from foresize.core.vertical.state import TargetState, WorkerState, state_key

OK = ActionResult(ok=True)
REFUSED = ActionResult(ok=False, code=422, reason="Invalid", message="no")


def _dsa_resize(pod: str = "agent-x") -> ResizePod:
    return ResizePod(
        "mon",
        pod,
        (ContainerResize("app", {"cpu": 300}),),
        target="mon/agent",
        reason="DaemonSetAutoscaler",
        direction="up",
        uid=f"uid-{pod}",
        target_kind="DaemonSetAutoscaler",
    )


def _worker_with_target() -> WorkerState:
    """What a restart reads back: the target's persisted `disruption` under "mon/agent"."""
    ts = TargetState()
    ts.inflight["agent-x"] = "uid-agent-x"
    ts.budget_pending["agent-x"] = ("s1", True)
    state = WorkerState.from_statuses({"mon/agent": TargetState().to_status()})
    state.targets["mon/agent"] = ts
    return state


def test_the_keys_of_each_kind() -> None:
    assert state_key("AIScaleTarget", "mon/agent") == "mon/agent"
    assert state_key("DaemonSetAutoscaler", "mon/agent") == "DaemonSetAutoscaler/mon/agent"


def test_a_daemonset_resize_does_not_count_into_a_target_of_the_same_name() -> None:
    state = _worker_with_target()
    after = on_result(state, _dsa_resize(), OK, 10.0)
    ts = after.targets["mon/agent"]
    assert ts.resized == 0
    assert ts.budget.changes == [] and ts.budget.disruptions == []
    assert "agent-x" in ts.budget_pending  # still the target's own pending change
    # The target's own resize of the same pod name counts, under the key it always had.
    own = dataclasses.replace(_dsa_resize(), target_kind="AIScaleTarget")
    mine = on_result(state, own, OK, 10.0).targets["mon/agent"]
    assert mine.resized == 1 and len(mine.budget.disruptions) == 1


def test_a_refused_daemonset_resize_leaves_the_target_state_alone() -> None:
    state = _worker_with_target()
    after = on_result(state, _dsa_resize(), REFUSED, 10.0)
    ts = after.targets["mon/agent"]
    assert ts.refused == {} and ts.stalls == {} and ts.outbox == []
    # The refusal itself is kept for the DaemonSetAutoscaler (by pod uid, `cluster.refusals`).
    assert "uid-agent-x" in after.refusals


def test_the_queue_sends_no_target_event_for_a_daemonset_refusal() -> None:
    queue = ActionQueue([_dsa_resize()], _worker_with_target(), 10.0)
    action = queue.next()
    assert action is not None
    queue.feed(action, REFUSED)
    assert queue.next() is None  # no ResizeRefused Event queued from the target's outbox
    assert queue.state.targets["mon/agent"].stalls == {}
