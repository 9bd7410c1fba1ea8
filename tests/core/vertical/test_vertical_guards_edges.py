"""Edges of the disruption worker's rules that a one-line mutation of the code changed
without any other test noticing (session 7 mutation round): stall reading, the circuit
breaker's bookkeeping, the PDB back-off default and the capacity guard's arithmetic."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import ActionResult, EvictPod, ResizePod
from foresize.core.cluster.model import PodCondition
from foresize.core.vertical import WorkerConfig, WorkerState, execute, plan
from foresize.core.vertical.state import HALF_OPEN, BreakerState, PendingEviction, TargetState
from support.vertical import (
    KEY,
    apply_ok,
    deferred,
    error,
    names,
    of,
    pod,
    selector_target,
    snap,
    sugg,
    target,
)


def _stuck(**kubelet: int) -> Any:
    """A pod whose resize is InProgress with an Error (memory limit below usage)."""
    alloc = {"cpu": 200, "memory": 300 * MIB}
    return pod("stuck", cpu=200, mem=200 * MIB, alloc=alloc, conditions=[error()], **kubelet)


def _deferred_upsize(t: Any) -> Any:
    """A snapshot of one pod asking for 600m with 100m allocated, Deferred on a 700m node."""
    held = pod("held", cpu=600, alloc={"cpu": 100, "memory": 100 * MIB}, conditions=[deferred()])
    return snap([held], [t], nodes={"n1": 700})


# --------------------------------------------------------------------------- stalls


def test_a_pending_condition_whose_status_is_false_is_not_a_stall() -> None:
    """Only `PodResizePending` with status True stalls a resize: a False one (the kubelet
    has cleared it) never starts the stall clock, so nothing is ever evicted for it."""
    p = pod(
        "p0",
        cpu=200,
        mem=200 * MIB,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[PodCondition("PodResizePending", "False", "Deferred", "")],
    )
    s = snap([p], [target("in_place_or_recreate")])
    state = WorkerState()
    for t in (0.0, 300.0, 3600.0):
        actions, state = plan(s, t, state, suggestions=sugg())
        assert not of(actions, EvictPod)
    assert not state.targets[KEY].stalls


def test_the_stall_clock_keeps_running_while_the_kubelet_has_not_seen_the_newest_spec() -> None:
    """A pass where the kubelet has not observed the newest generation says nothing about
    the stall: it is not forgotten, and the eviction comes stall_timeout after it was
    first seen."""
    t = target("in_place_or_recreate", min_replicas=1)

    stuck = _stuck()
    unseen = _stuck(generation=2, observed=1)
    stuck2 = _stuck(generation=2, observed=2)
    state = WorkerState()
    _, state = plan(snap([stuck], [t]), 0.0, state, suggestions=sugg())
    _, state = plan(snap([unseen], [t]), 60.0, state, suggestions=sugg())
    assert state.targets[KEY].stalls["uid-stuck"].first_seen == 0.0
    actions, state = plan(snap([stuck2], [t]), 120.0, state, suggestions=sugg())
    assert names(actions, EvictPod) == ["stuck"]


# --------------------------------------------------------------------------- circuit breaker


def _recreate_target() -> Any:
    return target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})


def test_a_breaker_that_closed_starts_its_next_back_off_at_one_minute() -> None:
    """A probe that comes back right closes the breaker and forgets its openings: the next
    run of stale recreations opens it for 1 min again, not for twice the last back-off."""
    t = _recreate_target()
    cfg = WorkerConfig()
    state, now, gen = WorkerState(), 0.0, 0
    current = pod("p-0")

    def cycle(stale: bool) -> None:
        nonlocal state, now, gen, current
        s = snap([current], [t])
        actions, state = plan(s, now, state, cfg, suggestions=sugg())
        if of(actions, EvictPod):
            state, _ = execute(actions, apply_ok, state, s, now, cfg)
            gen += 1
            current = (
                pod(f"p-{gen}", created=now + 5)
                if stale
                else pod(f"p-{gen}", cpu=200, mem=200 * MIB, created=now + 5)
            )
        now += 10

    while state.targets.get(KEY) is None or state.targets[KEY].breaker.state != "open":
        cycle(stale=True)
    assert state.targets[KEY].breaker.backoff == 60.0
    now = state.targets[KEY].breaker.next_probe_at or now
    cycle(stale=False)  # the probe comes back right
    cycle(stale=False)  # ... and is judged: closed
    assert state.targets[KEY].breaker.state == "closed"
    # The suggestion stays the same; the pod drifts away from it again (e.g. a rollout).
    current = pod(f"p-{gen}", created=now)
    while state.targets[KEY].breaker.state != "open":
        cycle(stale=True)
    assert state.targets[KEY].breaker.backoff == 60.0


def test_evictions_made_for_an_older_suggestion_are_not_judged_against_a_new_one() -> None:
    """Replacements of pods evicted for suggestion s1 come back at s1's sizes; judged
    against a new suggestion s2 they would all look stale and open the breaker."""
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 3, "interval": "1s"})
    cfg = WorkerConfig()
    pods = [pod(f"p{i}") for i in range(3)]
    s = snap(pods, [t])
    actions, state = plan(s, 0.0, WorkerState(), cfg, suggestions=sugg(uid="s1"))
    assert len(of(actions, EvictPod)) == 3
    state, _ = execute(actions, apply_ok, state, s, 0.0, cfg)
    # The replacements carry s1's sizes; the recommender has meanwhile published s2.
    back = [pod(f"r{i}", cpu=200, mem=200 * MIB, created=5.0) for i in range(3)]
    _, state = plan(snap(back, [t]), 10.0, state, cfg, suggestions=sugg(cpu=400, uid="s2"))
    b = state.targets[KEY].breaker
    assert b.state == "closed" and b.no_progress == 0


def test_an_eviction_without_a_replacement_stops_waiting_after_the_verdict_timeout() -> None:
    """The workload was scaled down: nothing replaces the evicted pod. After
    eviction_verdict_timeout the eviction counts as neither progress nor failure, so a pod
    created much later (a scale-up) is not taken for its replacement."""
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})
    cfg = WorkerConfig()
    s = snap([pod("p0")], [t])
    actions, state = plan(s, 0.0, WorkerState(), cfg, suggestions=sugg())
    state, _ = execute(actions, apply_ok, state, s, 0.0, cfg)
    assert state.targets[KEY].pending_evictions
    empty = snap([], [t], replicas={"web": 0})
    _, state = plan(empty, cfg.eviction_verdict_timeout + 1, state, cfg, suggestions=sugg())
    assert not state.targets[KEY].pending_evictions
    late = snap([pod("late", created=2000.0)], [t])
    _, state = plan(late, 2000.0, state, cfg, suggestions=sugg())
    assert state.targets[KEY].breaker.no_progress == 0


def test_a_half_open_breaker_lets_one_probe_out_and_waits_for_its_verdict() -> None:
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 3, "interval": "1s"})
    pods = [pod(f"p{i}") for i in range(3)]

    def half_open(probe_pending: bool) -> WorkerState:
        ts = TargetState(breaker=BreakerState(suggestion_uid="s1", state=HALF_OPEN))
        if probe_pending:
            ts.pending_evictions = [PendingEviction("gone", "uid-gone", 90.0, "s1", probe=True)]
        return WorkerState({KEY: ts})

    actions, _ = plan(snap(pods, [t]), 100.0, half_open(False), suggestions=sugg())
    assert len(of(actions, EvictPod)) == 1
    actions, _ = plan(snap(pods, [t]), 100.0, half_open(True), suggestions=sugg())
    assert not of(actions, EvictPod)


# --------------------------------------------------------------------------- PDB back-off


def test_a_429_without_retry_after_defers_the_targets_evictions_for_30_s() -> None:
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 3, "interval": "1s"})
    s = snap([pod(f"p{i}") for i in range(3)], [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())

    def apply(a: Any) -> ActionResult:
        if isinstance(a, EvictPod):
            return ActionResult(False, 429, "TooManyRequests", "would violate PDB")
        return ActionResult(True)

    state, _ = execute(actions, apply, state, s, 0.0)
    actions, state = plan(s, 29.0, state, suggestions=sugg())
    assert not of(actions, EvictPod)
    actions, state = plan(s, 30.0, state, suggestions=sugg())
    assert of(actions, EvictPod)


# --------------------------------------------------------------------------- capacity guard


def test_a_downsize_is_admitted_on_a_node_already_charged_beyond_its_allocatable() -> None:
    """A Deferred upsize keeps its larger request charged: the node is overcommitted by
    500m. Bringing the request down frees room; it is never held for lack of room."""
    a = pod("a", cpu=600, alloc={"cpu": 400, "memory": 100 * MIB}, conditions=[deferred()])
    other = pod("other", cpu=900, owner="other")
    s = snap([a, other], [target("in_place")], nodes={"n1": 1000})
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=500, mem=100 * MIB))
    (rz,) = of(actions, ResizePod)
    assert rz.name == "a" and rz.containers[0].requests["cpu"] == 500


def _mem_nodes(s: Any, **mib: int) -> None:
    """Give the snapshot's nodes these memory sizes (MiB); n2 may be marked unschedulable."""
    from foresize.core.cluster.model import Node

    s.nodes.clear()
    for name, size in mib.items():
        s.nodes[name.rstrip("_")] = Node(
            name.rstrip("_"),
            allocatable={"cpu": 64000, "memory": size * MIB},
            unschedulable=name.endswith("_"),
        )


def _recreate_two_on_a_full_node(n2_unschedulable: bool = False) -> list[str]:
    """n1 (1000Mi) is full with a and b (500Mi each); each is to be recreated at 800Mi
    (memory changes recreate by default); n2 has 1000Mi free."""
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 2, "interval": "1s"})
    s = snap([pod("a", mem=500 * MIB), pod("b", mem=500 * MIB)], [t])
    _mem_nodes(s, n1=1000, **({"n2_": 1000} if n2_unschedulable else {"n2": 1000}))
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=100, mem=800 * MIB))
    return names(actions, EvictPod)


def test_two_evictions_in_a_pass_do_not_count_on_the_same_room() -> None:
    # n2 has room for one 800Mi pod, not two: one eviction, the other waits.
    assert len(_recreate_two_on_a_full_node()) == 1


def test_an_unschedulable_node_is_no_room_for_a_recreated_pod() -> None:
    assert _recreate_two_on_a_full_node(n2_unschedulable=True) == []


def test_a_recreated_pod_may_take_back_its_own_room() -> None:
    """The pod's own charge leaves with it: a: 500Mi on n1 (1000Mi) next to 400Mi of
    another workload, 100Mi free; recreated at 550Mi it fits its own node again."""
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})
    s = snap([pod("a", mem=500 * MIB), pod("other", mem=400 * MIB, owner="other")], [t])
    _mem_nodes(s, n1=1000)
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=100, mem=550 * MIB))
    assert names(actions, EvictPod) == ["a"]


# --------------------------------------------------------------------------- OOM urgency


def _paced(*pods: Any) -> list[str]:
    """One in_place pass 20 s after the last batch (interval 60 s): only urgent OOM fixes
    go out."""
    from foresize.core.vertical.state import TargetState as TS

    state = WorkerState({KEY: TS(last_batch_at=80.0)})
    actions, _ = plan(snap(list(pods), [target("in_place")]), 100.0, state, suggestions=sugg())
    return names(actions, ResizePod)


def test_only_a_recent_oom_kill_makes_a_memory_upsize_skip_the_pacing() -> None:
    # Killed 10 minutes ago (OOM_URGENT_WINDOW) is recent; 10 minutes and 1 s is not.
    assert _paced(pod("oom", cpu=200, oom_at=100.0 - 600)) == ["oom"]
    assert _paced(pod("oom", cpu=200, oom_at=100.0 - 601)) == []


def test_an_oom_killed_pod_whose_memory_does_not_go_up_waits_for_the_pacing() -> None:
    # Memory already at the suggestion (200Mi): only CPU changes, nothing urgent about it.
    assert _paced(pod("oom", cpu=100, mem=200 * MIB, oom_at=90.0)) == []


def test_an_urgent_oom_fix_is_sent_even_below_the_hysteresis() -> None:
    """The OOM floor's raise is urgent whatever its size: +2% memory (under the 5% up
    threshold) of a just-killed pod is resized in place, and evicted in recreate mode."""
    s = sugg(cpu=200, mem=204 * MIB)
    oom = pod("oom", cpu=200, mem=200 * MIB, oom_at=90.0)
    calm = pod("calm", cpu=200, mem=200 * MIB)
    actions, _ = plan(snap([oom, calm], [target("in_place")]), 100.0, WorkerState(), suggestions=s)
    assert names(actions, ResizePod) == ["oom"]
    t = target("recreate", min_replicas=1, disruption={"interval": "1s"})
    actions, _ = plan(snap([oom, calm], [t]), 100.0, WorkerState(), suggestions=s)
    assert names(actions, EvictPod) == ["oom"]


# --------------------------------------------------------------------------- admission order


def _one_of(*pods: Any, nodes: dict[str, int] | None = None, **kw: Any) -> list[str]:
    """The resizes of one in_place pass with a batch of one."""
    t = target("in_place", disruption={"max_disrupted": 1})
    s = snap(list(pods), [t], replicas={"web": 20}, nodes=nodes)
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(**kw))
    return names(actions, ResizePod)


def test_a_downsize_takes_the_batch_before_an_upsize() -> None:
    # "a-up" sorts first by name; the downsize still goes first.
    assert _one_of(pod("a-up", cpu=100), pod("z-down", cpu=900), cpu=200, mem=100 * MIB) == [
        "z-down"
    ]


def test_a_higher_priority_pod_is_upsized_first() -> None:
    assert _one_of(pod("a-low", cpu=100), pod("z-high", cpu=100, priority=100)) == ["z-high"]


def test_a_guaranteed_pod_is_upsized_before_a_burstable_one() -> None:
    guaranteed = pod(
        "z-guaranteed", cpu=100, mem=100 * MIB, limits={"cpu": 100, "memory": 100 * MIB}
    )
    assert _one_of(pod("a-burstable", cpu=100), guaranteed) == ["z-guaranteed"]


def test_a_pod_that_is_not_running_yet_is_not_resized() -> None:
    from dataclasses import replace

    starting = replace(pod("starting"), phase="Pending")  # scheduled, containers starting
    for t in (target("in_place"), selector_target("in_place")):
        actions, _ = plan(snap([starting], [t]), 0.0, WorkerState(), suggestions=sugg())
        assert not of(actions, ResizePod)


def test_mirror_and_uncontrolled_pods_are_never_evicted() -> None:
    """A static pod's mirror (owned by its Node) and a pod whose owner is not its
    controller would not be recreated: a selector target never evicts them."""
    from dataclasses import replace

    from foresize.core.cluster.model import OwnerRef

    for owner in (OwnerRef("Node", "n1"), OwnerRef("Deployment", "web", controller=False)):
        p = replace(pod("p0"), owner=owner)
        s = snap([p], [selector_target("recreate", min_replicas=1)])
        actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(mem=400 * MIB))
        assert not of(actions, EvictPod), owner
    # The same pod with a controlling owner is evicted.
    s = snap([pod("p0")], [selector_target("recreate", min_replicas=1)])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(mem=400 * MIB))
    assert names(actions, EvictPod) == ["p0"]


def test_a_deferred_resize_the_suggestion_moved_away_from_is_resized_not_released() -> None:
    """Past release_deferred_after, a Deferred resize is released only while the
    suggestion still asks for it; a new suggestion (300m) is sent as a resize instead."""
    t = target("in_place", disruption={"release_deferred_after": "5m"})
    s = _deferred_upsize(t)
    _, state = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=600, mem=100 * MIB))
    actions, _ = plan(s, 400.0, state, suggestions=sugg(cpu=300, mem=100 * MIB))
    (rz,) = of(actions, ResizePod)
    assert rz.reason == "resize" and rz.containers[0].requests["cpu"] == 300


# --------------------------------------------------------------------------- results


def test_a_pdb_back_off_survives_an_operator_restart() -> None:
    """The 429's retry time is kept in status: a restarted operator does not evict
    before it."""
    from foresize.core.cluster.actions import WriteTargetStatus

    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 3, "interval": "1s"})
    s = snap([pod(f"p{i}") for i in range(3)], [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())

    def apply(a: Any) -> ActionResult:
        if isinstance(a, EvictPod):
            return ActionResult(False, 429, "TooManyRequests", "PDB", retry_after_seconds=45)
        return ActionResult(True)

    state, _ = execute(actions, apply, state, s, 0.0)
    actions, state = plan(s, 10.0, state, suggestions=sugg())
    (st,) = of(actions, WriteTargetStatus)
    t2 = t.model_copy(deep=True)
    t2.status = t2.status.model_validate({**t2.status.model_dump(), **st.status})
    s2 = snap([pod(f"p{i}") for i in range(3)], [t2])
    actions, fresh = plan(s2, 30.0, WorkerState(), suggestions=sugg())
    assert not of(actions, EvictPod)
    actions, _ = plan(s2, 45.0, fresh, suggestions=sugg())
    assert of(actions, EvictPod)


def test_the_probe_eviction_is_waited_for_before_another_one() -> None:
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 3, "interval": "1s"})
    pods = [pod(f"p{i}") for i in range(3)]
    ts = TargetState(breaker=BreakerState(suggestion_uid="s1", state=HALF_OPEN))
    s = snap(pods, [t])
    actions, state = plan(s, 100.0, WorkerState({KEY: ts}), suggestions=sugg())
    assert len(of(actions, EvictPod)) == 1
    state, _ = execute(actions, apply_ok, state, s, 100.0)
    left = snap([p for p in pods if p.name not in names(actions, EvictPod)], [t])
    actions, _ = plan(left, 110.0, state, suggestions=sugg())
    assert not of(actions, EvictPod)  # the probe's replacement has not been judged yet


def test_an_evicted_pods_stall_is_forgotten() -> None:
    t = target("in_place_or_recreate", min_replicas=1)
    stuck = _stuck()
    s = snap([stuck], [t])
    _, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    actions, state = plan(s, 120.0, state, suggestions=sugg())
    assert names(actions, EvictPod) == ["stuck"]
    state, _ = execute(actions, apply_ok, state, s, 120.0)
    assert not state.targets[KEY].stalls


def test_a_403_that_is_not_about_node_capacity_is_not_a_refusal() -> None:
    """A 403 without the NodeCapacity cause (e.g. RBAC) says nothing about the resize
    itself: the pod is not evicted as if the API server had refused the change."""
    from foresize.core.vertical import on_result

    t = target("in_place_or_recreate", min_replicas=1, disruption={"interval": "1s"})
    s = snap([pod("p0")], [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (rz,) = of(actions, ResizePod)
    state = on_result(state, rz, ActionResult(False, 403, "Forbidden", "no RBAC"), 0.0)
    actions, _ = plan(s, 5.0, state, suggestions=sugg())
    assert not of(actions, EvictPod)


def test_a_released_resize_is_not_counted_as_a_resize() -> None:
    from foresize.core.vertical import on_result

    t = target(
        "in_place", disruption={"release_deferred_after": "5m", "release_deferred": "allocated"}
    )
    s = _deferred_upsize(t)
    _, state = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=600, mem=100 * MIB))
    actions, state = plan(s, 300.0, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    (rz,) = of(actions, ResizePod)
    assert rz.reason == "release-deferred"
    state = on_result(state, rz, ActionResult(True, 200), 300.0)
    assert state.targets[KEY].resized == 0


def test_a_replacement_already_judged_is_not_judged_again_after_a_restart() -> None:
    """Two evictions await their verdicts; the first replacement (stale) is judged. After
    an operator restart (state read back from status) that same pod is not taken for the
    second eviction's replacement too."""
    from foresize.core.cluster.actions import WriteTargetStatus

    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 2, "interval": "1h"})
    s = snap([pod("p0"), pod("p1")], [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert len(of(actions, EvictPod)) == 2
    state, _ = execute(actions, apply_ok, state, s, 0.0)
    back = snap([pod("r0", created=5.0)], [t])  # stale: at the old size
    actions, state = plan(back, 10.0, state, suggestions=sugg())
    assert state.targets[KEY].breaker.no_progress == 1
    (st,) = of(actions, WriteTargetStatus)
    t2 = t.model_copy(deep=True)
    t2.status = t2.status.model_validate({**t2.status.model_dump(), **st.status})
    _, fresh = plan(snap([pod("r0", created=5.0)], [t2]), 20.0, WorkerState(), suggestions=sugg())
    assert fresh.targets[KEY].breaker.no_progress == 1


def test_an_eviction_after_a_refused_resize_says_it_was_refused() -> None:
    """A 422 sends the pod straight to eviction; its Events name the refusal, not a stall
    timeout that has not passed (5 s after the refusal, stall_timeout is 2 min)."""
    from foresize.core.cluster.actions import EmitEvent
    from foresize.core.vertical import on_result

    t = target("in_place_or_recreate", min_replicas=1, disruption={"interval": "1s"})
    s = snap([pod("p0")], [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (rz,) = of(actions, ResizePod)
    state = on_result(state, rz, ActionResult(False, 422, "Invalid", "QoS"), 0.0)
    actions, _ = plan(s, 5.0, state, suggestions=sugg())
    (ev,) = of(actions, EvictPod)
    assert ev.reason == "refused"
    said = {e.message for e in of(actions, EmitEvent) if e.reason == "Evicting"}
    assert said and all("refused by the API server" in m for m in said)
