"""The circuit breaker, per target and suggestion: evicted pods that come back without the
suggested resources (the webhook is not applying it) are no-progress cycles; after
`breaker_threshold` of them in a row evictions stop, with an exponential back-off
(1m, 2m, 4m ... capped at 1h), then one probe eviction is let through; a replacement that
comes back right closes it. A new suggestion starts with a closed breaker."""

from __future__ import annotations

import math

from foresize.core.cluster.model import Pod, Suggestion
from foresize.core.vertical.desired import matches_suggestion
from foresize.core.vertical.policy import WorkerConfig
from foresize.core.vertical.run import TargetRun
from foresize.core.vertical.state import CLOSED, HALF_OPEN, OPEN, BreakerState, PendingEviction


def move_breaker(run: TargetRun, sugg: Suggestion, now: float, config: WorkerConfig) -> None:
    """Judge recreated pods against the suggestion and move the circuit breaker."""
    ts = run.state
    b = ts.breaker
    if b.suggestion_uid != sugg.uid:
        _reset(run, b, sugg)
    if ts.pending_evictions:
        _judge(run, b, sugg, now, config)
    if b.state == OPEN and b.next_probe_at is not None and now >= b.next_probe_at:
        b.state = HALF_OPEN
        run.target_event("CircuitBreakerHalfOpen", "back-off over: one probe eviction allowed")


def _reset(run: TargetRun, b: BreakerState, sugg: Suggestion) -> None:
    # Per target and suggestion: a new suggestion starts with a closed breaker.
    if b.state != CLOSED:
        run.target_event("CircuitBreakerReset", f"new suggestion {sugg.uid}: circuit breaker reset")
    b.suggestion_uid, b.state, b.no_progress, b.openings, b.next_probe_at = (
        sugg.uid,
        CLOSED,
        0,
        0,
        None,
    )
    ts = run.state
    ts.pending_evictions = [p for p in ts.pending_evictions if p.suggestion_uid == sugg.uid]


def _replacement(ev: PendingEviction, fresh: list[Pod], judged: set[str]) -> Pod | None:
    # A controller recreates at once: the replacement may carry the eviction's time, and
    # creationTimestamp has whole seconds while the eviction's time has a fraction.
    since = math.floor(ev.at)
    return next(
        (p for p in fresh if p.creation_time >= since and p.uid not in judged and p.uid != ev.uid),
        None,
    )


def _judge(
    run: TargetRun, b: BreakerState, sugg: Suggestion, now: float, config: WorkerConfig
) -> None:
    ts = run.state
    judged = set(ts.judged)
    fresh = sorted(
        (p for p in run.pods if p.uid not in judged and not p.terminating),
        key=lambda p: (p.creation_time, p.name),
    )
    still: list[PendingEviction] = []
    for ev in ts.pending_evictions:
        new = _replacement(ev, fresh, judged)
        if new is None:
            if now - ev.at < config.eviction_verdict_timeout:
                still.append(ev)
            continue
        judged.add(new.uid)
        ts.judged.append(new.uid)
        if matches_suggestion(new, sugg, run.skip, config.match_tolerance):
            _progress(run, b, new)
        else:
            _no_progress(run, b, new, now, config)
    ts.pending_evictions = still


def _progress(run: TargetRun, b: BreakerState, new: Pod) -> None:
    if b.state != CLOSED:
        run.target_event(
            "CircuitBreakerClosed",
            f"pod {new.name} came back with the suggested resources: evictions resume",
        )
    b.state, b.no_progress, b.openings, b.next_probe_at = CLOSED, 0, 0, None
    b.opened_at = b.backoff = None


def _no_progress(
    run: TargetRun, b: BreakerState, new: Pod, now: float, config: WorkerConfig
) -> None:
    b.no_progress += 1
    if not (
        b.state == HALF_OPEN or (b.state == CLOSED and b.no_progress >= config.breaker_threshold)
    ):
        return
    b.openings += 1
    b.total_openings += 1
    backoff = min(
        config.breaker_base_backoff * 2 ** (b.openings - 1),
        config.breaker_max_backoff,
    )
    b.state, b.next_probe_at = OPEN, now + backoff
    b.opened_at, b.backoff = now, backoff
    run.target_event(
        "CircuitBreakerOpen",
        f"{b.no_progress} evicted pods in a row came back without the suggested "
        f"resources (pod {new.name}); no evictions for {backoff:.0f}s",
        "Warning",
    )
