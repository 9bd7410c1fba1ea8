"""The disruption worker's planning pass: snapshot + persisted state -> actions + new state.

Pure: no I/O and no clock (`now` is passed in); the shell applies the actions in order and
feeds each result back through `on_result` (or lets `execute` do both). architecture §3.2 is
the reference. A pass has three steps, like a disruption controller's decide / validate /
act:

1. decide, per target: the target-level guards (`vertical.guards`: exclusion, acting at
   all, the HPA's resource), the circuit breaker (`vertical.breaker`), the batch gates;
   then per running pod its stall is tracked (`vertical.stall`) and its update mode
   proposes a resize, an eviction or nothing (`vertical.modes`);
2. validate and act, across targets: the proposals in priority order against the budget,
   the eviction gates and the capacity guard (`vertical.admit`, `vertical.capacity`),
   giving `ResizePod` / `EvictPod` actions and their Events;
3. the results, fed back by the shell (`vertical.results`: 429 back-off, refusals).
"""

from __future__ import annotations

from collections.abc import Mapping

from foresize.core.api.access import JSONValue
from foresize.core.api.access import first as _get
from foresize.core.cluster.actions import Action, EmitEvent, WriteTargetStatus
from foresize.core.cluster.boost import PodCpuWindow
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.model import REASON_DEFERRED, Pod, Suggestion
from foresize.core.cluster.refusals import prune
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.errors import ForesizeError
from foresize.core.interruption import StopCheck, checkpoint
from foresize.core.vertical import limits
from foresize.core.vertical.admit import (
    EVICTION_SKIPPED_WEBHOOK,
    admit,
    count_ready,
    recreated_by_controller,
)
from foresize.core.vertical.boost import plan_boosts
from foresize.core.vertical.breaker import move_breaker
from foresize.core.vertical.coming import note_deferred
from foresize.core.vertical.desired import KnownPod, known_pod
from foresize.core.vertical.guards import (
    TARGET_GUARDS,
    claim_condition,
    history_condition,
    odd_annotation_conditions,
    open_gates,
    pod_level_conditions,
    pod_level_left_alone,
)
from foresize.core.vertical.modes import DECIDE
from foresize.core.vertical.policy import WorkerConfig, policy_of
from foresize.core.vertical.provision import node_autoscaler_present, room_found_for
from foresize.core.vertical.results import execute, on_result
from foresize.core.vertical.run import Candidate, PassContext, PodView, TargetRun
from foresize.core.vertical.stall import stall_message, stall_reason
from foresize.core.vertical.state import (
    STATUS_KEY,
    EvictionBucket,
    StallRecord,
    TargetState,
    WorkerState,
)

# The update modes that may evict a pod.
EVICTING_MODES = ("recreate", "in_place_or_recreate")

# The planner's entry points, with the results step they pair with.
__all__ = ["execute", "on_result", "plan", "stall_reason"]


# --------------------------------------------------------------------------- the pass


def plan(
    snapshot: ClusterSnapshot,
    now: float,
    state: WorkerState,
    config: WorkerConfig | None = None,
    suggestions: Mapping[str, Suggestion] | None = None,
    ledger: NodeLedger | None = None,
    pod_usage: PodCpuWindow | None = None,
    stop: StopCheck | None = None,
) -> tuple[list[Action], WorkerState]:
    """One planning pass over every target in the snapshot.

    `suggestions` maps target key ("namespace/name") to its current vertical suggestion
    (what the recommender wrote into status); a target without one gets status only.
    `ledger` is the pass's node capacity, shared with the other planners that resize pods
    in the same pass (the DaemonSetAutoscaler, the revert); a fresh one by default.
    `pod_usage`: the pods' recent CPU samples, for a start-up boost that ends when usage
    settles (`cluster.boost`; None: the shell has none, such a boost ends on its timeout).
    `stop`: asked between targets; yes ends the pass (`core.interruption`).
    """
    ctx = PassContext(snapshot, now, config or WorkerConfig(), pod_usage=pod_usage)
    ctx.provisioning = node_autoscaler_present(ctx.config.node_autoscaler, snapshot)
    suggestions = suggestions or {}
    new_state = state.copy()
    ctx.zones = ctx.config.time_zones
    ctx.window_checks = new_state.window_checks
    ctx.bucket = _eviction_bucket(new_state, ctx)
    actions: list[Action] = []
    runs: list[TargetRun] = []
    candidates: list[Candidate] = []
    pods_by_ns: dict[str, list[Pod]] = {}

    for target in snapshot.targets:
        checkpoint(stop)
        run = _start_run(target, new_state, suggestions, actions)
        if run is None:
            continue
        run.history_problem = ctx.config.history_problem
        run.known = new_state.memo.pods
        runs.append(run)
        _select_pods(run, snapshot, pods_by_ns)
        kept = new_state.memo.target(run.policy.key, len(run.pods))
        run.changes_by_spec, run.desired_by_spec = kept.changes, kept.desired
        run.last_entries = kept.entries
    _refuse_overlaps(runs)
    _start_limits(runs, ctx)
    for run in runs:
        checkpoint(stop)
        _decide(run, ctx, candidates)
    checkpoint(stop)

    admit(candidates, ctx, ledger or NodeLedger(snapshot, memo=new_state.memo.ledger), actions)
    new_state.coming = ctx.coming
    live = {p.uid for p in snapshot.pods}
    # A refusal is of one pod: a recreated pod (a new uid) is tried afresh.
    new_state.refusals = prune(new_state.refusals, live)
    new_state.memo.prune(live, snapshot.nodes.keys(), {run.policy.key for run in runs})
    _forget_gone_targets(new_state, runs)
    for run in runs:
        if run.issued:
            run.state.last_batch_at = now
        _report_rate_limited(run, ctx)
        _report_held_for_webhook(run)
        limits.report(run)
        actions.extend(run.events)
        status = _status(run)
        # Written until it lands: `last_status` is only set by `on_result` when the write
        # succeeded, so a refused or failed write (422, 409, 429, 5xx, timeout) is sent
        # again on the next pass instead of being forgotten.
        if status != run.state.last_status:
            actions.append(WriteTargetStatus(run.policy.namespace, run.policy.name, status))
    return actions, new_state


def _start_limits(runs: list[TargetRun], ctx: PassContext) -> None:
    """Each target's windows and budgets for the pass, and the disruptions of the last
    hour per namespace that the namespace budgets count (`vertical.limits`)."""
    ctx.runs = runs
    for run in runs:
        run.limits = limits.start(run, ctx)
        ns = run.policy.namespace
        ctx.ns_disruptions[ns] = ctx.ns_disruptions.get(ns, 0) + len(run.state.budget.disruptions)


def _eviction_bucket(state: WorkerState, ctx: PassContext) -> EvictionBucket | None:
    """The cluster-wide eviction bucket refilled to `now` (None: no rate limit)."""
    rate, burst = ctx.config.eviction_rate_limit, ctx.config.eviction_rate_burst
    if rate is None:
        state.eviction_bucket = None
        return None
    bucket = state.eviction_bucket
    if bucket is None:
        bucket = state.eviction_bucket = EvictionBucket(float(burst), ctx.now)
    bucket.refill(ctx.now, rate, burst)
    return bucket


def _report_rate_limited(run: TargetRun, ctx: PassContext) -> None:
    """A target whose evictions the rate limit held says so: a note while it lasts, one
    Event when it starts."""
    if not run.rate_limited:
        run.state.reported.pop("ratelimit", None)
        return
    rate = ctx.config.eviction_rate_limit
    msg = (
        f"{run.rate_limited} eviction(s) wait for the operator's eviction rate limit "
        f"({rate:g}/s, burst {ctx.config.eviction_rate_burst})"
    )
    run.notes.append(msg)
    if run.report_once("ratelimit", "1"):
        run.target_event("EvictionRateLimited", msg)


def _report_held_for_webhook(run: TargetRun) -> None:
    """A target whose evictions wait for the pod webhook says so: a note while it lasts,
    one Warning when it starts."""
    if not run.held_for_webhook:
        run.state.reported.pop("webhook", None)
        return
    msg = (
        f"{run.held_for_webhook} eviction(s) wait: the pod webhook is not serving, so a "
        "recreated pod would come back at its old size"
    )
    run.notes.append(msg)
    if run.report_once("webhook", "1"):
        run.target_event(EVICTION_SKIPPED_WEBHOOK, msg, "Warning")


def _start_run(
    target: TargetObject,
    state: WorkerState,
    suggestions: Mapping[str, Suggestion],
    actions: list[Action],
) -> TargetRun | None:
    """The target's run with its state (from memory, else from its status); None for a
    target whose spec cannot be read (announced once per distinct problem)."""
    try:
        pol = _cached_policy(state, target)
    except ForesizeError as exc:
        _invalid(target, state, str(exc), actions)
        return None
    # What the target's status persisted, through its one reader (`TargetView`).
    view = target_view(target)
    prev = state.targets.get(pol.key)
    ts = prev.clone() if prev is not None else TargetState.from_status(view.persisted(STATUS_KEY))
    state.targets[pol.key] = ts
    sugg = suggestions.get(pol.key) if pol.key in suggestions else view.suggestion
    run = TargetRun(pol, ts, sugg, target_conditions=[dict(c) for c in view.conditions])
    # Events recorded by on_result since the last pass that the shell did not send.
    run.events.extend(ts.outbox)
    ts.outbox = []
    ts.inflight = {}
    ts.budget_pending = {}
    return run


def _invalid(target: TargetObject, state: WorkerState, problem: str, actions: list[Action]) -> None:
    meta = _get(target, "metadata")
    ns = str(_get(meta, "namespace", default="default"))
    name = str(_get(meta, "name", default="?"))
    bad = state.targets.get(f"{ns}/{name}")
    bad = bad.clone() if bad is not None else TargetState()
    state.targets[f"{ns}/{name}"] = bad
    if bad.reported.get("invalid") != problem:
        bad.reported["invalid"] = problem
        actions.append(EmitEvent(ns, "AIScaleTarget", name, "InvalidSpec", problem, "Warning"))


def _select_pods(
    run: TargetRun, snapshot: ClusterSnapshot, pods_by_ns: dict[str, list[Pod]]
) -> None:
    """The target's pods: its workload's, or those its selector matches."""
    pol = run.policy
    if pol.ref_kind and pol.ref_name:
        wl = snapshot.workload(pol.ref_kind, pol.namespace, pol.ref_name)
        run.workload = wl
        run.pods = list(snapshot.pods_of(wl)) if wl is not None else []
        run.replicas = wl.replicas if wl is not None else len(run.pods)
    elif pol.has_selector:
        if not pods_by_ns:
            for p in snapshot.pods:
                pods_by_ns.setdefault(p.namespace, []).append(p)
        run.pods = [p for p in pods_by_ns.get(pol.namespace, []) if pol.selects(p.labels)]
        run.replicas = len(run.pods)


def _refuse_overlaps(runs: list[TargetRun]) -> None:
    """A pod belongs to one target. A selector target leaves alone every pod that a
    scaleTargetRef target, or another selector target, also claims (the pod webhook does
    the same at admission), and reports the overlap in its status and one Event."""
    if not any(run.policy.has_selector for run in runs):
        return  # only a selector target can claim another target's pods
    claims: dict[str, list[str]] = {}
    for run in runs:
        for p in run.pods:
            claims.setdefault(p.uid, []).append(run.policy.key)
    by_ref = {p.uid for run in runs if not run.policy.has_selector for p in run.pods}
    for run in runs:
        if not run.policy.has_selector:
            continue
        me = run.policy.key
        contested = [p for p in run.pods if p.uid in by_ref or len(claims[p.uid]) > 1]
        if not contested:
            run.state.reported.pop("overlap", None)
            continue
        others = sorted({k for p in contested for k in claims[p.uid] if k != me})
        run.overlaps = others
        gone = {p.uid for p in contested}
        run.pods = [p for p in run.pods if p.uid not in gone]
        run.replicas = len(run.pods)
        msg = (
            f"{len(contested)} selected pod(s) also belong to {', '.join(others)}: "
            "left alone (a pod belongs to one target)"
        )
        run.notes.append(msg)
        if run.report_once("overlap", ",".join(others)):
            run.target_event("TargetOverlap", msg, "Warning")


def _forget_gone_targets(state: WorkerState, runs: list[TargetRun]) -> None:
    """Forget targets that are gone (deleted), and their cached policies."""
    seen = {run.policy.key for run in runs}
    for key in [
        k for k in state.targets if k not in seen and "invalid" not in state.targets[k].reported
    ]:
        del state.targets[key]
    if len(state.policies) > len(runs):
        uids = {run.policy.uid for run in runs}
        state.policies = {u: v for u, v in state.policies.items() if u in uids}


def _cached_policy(state: WorkerState, target: TargetObject) -> TargetView:
    meta = getattr(target, "metadata", None)
    uid = getattr(meta, "uid", None)
    gen = getattr(meta, "generation", None)
    if uid and gen is not None:
        hit = state.policies.get(uid)
        if hit is not None and hit[0] == gen:
            cached: TargetView = hit[1]
            return cached
        pol = policy_of(target)
        state.policies[uid] = (gen, pol)
        return pol
    return policy_of(target)


def _forget_gone_pods(run: TargetRun) -> None:
    ts = run.state
    kept = (ts.stalls, ts.blocked_pods, ts.refused, ts.released, ts.no_room_since)
    if not (ts.judged or ts.reported or any(kept)):
        return  # nothing kept of any pod
    live_uids = {p.uid for p in run.pods}
    for uid in [u for u in ts.stalls if u not in live_uids]:
        del ts.stalls[uid]
    for d in (ts.blocked_pods, ts.refused, ts.released, ts.no_room_since):
        for uid in [u for u in d if u not in live_uids]:
            del d[uid]
    ts.judged = [u for u in ts.judged if u in live_uids]
    for topic in [t for t in ts.reported if ":" in t and t.split(":", 1)[1] not in live_uids]:
        del ts.reported[topic]


def _decide(run: TargetRun, ctx: PassContext, candidates: list[Candidate]) -> None:
    """The decision step for one target: guards, breaker, gates, then each running pod's
    proposal from its update mode."""
    _forget_gone_pods(run)
    # Each pod's entry once: what the steps below read of it was read when it was made.
    known = run.known
    pods = run.pods
    # A pod handed in again at its place: its entry of the last pass, without a lookup by
    # uid (at 100,000 pods each lookup waits on memory).
    last = run.last_entries
    entries = []
    for i, p in enumerate(pods):
        entry = last[i] if i < len(last) else None
        if entry is None or entry.pod is not p:
            entry = known_pod(known, p)
        entries.append(entry)
    last[:] = entries
    boosted = plan_boosts(run, ctx, candidates, entries)
    # In order; the first that says no stops the target.
    stopped = not all(guard(run, ctx) for guard in TARGET_GUARDS)
    if run.pods is not pods:  # a guard left some pods out (`guards.claimed_elsewhere`)
        entries = [known_pod(known, p) for p in run.pods]
    run.entries = entries
    if stopped:
        return
    assert run.suggestion is not None
    move_breaker(run, run.suggestion, ctx.now, ctx.config)
    size = open_gates(run, ctx.now)
    count_ready(run, ctx, [e.pod for e in entries if e.ready and not e.terminating])
    decide = DECIDE[run.policy.update_mode]
    disrupted = 0
    for entry in entries:
        if entry.terminating or not entry.ready:
            disrupted += 1
        if not entry.running:
            continue
        pod = entry.pod
        if pod.uid in boosted or (entry.pod_level and pod_level_left_alone(run, pod)):
            continue
        view = _track_stall(run, entry, ctx.now)
        if view.reason == REASON_DEFERRED:
            note_deferred(run, view, ctx)
        proposed = len(candidates)
        disrupted += decide(run, view, ctx, candidates)
        if len(candidates) == proposed:
            # Nothing to do for the pod any more (its upsize went with the suggestion,
            # or under the hysteresis): a hold for room it had is over, or a later
            # upsize would inherit its clock and be recreated at once.
            room_found_for(run, pod)
    run.disrupted_now = disrupted
    run.budget = 0 if run.paced else max(0, size - disrupted)
    if run.policy.update_mode in EVICTING_MODES:
        _report_without_controller(run)


def _report_without_controller(run: TargetRun) -> None:
    """Pods no controller would recreate are never evicted (`admit.recreated_by_controller`);
    a target whose mode evicts lists them in its status, so nobody expects them to move."""
    run.without_controller = sorted(p.name for p in run.pods if not recreated_by_controller(p))
    if run.without_controller:
        run.notes.append(
            f"{len(run.without_controller)} pod(s) without a controller are resized in place "
            "only, never evicted"
        )


def _track_stall(run: TargetRun, entry: KnownPod, now: float) -> PodView:
    """Read the pod's stall now; keep when it was first seen (the clock of stall_timeout
    keeps running when only the reason changes); forget a stall that is gone."""
    ts = run.state
    pod = entry.pod
    reason = entry.stall  # `stall_reason(pod)`, read when the entry was made
    rec = ts.stalls.get(pod.uid)
    if reason is not None:
        if rec is None:
            rec = StallRecord(pod.name, now, reason)
            ts.stalls[pod.uid] = rec
            ts.stalls_seen += 1
        elif rec.reason != reason:
            rec.reason = reason  # same stall, new reason: the clock keeps running
        run.stalled += 1
        if run.report_once(f"stall:{pod.uid}", reason):
            msg = stall_message(pod, reason)
            run.pod_event(pod, "ResizeStalled", f"resize stalled ({reason}): {msg}", "Warning")
    elif rec is not None and not entry.awaiting_kubelet and rec.reason != "Refused":
        # Conditions are re-read every pass: a stall that is gone is gone.
        del ts.stalls[pod.uid]
        ts.reported.pop(f"stall:{pod.uid}", None)
        rec = None
    return PodView(pod, reason, rec, entry)


def _status(run: TargetRun) -> dict[str, JSONValue]:
    """The worker's part of the target's status (keys as in `AIScaleTargetStatus`)."""
    ts = run.state
    return {
        "pods_resized": ts.resized,
        "pods_evicted": ts.evicted,
        "pods_stalled": run.stalled,
        "pods_waiting_for_capacity": run.waiting_capacity,
        "pods_without_controller": list(run.without_controller),
        "pods_held_by_min_replicas": sorted(run.held_min_replicas),
        "pods_held_by_disruption_opt_out": [
            {"pod": name, "annotation": annotation, "not_done": what}
            for name, (annotation, what) in sorted(run.held_opt_out.items())
        ],
        "overlapping_targets": list(run.overlaps),
        "pods_starting_boosted": run.boosting,
        "pods_waiting_for_restart": [
            {"pod": name, "reason": why} for name, why in sorted(run.waiting_restart.items())
        ],
        "stall_fallbacks": ts.stall_fallbacks,
        "circuit_breaker": ts.breaker.to_status(),
        "vertical_notes": list(run.notes),
        "held_back": limits.held_status(run) or None,
        STATUS_KEY: ts.to_status(),
        **({"conditions": conditions} if (conditions := _conditions(run)) else {}),
    }


def _conditions(run: TargetRun) -> list[dict[str, JSONValue]] | None:
    """The target's conditions when one of the worker's changed (None: no write)."""
    pod_level = pod_level_conditions(run)
    odd = odd_annotation_conditions(run, pod_level or run.target_conditions)
    changed = odd or pod_level
    base = changed if changed is not None else run.target_conditions
    for wanted in (
        claim_condition(run),  # another vertical autoscaler's claim on the workload
        history_condition(run),  # the shared history store cannot be read whole
        limits.condition(run, base),  # maintenance windows that cannot be read
    ):
        if wanted is not None:
            base = changed = [c for c in base if c.get("type") != wanted["type"]] + [wanted]
    return changed
