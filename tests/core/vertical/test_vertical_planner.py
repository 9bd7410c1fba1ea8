"""Unit tests of the disruption worker's planner on hand-built snapshots (no simulator)."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import (
    ActionResult,
    EmitEvent,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.model import (
    Container,
    HorizontalPodAutoscaler,
    HPAMetric,
    Pod,
    PodCondition,
    ResourceRequirements,
)
from foresize.core.vertical import WorkerConfig, WorkerState, batch_size, execute, on_result, plan
from foresize.core.vertical.state import STATUS_KEY, TargetState
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

# --------------------------------------------------------------------------- modes


def test_initial_mode_never_touches_running_pods() -> None:
    s = snap([pod(f"p{i}") for i in range(5)], [target("initial")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
    assert not of(actions, ResizePod) and not of(actions, EvictPod)


def test_recommendation_mode_changes_nothing() -> None:
    for update in ("in_place", "in_place_or_recreate", "recreate"):
        s = snap([pod("p0")], [target(update, mode="recommendation")])
        actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
        assert not of(actions, ResizePod) and not of(actions, EvictPod), update
        # The same target in autonomous mode does act on the pod (allowed to evict its
        # only replica).
        s = snap([pod("p0")], [target(update, min_replicas=1)])
        actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
        assert of(actions, ResizePod) or of(actions, EvictPod), update


def test_in_place_resizes_to_the_suggestion_in_a_batch() -> None:
    pods = [pod(f"p{i}") for i in range(10)]
    pods.append(pod("done", cpu=200, mem=200 * MIB))
    s = snap(pods, [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
    resizes = of(actions, ResizePod)
    # 20% of 11 replicas rounded up = 3; the pod already at the suggestion is left alone.
    assert len(resizes) == 3
    assert "done" not in names(actions, ResizePod)
    assert resizes[0].containers[0].requests == {"cpu": 200, "memory": 200 * MIB}
    assert not of(actions, EvictPod)
    # every change is recorded on the pod and the target
    kinds = {(e.kind, e.reason) for e in of(actions, EmitEvent)}
    assert ("Pod", "Resizing") in kinds and ("AIScaleTarget", "Resizing") in kinds


def test_recreate_evicts_only_pods_whose_recreate_resources_differ() -> None:
    pods = [
        pod("cpu-only", cpu=100, mem=200 * MIB),  # only cpu differs: waits for turnover
        pod("mem", cpu=200, mem=100 * MIB),
    ]
    s = snap(pods, [target("recreate", disruption={"max_disrupted": 5})])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
    assert names(actions, EvictPod) == ["mem"]
    assert not of(actions, ResizePod)


def test_guaranteed_pod_keeps_requests_equal_to_limits() -> None:
    g = pod("g", limits={"cpu": 100, "memory": 100 * MIB})
    s = snap([g], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
    (r,) = of(actions, ResizePod)
    assert r.containers[0].requests == r.containers[0].limits == {"cpu": 200, "memory": 200 * MIB}


def test_request_never_exceeds_existing_limit() -> None:
    b = pod("b", limits={"cpu": 150})
    s = snap([b], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())
    (r,) = of(actions, ResizePod)
    assert r.containers[0].requests["cpu"] == 150


def test_hysteresis_threshold_skips_small_changes() -> None:
    t = target("in_place", scaling_behavior={"scale_up": {"type": "percent", "percent": 150}})
    s = snap([pod("p0")], [t])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg())  # +100% < 150%
    assert not of(actions, ResizePod)


def test_default_hysteresis_is_the_apis_rule_when_scaling_behavior_is_absent() -> None:
    """No scaling_behavior: the planner applies the API's documented defaults (up 5%,
    down 10%), the same rule as the recommender, so it never resizes over noise."""
    t = target("in_place")
    small_up = sugg(cpu=104, mem=100 * MIB)  # +4% CPU: below the 5% default
    actions, _ = plan(snap([pod("p0")], [t]), 100.0, WorkerState(), suggestions=small_up)
    assert not of(actions, ResizePod)
    small_down = sugg(cpu=92, mem=100 * MIB)  # -8% CPU: below the 10% default
    actions, _ = plan(snap([pod("p0")], [t]), 100.0, WorkerState(), suggestions=small_down)
    assert not of(actions, ResizePod)
    big_up = sugg(cpu=106, mem=100 * MIB)  # +6%: worth a resize
    actions, _ = plan(snap([pod("p0")], [t]), 100.0, WorkerState(), suggestions=big_up)
    assert names(actions, ResizePod) == ["p0"]


# --------------------------------------------------------------------------- stalls


def test_in_place_never_evicts_a_stalled_pod() -> None:
    p = pod(
        "p0",
        cpu=200,
        mem=200 * MIB,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[deferred()],
    )
    s = snap([p], [target("in_place")])
    state = WorkerState()
    events = 0
    for t in range(0, 3600, 30):
        actions, state = plan(s, float(t), state, suggestions=sugg())
        assert not of(actions, EvictPod) and not of(actions, ResizePod)
        events += sum(1 for e in of(actions, EmitEvent) if e.reason == "ResizeStalled")
    assert events == 1  # announced once, not every pass
    assert state.targets[KEY].stalls["uid-p0"].first_seen == 0.0


def stalled_pair() -> list[Pod]:
    return [
        pod(
            "stuck",
            cpu=200,
            mem=200 * MIB,
            alloc={"cpu": 200, "memory": 300 * MIB},
            conditions=[error()],
        ),
        pod("fine", cpu=200, mem=200 * MIB),  # already resized: never evicted
    ]


def test_in_place_or_recreate_evicts_only_stalled_pods_after_stall_timeout() -> None:
    s = snap(stalled_pair(), [target("in_place_or_recreate", disruption={"max_disrupted": 2})])
    state = WorkerState()
    actions, state = plan(s, 1000.0, state, suggestions=sugg())
    assert not of(actions, EvictPod)
    actions, state = plan(s, 1119.0, state, suggestions=sugg())  # 1m59s
    assert not of(actions, EvictPod)
    actions, state = plan(s, 1120.0, state, suggestions=sugg())  # 2m
    assert names(actions, EvictPod) == ["stuck"]


def test_stall_clock_survives_an_operator_restart_through_status() -> None:
    t = target("in_place_or_recreate")
    s = snap(stalled_pair(), [t])
    actions, _ = plan(s, 1000.0, WorkerState(), suggestions=sugg())
    (st,) = of(actions, WriteTargetStatus)
    # The shell merges the status into the object; the operator then restarts.
    t2 = t.model_copy(deep=True)
    t2.status = t2.status.model_validate({**t2.status.model_dump(), **st.status})
    s2 = snap(stalled_pair(), [t2])
    actions, fresh = plan(s2, 1100.0, WorkerState(), suggestions=sugg())
    assert fresh.targets[KEY].stalls["uid-stuck"].first_seen == 1000.0
    actions, fresh = plan(s2, 1120.0, fresh, suggestions=sugg())
    assert names(actions, EvictPod) == ["stuck"]


def test_state_round_trips_through_status_dict() -> None:
    ts = TargetState()
    ts.stalls["u"] = __import__(
        "foresize.core.vertical.state", fromlist=["StallRecord"]
    ).StallRecord("p", 12.0, "Deferred")
    ts.last_batch_at = 5.0
    ts.breaker.state, ts.breaker.no_progress, ts.breaker.next_probe_at = "open", 3, 99.0
    back = TargetState.from_status(ts.to_status())
    assert back.to_status() == ts.to_status()


RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"


def test_every_time_in_the_disruption_status_is_rfc3339_and_reads_back() -> None:
    """seed.md N5 (docs/api.md: times in status are RFC 3339): the stall clock, the last
    batch, the PDB back-off, blocked pods and evictions awaiting a verdict are written as
    date-times, read back to the same instants, and a status written by an older release
    (epoch numbers) still reads."""
    import re

    from foresize.core.vertical.state import PendingEviction, StallRecord

    now = 1764403200.0  # 2025-11-29T08:00:00Z
    t = target("in_place")
    stuck = pod("p0", cpu=600, mem=100 * MIB, alloc={"cpu": 100, "memory": 100 * MIB})
    stuck.conditions.append(PodCondition("PodResizePending", "True", "Deferred", "node full"))
    actions, _ = plan(snap([stuck], [t]), now, WorkerState(), suggestions=sugg(cpu=600))
    (st,) = of(actions, WriteTargetStatus)
    assert st.status[STATUS_KEY]["stalls"] == [
        {"uid": "uid-p0", "pod": "p0", "firstSeen": "2025-11-29T08:00:00Z", "reason": "Deferred"}
    ]

    ts = TargetState()
    ts.stalls["u"] = StallRecord("p", now, "Deferred")
    ts.last_batch_at, ts.evict_retry_at = now + 1.5, now + 30
    ts.blocked_pods["b"] = now + 600
    ts.pending_evictions.append(PendingEviction("q", "uq", now + 2, "s1"))
    ts.breaker.next_probe_at = now + 60
    status = ts.to_status()
    times = [
        status["stalls"][0]["firstSeen"],
        status["lastBatchTime"],
        status["evictionRetryTime"],
        status["blockedPods"][0]["until"],
        status["pendingEvictions"][0]["time"],
        status["circuitBreaker"]["retry_at"],
    ]
    assert all(isinstance(x, str) and re.match(RFC3339, x) for x in times), times
    assert status["lastBatchTime"] == "2025-11-29T08:00:01.500000Z"
    back = TargetState.from_status(status)
    assert back.stalls["u"].first_seen == now and back.last_batch_at == now + 1.5
    assert back.evict_retry_at == now + 30 and back.blocked_pods == {"b": now + 600}
    assert back.pending_evictions[0].at == now + 2 and back.to_status() == status
    old = {
        **status,
        "lastBatchTime": now,
        "stalls": [{"uid": "u", "firstSeen": now, "reason": "x"}],
    }
    old["pendingEvictions"] = [{"pod": "q", "uid": "uq", "time": "garbage"}]
    read = TargetState.from_status(old)
    assert read.last_batch_at == now and read.stalls["u"].first_seen == now
    assert read.pending_evictions == []  # unreadable: dropped, the worker goes on


def test_conditions_are_re_read_each_pass() -> None:
    t = target("in_place_or_recreate")
    stuck = stalled_pair()
    state = WorkerState()
    _, state = plan(snap(stuck, [t]), 0.0, state, suggestions=sugg())
    # The kubelet error was transient: gone on the next pass.
    cleared = [
        pod("stuck", cpu=200, mem=200 * MIB, alloc={"cpu": 200, "memory": 300 * MIB}),
        stuck[1],
    ]
    _, state = plan(snap(cleared, [t]), 60.0, state, suggestions=sugg())
    assert "uid-stuck" not in state.targets[KEY].stalls
    # It comes back: a new clock, so no eviction 2 minutes after the first sighting.
    actions, state = plan(snap(stuck, [t]), 100.0, state, suggestions=sugg())
    actions, state = plan(snap(stuck, [t]), 125.0, state, suggestions=sugg())
    assert not of(actions, EvictPod)
    actions, state = plan(snap(stuck, [t]), 220.0, state, suggestions=sugg())
    assert names(actions, EvictPod) == ["stuck"]


def test_conditions_of_an_older_generation_are_not_a_stall() -> None:
    p = pod(
        "p0",
        cpu=200,
        mem=200 * MIB,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[deferred()],
        generation=3,
        observed=2,
    )
    _, state = plan(snap([p], [target("in_place")]), 0.0, WorkerState(), suggestions=sugg())
    assert not state.targets[KEY].stalls


# --------------------------------------------------------------------------- budget


def test_batch_size_rounding() -> None:
    assert batch_size("20%", 10) == 2
    assert batch_size("20%", 11) == 3
    assert batch_size("20%", 1) == 1
    assert batch_size("20%", 0) == 1
    assert batch_size(3, 10) == 3


def test_not_ready_and_terminating_pods_count_against_the_batch() -> None:
    pods = [pod(f"p{i}") for i in range(8)]
    pods.append(pod("sick", ready=False))
    s = snap(pods, [target("in_place")], replicas={"web": 10})
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert len(of(actions, ResizePod)) == 1  # 2 allowed, 1 already not Ready
    pods.append(pod("leaving", terminating=True))
    actions, _ = plan(snap(pods, [target("in_place")]), 0.0, WorkerState(), suggestions=sugg())
    assert len(of(actions, ResizePod)) == 0


def test_in_flight_resizes_count_and_batches_are_an_interval_apart() -> None:
    t = target("in_place")
    pods = [pod(f"p{i}") for i in range(10)]
    actions, state = plan(snap(pods, [t]), 0.0, WorkerState(), suggestions=sugg())
    first = names(actions, ResizePod)
    assert len(first) == 2
    # The kubelet has not actuated them yet: spec changed, allocated not.
    pods = [
        pod(p.name, cpu=200, mem=200 * MIB, alloc={"cpu": 100, "memory": 100 * MIB}, generation=2)
        if p.name in first
        else p
        for p in pods
    ]
    actions, state = plan(snap(pods, [t]), 70.0, state, suggestions=sugg())
    assert not of(actions, ResizePod)  # both still rolling: the batch is full
    pods = [pod(p.name, cpu=200, mem=200 * MIB) if p.name in first else p for p in pods]
    actions, state = plan(snap(pods, [t]), 75.0, state, suggestions=sugg())
    assert len(of(actions, ResizePod)) == 2
    actions, state = plan(snap(pods, [t]), 100.0, state, suggestions=sugg())
    assert not of(actions, ResizePod)  # only 25 s since the last batch


def test_restart_container_resize_pending_counts_as_disrupted() -> None:
    def pods_with(policy: dict[str, str]) -> list[Pod]:
        out = [pod(f"p{i}") for i in range(9)]
        out.append(
            pod(
                "stuck",
                cpu=200,
                mem=200 * MIB,
                alloc={"cpu": 100, "memory": 100 * MIB},
                conditions=[deferred()],
                resize_policy=policy,
            )
        )
        return out

    t = target("in_place")
    actions, _ = plan(snap(pods_with({}), [t]), 0.0, WorkerState(), suggestions=sugg())
    assert len(of(actions, ResizePod)) == 2
    actions, _ = plan(
        snap(pods_with({"memory": "RestartContainer"}), [t]), 0.0, WorkerState(), suggestions=sugg()
    )
    assert len(of(actions, ResizePod)) == 1


def test_oom_memory_upsize_skips_the_pacing() -> None:
    t = target("in_place")
    pods = [pod("p0", cpu=200), pod("oom", cpu=200, ready=False, oom_at=90.0)]
    state = WorkerState({KEY: TargetState(last_batch_at=80.0)})
    actions, _ = plan(snap(pods, [t]), 100.0, state, suggestions=sugg())
    assert names(actions, ResizePod) == ["oom"]


# --------------------------------------------------------------------------- eviction results


def test_pdb_429_stops_evictions_of_the_target_until_retry_after() -> None:
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 3, "interval": "1s"})
    pods = [pod(f"p{i}") for i in range(3)]
    s = snap(pods, [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert len(of(actions, EvictPod)) == 3
    sent: list[str] = []

    def apply(a: Any) -> ActionResult:
        if isinstance(a, EvictPod):
            sent.append(a.name)
            return ActionResult(
                False,
                429,
                "TooManyRequests",
                "would violate PDB",
                ({"type": "DisruptionBudget"},),
                retry_after_seconds=45,
            )
        return ActionResult(True)

    state, done = execute(actions, apply, state, s, 0.0)
    assert sent == ["p0"]  # the rest of the target's evictions were not sent
    assert any(isinstance(a, EmitEvent) and a.reason == "EvictionDeferred" for a, _ in done)
    actions, state = plan(s, 30.0, state, suggestions=sugg())
    assert not of(actions, EvictPod)
    actions, state = plan(s, 60.0, state, suggestions=sugg())
    assert of(actions, EvictPod)


def test_multiple_pdbs_500_blocks_that_pod_and_is_reported() -> None:
    t = target("recreate", disruption={"max_disrupted": 1, "interval": "1s"})
    pods = [pod("p0"), pod("p1")]
    s = snap(pods, [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (ev,) = of(actions, EvictPod)
    state = on_result(
        state, ev, ActionResult(False, 500, "InternalError", "more than one PDB"), 0.0
    )
    actions, state = plan(s, 10.0, state, suggestions=sugg())
    assert any(e.reason == "EvictionFailed" for e in of(actions, EmitEvent))
    assert names(actions, EvictPod) == ["p1"]  # p0 is not hot-looped
    actions, state = plan(s, 20.0, state, suggestions=sugg())
    assert "p0" not in names(actions, EvictPod)


def test_resize_refused_422_goes_straight_to_fallback() -> None:
    for mode, expect_evict in (("in_place_or_recreate", True), ("in_place", False)):
        t = target(mode, min_replicas=1, disruption={"interval": "1s"})
        s = snap([pod("p0")], [t])
        actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
        (rz,) = of(actions, ResizePod)
        state = on_result(state, rz, ActionResult(False, 422, "Invalid", "QoS"), 0.0)
        actions, state = plan(s, 5.0, state, suggestions=sugg())
        assert bool(of(actions, EvictPod)) is expect_evict, mode
        assert not of(actions, ResizePod)  # the refused patch is not re-sent


def test_resize_refused_403_node_capacity_evicts() -> None:
    t = target("in_place_or_recreate", min_replicas=1, disruption={"interval": "1s"})
    s = snap([pod("p0")], [t])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (rz,) = of(actions, ResizePod)
    res = ActionResult(False, 403, "Forbidden", "too big", ({"type": "NodeCapacity"},))
    state = on_result(state, rz, res, 0.0)
    actions, _ = plan(s, 5.0, state, suggestions=sugg())
    assert names(actions, EvictPod) == ["p0"]


# --------------------------------------------------------------------------- circuit breaker


def test_circuit_breaker_opens_backs_off_probes_and_closes() -> None:
    # One replica: the test is about the breaker, so the target allows evicting it.
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})
    cfg = WorkerConfig()
    state = WorkerState()
    now = 0.0
    gen = 0
    current = pod("p-0")
    history: list[tuple[float, str]] = []

    def cycle(stale: bool) -> bool:
        """One pass; if it evicts, the pod is replaced (stale or right). Returns evicted?"""
        nonlocal state, current, gen, now
        actions, state = plan(snap([current], [t]), now, state, cfg, suggestions=sugg())
        evs = of(actions, EvictPod)
        if evs:
            state, _ = execute(actions, apply_ok, state, snap([current], [t]), now, cfg)
            gen += 1
            now += 5
            current = (
                pod(f"p-{gen}", created=now)
                if stale
                else pod(f"p-{gen}", cpu=200, mem=200 * MIB, created=now)
            )
        history.append((now, state.targets[KEY].breaker.state))
        now += 5
        return bool(evs)

    evictions = [cycle(stale=True) for _ in range(4)]
    assert evictions == [True, True, True, False]
    b = state.targets[KEY].breaker
    assert b.state == "open" and b.backoff == 60.0
    # No evictions during the back-off.
    opened = b.opened_at
    while now < opened + 60:
        assert not cycle(stale=True)
    # One probe; it comes back stale: reopen with twice the back-off.
    assert cycle(stale=True)
    assert not cycle(stale=True)
    b = state.targets[KEY].breaker
    assert b.state == "open" and b.backoff == 120.0 and b.total_openings == 2
    while now < b.opened_at + 120:
        assert not cycle(stale=True)
    # The admission hook is back: the probe's pod comes back right and closes it.
    assert cycle(stale=False)
    cycle(stale=False)
    assert state.targets[KEY].breaker.state == "closed"


def test_breaker_backoff_doubles_and_is_capped_at_one_hour() -> None:
    """Every failed probe reopens the breaker with twice the back-off, up to one hour."""
    # One replica: the test is about the breaker, so the target allows evicting it.
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})
    cfg = WorkerConfig()
    state = WorkerState()
    now, gen = 0.0, 0
    current = pod("p-0")
    backoffs: list[float] = []
    opened = -1.0
    while len(backoffs) < 8:
        actions, state = plan(snap([current], [t]), now, state, cfg, suggestions=sugg())
        if of(actions, EvictPod):  # a (probe) eviction: the pod comes back stale
            state, _ = execute(actions, apply_ok, state, snap([current], [t]), now, cfg)
            gen += 1
            current = pod(f"p-{gen}", created=now + 5)
        b = state.targets[KEY].breaker
        if b.state == "open" and b.opened_at > opened:
            backoffs.append(b.backoff)
            opened = b.opened_at
            now = b.next_probe_at  # skip the back-off: the next pass probes
        else:
            now += 10
    assert backoffs == [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0]


# --------------------------------------------------------------------------- capacity guard


def test_capacity_guard_admits_upsizes_by_priority_and_holds_the_rest() -> None:
    # n1: 1000m allocatable, two pods at 400m each: 200m free; each wants +200m.
    pods = [pod("low", cpu=400, priority=0), pod("high", cpu=400, priority=100)]
    for mode, fallback in (("in_place", None), ("in_place_or_recreate", "low")):
        t = target(mode, disruption={"max_disrupted": 2})
        s = snap(pods, [t], nodes={"n1": 1000, "n2": 4000})
        actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=600, mem=100 * MIB))
        assert names(actions, ResizePod) == ["high"], mode
        if fallback is None:
            assert not of(actions, EvictPod)
            waiting = [e for e in of(actions, EmitEvent) if e.reason == "ResizeWaitingForCapacity"]
            assert {e.kind for e in waiting} == {"Pod", "AIScaleTarget"}
            (st,) = of(actions, WriteTargetStatus)
            assert st.status["pods_waiting_for_capacity"] == 1
        else:
            assert names(actions, EvictPod) == [fallback]


def test_without_the_guard_every_upsize_is_sent() -> None:
    pods = [pod("low", cpu=400), pod("high", cpu=400, priority=100)]
    s = snap(pods, [target("in_place", disruption={"max_disrupted": 2})], nodes={"n1": 1000})
    actions, _ = plan(
        s,
        0.0,
        WorkerState(),
        WorkerConfig(capacity_guard=False),
        suggestions=sugg(cpu=600, mem=100 * MIB),
    )
    assert names(actions, ResizePod) == ["high", "low"]


def test_no_eviction_when_no_node_has_room() -> None:
    pods = [pod("a", cpu=500), pod("b", cpu=500)]
    s = snap(
        pods, [target("in_place_or_recreate", disruption={"max_disrupted": 2})], nodes={"n1": 1000}
    )
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=2000, mem=100 * MIB))
    assert not of(actions, EvictPod) and not of(actions, ResizePod)


def test_downsizes_go_first_and_release_deferred_after() -> None:
    t = target(
        "in_place",
        disruption={
            "max_disrupted": 1,
            "release_deferred_after": "5m",
            "release_deferred": "allocated",
        },
    )
    big = pod("big", cpu=900)
    s = snap([big, pod("small", cpu=50)], [t], nodes={"n1": 2000})
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=200, mem=100 * MIB))
    assert names(actions, ResizePod) == ["big"]  # the downsize, before the upsize
    # A Deferred upsize (lost a race with the scheduler) is released after 5 minutes.
    held = pod("held", cpu=600, alloc={"cpu": 100, "memory": 100 * MIB}, conditions=[deferred()])
    s = snap([held], [t], nodes={"n1": 700})
    state = WorkerState()
    actions, state = plan(s, 0.0, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    assert not of(actions, ResizePod)
    actions, state = plan(s, 299.0, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    assert not of(actions, ResizePod)
    actions, state = plan(s, 300.0, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    (rz,) = of(actions, ResizePod)
    assert rz.containers[0].requests["cpu"] == 100 and rz.reason == "release-deferred"


def test_deferred_is_held_with_release_deferred_never() -> None:
    held = pod("held", cpu=600, alloc={"cpu": 100, "memory": 100 * MIB}, conditions=[deferred()])
    other = pod("other", cpu=500, owner="batch")
    t = target("in_place", disruption={"release_deferred": "never"})
    s = snap([held, other], [t], nodes={"n1": 700})
    state = WorkerState()
    for now in (0.0, 600.0, 7200.0):
        actions, state = plan(s, now, state, suggestions=sugg(cpu=600, mem=100 * MIB))
        assert not of(actions, ResizePod)


# --------------------------------------------------------------------------- HPA and exclusion


def hpa_on_cpu() -> HorizontalPodAutoscaler:
    return HorizontalPodAutoscaler(
        "default", "web", "Deployment", "web", 1, 10, [HPAMetric("Resource", "cpu", 70)]
    )


def test_hpa_resource_is_left_alone_and_said_so() -> None:
    s = snap([pod("p0")], [target("in_place")], hpas=[hpa_on_cpu()])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (rz,) = of(actions, ResizePod)
    assert rz.containers[0].requests == {"cpu": 100, "memory": 200 * MIB}
    assert any(e.reason == "HPAResourceLeftAlone" for e in of(actions, EmitEvent))
    (st,) = of(actions, WriteTargetStatus)
    assert any("cpu" in n for n in st.status["vertical_notes"])
    s = snap([pod("p0")], [target("in_place", hpa_resource_policy="override")], hpas=[hpa_on_cpu()])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (rz,) = of(actions, ResizePod)
    assert rz.containers[0].requests["cpu"] == 200


def test_label_selector_excludes_workloads() -> None:
    s = snap([pod("p0")], [target("in_place")], labels={"web": {"foresize.io/skip": "yes"}})
    cfg = WorkerConfig(exclude_selector={"foresize.io/skip": "yes"})
    actions, _ = plan(s, 0.0, WorkerState(), cfg, suggestions=sugg())
    assert not of(actions, ResizePod)
    assert any(e.reason == "Excluded" for e in of(actions, EmitEvent))
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert of(actions, ResizePod)


# --------------------------------------------------------------------------- status


def test_status_counts_and_breaker_written_only_when_changed() -> None:
    s = snap([pod("p0")], [target("in_place")])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    state, _ = execute(actions, apply_ok, state, s, 0.0)
    done = snap([pod("p0", cpu=200, mem=200 * MIB)], [target("in_place")])
    actions, state = plan(done, 100.0, state, suggestions=sugg())
    (st,) = of(actions, WriteTargetStatus)
    assert st.status["pods_resized"] == 1
    assert st.status["circuit_breaker"]["state"] == "closed"
    assert STATUS_KEY in st.status
    state, _ = execute(actions, apply_ok, state, done, 100.0)  # the write landed
    actions, state = plan(done, 200.0, state, suggestions=sugg())
    assert not of(actions, WriteTargetStatus)


def test_a_status_write_that_failed_is_sent_again_until_it_lands() -> None:
    """kube.md GAP 9: the write used to be marked done when planned, so a refused or
    failed one (422/409/429/5xx) was lost until the status changed again."""
    s = snap([pod("p0")], [target("in_place")])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (first,) = of(actions, WriteTargetStatus)

    def brownout(action):  # the API server answers 503 to everything
        return ActionResult(ok=False, code=503, reason="ServiceUnavailable", message="down")

    state, _ = execute(actions, brownout, state, s, 0.0)
    assert state.targets["default/web"].last_status is None  # not marked written
    actions, state = plan(s, 30.0, state, suggestions=sugg())
    (again,) = of(actions, WriteTargetStatus)
    assert again.status == first.status

    def status_lands(action):  # the API is back for status writes only
        return apply_ok(action) if isinstance(action, WriteTargetStatus) else brownout(action)

    state, _ = execute(actions, status_lands, state, s, 30.0)
    assert state.targets["default/web"].last_status == again.status


def test_the_capacity_guard_counts_the_scheduler_charge_of_every_pod() -> None:
    from foresize.core.cluster.capacity import NodeLedger
    from foresize.core.cluster.qos import pod_charge

    cases = [
        pod("a"),
        pod("b", cpu=300, alloc={"cpu": 100, "memory": 400 * MIB}, conditions=[deferred()]),
        pod(
            "c",
            cpu=300,
            alloc={"cpu": 100, "memory": 100 * MIB},
            conditions=[PodCondition("PodResizePending", "True", "Infeasible")],
        ),
        pod("d", limits={"cpu": 500}),
    ]
    side = pod("e")
    side.init_containers = [Container("init", ResourceRequirements({"cpu": 900}, {}))]
    cases.append(side)
    # One rule: the ledger's free room is allocatable minus `qos.pod_charge` of each pod
    # (spec, allocated and actual; Infeasible skips the spec; init containers at peak).
    ledger = NodeLedger(snap(cases, []))
    used = {"cpu": 0, "memory": 0}
    for p in cases:
        for r, v in pod_charge(p).items():
            used[r] += v
    assert used["cpu"] == 100 + 300 + 100 + 100 + 900  # c: Infeasible, d: request 100
    assert ledger.free("n1") == {
        "cpu": 64000 - used["cpu"],
        "memory": 256 * 1024 * MIB - used["memory"],
    }


def test_selector_target_uses_match_labels_and_expressions() -> None:
    t = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "default", "uid": "t-sel"},
            "spec": {
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "NotIn", "values": ["canary"]}
                    ],
                },
                "vertical": {
                    "mode": "auto",
                    "update_policy": {"update_mode": "in_place"},
                    "disruption": {"max_disrupted": 5},
                },
            },
        }
    )
    pods = [pod("a"), pod("b"), pod("c"), pod("other", owner="db")]
    pods[1].labels["tier"] = "canary"
    s = snap(pods, [t])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert names(actions, ResizePod) == ["a", "c"]


def test_a_bad_target_is_reported_by_field_and_does_not_stop_the_others() -> None:
    bad = {
        "metadata": {"name": "broken", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "vertical": {"mode": "auto", "update_policy": {"update_mode": "sometimes"}},
        },
    }
    s = snap([pod("p0")], [target("in_place")])
    s.targets.insert(0, bad)
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    (ev,) = [e for e in of(actions, EmitEvent) if e.reason == "InvalidSpec"]
    assert ev.name == "broken" and "update_policy.update_mode" in ev.message
    assert names(actions, ResizePod) == ["p0"]
    actions, _ = plan(s, 10.0, state, suggestions=sugg())
    assert not [e for e in of(actions, EmitEvent) if e.reason == "InvalidSpec"]


def test_state_of_a_deleted_target_is_dropped() -> None:
    s = snap([pod("p0")], [target("in_place")])
    _, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert KEY in state.targets
    _, state = plan(snap([pod("p0")], []), 10.0, state, suggestions=sugg())
    assert KEY not in state.targets and not state.policies


def test_suggestion_is_read_from_the_target_status_when_not_passed() -> None:
    t = target("in_place")
    t.status = t.status.model_validate(
        {
            "vertical_suggestion": {
                "uid": "from-status",
                "containers": [{"name": "app", "requests": {"cpu": "300m", "memory": "128Mi"}}],
                "created_at": "2026-01-05T00:00:00Z",
            }
        }
    )
    actions, state = plan(snap([pod("p0")], [t]), 0.0, WorkerState())
    (rz,) = of(actions, ResizePod)
    assert rz.containers[0].requests == {"cpu": 300, "memory": 128 * MIB}
    assert state.targets[KEY].breaker.suggestion_uid == "from-status"


# ---------------------------------------------------------- pods without a controller


def bare(p: Pod) -> Pod:
    p.owner = None
    return p


def test_a_stalled_pod_without_a_controller_is_never_evicted_and_the_target_says_so() -> None:
    stuck = bare(pod("bare", cpu=200, mem=200 * MIB, alloc={"cpu": 200, "memory": 300 * MIB}))
    stuck.conditions.append(error())
    owned = pod("owned", cpu=200, mem=200 * MIB, alloc={"cpu": 200, "memory": 300 * MIB})
    owned.conditions.append(error())
    s = snap([stuck, owned], [selector_target("in_place_or_recreate", min_replicas=1)])
    state = WorkerState()
    seen: list[Any] = []
    for t in (0.0, 130.0, 400.0, 1000.0):
        actions, state = plan(s, t, state, suggestions=sugg())
        seen += actions
    # Only the pod a controller recreates is evicted.
    assert {a.name for a in of(seen, EvictPod)} == {"owned"}
    skipped = [
        e for e in of(seen, EmitEvent) if e.reason in ("EvictionSkipped", "PodWithoutController")
    ]
    assert {(e.kind, e.name) for e in skipped} == {("Pod", "bare"), ("AIScaleTarget", "web")}
    assert len(skipped) == 2  # announced once
    status = of(seen, WriteTargetStatus)[-1].status
    assert status["pods_without_controller"] == ["bare"]


def test_recreate_mode_and_a_capacity_miss_never_evict_a_pod_without_a_controller() -> None:
    s = snap([bare(pod("bare"))], [selector_target("recreate")])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(mem=400 * MIB))
    assert not of(actions, EvictPod)
    # in_place_or_recreate: an upsize that does not fit its node waits instead of evicting.
    p = bare(pod("bare", cpu=900))
    s = snap([p], [selector_target("in_place_or_recreate")], nodes={"n1": 1000, "n2": 4000})
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=1500))
    assert not of(actions, EvictPod) and not of(actions, ResizePod)
    assert any(e.reason == "ResizeWaitingForCapacity" for e in of(actions, EmitEvent))


def test_selector_target_leaves_pods_other_targets_claim_and_reports_the_overlap() -> None:
    """A pod belongs to one target: a selector target does not resize the pods of a
    scaleTargetRef target, nor pods a second selector target also selects."""
    sel = selector_target("in_place")
    other = selector_target("in_place")
    other.metadata.name, other.metadata.uid = "web-too", "t-sel-2"
    other.spec.selector.matchLabels = {"tier": "front"}
    pods = [bare(pod("a")), bare(pod("b")), pod("c", owner="web")]
    pods[1].labels["tier"] = "front"
    pods[2].labels["app"] = "web"  # also the Deployment's pod (its scaleTargetRef target)
    ref = target("in_place", name="web-ref")
    ref.spec.scaleTargetRef.name = "web"
    s = snap(pods, [sel, other, ref])
    both = {**sugg(), "default/web-too": sugg()[KEY], "default/web-ref": sugg()[KEY]}
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=both)
    resized = sorted((a.target, a.name) for a in of(actions, ResizePod))
    # "a" only by the first selector; "b" by neither selector; "c" by its ref target.
    assert resized == [("default/web", "a"), ("default/web-ref", "c")]
    overlap = [e for e in of(actions, EmitEvent) if e.reason == "TargetOverlap"]
    assert sorted(e.name for e in overlap) == ["web", "web-too"]
    statuses = {w.name: w.status for w in of(actions, WriteTargetStatus)}
    assert statuses["web"]["overlapping_targets"] == ["default/web-ref", "default/web-too"]


def test_oom_killed_pods_are_evicted_first_but_within_the_batch() -> None:
    """recreate: ten replicas all OOM-killed just now: two (20%) go per batch, not ten."""
    t = target("recreate")
    pods = [pod(f"p{i}", oom_at=90.0) for i in range(10)]
    actions, _ = plan(snap(pods, [t]), 100.0, WorkerState(), suggestions=sugg(mem=400 * MIB))
    assert len(of(actions, EvictPod)) == 2


def test_a_request_the_container_does_not_declare_is_never_added() -> None:
    """Audit reliability F-16: a container with only a memory request got a CPU request
    from a "*" suggestion; the API refuses to remove a request in place, so the revert to
    the template would have needed a restart. The webhook keeps the key set; so does the
    worker."""
    from foresize.core.cluster.model import Container

    def memory_only(mem: int) -> Pod:
        p = pod("p0", mem=mem)
        p.containers[0] = Container("app", ResourceRequirements({"memory": mem}, {}))
        p.container_statuses[0].allocated = {"memory": mem}
        p.container_statuses[0].resources = ResourceRequirements({"memory": mem}, {})
        return p

    t = target("in_place", min_replicas=1)
    actions, _ = plan(
        snap([memory_only(100 * MIB)], [t]), 100.0, WorkerState(), suggestions=sugg(cpu=300)
    )
    (r,) = of(actions, ResizePod)
    assert r.containers[0].requests == {"memory": 200 * MIB}
    # Only the undeclared resource differs: nothing to do.
    actions, _ = plan(
        snap([memory_only(200 * MIB)], [t]), 100.0, WorkerState(), suggestions=sugg(cpu=300)
    )
    assert not of(actions, ResizePod)
