"""The planner's half of the start-up boost (issue 25, `vertical.boost`): a boosted pod
is left alone while it starts, and unboosted in place in the first pass after its
start-up period (Ready, or the annotation's `until`), back to the suggestion or, without
one, to what it was admitted with before the boost; not paced by the batch budget. A boost
that ends when usage settles waits, once Ready, for the pod's CPU samples to fall under
the unboosted request, or for its timeout (a Warning Event and a status note then)."""

from __future__ import annotations

import json

from foresize.core.cluster.actions import EmitEvent, ResizePod, WriteTargetStatus
from foresize.core.cluster.boost import BOOST_ANNOTATION, PodCpuWindow
from foresize.core.cluster.model import Pod, PodCondition
from foresize.core.vertical import WorkerState, plan
from support.vertical import of, pod, snap, sugg, target


def boosted(name: str, *, ready: bool, until: float | None = None) -> Pod:
    """A pod admitted at 250m and boosted to 1 CPU (limit 500m -> 2)."""
    p = pod(name, cpu=1000, limits={"cpu": 2000}, ready=ready)
    value: dict = {"containers": {"app": {"request": 250, "limit": 500}}}
    if until is not None:
        value["until"] = until
    p.annotations[BOOST_ANNOTATION] = json.dumps(value)
    return p


def test_a_starting_pod_keeps_its_boost_and_a_ready_one_is_unboosted_at_once() -> None:
    s = snap([boosted("starting", ready=False), boosted("up", ready=True)], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions={})  # no suggestion yet
    (resize,) = of(actions, ResizePod)
    assert resize.name == "up" and resize.reason == "unboost"
    assert resize.containers[0].requests["cpu"] == 250
    assert resize.containers[0].limits["cpu"] == 500
    (write,) = of(actions, WriteTargetStatus)
    assert write.status["pods_starting_boosted"] == 1


def test_the_unboost_goes_to_the_suggestion_when_there_is_one_and_skips_the_budget() -> None:
    pods = [boosted(f"p{i}", ready=True) for i in range(5)]
    s = snap(pods, [target("in_place", disruption={"max_disrupted": 1})])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg(cpu=300, mem=100 * 2**20))
    resizes = of(actions, ResizePod)
    assert len(resizes) == 5  # every boosted pod, whatever the batch size
    assert {r.containers[0].requests["cpu"] for r in resizes} == {300}


def test_a_duration_boost_ends_at_its_until_ready_or_not() -> None:
    s = snap([boosted("p0", ready=True, until=200.0)], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions={})
    assert not of(actions, ResizePod)  # Ready, but the boost lasts until 200
    s = snap([boosted("p0", ready=False, until=200.0)], [target("in_place")])
    actions, _ = plan(s, 200.0, WorkerState(), suggestions={})
    assert of(actions, ResizePod)[0].reason == "unboost"


def test_a_malformed_boost_annotation_is_ignored_with_a_warning() -> None:
    p = pod("p0", cpu=1000, ready=True)
    p.annotations[BOOST_ANNOTATION] = "{not json"
    s = snap([p], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions={})
    assert not of(actions, ResizePod)
    assert [e for e in of(actions, EmitEvent) if e.reason == "StartupBoostIgnored"]


def settling(name: str, ready_at: float = 100.0) -> Pod:
    """A Ready pod boosted to 1 CPU (back to 250m) until its usage settles."""
    p = boosted(name, ready=True)
    p.conditions = [PodCondition("Ready", "True", last_transition_time=ready_at)]
    value = json.loads(p.annotations[BOOST_ANNOTATION])
    value["settle"] = {"samples": 2, "below": 1.0, "timeout": 300.0}
    p.annotations[BOOST_ANNOTATION] = json.dumps(value)
    return p


def test_a_settle_boost_waits_for_low_usage_after_ready_then_unboosts() -> None:
    s = snap([settling("p0")], [target("in_place")])
    window = PodCpuWindow()
    window.add("default/p0", 110.0, "app", 0.9)  # Ready, still compiling
    window.add("default/p0", 120.0, "app", 0.2)
    actions, _ = plan(s, 125.0, WorkerState(), suggestions={}, pod_usage=window)
    assert not of(actions, ResizePod)
    assert of(actions, WriteTargetStatus)[0].status["pods_starting_boosted"] == 1
    window.add("default/p0", 130.0, "app", 0.2)  # two in a row under 250m
    actions, _ = plan(s, 135.0, WorkerState(), suggestions={}, pod_usage=window)
    (resize,) = of(actions, ResizePod)
    assert resize.reason == "unboost" and resize.containers[0].requests["cpu"] == 250
    assert not [e for e in of(actions, EmitEvent) if e.reason == "StartupBoostTimedOut"]


def test_a_settle_boost_whose_usage_never_settles_ends_at_its_timeout_and_says_so() -> None:
    s = snap([settling("p0")], [target("in_place")])
    window = PodCpuWindow()
    for t in range(110, 400, 10):
        window.add("default/p0", float(t), "app", 0.9)
    actions, _ = plan(s, 399.0, WorkerState(), suggestions={}, pod_usage=window)
    assert not of(actions, ResizePod)
    actions, _ = plan(s, 400.0, WorkerState(), suggestions={}, pod_usage=window)
    assert of(actions, ResizePod)[0].reason == "unboost"
    (event,) = [e for e in of(actions, EmitEvent) if e.reason == "StartupBoostTimedOut"]
    assert event.type == "Warning" and "had not settled" in event.message
    (write,) = of(actions, WriteTargetStatus)
    assert any("without settling" in n for n in write.status["vertical_notes"])
    # No collector at all: the timeout still ends it, and the note says no usage was seen.
    actions, _ = plan(s, 400.0, WorkerState(), suggestions={})
    (event,) = [e for e in of(actions, EmitEvent) if e.reason == "StartupBoostTimedOut"]
    assert "no CPU usage sample" in event.message
