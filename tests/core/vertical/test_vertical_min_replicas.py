"""The min-replicas eviction rule (VPA's `--min-replicas`): an eviction never takes a
workload's last ready replica down unless the target sets `update_policy.min_replicas: 1`."""

from __future__ import annotations

from typing import Any

from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod, WriteTargetStatus
from foresize.core.cluster.model import OwnerRef
from foresize.core.vertical import WorkerState, plan
from foresize.core.vertical.admit import EVICTION_SKIPPED_MIN_REPLICAS
from support.vertical import names, of, pod, selector_target, snap, sugg, target

BIG = {"max_disrupted": 10, "interval": "1s"}


def held_events(actions: list[Any]) -> list[tuple[str, str]]:
    return [
        (e.kind, e.name)
        for e in of(actions, EmitEvent)
        if e.reason == EVICTION_SKIPPED_MIN_REPLICAS
    ]


def status(actions: list[Any]) -> dict[str, Any]:
    return of(actions, WriteTargetStatus)[-1].status


def test_a_single_replica_is_held_by_default_and_said_once() -> None:
    s = snap([pod("p0")], [target("recreate", disruption=BIG)])
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert not of(actions, EvictPod)
    assert held_events(actions) == [("Pod", "p0"), ("AIScaleTarget", "web")]
    assert status(actions)["pods_held_by_min_replicas"] == ["p0"]
    actions, _ = plan(s, 60.0, state, suggestions=sugg())
    assert not of(actions, EvictPod) and not held_events(actions)  # announced once


def test_a_single_replica_is_evicted_when_the_target_allows_it() -> None:
    s = snap([pod("p0")], [target("recreate", min_replicas=1, disruption=BIG)])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert names(actions, EvictPod) == ["p0"]
    assert not held_events(actions)
    assert status(actions)["pods_held_by_min_replicas"] == []


def test_the_ready_replica_is_held_while_its_sibling_is_not_ready() -> None:
    # Two replicas, one not ready: evicting the ready one would leave none serving. The
    # one that is not ready serves nothing, so it may go (that is how a crash-looping pod
    # gets its bigger size).
    pods = [pod("ready"), pod("starting", ready=False)]
    s = snap(pods, [target("recreate", disruption=BIG)])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert names(actions, EvictPod) == ["starting"]
    assert status(actions)["pods_held_by_min_replicas"] == ["ready"]


def test_evictions_in_one_pass_leave_min_replicas_minus_one_ready() -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    for min_replicas, evicted in ((None, 3), (3, 2), (4, 1), (5, 0)):
        t = target("recreate", min_replicas=min_replicas, disruption=BIG)
        actions, _ = plan(snap(pods, [t]), 0.0, WorkerState(), suggestions=sugg())
        assert len(of(actions, EvictPod)) == evicted, min_replicas


def test_in_place_resizes_are_not_held() -> None:
    s = snap([pod("p0")], [target("in_place", disruption=BIG)])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert names(actions, ResizePod) == ["p0"]
    assert not held_events(actions)


def test_a_selector_target_counts_ready_replicas_per_workload() -> None:
    # Two workloads under one selector target: "web" has two ready replicas (one may go),
    # "solo" has one (held). Counting the target's pods together would let "solo" go.
    pods = [pod("web-0"), pod("web-1"), pod("solo-0")]
    pods[2].owner = OwnerRef("Deployment", "solo")
    s = snap(pods, [selector_target("recreate", max_disrupted=10, interval="1s")])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert names(actions, EvictPod) == ["web-0"]
    assert status(actions)["pods_held_by_min_replicas"] == ["solo-0", "web-1"]
