"""When a start-up boost's usage has settled (`cluster.boost`, issue 25 item 2): the pod
is Ready and its last `samples` CPU samples since Ready each show every boosted container
under `below` x the request it returns to; usage never seen does not settle, and the
boost ends `timeout` after Ready; a `duration` caps it. The pods' CPU window keeps the
latest samples a pod and forgets pods gone quiet."""

from __future__ import annotations

import json

import pytest

from foresize.core.cluster.boost import (
    BOOST_ANNOTATION,
    ENDED_DURATION,
    ENDED_READY,
    ENDED_SETTLE_TIMEOUT,
    ENDED_SETTLED,
    BoostPolicy,
    PodCpuWindow,
    Settle,
    boost_state,
    encode,
)
from foresize.core.cluster.model import PodCondition
from support.vertical import pod

READY_AT = 1000.0


def boosted(*, ready: bool = True, settle: dict | None = None, until: float | None = None):
    """A pod boosted to 1 CPU whose two containers return to 250m and 100m."""
    p = pod("p0", cpu=1000, ready=ready)
    p.conditions = [
        PodCondition("Ready", "True" if ready else "False", last_transition_time=READY_AT)
    ]
    p.start_time = READY_AT - 60.0
    value: dict = {"containers": {"app": {"request": 250}, "side": {"request": 100}}}
    if settle is not None:
        value["settle"] = settle
    if until is not None:
        value["until"] = until
    p.annotations[BOOST_ANNOTATION] = json.dumps(value)
    return p


SETTLE = {"samples": 3, "below": 1.0, "timeout": 600.0}


def samples(*rows: tuple[float, float, float]) -> list:
    return [(t, {"app": a, "side": s}) for t, a, s in rows]


def test_ready_alone_does_not_end_a_settle_boost_three_low_samples_since_ready_do() -> None:
    p = boosted(settle=SETTLE)
    state = boost_state(p)
    assert state is not None and state.settle == Settle(3, 1.0, 600.0)
    assert state.ended(p, READY_AT + 10, None) == ""  # Ready, no usage seen yet
    busy = samples(
        (READY_AT + 15, 0.9, 0.05), (READY_AT + 30, 0.2, 0.05), (READY_AT + 45, 0.2, 0.05)
    )
    assert state.ended(p, READY_AT + 50, busy) == ""  # the first of the last 3 was busy
    calm = [*busy, (READY_AT + 60, {"app": 0.2, "side": 0.05})]
    assert state.ended(p, READY_AT + 65, calm) == ENDED_SETTLED


def test_samples_before_ready_and_a_missing_container_do_not_count() -> None:
    p = boosted(settle=SETTLE)
    state = boost_state(p)
    assert state is not None
    before = samples((READY_AT - 30, 0.1, 0.0), (READY_AT - 15, 0.1, 0.0), (READY_AT, 0.1, 0.0))
    assert state.ended(p, READY_AT + 5, before) == ""
    partial = [(READY_AT + t, {"app": 0.1}) for t in (15.0, 30.0, 45.0)]
    assert state.ended(p, READY_AT + 50, partial) == ""  # `side` was never seen
    # Every container counts: `side` at its unboosted 100m is not under it.
    at_level = samples(*[(READY_AT + t, 0.1, 0.1) for t in (15.0, 30.0, 45.0)])
    assert state.ended(p, READY_AT + 50, at_level) == ""


def test_below_scales_the_level() -> None:
    p = boosted(settle={**SETTLE, "below": 1.5})
    state = boost_state(p)
    assert state is not None
    rows = samples(*[(READY_AT + t, 0.3, 0.12) for t in (15.0, 30.0, 45.0)])  # < 375m, < 150m
    assert state.ended(p, READY_AT + 50, rows) == ENDED_SETTLED


def test_unsettled_usage_ends_the_boost_at_the_timeout_after_ready() -> None:
    p = boosted(settle=SETTLE)
    state = boost_state(p)
    assert state is not None
    hot = samples(*[(READY_AT + t, 0.9, 0.05) for t in range(15, 600, 15)])
    assert state.ended(p, READY_AT + 599, hot) == ""
    assert state.ended(p, READY_AT + 600, hot) == ENDED_SETTLE_TIMEOUT
    assert state.ended(p, READY_AT + 600, None) == ENDED_SETTLE_TIMEOUT


def test_a_starting_pod_keeps_a_settle_boost_and_a_duration_caps_it() -> None:
    starting = boosted(ready=False, settle=SETTLE)
    state = boost_state(starting)
    assert state is not None
    assert state.ended(starting, READY_AT + 5000, None) == ""  # never Ready: no timeout
    capped = boosted(ready=False, settle=SETTLE, until=READY_AT + 100)
    state = boost_state(capped)
    assert state is not None
    assert state.ended(capped, READY_AT + 100, None) == ENDED_DURATION
    plain = boosted()
    state = boost_state(plain)
    assert state is not None and state.ended(plain, READY_AT, None) == ENDED_READY


@pytest.mark.parametrize(
    "settle",
    [
        {"samples": 0, "below": 1.0, "timeout": 600},
        {"samples": 3, "below": 0, "timeout": 600},
        {"samples": 3, "below": "NaN", "timeout": 600},
        {"samples": 3, "below": 1.0, "timeout": -1},
        {"samples": 3, "below": 1.0},
        "soon",
    ],
)
def test_a_malformed_settle_is_a_problem_not_a_guess(settle) -> None:
    state = boost_state(boosted(settle=settle))
    assert state is not None and "not what the webhook writes" in state.problem


def test_the_webhook_writes_what_the_planner_reads() -> None:
    policy = BoostPolicy(factor=4, duration=900.0, settle=Settle(5, 0.8, 300.0))
    p = boosted()
    p.annotations[BOOST_ANNOTATION] = encode({"app": {"request": 250}}, policy, 10.0)
    state = boost_state(p)
    assert state is not None and not state.problem
    assert state.settle == Settle(5, 0.8, 300.0) and state.until == 910.0


def test_the_window_keeps_the_latest_samples_merges_containers_and_forgets_quiet_pods() -> None:
    window = PodCpuWindow(keep=3, forget=100.0)
    for t in (1.0, 2.0, 3.0, 4.0):
        window.add("ns/a", t, "app", t / 10)
        window.add("ns/a", t, "side", 0.5)
    window.add("ns/a", 2.5, "app", 9.0)  # older than the newest: not history rewritten
    assert window.samples("ns/a") == [(t, {"app": t / 10, "side": 0.5}) for t in (2.0, 3.0, 4.0)]
    window.add("ns/b", 200.0, "app", 0.1)  # a sweep: `a` quiet for more than 100 s
    assert window.samples("ns/a") == [] and window.samples("ns/b") == [(200.0, {"app": 0.1})]
