"""The cluster-wide eviction rate limit (VPA updater's `--eviction-rate-limit` /
`--eviction-rate-burst`): a token bucket in the worker's state, refilled with the pass's
`now`, so the kube shell and the simulator pace evictions the same way."""

from __future__ import annotations

from typing import Any

from foresize.core.cluster.actions import EmitEvent, EvictPod, WriteTargetStatus
from foresize.core.vertical import WorkerConfig, WorkerState, plan
from support.vertical import names, of, pod, snap, sugg, target

BIG = {"max_disrupted": 10, "interval": "1s"}
LIMITED = WorkerConfig(eviction_rate_limit=0.1, eviction_rate_burst=2)  # 1 per 10 s


def test_the_burst_goes_at_once_then_one_eviction_per_token() -> None:
    pods = [pod(f"p{i}", created=float(i)) for i in range(6)]
    t = target("recreate", min_replicas=1, disruption=BIG)
    state = WorkerState()
    evicted: list[tuple[float, str]] = []
    for now in (0.0, 5.0, 10.0, 15.0, 20.0, 40.0):
        s = snap([p for p in pods if p.name not in {n for _, n in evicted}], [t])
        actions, state = plan(s, now, state, LIMITED, suggestions=sugg())
        evicted += [(now, n) for n in names(actions, EvictPod)]
    # Two at once (the burst), then one per 10 s; 20 s idle refill at most the burst.
    assert [at for at, _ in evicted] == [0.0, 0.0, 10.0, 20.0, 40.0, 40.0]


def test_without_the_limit_the_batch_goes_at_once() -> None:
    pods = [pod(f"p{i}") for i in range(6)]
    s = snap(pods, [target("recreate", min_replicas=1, disruption=BIG)])
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg())
    assert len(of(actions, EvictPod)) == 6


def test_the_bucket_is_shared_by_all_targets_and_said_once() -> None:
    a, b = target("recreate", "a", min_replicas=1), target("recreate", "b", min_replicas=1)
    pods = [pod("a-0", owner="a", priority=10), pod("b-0", owner="b")]
    suggestions = {**sugg(), "default/a": sugg()["default/web"], "default/b": sugg()["default/web"]}
    cfg = WorkerConfig(eviction_rate_limit=0.01, eviction_rate_burst=1)
    state = WorkerState()
    seen: list[Any] = []
    for now in (0.0, 30.0):
        actions, state = plan(snap(pods, [a, b]), now, state, cfg, suggestions=suggestions)
        seen += actions
    assert names(seen, EvictPod) == ["a-0"]  # the higher priority first; one token only
    limited = [e for e in of(seen, EmitEvent) if e.reason == "EvictionRateLimited"]
    assert [(e.kind, e.name) for e in limited] == [("AIScaleTarget", "b")]  # once
    last_b = [w for w in of(seen, WriteTargetStatus) if w.name == "b"][-1]
    assert any("rate limit" in n for n in last_b.status["vertical_notes"])


def test_a_pass_does_not_spend_the_tokens_of_the_state_it_was_given() -> None:
    t = target("recreate", min_replicas=1, disruption=BIG)
    cfg = WorkerConfig(eviction_rate_limit=0.001, eviction_rate_burst=2)
    _, state = plan(snap([pod("p0")], [t]), 0.0, WorkerState(), cfg, suggestions=sugg())
    s = snap([pod("p1")], [t])  # one token left in `state`
    first, _ = plan(s, 1.0, state, cfg, suggestions=sugg())
    again, _ = plan(s, 1.0, state, cfg, suggestions=sugg())
    assert names(first, EvictPod) == names(again, EvictPod) == ["p1"]
