"""The act step's feedback: each action's outcome back into the worker's state.

An eviction that succeeded waits for its replacement's verdict (circuit breaker); a 429
stops evictions of the target until `retryAfterSeconds` (or `eviction_retry_default`); a
500 (several PDBs select the pod) blocks that pod for `multi_pdb_backoff`. A resize the
API server refuses outright (422, 403 NodeCapacity) is remembered with the change it
refused, so `in_place` waits and `in_place_or_recreate` evicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from foresize.core.api.access import JSONValue
from foresize.core.cluster.actions import (
    Action,
    ActionResult,
    EmitEvent,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.refusals import record_refusal, resize_signature
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.vertical.policy import WorkerConfig
from foresize.core.vertical.state import (
    HALF_OPEN,
    STATUS_KEY,
    PendingEviction,
    StallRecord,
    TargetState,
    WorkerState,
    action_state_key,
)

# Eviction reasons that are the fallback of a resize that could not land.
_FALLBACK_REASONS = ("stall-fallback", "refused", "capacity")


def result_fields(ts: TargetState) -> dict[str, JSONValue]:
    """The parts of the worker's status that the pass's results change (counts, breaker,
    the persisted state): the planner writes them, and `refreshed_status` renews them."""
    return {
        "pods_resized": ts.resized,
        "pods_evicted": ts.evicted,
        "stall_fallbacks": ts.stall_fallbacks,
        "circuit_breaker": ts.breaker.to_status(),
        STATUS_KEY: ts.to_status(),
    }


def refreshed_status(state: WorkerState, action: WriteTargetStatus) -> WriteTargetStatus:
    """The worker's status write of a target with `result_fields` as they are now, after
    the results of its pods' actions: planned before them, it would count none of this
    pass's resizes, and the next pass would write the status again only to count them
    (two writes a target a pass where one does). Other status writes are left alone."""
    ts = state.targets.get(f"{action.namespace}/{action.name}")
    if action.kind != "AIScaleTarget" or ts is None or STATUS_KEY not in action.status:
        return action
    fresh = {**action.status, **result_fields(ts)}
    return action if fresh == action.status else dataclasses.replace(action, status=fresh)


def on_result(
    state: WorkerState,
    action: Action,
    result: ActionResult,
    now: float,
    config: WorkerConfig | None = None,
) -> WorkerState:
    """Feed one action's outcome back. Returns the new state (the input is not changed)."""
    if isinstance(action, WriteTargetStatus):
        return _status_result(state, action, result)
    if not isinstance(action, EvictPod | ResizePod):
        return state
    config = config or WorkerConfig()
    new_state = state.copy()
    if isinstance(action, ResizePod) and record_refusal(new_state.refusals, action, result, now):
        state = new_state  # every planner's refusal is kept, a DaemonSet's or a revert's too
    key = action_state_key(action)
    prev = state.targets.get(key)
    if prev is None:
        return state
    ts = prev.clone()
    new_state.targets[key] = ts
    # The change budgets count what landed: a refused or failed action changed nothing.
    pending = ts.budget_pending.pop(action.name, None)
    if pending is not None and result.ok:
        ts.budget.record(now, *pending)
    if isinstance(action, EvictPod):
        _eviction_result(ts, action, result, now, config)
    else:
        _resize_result(ts, action, result, now)
    return new_state


def _status_result(
    state: WorkerState, action: WriteTargetStatus, result: ActionResult
) -> WorkerState:
    """A status write that landed is remembered, so the next pass writes only a change; one
    that did not is left pending, so the next pass sends it again."""
    key = f"{action.namespace}/{action.name}"
    prev = state.targets.get(key)
    if action.kind != "AIScaleTarget" or prev is None or not result.ok:
        return state
    own = {k: v for k, v in action.status.items() if k not in action.folded}
    if not own:  # a write of other steps' fields alone: not what the worker wrote
        return state
    ts = prev.clone()
    ts.last_status = own
    new_state = state.copy()
    new_state.targets[key] = ts
    return new_state


def _eviction_result(
    ts: TargetState, action: EvictPod, result: ActionResult, now: float, config: WorkerConfig
) -> None:
    ns, _, tname = action.target.partition("/")
    pod_uid = ts.inflight.get(action.name, "")
    if result.ok:
        ts.evicted += 1
        if action.reason in _FALLBACK_REASONS:
            ts.stall_fallbacks += 1
        ts.pending_evictions.append(
            PendingEviction(
                action.name,
                pod_uid,
                now,
                ts.breaker.suggestion_uid,
                probe=ts.breaker.state == HALF_OPEN,
            )
        )
        for uid, rec in list(ts.stalls.items()):
            if rec.pod == action.name:
                del ts.stalls[uid]
    elif result.code == 429:
        wait = result.retry_after_seconds or config.eviction_retry_default
        ts.evict_retry_at = now + wait
        ts.outbox.append(
            EmitEvent(
                ns,
                "AIScaleTarget",
                tname,
                "EvictionDeferred",
                f"eviction of {action.name} refused "
                f"(429: {result.message or 'disruption budget'}); "
                f"no more evictions of this target for {wait:.0f}s",
                "Warning",
            )
        )
    elif result.code == 500:
        ts.blocked_pods[pod_uid or action.name] = now + config.multi_pdb_backoff
        ts.outbox.append(
            EmitEvent(
                ns,
                "Pod",
                action.name,
                "EvictionFailed",
                f"eviction failed (500: {result.message}); more than one PodDisruptionBudget "
                f"selects this pod; not retrying for {config.multi_pdb_backoff:.0f}s",
                "Warning",
            )
        )


def _resize_result(ts: TargetState, action: ResizePod, result: ActionResult, now: float) -> None:
    if result.ok:
        if action.reason != "release-deferred":
            ts.resized += 1
        return
    if not result.resize_refused:
        return
    ns = action.target.partition("/")[0]
    pod_uid = ts.inflight.get(action.name, "")
    if pod_uid:
        ts.refused[pod_uid] = resize_sig(action)
        ts.stalls[pod_uid] = StallRecord(action.name, now, "Refused")
    ts.outbox.append(
        EmitEvent(
            ns,
            "Pod",
            action.name,
            "ResizeRefused",
            f"resize refused ({result.code}: {result.message})",
            "Warning",
        )
    )


def execute(
    actions: list[Action],
    apply: Callable[[Action], ActionResult],
    state: WorkerState,
    snapshot: ClusterSnapshot,
    now: float,
    config: WorkerConfig | None = None,
) -> tuple[WorkerState, list[tuple[Action, ActionResult | None]]]:
    """Apply a pass's actions in order through `apply`, feeding results back.

    After a 429 the remaining evictions of that target are skipped (not sent) in this run.
    Returns the final state and (action, result or None if skipped) pairs."""
    config = config or WorkerConfig()
    done: list[tuple[Action, ActionResult | None]] = []
    for action in actions:
        if isinstance(action, EvictPod):
            ts = state.targets.get(action_state_key(action))
            if ts is not None and ts.evict_retry_at is not None and now < ts.evict_retry_at:
                done.append((action, None))
                continue
        result = apply(action)
        done.append((action, result))
        if isinstance(action, WriteTargetStatus):
            state = on_result(state, action, result, now, config)
        elif isinstance(action, EvictPod | ResizePod):
            state = on_result(state, action, result, now, config)
            ts = state.targets.get(action_state_key(action))
            if ts is not None and ts.outbox:
                for ev in ts.outbox:
                    done.append((ev, apply(ev)))
                ts.outbox = []
    return state, done


def resize_sig(action: ResizePod) -> str:
    """The signature of the change a ResizePod asks for (as `PodChange.signature`)."""
    return resize_signature(action.containers)
