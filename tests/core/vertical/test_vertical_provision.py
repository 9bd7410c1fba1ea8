"""The capacity fallback where a node autoscaler adds nodes (`core.vertical.provision`): an
upsize no node has room for is recreated into Pending after the target's stall_timeout."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, EvictPod
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.vertical import WorkerConfig, WorkerState, plan
from foresize.core.vertical.provision import EVICTING_INTO_PENDING, KARPENTER_NODE_LABEL
from support.vertical import KEY, of, pod, snap, sugg, target

# n1 holds two pods of 500m and nothing more; each wants 800m: no node has room for the
# bigger pod now, but an empty n1 would hold it.
SUGGESTION = sugg(cpu=800, mem=100 * MIB)


def full_node(**disruption: Any) -> ClusterSnapshot:
    t = target("in_place_or_recreate", disruption={"max_disrupted": 2, **disruption})
    return snap([pod("a", cpu=500), pod("b", cpu=500)], [t], nodes={"n1": 1000})


def first_eviction(
    s: ClusterSnapshot, config: WorkerConfig, times: tuple[float, ...] = (0.0, 60.0, 120.0, 600.0)
) -> tuple[float | None, list[EmitEvent]]:
    state = WorkerState()
    for t in times:
        actions, state = plan(s, t, state, config, suggestions=SUGGESTION)
        if of(actions, EvictPod):
            return t, of(actions, EmitEvent)
    return None, []


def test_with_a_node_autoscaler_a_held_upsize_is_recreated_into_pending_after_stall_timeout() -> (
    None
):
    at, events = first_eviction(full_node(), WorkerConfig(node_autoscaler=True))
    assert at == 120.0  # held at 0 and 60 s, recreated at the default stall_timeout (2 min)
    reasons = {(e.kind, e.reason) for e in events}
    assert ("Pod", EVICTING_INTO_PENDING) in reasons
    assert ("AIScaleTarget", EVICTING_INTO_PENDING) in reasons


def test_the_bound_is_the_targets_stall_timeout() -> None:
    s = full_node(stall_timeout="5m")
    at, _ = first_eviction(s, WorkerConfig(node_autoscaler=True), (0.0, 120.0, 240.0, 300.0))
    assert at == 300.0


def test_without_a_node_autoscaler_no_pod_is_evicted_into_pending() -> None:
    at, _ = first_eviction(full_node(), WorkerConfig(node_autoscaler=False))
    assert at is None


def test_auto_reads_karpenter_from_the_nodes() -> None:
    s = full_node()
    assert first_eviction(s, WorkerConfig())[0] is None  # no NodePool label: no provisioning
    s.nodes["n1"].labels[KARPENTER_NODE_LABEL] = "default"
    assert first_eviction(s, WorkerConfig())[0] == 120.0


def test_a_pod_no_node_type_holds_never_goes_pending() -> None:
    s = full_node()
    state = WorkerState()
    too_big = sugg(cpu=2000, mem=100 * MIB)  # more than n1's whole allocatable
    for t in (0.0, 120.0, 600.0):
        actions, state = plan(s, t, state, WorkerConfig(node_autoscaler=True), suggestions=too_big)
        assert not of(actions, EvictPod)


def test_an_opted_out_pod_is_never_recreated_into_pending() -> None:
    s = full_node()
    for p in s.pods:
        p.annotations["karpenter.sh/do-not-disrupt"] = "true"
    assert first_eviction(s, WorkerConfig(node_autoscaler=True))[0] is None


def test_the_hold_clock_survives_a_restart() -> None:
    s = full_node()
    config = WorkerConfig(node_autoscaler=True)
    _, state = plan(s, 0.0, WorkerState(), config, suggestions=SUGGESTION)
    restored = WorkerState.from_statuses({KEY: state.to_status(KEY)})
    actions, _ = plan(s, 120.0, restored, config, suggestions=SUGGESTION)
    assert of(actions, EvictPod)  # the hold began at 0 s, before the restart


def test_a_hold_ends_when_its_upsize_vanishes() -> None:
    """The suggestion falls back to what the pods have: the hold for room is dropped from
    status, and a later upsize waits its own stall_timeout instead of inheriting the old
    clock and being recreated at once."""
    s = full_node()
    config = WorkerConfig(node_autoscaler=True)
    current = sugg(cpu=500, mem=100 * MIB)  # what the pods request: no upsize
    _, state = plan(s, 0.0, WorkerState(), config, suggestions=SUGGESTION)
    assert state.to_status(KEY)["noRoomSince"]  # both pods held for room
    _, state = plan(s, 60.0, state, config, suggestions=current)
    assert not state.to_status(KEY)["noRoomSince"]
    actions, state = plan(s, 120.0, state, config, suggestions=SUGGESTION)
    assert not of(actions, EvictPod)  # held again from 120 s
    actions, _ = plan(s, 240.0, state, config, suggestions=SUGGESTION)
    assert of(actions, EvictPod)
