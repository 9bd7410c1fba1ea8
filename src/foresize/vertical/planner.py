"""The disruption worker's planning pass: snapshot + persisted state -> actions + new state.

Pure: no I/O and no clock (`now` is passed in); the shell applies the actions in order and
feeds each result back through `on_result` (or lets `execute` do both). DESIGN.md §4.2 is
the reference; the rules in brief:

- `initial` never touches running pods; `recreate` evicts pods whose `recreate_resources`
  differ; `in_place` only resizes; `in_place_or_recreate` resizes and evicts a pod whose
  resize stalled for `stall_timeout` or was refused outright (422, 403 NodeCapacity).
- Stalls are read from the pod's conditions on every pass (for the generation the kubelet
  has observed); when each stall was first seen is kept in the state, which the shell
  persists in the target's status.
- Disruption budget per target: at most `max_disrupted` pods changing at once, batches at
  least `interval` apart; terminating, not-Ready and mid-resize pods count.
- Evictions only as `EvictPod` (the Eviction API, so PDBs apply); a 429 stops evictions of
  that target until `retryAfterSeconds`; a 500 (several PDBs) blocks that pod for a while.
- Circuit breaker per target and suggestion; capacity guard per node with the scheduler's
  charge; HPA guard; OOM-remediation resizes skip the pacing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from foresize.cluster.actions import (
    Action,
    ActionResult,
    EmitEvent,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.cluster.model import (
    COMPUTE_RESOURCES,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    REASON_DEFERRED,
    REASON_ERROR,
    REASON_INFEASIBLE,
    Pod,
    ResourceMap,
    Suggestion,
)
from foresize.cluster.qos import pod_charge, pod_qos_class
from foresize.cluster.snapshot import ClusterSnapshot, labels_match
from foresize.errors import ForesizeError
from foresize.vertical.desired import (
    PodChange,
    allocated_containers,
    charge_delta,
    desired_containers,
    matches_suggestion,
    pod_change,
    resize_in_flight,
)
from foresize.vertical.policy import TargetPolicy, WorkerConfig, _get, batch_size, policy_of
from foresize.vertical.state import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    STATUS_KEY,
    PendingEviction,
    StallRecord,
    TargetState,
    WorkerState,
)

# An OOM kill this recent makes a memory upsize of that pod urgent (DESIGN §4.1: ×1.2 at
# once): it skips the batch pacing, because the OOMing pod is already disrupted and the
# resize is what ends the disruption.
OOM_URGENT_WINDOW = 600.0
OOM_KILLED = "OOMKilled"


# --------------------------------------------------------------------------- helpers


def stall_reason(pod: Pod) -> str | None:
    """The stall the kubelet reports for the pod's latest observed resize, if any."""
    if pod.observed_generation and pod.observed_generation < pod.generation:
        # The kubelet has not acted on the newest spec yet: older conditions do not apply.
        return None
    pending = pod.condition(POD_RESIZE_PENDING)
    if (
        pending is not None
        and pending.status == "True"
        and pending.reason in (REASON_DEFERRED, REASON_INFEASIBLE)
    ):
        return pending.reason
    prog = pod.condition(POD_RESIZE_IN_PROGRESS)
    if prog is not None and prog.status == "True" and prog.reason == REASON_ERROR:
        return REASON_ERROR
    return None


def _awaiting_kubelet(pod: Pod) -> bool:
    return bool(pod.observed_generation) and pod.observed_generation < pod.generation


def _recent_oom(pod: Pod, now: float) -> bool:
    for st in pod.container_statuses:
        if (
            st.last_termination_reason == OOM_KILLED
            and st.last_termination_time is not None
            and now - st.last_termination_time <= OOM_URGENT_WINDOW
        ):
            return True
    return False


def _memory_up(pod: Pod, change: PodChange) -> bool:
    """Does the change raise a memory request or limit (what OOM remediation does)?"""
    for cr in change.containers:
        c = pod.container(cr.name)
        if c is None:
            continue
        for new, old in ((cr.requests, c.resources.requests), (cr.limits, c.resources.limits)):
            if new.get("memory", 0) > old.get("memory", new.get("memory", 0)):
                return True
    return False


def _fmt(res: ResourceMap) -> str:
    from foresize.api.quantity import format_quantity

    return ",".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(res.items()))


def _describe(pod: Pod, change: PodChange) -> str:
    parts = []
    by = {c.name: c for c in pod.containers}
    for cr in change.containers:
        cur = by[cr.name].resources
        parts.append(
            f"{cr.name}: requests {_fmt(cur.requests)} -> {_fmt(cr.requests)}"
            + (f", limits {_fmt(cur.limits)} -> {_fmt(cr.limits)}" if cr.limits else "")
        )
    return "; ".join(parts)


def suggestion_from_status(target: Any) -> Suggestion | None:
    """The target's `status.vertical_suggestion` (API model) as the core's `Suggestion`."""
    status = getattr(target, "status", None)
    vs = getattr(status, "vertical_suggestion", None) if status is not None else None
    if vs is None:
        return None
    from foresize.cluster.model import ContainerSuggestion

    window = getattr(vs, "forecast_window", None)
    return Suggestion(
        uid=vs.uid,
        created_at=vs.created_at or 0.0,
        containers={
            c.name: ContainerSuggestion(c.name, dict(c.requests), dict(c.limits))
            for c in vs.containers
        },
        window_start=window.start if window is not None else 0.0,
        window_end=window.end if window is not None else 0.0,
    )


def status_disruption(target: Any) -> dict[str, Any] | None:
    """The persisted worker state inside a target's status (dict or API model)."""
    status = target.get("status") if isinstance(target, dict) else getattr(target, "status", None)
    if status is None:
        return None
    if hasattr(status, "model_dump"):
        extra = getattr(status, "model_extra", None) or {}
        if STATUS_KEY in extra:
            return extra[STATUS_KEY]
        value = getattr(status, STATUS_KEY, None)
        if value is not None and hasattr(value, "model_dump"):
            return value.model_dump(by_alias=True)
        return value
    if isinstance(status, dict):
        return status.get(STATUS_KEY)
    return getattr(status, STATUS_KEY, None)


# --------------------------------------------------------------------------- per-run context


@dataclass(slots=True)
class _Candidate:
    kind: str  # evict | resize | fallback
    pod: Pod
    run: _TargetRun
    change: PodChange | None = None
    reason: str = ""
    urgent: bool = False


@dataclass(slots=True)
class _TargetRun:
    policy: TargetPolicy
    state: TargetState
    suggestion: Suggestion | None
    skip: frozenset[str] = frozenset()
    pods: list[Pod] = field(default_factory=list)
    replicas: int = 0
    budget: int = 0  # disruptions still allowed in this batch
    paced: bool = False  # the interval since the last batch has not passed
    disrupted_now: int = 0
    evictions_left: int = 1_000_000  # breaker / PDB gate
    issued: int = 0
    stalled: int = 0
    waiting_capacity: int = 0
    notes: list[str] = field(default_factory=list)
    events: list[EmitEvent] = field(default_factory=list)

    def target_event(self, reason: str, message: str, type_: str = "Normal") -> None:
        p = self.policy
        self.events.append(
            EmitEvent(p.namespace, "AIScaleTarget", p.name, reason, message, type_, p.uid)
        )

    def pod_event(self, pod: Pod, reason: str, message: str, type_: str = "Normal") -> None:
        self.events.append(
            EmitEvent(pod.namespace, "Pod", pod.name, reason, message, type_, pod.uid)
        )

    def report_once(self, topic: str, value: str) -> bool:
        """True the first time `topic` takes `value` (so the caller emits its event)."""
        if self.state.reported.get(topic) == value:
            return False
        self.state.reported[topic] = value
        return True


# --------------------------------------------------------------------------- the pass


def plan(
    snapshot: ClusterSnapshot,
    now: float,
    state: WorkerState,
    config: WorkerConfig | None = None,
    suggestions: Mapping[str, Suggestion] | None = None,
) -> tuple[list[Action], WorkerState]:
    """One planning pass over every target in the snapshot.

    `suggestions` maps target key ("namespace/name") to its current vertical suggestion
    (what the recommender wrote into status); a target without one gets status only.
    """
    config = config or WorkerConfig()
    suggestions = suggestions or {}
    new_state = state.copy()
    actions: list[Action] = []
    runs: list[_TargetRun] = []
    candidates: list[_Candidate] = []
    pods_by_ns: dict[str, list[Pod]] | None = None

    for target in snapshot.targets:
        try:
            pol = _cached_policy(new_state, target)
        except ForesizeError as exc:
            meta = _get(target, "metadata")
            ns = str(_get(meta, "namespace", default="default"))
            name = str(_get(meta, "name", default="?"))
            # Announced once per distinct problem, not on every pass.
            bad = new_state.targets.get(f"{ns}/{name}")
            bad = bad.clone() if bad is not None else TargetState()
            new_state.targets[f"{ns}/{name}"] = bad
            if bad.reported.get("invalid") != str(exc):
                bad.reported["invalid"] = str(exc)
                actions.append(
                    EmitEvent(ns, "AIScaleTarget", name, "InvalidSpec", str(exc), "Warning")
                )
            continue
        prev = new_state.targets.get(pol.key)
        ts = (
            prev.clone() if prev is not None else TargetState.from_status(status_disruption(target))
        )
        new_state.targets[pol.key] = ts
        sugg = (
            suggestions.get(pol.key) if pol.key in suggestions else suggestion_from_status(target)
        )
        run = _TargetRun(pol, ts, sugg)
        runs.append(run)
        # Pods of the target.
        wl = None
        if pol.ref_kind and pol.ref_name:
            wl = snapshot.workload(pol.ref_kind, pol.namespace, pol.ref_name)
            run.pods = list(snapshot.pods_of(wl)) if wl is not None else []
            run.replicas = wl.replicas if wl is not None else len(run.pods)
        elif pol.has_selector:
            if pods_by_ns is None:
                pods_by_ns = {}
                for p in snapshot.pods:
                    pods_by_ns.setdefault(p.namespace, []).append(p)
            run.pods = [p for p in pods_by_ns.get(pol.namespace, []) if pol.selects(p.labels)]
            run.replicas = len(run.pods)
        # Events recorded by on_result since the last pass that the shell did not send.
        run.events.extend(ts.outbox)
        ts.outbox = []
        ts.inflight = {}
        _analyse(run, snapshot, wl, now, config, candidates)

    _admit(candidates, snapshot, now, config, actions)

    # Forget targets that are gone (deleted), and their cached policies.
    seen = {run.policy.key for run in runs}
    for key in [
        k
        for k in new_state.targets
        if k not in seen and "invalid" not in new_state.targets[k].reported
    ]:
        del new_state.targets[key]
    if len(new_state.policies) > len(runs):
        uids = {run.policy.uid for run in runs}
        new_state.policies = {u: v for u, v in new_state.policies.items() if u in uids}

    for run in runs:
        if run.issued:
            run.state.last_batch_at = now
        actions.extend(run.events)
        status = _status(run, now)
        if status != run.state.last_status:
            run.state.last_status = status
            actions.append(WriteTargetStatus(run.policy.namespace, run.policy.name, status))
    return actions, new_state


def _cached_policy(state: WorkerState, target: Any) -> TargetPolicy:
    meta = getattr(target, "metadata", None)
    uid = getattr(meta, "uid", None)
    gen = getattr(meta, "generation", None)
    if uid and gen is not None:
        hit = state.policies.get(uid)
        if hit is not None and hit[0] == gen:
            return hit[1]
        pol = policy_of(target)
        state.policies[uid] = (gen, pol)
        return pol
    return policy_of(target)


def _analyse(
    run: _TargetRun,
    snapshot: ClusterSnapshot,
    wl: Any,
    now: float,
    config: WorkerConfig,
    candidates: list[_Candidate],
) -> None:
    pol, ts = run.policy, run.state
    live_uids = {p.uid for p in run.pods}
    # Forget pods that are gone.
    for uid in [u for u in ts.stalls if u not in live_uids]:
        del ts.stalls[uid]
    for d in (ts.blocked_pods, ts.refused, ts.released):
        for uid in [u for u in d if u not in live_uids]:
            del d[uid]
    ts.judged = [u for u in ts.judged if u in live_uids]
    for topic in [t for t in ts.reported if ":" in t and t.split(":", 1)[1] not in live_uids]:
        del ts.reported[topic]

    # Exclusion by label selector (seed 004: keep resizes away from chosen workloads).
    wl_labels = getattr(wl, "labels", {}) if wl is not None else {}
    if config.exclude_selector and (
        labels_match(config.exclude_selector, wl_labels)
        or labels_match(config.exclude_selector, pol.labels)
    ):
        run.notes.append("excluded by the operator's label selector")
        if run.report_once("excluded", "1"):
            run.target_event(
                "Excluded",
                "workload excluded from vertical actuation by the operator's label selector",
            )
        return
    ts.reported.pop("excluded", None)
    if pol.mode != "autonomous" or snapshot.paused or pol.deleting or run.suggestion is None:
        # Not acting: keep the stall bookkeeping honest but change nothing.
        for p in run.pods:
            if stall_reason(p) is not None:
                run.stalled += 1
        return
    sugg = run.suggestion

    # HPA guard: leave the resource the HPA scales on alone unless the user opted in.
    hpa = snapshot.hpa_for(wl) if wl is not None else None
    hpa_res = frozenset(hpa.scaling_resources()) if hpa is not None else frozenset()
    if hpa_res and pol.hpa_resource_policy == "leave":
        run.skip = hpa_res
        res = ",".join(sorted(hpa_res))
        run.notes.append(f"leaving {res} alone: HorizontalPodAutoscaler {hpa.name} scales on it")
        if run.report_once("hpa", res):
            run.target_event(
                "HPAResourceLeftAlone",
                f"not changing {res}: HorizontalPodAutoscaler {hpa.name} scales on its "
                "utilisation (set spec.vertical.hpa_resource_policy: override to change it)",
            )
    else:
        ts.reported.pop("hpa", None)

    _breaker(run, sugg, now, config)

    # Budget of this batch.
    size = batch_size(pol.max_disrupted, run.replicas or len(run.pods))
    run.paced = ts.last_batch_at is not None and now - ts.last_batch_at < pol.interval
    if ts.evict_retry_at is not None and now >= ts.evict_retry_at:
        ts.evict_retry_at = None
    if ts.evict_retry_at is not None:
        run.evictions_left = 0
    b = ts.breaker
    if b.state == OPEN:
        run.evictions_left = 0
    elif b.state == HALF_OPEN:
        run.evictions_left = 0 if any(p.probe for p in ts.pending_evictions) else 1

    mode = pol.update_mode
    only = pol.recreate_resources if mode == "recreate" else None
    disrupted = 0
    for pod in run.pods:
        if pod.terminating or not pod.ready:
            disrupted += 1
        if pod.phase != "Running" or pod.node_name is None or pod.terminating:
            continue
        reason = stall_reason(pod)
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
                cond = pod.condition(
                    POD_RESIZE_PENDING if reason != REASON_ERROR else POD_RESIZE_IN_PROGRESS
                )
                msg = cond.message if cond is not None and cond.message else reason
                run.pod_event(pod, "ResizeStalled", f"resize stalled ({reason}): {msg}", "Warning")
        elif rec is not None and not _awaiting_kubelet(pod) and rec.reason != "Refused":
            # Conditions are re-read every pass: a stall that is gone is gone.
            del ts.stalls[pod.uid]
            ts.reported.pop(f"stall:{pod.uid}", None)
            rec = None
        if mode == "initial":
            continue
        change = pod_change(pod, sugg, run.skip, pol.scale_up, pol.scale_down, only)
        if (
            change is not None
            and change.problem is not None
            and mode != "in_place_or_recreate"
            and mode != "recreate"
        ):
            if run.report_once(f"qos:{pod.uid}", change.signature):
                run.pod_event(pod, "ResizeNotPossible", change.problem, "Warning")
            continue
        in_flight = resize_in_flight(pod)
        if in_flight and reason is None:
            disrupted += 1  # an in-place change still rolling counts against the batch
        elif reason is not None and _restart_pending(pod):
            disrupted += 1  # it will restart whenever the resize lands
        urgent = change is not None and _recent_oom(pod, now) and _memory_up(pod, change)
        if mode == "recreate":
            if change is not None and (change.significant or urgent):
                candidates.append(_Candidate("evict", pod, run, change, "recreate", urgent))
            continue
        # Release a Deferred resize that has held capacity too long (opt-in).
        if (
            reason == REASON_DEFERRED
            and pol.release_deferred_after is not None
            and rec is not None
            and now - rec.first_seen >= pol.release_deferred_after
            and change is None
        ):
            back = allocated_containers(pod)
            candidates.append(_Candidate("release", pod, run, None, "release-deferred"))
            ts.released[pod.uid] = _pending_sig(pod)
            run.pod_event(
                pod,
                "ResizeReleased",
                f"resize Deferred for {now - rec.first_seen:.0f}s: patched back to the allocated "
                f"resources so it stops holding node capacity ({'; '.join(c.name for c in back)})",
                "Warning",
            )
            continue
        refused = pod.uid in ts.refused
        if refused and change is not None and ts.refused[pod.uid] != change.signature:
            # A new forecast changed the target: try in place again.
            del ts.refused[pod.uid]
            refused = False
            if rec is not None and rec.reason == "Refused":
                del ts.stalls[pod.uid]
                rec = None
        if mode == "in_place_or_recreate":
            if rec is not None and (
                rec.reason == "Refused" or now - rec.first_seen >= pol.stall_timeout
            ):
                candidates.append(_Candidate("evict", pod, run, change, "stall-fallback", urgent))
                continue
            if refused or (change is not None and change.problem is not None):
                candidates.append(_Candidate("evict", pod, run, change, "refused", urgent))
                continue
        elif refused:
            if run.report_once(f"refused:{pod.uid}", ts.refused[pod.uid]):
                run.pod_event(
                    pod, "ResizeRefused", "resize refused by the API server; waiting", "Warning"
                )
            continue
        if change is None or not (change.significant or urgent):
            continue
        if ts.released.get(pod.uid) == change.signature and not config.capacity_guard:
            continue  # released because it could not land; without the guard do not resend
        candidates.append(_Candidate("resize", pod, run, change, "resize", urgent))
    run.disrupted_now = disrupted
    run.budget = 0 if run.paced else max(0, size - disrupted)


def _pending_sig(pod: Pod) -> str:
    """Signature (as `PodChange.signature`) of the resize the pod's spec is asking for."""
    back = {c.name: c for c in allocated_containers(pod)}
    parts = []
    for c in pod.containers:
        a = back[c.name]
        if a.requests != c.resources.requests or a.limits != c.resources.limits:
            parts.append(_container_sig(c.name, c.resources.requests, c.resources.limits))
    return ";".join(parts)


def _container_sig(name: str, requests: ResourceMap, limits: ResourceMap) -> str:
    return f"{name}[{sorted(requests.items())}|{sorted(limits.items())}]"


def _restart_pending(pod: Pod) -> bool:
    from foresize.cluster.model import RESTART_CONTAINER

    for c in pod.containers:
        st = pod.status_of(c.name)
        if st is None:
            continue
        for r, pol in c.resize_policy.items():
            if pol == RESTART_CONTAINER and r in COMPUTE_RESOURCES:
                if c.resources.requests.get(r) != st.allocated.get(r, c.resources.requests.get(r)):
                    return True
                if c.resources.limits.get(r) != st.resources.limits.get(
                    r, c.resources.limits.get(r)
                ):
                    return True
    return False


def _breaker(run: _TargetRun, sugg: Suggestion, now: float, config: WorkerConfig) -> None:
    """Judge recreated pods against the suggestion and move the circuit breaker."""
    ts = run.state
    b = ts.breaker
    if b.suggestion_uid != sugg.uid:
        # Per target and suggestion: a new suggestion starts with a closed breaker.
        if b.state != CLOSED:
            run.target_event(
                "CircuitBreakerReset", f"new suggestion {sugg.uid}: circuit breaker reset"
            )
        b.suggestion_uid, b.state, b.no_progress, b.openings, b.next_probe_at = (
            sugg.uid,
            CLOSED,
            0,
            0,
            None,
        )
        ts.pending_evictions = [p for p in ts.pending_evictions if p.suggestion_uid == sugg.uid]
    if ts.pending_evictions:
        judged = set(ts.judged)
        fresh = sorted(
            (p for p in run.pods if p.uid not in judged and not p.terminating),
            key=lambda p: (p.creation_time, p.name),
        )
        still: list[PendingEviction] = []
        for ev in ts.pending_evictions:
            # A controller recreates at once: the replacement may carry the eviction's time.
            new = next(
                (
                    p
                    for p in fresh
                    if p.creation_time >= ev.at and p.uid not in judged and p.uid != ev.uid
                ),
                None,
            )
            if new is None:
                if now - ev.at < config.eviction_verdict_timeout:
                    still.append(ev)
                continue
            judged.add(new.uid)
            ts.judged.append(new.uid)
            if matches_suggestion(new, sugg, run.skip, config.match_tolerance):
                if b.state != CLOSED:
                    run.target_event(
                        "CircuitBreakerClosed",
                        f"pod {new.name} came back with the suggested resources: evictions resume",
                    )
                b.state, b.no_progress, b.openings, b.next_probe_at = CLOSED, 0, 0, None
                b.opened_at = b.backoff = None
            else:
                b.no_progress += 1
                if b.state == HALF_OPEN or (
                    b.state == CLOSED and b.no_progress >= config.breaker_threshold
                ):
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
        ts.pending_evictions = still
    if b.state == OPEN and b.next_probe_at is not None and now >= b.next_probe_at:
        b.state = HALF_OPEN
        run.target_event("CircuitBreakerHalfOpen", "back-off over: one probe eviction allowed")


# --------------------------------------------------------------------------- admission


def _node_free(snapshot: ClusterSnapshot, cache: dict[str, ResourceMap], node: str) -> ResourceMap:
    free = cache.get(node)
    if free is None:
        n = snapshot.nodes.get(node)
        free = dict(n.allocatable) if n is not None else {}
        for p in snapshot.pods_on_node(node):
            for r, v in fast_charge(p).items():
                free[r] = free.get(r, 0) - v
        cache[node] = free
    return free


def fast_charge(pod: Pod) -> ResourceMap:
    """`qos.pod_charge` with a fast path for the common pod (no init containers, status for
    every container, no Infeasible resize); identical results (tested)."""
    if pod.init_containers or pod.resources or pod.overhead or pod.phase in ("Succeeded", "Failed"):
        return pod_charge(pod)
    for cond in pod.conditions:
        if cond.type == POD_RESIZE_PENDING and cond.reason == REASON_INFEASIBLE:
            return pod_charge(pod)
    statuses = pod.container_statuses
    if len(statuses) != len(pod.containers):
        return pod_charge(pod)
    total: ResourceMap = {}
    for c, st in zip(pod.containers, statuses, strict=True):
        if st.name != c.name:
            return pod_charge(pod)
        req = c.resources.requests
        lim = c.resources.limits
        alloc = st.allocated
        act = st.resources.requests
        for r in {*req, *lim, *alloc, *act}:
            v = req.get(r)
            if v is None:
                v = lim.get(r, 0)
            a = alloc.get(r, 0)
            if a > v:
                v = a
            a = act.get(r, 0)
            if a > v:
                v = a
            total[r] = total.get(r, 0) + v
    return total


def _fits(delta: ResourceMap, free: ResourceMap) -> bool:
    return all(v <= 0 or v <= free.get(r, 0) for r, v in delta.items())


def _order(c: _Candidate) -> tuple:
    # Evictions (fallbacks) and releases first, then urgent OOM fixes, then downsizes (they
    # free capacity once actuated), then upsizes by priority, Guaranteed first, oldest first
    # — the order the kubelet itself retries Deferred resizes in.
    if c.kind in ("evict", "release"):
        rank = 0
    elif c.urgent:
        rank = 1
    elif c.change is not None and c.change.direction == "down":
        rank = 2
    else:
        rank = 3
    qos = 0 if rank == 3 and pod_qos_class(c.pod) == "Guaranteed" else 1
    return (rank, -c.pod.priority, qos, c.pod.creation_time, c.pod.namespace, c.pod.name)


def _admit(
    candidates: list[_Candidate],
    snapshot: ClusterSnapshot,
    now: float,
    config: WorkerConfig,
    actions: list[Action],
) -> None:
    free_cache: dict[str, ResourceMap] = {}
    candidates.sort(key=_order)
    for c in candidates:
        run, pod = c.run, c.pod
        key = run.policy.key
        if c.kind == "release":
            actions.append(
                ResizePod(
                    pod.namespace,
                    pod.name,
                    allocated_containers(pod),
                    key,
                    "release-deferred",
                    "down",
                )
            )
            run.state.inflight[pod.name] = pod.uid
            continue
        if c.kind == "resize":
            assert c.change is not None
            if not c.urgent and run.budget <= 0:
                continue
            delta = charge_delta(pod, c.change)
            if config.capacity_guard:
                free = _node_free(snapshot, free_cache, pod.node_name or "")
                if not _fits(delta, free):
                    if run.policy.update_mode == "in_place_or_recreate":
                        c = _Candidate("evict", pod, run, c.change, "capacity", c.urgent)
                    else:
                        run.waiting_capacity += 1
                        if run.report_once(f"guard:{pod.uid}", c.change.signature):
                            msg = (
                                f"upsize does not fit node {pod.node_name} now "
                                f"({_fmt({r: v for r, v in delta.items() if v > 0})} more needed, "
                                f"{_fmt({r: max(v, 0) for r, v in free.items()})} "
                                "free): not sent, waiting for capacity"
                            )
                            run.pod_event(pod, "ResizeWaitingForCapacity", msg, "Warning")
                            run.target_event(
                                "ResizeWaitingForCapacity", f"pod {pod.name}: {msg}", "Warning"
                            )
                        continue
                else:
                    for r, v in delta.items():
                        if v > 0:
                            free[r] = free.get(r, 0) - v
            if c.kind == "resize":
                actions.append(
                    ResizePod(
                        pod.namespace,
                        pod.name,
                        c.change.containers,
                        key,
                        c.reason,
                        c.change.direction,
                    )
                )
                if not c.urgent:
                    run.budget -= 1
                run.issued += 1
                run.state.inflight[pod.name] = pod.uid
                what = "restarting resize" if c.change.restarts else "in-place resize"
                msg = f"{what}: {_describe(pod, c.change)}"
                run.pod_event(pod, "Resizing", msg)
                run.target_event("Resizing", f"pod {pod.name}: {msg}")
                continue
        # Eviction.
        if run.evictions_left <= 0 or (run.budget <= 0 and not c.urgent):
            continue
        until = run.state.blocked_pods.get(pod.uid)
        if until is not None and now < until:
            continue
        if not _fits_elsewhere(pod, run, snapshot, free_cache):
            if run.report_once(f"nofit:{pod.uid}", c.reason):
                run.pod_event(
                    pod,
                    "EvictionSkipped",
                    "no node has room for the pod at its suggested size; not evicting",
                    "Warning",
                )
            continue
        actions.append(EvictPod(pod.namespace, pod.name, key, c.reason))
        run.state.inflight[pod.name] = pod.uid
        run.evictions_left -= 1
        if not c.urgent:
            run.budget -= 1
        run.issued += 1
        why = {
            "recreate": "recreate with the suggested resources",
            "stall-fallback": "resize stalled past stall_timeout",
            "refused": "resize refused by the API server",
            "capacity": "upsize cannot fit its node",
        }.get(c.reason, c.reason)
        run.pod_event(pod, "Evicting", f"evicting: {why}")
        run.target_event("Evicting", f"pod {pod.name}: {why}")


def _fits_elsewhere(
    pod: Pod, run: _TargetRun, snapshot: ClusterSnapshot, cache: dict[str, ResourceMap]
) -> bool:
    """Would the recreated pod, at its suggested size, fit some schedulable node?"""
    if run.suggestion is None:
        return True
    containers, _ = desired_containers(pod, run.suggestion, run.skip)
    need: ResourceMap = {}
    for c in containers:
        for r, v in c.resources.requests.items():
            if r in COMPUTE_RESOURCES:
                need[r] = need.get(r, 0) + v
    own = fast_charge(pod)
    # The node it runs on first: a recreated pod usually fits where it was.
    order = [pod.node_name] if pod.node_name in snapshot.nodes else []
    order += [n for n in snapshot.nodes if n != pod.node_name]
    for name in order:
        node = snapshot.nodes[name]
        if node.unschedulable or not node.ready:
            continue
        free = _node_free(snapshot, cache, name)
        room = {r: v + own.get(r, 0) for r, v in free.items()} if name == pod.node_name else free
        if _fits(need, room):
            # Reserve it, so two evictions in one pass do not count on the same room.
            for r, v in need.items():
                free[r] = free.get(r, 0) - v
            return True
    return False


def _status(run: _TargetRun, now: float) -> dict[str, Any]:
    """The worker's part of the target's status (keys as in `AIScaleTargetStatus`)."""
    ts = run.state
    return {
        "pods_resized": ts.resized,
        "pods_evicted": ts.evicted,
        "pods_stalled": run.stalled,
        "pods_waiting_for_capacity": run.waiting_capacity,
        "stall_fallbacks": ts.stall_fallbacks,
        "circuit_breaker": ts.breaker.to_status(),
        "vertical_notes": list(run.notes),
        STATUS_KEY: ts.to_status(),
    }


# --------------------------------------------------------------------------- results


def on_result(
    state: WorkerState,
    action: Action,
    result: ActionResult,
    now: float,
    config: WorkerConfig | None = None,
) -> WorkerState:
    """Feed one action's outcome back. Returns the new state (the input is not changed)."""
    if not isinstance(action, EvictPod | ResizePod):
        return state
    config = config or WorkerConfig()
    prev = state.targets.get(action.target)
    if prev is None:
        return state
    ts = prev.clone()
    new_state = state.copy()
    new_state.targets[action.target] = ts
    ns, _, tname = action.target.partition("/")
    out = ts.outbox
    pod_uid = ts.inflight.get(action.name, "")
    if isinstance(action, EvictPod):
        if result.ok:
            ts.evicted += 1
            if action.reason in ("stall-fallback", "refused", "capacity"):
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
            out.append(
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
            key = pod_uid or action.name
            ts.blocked_pods[key] = now + config.multi_pdb_backoff
            out.append(
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
    else:
        if result.ok:
            if action.reason != "release-deferred":
                ts.resized += 1
        elif result.code == 422 or (result.code == 403 and result.has_cause("NodeCapacity")):
            if pod_uid:
                ts.refused[pod_uid] = _resize_sig(action)
                ts.stalls[pod_uid] = StallRecord(action.name, now, "Refused")
            out.append(
                EmitEvent(
                    ns,
                    "Pod",
                    action.name,
                    "ResizeRefused",
                    f"resize refused ({result.code}: {result.message})",
                    "Warning",
                )
            )
    return new_state


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
            ts = state.targets.get(action.target)
            if ts is not None and ts.evict_retry_at is not None and now < ts.evict_retry_at:
                done.append((action, None))
                continue
        result = apply(action)
        done.append((action, result))
        if isinstance(action, EvictPod | ResizePod):
            state = on_result(state, action, result, now, config)
            ts = state.targets.get(action.target)
            if ts is not None and ts.outbox:
                for ev in ts.outbox:
                    done.append((ev, apply(ev)))
                ts.outbox = []
    return state, done


def _resize_sig(action: ResizePod) -> str:
    return ";".join(_container_sig(c.name, c.requests, c.limits) for c in action.containers)
