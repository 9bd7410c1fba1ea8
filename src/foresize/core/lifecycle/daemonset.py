"""DaemonSetAutoscaler (pure): size a DaemonSet's containers from a percentile of their
observed usage, seed new pods at admission, and resize running ones in place.

- `dsa_suggestion`: per container, the `percentile` (default 90) of all samples of all
  the DaemonSet's pods within `observationWindow` (8 d); nothing until the observations
  span `minObservationWindow` (3 h). CPU rounds up to 1m, memory up to 1Mi, then bounds.
- Seeding: the suggestion goes into the admission index (`AdmissionIndex.build(...,
  dsa_suggestions=...)` or the DSA's `status.suggestion`) and the pod webhook applies it
  to each new DaemonSet pod, including pods for nodes added later, with the same sizing
  code as AIScaleTargets (bounds, limit ratio, QoS kept) and the managed annotation.
- `plan_dsa`: every `scaleInterval` (15 m) the running pods that differ are resized in
  place (`ResizePod`); a resize the API server would refuse (QoS change) is skipped; an
  upsize that does not fit its node's free capacity (the scheduler's charge, the capacity
  guard every resize passes) is not sent, so it never sits Deferred holding capacity the
  node does not have: it is reported and tried again next interval. A resize that restarts
  a container (resizePolicy RestartContainer) is a disruption, paced like the disruption
  worker's (`cluster.disruption`: 20% of the DaemonSet's pods at once, pods already
  disrupted counted, batches 60 s apart; a DaemonSetAutoscaler has no `disruption`
  settings of its own, so the defaults); the rest wait for the next batch, which the pass
  plans without waiting for the next `scaleInterval`.
- `spec.maintenance` (the windows of an AIScaleTarget's `vertical.maintenance`, read the
  same way: `cluster.windows`): outside every window a resize that restarts a container
  (or, with `restrict: all`, every resize) is held; held pods are tried on every pass, so
  the first pass inside a window sends them. Windows that cannot be read (an unknown
  zone, an overlap, a bad field) hold what they guard, and the status says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.actions import (
    Action,
    ContainerResize,
    EmitEvent,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.capacity import NodeLedger, resize_delta
from foresize.core.cluster.disruption import resize_restarts, restart_batch
from foresize.core.cluster.model import ContainerSuggestion, Pod, Suggestion, disruption_hold
from foresize.core.cluster.qos import pod_qos_class
from foresize.core.cluster.refusals import Refusal, refusal_of
from foresize.core.cluster.sizing import size_container
from foresize.core.cluster.snapshot import ClusterSnapshot, DsaObject
from foresize.core.cluster.target import TargetView, dsa_view
from foresize.core.cluster.target_fields import AUTONOMOUS
from foresize.core.cluster.validation import check_resize
from foresize.core.cluster.windows import (
    UTC_ONLY,
    MaintenancePolicy,
    TimeZones,
    window_problems,
    window_state,
)


@dataclass(slots=True)
class ContainerSamples:
    """Usage samples of one container name across the DaemonSet's pods."""

    times: np.ndarray  # float seconds
    cpu_cores: np.ndarray
    memory_bytes: np.ndarray


def dsa_suggestion(
    dsa: TargetView | DsaObject,
    usage: Mapping[str, ContainerSamples],
    now: float,
    *,
    first_seen: float | None = None,
) -> Suggestion | None:
    """The percentile suggestion, or None before `minObservationWindow` of data.

    `first_seen` is when observation started (defaults to the oldest sample)."""
    view = dsa if isinstance(dsa, TargetView) else dsa_view(dsa)
    containers: dict[str, ContainerSuggestion] = {}
    start = now - view.observation_window
    for name, s in sorted(usage.items()):
        t = np.asarray(s.times, dtype=float)
        if t.size == 0:
            continue
        began = first_seen if first_seen is not None else float(t.min())
        if now - began < view.min_observation_window:
            continue
        keep = (t >= start) & (t <= now)
        if not keep.any():
            continue
        cpu = float(np.percentile(np.asarray(s.cpu_cores, dtype=float)[keep], view.percentile))
        mem = float(np.percentile(np.asarray(s.memory_bytes, dtype=float)[keep], view.percentile))
        requests = {
            CPU: max(1, math.ceil(cpu * 1000 - 1e-9)),
            MEMORY: max(MIB, math.ceil(mem / MIB - 1e-9) * MIB),
        }
        policy = view.policy_for(name)
        if policy is None:
            continue
        for resource in (CPU, MEMORY):
            rp = policy.for_resource(resource)
            if rp is not None:
                if rp.upper is not None:
                    requests[resource] = min(requests[resource], rp.upper)
                if rp.lower is not None:
                    requests[resource] = max(requests[resource], rp.lower)
        containers[name] = ContainerSuggestion(name, requests)
    if not containers:
        return None
    return Suggestion(
        uid=f"{view.namespace}/{view.name}@{int(now)}",
        created_at=now,
        containers=containers,
        window_start=start,
        window_end=now + view.scale_interval,
    )


class UsageWindow:
    """Usage samples per (namespace, DaemonSet, container), trimmed to a time window.

    Fed by the shell (the simulator's usage observer, or metrics-server polls); chunks
    are kept as numpy arrays and concatenated on read."""

    def __init__(self, window: float = 8 * 86400.0) -> None:
        self.window = window
        self._chunks: dict[
            tuple[str, str, str], list[tuple[np.ndarray, np.ndarray, np.ndarray]]
        ] = {}
        self.first_seen: dict[tuple[str, str], float] = {}

    def add(
        self,
        namespace: str,
        daemonset: str,
        container: str,
        t: float,
        cpu: np.ndarray,
        mem: np.ndarray,
    ) -> None:
        """Samples taken at time `t` (one per pod of the DaemonSet)."""
        cpu = np.atleast_1d(np.asarray(cpu, dtype=float))
        mem = np.atleast_1d(np.asarray(mem, dtype=float))
        self.first_seen.setdefault((namespace, daemonset), t)
        chunks = self._chunks.setdefault((namespace, daemonset, container), [])
        chunks.append((np.full(cpu.shape, t), cpu, mem))
        while chunks and chunks[0][0][0] < t - self.window:
            chunks.pop(0)

    def samples(self, namespace: str, daemonset: str) -> dict[str, ContainerSamples]:
        out = {}
        for (ns, ds, container), chunks in self._chunks.items():
            if ns == namespace and ds == daemonset and chunks:
                out[container] = ContainerSamples(
                    np.concatenate([c[0] for c in chunks]),
                    np.concatenate([c[1] for c in chunks]),
                    np.concatenate([c[2] for c in chunks]),
                )
        return out


@dataclass(slots=True)
class DsaPlan:
    actions: list[Action] = field(default_factory=list)
    resized: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)  # upsizes held by the guard
    paced: list[str] = field(default_factory=list)  # restarting resizes left for a next batch
    held: list[str] = field(default_factory=list)  # resizes waiting for a maintenance window
    held_why: str = ""  # what holds them: the window, or why the windows cannot be read
    batch_sent: bool = False  # a restarting resize went out: the batch's time is now


def plan_dsa(
    snapshot: ClusterSnapshot,
    dsa: TargetView | DsaObject,
    suggestion: Suggestion | None,
    now: float,
    ledger: NodeLedger | None = None,
    last_batch_at: float | None = None,
    refusals: Mapping[str, Refusal] | None = None,
    zones: TimeZones = UTC_ONLY,
) -> DsaPlan:
    """In-place resizes bringing the DaemonSet's running pods to `suggestion` (call it
    every `scaleInterval`, and on every pass while `paced` or `held` is not empty).
    Nothing while paused, outside autonomous mode or without a suggestion. `ledger`: the
    pass's node capacity shared with the other planners; `last_batch_at`: when the last
    restarting resize went out (the caller keeps it); `refusals`: the resizes the API
    server refused outright (`cluster.refusals`), not sent again while the suggestion
    asks the same; `zones`: the time-zone database the maintenance windows are read in."""
    view = dsa if isinstance(dsa, TargetView) else dsa_view(dsa)
    plan = DsaPlan()
    ledger = ledger or NodeLedger(snapshot)
    if snapshot.paused or view.vertical_mode != AUTONOMOUS or suggestion is None or view.deleting:
        return plan
    ds = snapshot.workload("DaemonSet", view.namespace, view.ref_name)
    if ds is None:
        return plan
    pods = [p for p in snapshot.pods_of(ds) if p.phase not in ("Succeeded", "Failed")]
    pods = _unclaimed(snapshot, view, pods, plan)
    batch = restart_batch(pods, view.max_disrupted, view.disruption_interval, last_batch_at, now)
    closed = _closed_window(view, zones, now)
    for pod in pods:
        if pod.terminating:
            continue
        changes = _changes(pod, view, suggestion)
        if not changes:
            continue
        action = ResizePod(
            pod.namespace,
            pod.name,
            tuple(changes),
            target=view.key,
            reason="DaemonSetAutoscaler",
            direction=_direction(pod, changes),
            uid=pod.uid,
            target_kind=view.kind,
        )
        restarts = resize_restarts(pod, changes)
        why_not = _not_sendable(pod, action, restarts, refusals or {})
        if why_not is not None:
            plan.skipped[pod.key] = why_not
            continue
        if closed is not None and closed[0].holds(restarts):
            plan.held.append(pod.key)
            plan.held_why = closed[1]
            continue
        if restarts and batch.left <= 0:
            plan.paced.append(pod.key)
            continue
        delta = resize_delta(pod, changes)
        why = ledger.why_not(pod.node_name or "", delta, pod.priority)
        if why is not None:
            _hold(plan, view, pod.key, why)
            continue
        ledger.reserve(pod.node_name or "", delta)
        if restarts:
            batch.take()
        plan.resized.append(pod.key)
        plan.actions.append(action)
    plan.batch_sent = batch.sent > 0
    if plan.resized or plan.skipped or plan.waiting or plan.paced or plan.held:
        plan.actions.append(_status(view, plan))
    return plan


def plan_dsa_across_passes(
    snapshot: ClusterSnapshot,
    dsa: TargetView,
    suggestion: Suggestion,
    now: float,
    ledger: NodeLedger | None,
    refusals: Mapping[str, Refusal],
    zones: TimeZones,
    batch_at: dict[str, float],
    paced: dict[str, Suggestion],
) -> DsaPlan:
    """`plan_dsa`, with what it leaves kept across passes in the caller's maps (keyed by
    the DaemonSetAutoscaler): when its last disruption batch went out (`batch_at`), and
    the suggestion whose resizes a batch or a maintenance window holds (`paced`), tried
    again on every pass rather than at the next `scaleInterval`."""
    key = dsa.key
    dp = plan_dsa(snapshot, dsa, suggestion, now, ledger, batch_at.get(key), refusals, zones)
    if dp.batch_sent:
        batch_at[key] = now
    if dp.paced or dp.held:
        paced[key] = suggestion
    else:
        paced.pop(key, None)
    return dp


def _changes(pod: Pod, view: TargetView, suggestion: Suggestion) -> list[ContainerResize]:
    """The pod's containers that differ from the suggestion as sized for them (none for
    a BestEffort pod: requests would change its QoS class)."""
    qos = pod_qos_class(pod)
    if qos == "BestEffort":
        return []
    changes = []
    for c in pod.containers:
        policy = view.policy_for(c.name)
        sug = suggestion.for_container(c.name)
        if policy is None or sug is None:
            continue
        new = size_container(c, policy, sug, None, qos)
        if new.requests != c.resources.requests or new.limits != c.resources.limits:
            changes.append(ContainerResize(c.name, dict(new.requests), dict(new.limits)))
    return changes


def _status(view: TargetView, plan: DsaPlan) -> WriteTargetStatus:
    """What the pass did and left, for the DaemonSetAutoscaler's status."""
    return WriteTargetStatus(
        view.namespace,
        view.name,
        {
            "pods_resized_last": len(plan.resized),
            "pods_skipped": dict(plan.skipped),
            "pods_waiting_for_capacity": len(plan.waiting),
            "pods_waiting_for_disruption_batch": len(plan.paced),
            "pods_held_for_maintenance_window": len(plan.held),
            "maintenance_window": plan.held_why or None,
        },
        kind="DaemonSetAutoscaler",
    )


def _closed_window(
    view: TargetView, zones: TimeZones, now: float
) -> tuple[MaintenancePolicy, str] | None:
    """The DaemonSetAutoscaler's maintenance policy and what to say of it when its
    windows are closed now (or cannot be read: held closed, the safe side); None when no
    window holds anything now."""
    policy = view.maintenance
    if policy is None:
        return None
    problems = [*policy.problems, *window_problems(policy.windows, zones, "spec.maintenance")]
    if problems:
        return policy, (
            f"held: the maintenance windows cannot be read as written ({problems[0]}), so "
            "the DaemonSetAutoscaler stays on the safe side"
        )
    state = window_state(policy.windows, zones, now)
    return None if state.open else (policy, f"held: {state.words()}")


def _not_sendable(
    pod: Pod, action: ResizePod, restarts: bool, refusals: Mapping[str, Refusal]
) -> str | None:
    """Why the resize is not sent at all, or None: the API server would refuse it (a
    QoS change), it refused this very change already (as an Infeasible resize: a
    DaemonSet pod cannot move, so it keeps its size), or it restarts a container of a
    pod that opted out of voluntary disruption."""
    refused = check_resize(pod, action)
    if refused is not None:
        return refused.message
    earlier = refusal_of(refusals, action)
    if earlier is not None:
        return f"{earlier.describe()}; not sent again until it changes"
    hold = disruption_hold(pod.annotations) if restarts else None
    if hold is not None:
        return (
            "not resized: the resize would restart a container (resizePolicy "
            f"RestartContainer) and the pod opts out of voluntary disruption ({hold})"
        )
    return None


def _unclaimed(
    snapshot: ClusterSnapshot, view: TargetView, pods: list[Pod], plan: DsaPlan
) -> list[Pod]:
    """The pods to size: none when another vertical autoscaler (a VPA in any mode but Off,
    ...) sizes the DaemonSet; each is then reported skipped, naming it."""
    claim = snapshot.vertical_claim_for("DaemonSet", view.namespace, view.ref_name)
    if claim is None:
        return pods
    for pod in pods:
        plan.skipped[pod.key] = f"{claim.describe()} also sizes the DaemonSet"
    return []


def _hold(
    plan: DsaPlan,
    view: TargetView,
    pod_key: str,
    msg: str,
) -> None:
    """An upsize the node has no room for (or whose room a Pending pod needs): not sent
    (it would sit Deferred while the scheduler charges the node for it), reported on the
    pod and the DaemonSetAutoscaler."""
    plan.waiting[pod_key] = msg
    ns, name = pod_key.split("/", 1)
    plan.actions.append(EmitEvent(ns, "Pod", name, "ResizeWaitingForCapacity", msg, "Warning"))
    plan.actions.append(
        EmitEvent(
            view.namespace,
            view.kind,
            view.name,
            "ResizeWaitingForCapacity",
            f"pod {name}: {msg}",
            "Warning",
            view.uid,
        )
    )


def _direction(pod: Pod, changes: list[ContainerResize]) -> str:
    ups = downs = 0
    for ch in changes:
        cur = pod.container(ch.name)
        for name, qty in ch.requests.items():
            old = cur.resources.requests.get(name, 0) if cur is not None else 0
            ups += qty > old
            downs += qty < old
    return "mixed" if ups and downs else "up" if ups else "down"
