"""Seed rules whose earlier tests still passed with the rule removed: each test here fails
when its rule is taken out of the code (the rule and the one-line change that breaks it
are named in each docstring)."""

from __future__ import annotations

from typing import Any

import numpy as np

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod, WriteTargetStatus
from foresize.core.cluster.model import PodCondition, ResourceRequirements
from foresize.core.recommend.histories import MODEL_STEP, ContainerHistory
from foresize.core.recommend.target import recommend_target
from foresize.core.vertical import WorkerConfig, WorkerState, execute, plan
from support.vertical import KEY, apply_ok, names, of, pod, snap, sugg, target

DAY = 86400.0
# The pods here are single replicas: targets that evict opt in with min_replicas=1.


# --------------------------------------------------------------------------- stalls


def test_infeasible_is_a_stall_and_falls_back_after_the_stall_timeout() -> None:
    """Rule: `PodResizePending` reason `Infeasible` is a stall (vertical.stall.stall_reason)."""
    stuck = pod(
        "big",
        cpu=2000,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[PodCondition("PodResizePending", "True", "Infeasible", "node too small")],
    )
    # n1 (1 core) can never hold 2 cores; n2 can, so the fallback eviction has somewhere to go.
    s = snap(
        [stuck], [target("in_place_or_recreate", min_replicas=1)], nodes={"n1": 1000, "n2": 8000}
    )
    state = WorkerState()
    actions, state = plan(s, 0.0, state, suggestions=sugg(cpu=2000, mem=100 * MIB))
    stalled = [e for e in of(actions, EmitEvent) if e.reason == "ResizeStalled"]
    assert [e.name for e in stalled] == ["big"] and "Infeasible" in stalled[0].message
    assert of(actions, WriteTargetStatus)[0].status["pods_stalled"] == 1
    assert not of(actions, EvictPod)
    actions, state = plan(s, 119.0, state, suggestions=sugg(cpu=2000, mem=100 * MIB))
    assert not of(actions, EvictPod)
    actions, state = plan(s, 121.0, state, suggestions=sugg(cpu=2000, mem=100 * MIB))
    assert names(actions, EvictPod) == ["big"]


def test_resize_in_progress_without_a_reason_is_not_a_stall() -> None:
    """Rule: only `PodResizeInProgress` with reason `Error` is a stall; without a reason the
    kubelet is actuating the resize, and the pod must never be evicted for it."""
    busy = pod(
        "busy",
        cpu=200,
        mem=200 * MIB,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[PodCondition("PodResizeInProgress", "True", "", "")],
    )
    s = snap([busy], [target("in_place_or_recreate", min_replicas=1)])
    state = WorkerState()
    for t in range(0, 1200, 30):
        actions, state = plan(s, float(t), state, suggestions=sugg())
        assert not of(actions, EvictPod), t
        assert not [e for e in of(actions, EmitEvent) if e.reason == "ResizeStalled"]
    assert not state.targets[KEY].stalls


def test_an_in_place_stall_is_resolved_by_a_lower_forecast() -> None:
    """Rule: under `in_place` a stall stays until conditions change or a new forecast
    lowers the target: the stalled pod gets a new resize to the lower value, no eviction."""
    stuck = pod(
        "p0",
        cpu=600,
        mem=100 * MIB,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[PodCondition("PodResizePending", "True", "Deferred", "node full")],
    )
    s = snap([stuck], [target("in_place")])
    state = WorkerState()
    actions, state = plan(s, 0.0, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    assert not of(actions, ResizePod) and not of(actions, EvictPod)
    lower = sugg(cpu=150, mem=100 * MIB, uid="s2")
    actions, state = plan(s, 600.0, state, suggestions=lower)
    (resize,) = of(actions, ResizePod)
    assert resize.name == "p0" and resize.containers[0].requests["cpu"] == 150
    assert not of(actions, EvictPod)


# --------------------------------------------------------------------------- breaker


def test_a_new_suggestion_resets_an_open_breaker() -> None:
    """Rule: the circuit breaker is per target *and suggestion*: a new suggestion uid starts
    closed, so evictions for it go out at once instead of waiting out the old back-off."""
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})
    cfg = WorkerConfig()
    state, now, gen = WorkerState(), 0.0, 0
    current = pod("p-0")
    while state.targets.get(KEY) is None or state.targets[KEY].breaker.state != "open":
        actions, state = plan(snap([current], [t]), now, state, cfg, suggestions=sugg())
        if of(actions, EvictPod):
            state, _ = execute(actions, apply_ok, state, snap([current], [t]), now, cfg)
            gen += 1
            current = pod(f"p-{gen}", created=now + 5)  # comes back stale
        now += 10
        assert now < 600
    assert state.targets[KEY].breaker.next_probe_at > now + 30  # still backing off
    # A different recommendation arrives: the breaker starts closed, the pod is evicted.
    new = sugg(cpu=300, mem=300 * MIB, uid="s2")
    actions, state = plan(snap([current], [t]), now, state, cfg, suggestions=new)
    assert names(actions, EvictPod) == [current.name]
    b = state.targets[KEY].breaker
    assert (b.state, b.suggestion_uid, b.no_progress) == ("closed", "s2", 0)
    assert any(e.reason == "CircuitBreakerReset" for e in of(actions, EmitEvent))


# --------------------------------------------------------------------------- forecasting


def _spiky_history(days: int, end: float) -> ContainerHistory:
    """100m all day, 900m from 12:00 to 13:00 every day, on the model grid up to `end`."""
    t = np.arange(end - days * DAY + MODEL_STEP, end + 1.0, MODEL_STEP)
    hour = (t % DAY) / 3600.0
    cpu = np.where((hour >= 12.0) & (hour < 13.0), 0.9, 0.1)
    return ContainerHistory(cpu, np.full(t.shape, 200.0 * MIB), first_seen=float(t[0]))


def _suggested_cpu(now: float) -> int:
    current = {"app": ResourceRequirements({"cpu": 300, "memory": 256 * MIB}, {})}
    result = recommend_target(
        target("in_place"), {"app": _spiky_history(4, now)}, current, None, now
    )
    return result.suggestion.containers["app"].requests["cpu"]


def test_the_request_rises_before_a_daily_spike_not_with_it() -> None:
    """Rule: forecasting applies upsizes before the spike. At 11:15 usage has been 100m for
    11 hours; only a forecast that knows the daily pattern asks for the 900m due at 12:00
    (a reactive model, e.g. forcing the `persist` model in forecast selection, asks for
    ~100m and fails). At 09:00 the same forecast stays low: it is the time of day, not a
    blanket maximum."""
    day4 = 4 * DAY
    ahead = _suggested_cpu(day4 + 11 * 3600 + 15 * 60)
    morning = _suggested_cpu(day4 + 9 * 3600)
    assert ahead >= 850, ahead
    assert morning <= 300, morning


def test_a_replacement_created_in_the_eviction_second_is_judged() -> None:
    """Rule: each stale replacement is a no-progress cycle, 3 open the breaker. On a real
    API server creationTimestamp has whole seconds while the pass clock has a fraction: a
    pod created in the same second as the eviction is its replacement (else the breaker
    opens one eviction late)."""
    t = target("recreate", min_replicas=1, disruption={"max_disrupted": 1, "interval": "1s"})
    cfg = WorkerConfig()
    state, now, gen, evictions = WorkerState(), 0.4, 0, 0
    current = pod("p-0")
    while state.targets.get(KEY) is None or state.targets[KEY].breaker.state != "open":
        actions, state = plan(snap([current], [t]), now, state, cfg, suggestions=sugg())
        if of(actions, EvictPod):
            evictions += 1
            state, _ = execute(actions, apply_ok, state, snap([current], [t]), now, cfg)
            gen += 1
            current = pod(f"p-{gen}", created=float(int(now)))  # same second, truncated
        now += 10
        assert evictions <= 5
    assert evictions == 3


def test_a_stall_whose_reason_changes_keeps_its_clock() -> None:
    """Rule: the stall clock starts when the stall is first seen; Deferred turning into
    Infeasible is the same stall, so the fallback still comes at stall_timeout from the
    first sighting (resetting the clock on a reason change would push it out)."""

    def stuck(reason: str) -> Any:
        return pod(
            "p0",
            cpu=2000,
            mem=100 * MIB,
            alloc={"cpu": 100, "memory": 100 * MIB},
            conditions=[PodCondition("PodResizePending", "True", reason, "")],
        )

    t = target("in_place_or_recreate", min_replicas=1)
    nodes = {"n1": 1000, "n2": 8000}
    want = sugg(cpu=2000, mem=100 * MIB)
    _, state = plan(
        snap([stuck("Deferred")], [t], nodes=nodes), 0.0, WorkerState(), suggestions=want
    )
    _, state = plan(snap([stuck("Infeasible")], [t], nodes=nodes), 90.0, state, suggestions=want)
    actions, _ = plan(snap([stuck("Infeasible")], [t], nodes=nodes), 121.0, state, suggestions=want)
    assert names(actions, EvictPod) == ["p0"]
