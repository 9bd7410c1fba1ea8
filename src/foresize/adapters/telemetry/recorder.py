"""Recording changes (architecture §3.2): one recorder both shells feed with what they did.

`ChangeRecorder.record(pairs, snapshot)` takes the list of (Action, ActionResult) a pass
produced and

- counts every resize by target, resource, direction and outcome, every eviction by target
  and outcome;
- follows target status writes (stalled pods, circuit breaker, the latest recommendation);
- returns the Kubernetes Events that report each change's outcome on the pod and on the
  target (the planner already reports its intent — "Resizing", "Evicting" — and the
  refusals it reacts to: 429 "EvictionDeferred", 422/403 "ResizeRefused"; the recorder
  reports what actually happened, so each change has an Event either way).

`observe(snapshot)` refreshes what is read from the cluster rather than from actions: the
per-node gap between the scheduler's charge and what the pods' specs and allocations agree
on (`cluster.capacity.charge_gap`: positive while a resize has not landed, a Deferred upsize
included; negative while one is Infeasible), and OOM kills.
The recorder never talks to the API itself; the shell applies the returned events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from foresize.adapters.telemetry.metrics import (
    SOURCE_ADMISSION,
    SOURCE_IN_PLACE,
    ForesizeMetrics,
    base_units,
    outcome_of,
)
from foresize.core.api.access import get_path
from foresize.core.api.quantity import QuantityError, format_quantity, to_canonical
from foresize.core.cluster.actions import (
    Action,
    ActionResult,
    EmitEvent,
    EvictPod,
    PatchScale,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.core.cluster.capacity import charge_gap
from foresize.core.cluster.model import COMPUTE_RESOURCES, Pod
from foresize.core.cluster.pending import PendingDemand
from foresize.core.cluster.snapshot import ClusterSnapshot, labels_match

log = logging.getLogger("foresize.changes")

OOM_KILLED = "OOMKilled"
# A deleted target's counters stay exported this long, then go: longer than every shipped
# alert's window (30 min), so the changes of its last passes (a revert on deletion) are
# still scraped and alerted on; without an end, every target ever seen would be exported
# for ever (each has 24 counter label sets from its first pass).
FORGET_COUNTERS_AFTER = 3600.0
# SizedAtAdmission Events waiting for the next pass, after coalescing (one per target and
# change): far more than a pass of rollouts makes, few enough to hold while passes fail.
MAX_QUEUED_ADMISSION_EVENTS = 1000


def _split(target: str) -> tuple[str, str]:
    ns, _, name = target.partition("/")
    return ns, name


def target_key(target: Any) -> str:
    return f"{get_path(target, 'metadata', 'namespace')}/{get_path(target, 'metadata', 'name')}"


def pods_by_target(snapshot: ClusterSnapshot) -> dict[str, list[Pod]]:
    """Target key -> its pods (through scaleTargetRef's controller chain, or the selector)."""
    out: dict[str, list[Pod]] = {}
    for target in snapshot.targets:
        key = target_key(target)
        ns = get_path(target, "metadata", "namespace")
        ref = get_path(target, "spec", "scaleTargetRef")
        if ref is not None:
            wl = snapshot.workload(get_path(ref, "kind"), ns, get_path(ref, "name"))
            out[key] = list(snapshot.pods_of(wl)) if wl is not None else []
            continue
        selector = get_path(target, "spec", "selector", "matchLabels") or {}
        out[key] = [
            p for p in snapshot.pods if p.namespace == ns and labels_match(selector, p.labels)
        ]
    return out


class ChangeRecorder:
    """Metrics, Events and structured logs for every change, identical in both shells."""

    def __init__(self, metrics: ForesizeMetrics | None = None) -> None:
        self.metrics = metrics or ForesizeMetrics()
        # (pod uid or key, container) -> restart count at the last OOM counted
        self._oom_seen: dict[tuple[str, str], int] = {}
        # OOM kills found by the last observe() calls: (pod, container, time); the shell
        # drains this into the history.
        self.new_ooms: list[tuple[Pod, str, float]] = []
        # Events of pods sized at admission, sent with the next pass (the webhook handler
        # only queues them).
        # Coalesced as they come (per target and change, the first pod's Event kept) and
        # capped, so passes that fail for a while do not grow it without end.
        self._admissions: dict[tuple[str, str, str, str], EmitEvent] = {}
        self._admissions_dropped = 0
        self._admissions_lock = threading.Lock()  # the webhook reviews in worker threads
        # Target key -> when `declare` last saw it in the cluster.
        self._last_seen: dict[str, float] = {}
        # The pending-upsize gauges' values written by the last pass, by label set.
        self._pending_last: dict[tuple[str, str, str], float] = {}

    def declare(self, full: ClusterSnapshot, owned: ClusterSnapshot, now: float) -> None:
        """Every counter label set of the cluster's targets (`full`) and of those this
        replica's shards hold (`owned`) exported at 0 before anything is counted, so the
        first change after a start is an increase Prometheus sees (`declare_targets`).
        The counters of a target deleted `FORGET_COUNTERS_AFTER` ago are removed."""

        def keys(snapshot: ClusterSnapshot) -> list[str]:
            return [target_key(t) for t in (*snapshot.targets, *snapshot.daemonset_autoscalers)]

        known = keys(full)
        self.metrics.declare_targets(known, keys(owned))
        for key in known:
            self._last_seen[key] = now
        gone = [k for k, seen in self._last_seen.items() if now - seen >= FORGET_COUNTERS_AFTER]
        if gone:
            self.metrics.forget_counters(gone)
            for key in gone:
                del self._last_seen[key]

    # ------------------------------------------------------------------ actions
    def record(
        self,
        pairs: Iterable[tuple[Action, ActionResult | None]],
        snapshot: ClusterSnapshot | None = None,
    ) -> list[EmitEvent]:
        """Count and log each applied action; return the outcome Events to emit.

        A None result means the shell skipped the action (e.g. evictions after a 429);
        it is not a change and is not counted.
        """
        pods: dict[str, Pod] = {}
        if snapshot is not None:
            pods = {p.key: p for p in snapshot.pods}
        events: list[EmitEvent] = []
        for action, result in pairs:
            if result is None:
                continue
            match action:
                case ResizePod():
                    events += self._resize(
                        action, result, pods.get(f"{action.namespace}/{action.name}")
                    )
                case EvictPod():
                    events += self._evict(action, result)
                case PatchScale():
                    events += self._scale(action, result)
                case RestartWorkload():
                    events += self._restart(action, result)
                case WriteTargetStatus():
                    self._status(action)
        return events

    def _log(self, change: str, action: Action, result: ActionResult, **fields: Any) -> None:
        log.info(
            "%s %s",
            change,
            "ok" if result.ok else f"failed ({result.code} {result.reason})",
            extra={
                "change": change,
                "target": getattr(action, "target", ""),
                "namespace": getattr(action, "namespace", ""),
                "object": getattr(action, "name", ""),
                "code": result.code,
                "outcome": outcome_of(result.code, result.ok),
                "api_message": result.message,
                **fields,
            },
        )

    def _resize(self, action: ResizePod, result: ActionResult, pod: Pod | None) -> list[EmitEvent]:
        outcome = outcome_of(result.code, result.ok)
        directions: dict[str, str] = {}
        parts: list[str] = []
        for change in action.containers:
            before = pod.container(change.name) if pod is not None else None
            for section, amounts in (("requests", change.requests), ("limits", change.limits)):
                for resource, amount in amounts.items():
                    old = None
                    if before is not None:
                        old = getattr(before.resources, section).get(resource)
                    if old is not None and amount != old:
                        direction = "up" if amount > old else "down"
                    elif old is None and action.direction in ("up", "down"):
                        direction = action.direction
                    elif old is None:
                        direction = "up"
                    else:
                        continue  # unchanged amount
                    # A resource counts once per resize; requests decide the direction.
                    if section == "requests" or resource not in directions:
                        directions[resource] = direction
                    was = format_quantity(resource, old) if old is not None else "unset"
                    parts.append(
                        f"{change.name} {resource} {section[:-1]} {was} -> "
                        f"{format_quantity(resource, amount)}"
                    )
        for resource, direction in directions.items():
            self.metrics.resizes.labels(action.target, resource, direction, outcome).inc()
        summary = ", ".join(parts) or "no change"
        self._log("resize", action, result, resources=sorted(directions), summary=summary)
        if not result.ok and (result.code == 422 or result.has_cause("NodeCapacity")):
            return []  # the planner reports refusals it reacts to ("ResizeRefused")
        if result.ok:
            self._count_request_changes(action.target, pod, action, SOURCE_IN_PLACE)
        return self._events(
            action.target,
            action.namespace,
            action.name,
            ("Resized", f"resized in place: {summary}")
            if result.ok
            else (
                "ResizeFailed",
                f"resize failed ({result.code} {result.reason}): {result.message}",
            ),
            result.ok,
            uid=pod.uid if pod is not None else "",
            target_kind=action.target_kind,
        )

    def _count_request_changes(
        self, target: str, pod: Pod | None, action: ResizePod, source: str
    ) -> None:
        """One count per container request that changed (the request-change counter)."""
        for change in action.containers:
            before = pod.container(change.name) if pod is not None else None
            for resource, amount in change.requests.items():
                if resource not in COMPUTE_RESOURCES or amount is None:
                    continue
                old = before.resources.requests.get(resource) if before is not None else None
                if old == amount:
                    continue
                direction = "up" if old is None or amount > old else "down"
                self.metrics.request_changes.labels(target, resource, direction, source).inc()

    def admitted(self, pod: Pod, decision: Any) -> None:
        """A pod the webhook sized at admission (called from the webhook's handler: only a
        counter and a queued Event, nothing slow). `decision` is the admission's
        `PodDecision`; the Event names its target (AIScaleTarget or DaemonSetAutoscaler)
        and goes out with the next pass's Events (`drain_admissions`)."""
        view = decision.target
        if view is None or not decision.changed:
            return
        target = f"{view.namespace}/{view.name}"
        parts: list[str] = []
        for name, new in sorted(decision.containers.items()):
            before = pod.container(name)
            for resource, amount in sorted(new.requests.items()):
                old = before.resources.requests.get(resource) if before is not None else None
                if resource not in COMPUTE_RESOURCES or old == amount:
                    continue
                direction = "up" if old is None or amount > old else "down"
                self.metrics.request_changes.labels(
                    target, resource, direction, SOURCE_ADMISSION
                ).inc()
                was = format_quantity(resource, old) if old is not None else "unset"
                parts.append(
                    f"{name} {resource} request {was} -> {format_quantity(resource, amount)}"
                )
        if not parts:
            return
        # At CREATE a controller's pod often has no name yet (generateName).
        owner = f" of {pod.owner.kind} {pod.owner.name}" if pod.owner is not None else ""
        who = f"pod {pod.name}" if pod.name else f"a new pod{owner}"
        event = EmitEvent(
            view.namespace,
            view.kind,
            view.name,
            "SizedAtAdmission",
            f"{who}: sized at admission: {', '.join(parts)}",
            "Normal",
            view.uid,
        )
        key = (event.kind, event.namespace, event.name, event.message.split(": ", 1)[-1])
        with self._admissions_lock:
            if key in self._admissions:
                return
            if len(self._admissions) >= MAX_QUEUED_ADMISSION_EVENTS:
                self._admissions_dropped += 1
                return
            self._admissions[key] = event

    def drain_admissions(self) -> list[EmitEvent]:
        """The Events of the pods sized at admission since the last call (coalesced per
        target and message, so a rollout of many replicas is a handful of Events)."""
        with self._admissions_lock:
            out, self._admissions = self._admissions, {}
            dropped, self._admissions_dropped = self._admissions_dropped, 0
        if dropped:
            log.warning(
                "%d SizedAtAdmission Event(s) not queued: over %d distinct ones since the "
                "last pass (the request-change counter counted them all)",
                dropped,
                MAX_QUEUED_ADMISSION_EVENTS,
            )
        return list(out.values())

    def _evict(self, action: EvictPod, result: ActionResult) -> list[EmitEvent]:
        outcome = outcome_of(result.code, result.ok)
        self.metrics.evictions.labels(action.target, outcome).inc()
        self._log("eviction", action, result, eviction_reason=action.reason)
        if result.code == 429:
            return []  # the planner reports the deferral ("EvictionDeferred")
        return self._events(
            action.target,
            action.namespace,
            action.name,
            ("Evicted", f"evicted ({action.reason or 'resources'}); its controller recreates it")
            if result.ok
            else (
                "EvictionFailed",
                f"eviction failed ({result.code} {result.reason}): {result.message}",
            ),
            result.ok,
        )

    def _scale(self, action: PatchScale, result: ActionResult) -> list[EmitEvent]:
        self._log("scale", action, result, replicas=action.replicas)
        return self._workload_events(
            action,
            ("Scaled", f"{action.kind}/{action.name} scaled to {action.replicas} replicas")
            if result.ok
            else (
                "ScaleFailed",
                f"scale of {action.kind}/{action.name} to {action.replicas} failed "
                f"({result.code}): {result.message}",
            ),
            result.ok,
        )

    def _restart(self, action: RestartWorkload, result: ActionResult) -> list[EmitEvent]:
        self._log("restart", action, result, restart_reason=action.reason)
        return self._workload_events(
            action,
            ("WorkloadRestarted", f"{action.kind}/{action.name} restarted ({action.reason})")
            if result.ok
            else (
                "RestartFailed",
                f"restart of {action.kind}/{action.name} failed ({result.code}): {result.message}",
            ),
            result.ok,
        )

    @staticmethod
    def _workload_events(
        action: PatchScale | RestartWorkload, what: tuple[str, str], ok: bool
    ) -> list[EmitEvent]:
        """The outcome Event on the workload, and the same on its target if it has one."""
        reason, msg = what
        kind_type = "Normal" if ok else "Warning"
        events = [EmitEvent(action.namespace, action.kind, action.name, reason, msg, kind_type)]
        ns, name = _split(action.target)
        if name:
            events.append(EmitEvent(ns, "AIScaleTarget", name, reason, msg, kind_type))
        return events

    @staticmethod
    def _events(
        target: str,
        namespace: str,
        pod: str,
        what: tuple[str, str],
        ok: bool,
        uid: str = "",
        target_kind: str = "AIScaleTarget",
    ) -> list[EmitEvent]:
        reason, message = what
        type_ = "Normal" if ok else "Warning"
        events = [EmitEvent(namespace, "Pod", pod, reason, message, type_, uid)]
        if target:
            tns, tname = _split(target)
            events.append(
                EmitEvent(tns, target_kind, tname, reason, f"pod {pod}: {message}", type_)
            )
        return events

    def _status(self, action: WriteTargetStatus) -> None:
        if action.kind != "AIScaleTarget":
            return
        key = f"{action.namespace}/{action.name}"
        status = action.status
        if "pods_stalled" in status:
            self.metrics.stalled.labels(key).set(int(status.get("pods_stalled") or 0))
        breaker = status.get("circuit_breaker")
        if isinstance(breaker, dict) and "state" in breaker:
            self.metrics.breaker.labels(key).set(0 if breaker["state"] == "closed" else 1)
        suggestion = status.get("vertical_suggestion")
        if isinstance(suggestion, dict):
            self.set_recommendation(key, suggestion.get("containers") or [])
        for entry in status.get("shadow") or []:
            if not isinstance(entry, dict):
                continue
            for resource, score in (entry.get("score") or {}).items():
                for metric, value in (score or {}).items():
                    if isinstance(value, int | float):
                        self.metrics.shadow_score.labels(
                            key, str(entry.get("name")), resource, metric
                        ).set(float(value))

    def set_recommendation(self, target: str, containers: list[dict[str, Any]]) -> None:
        """Recommendation gauges from status.vertical_suggestion.containers (quantities)."""
        for entry in containers:
            name = entry.get("name", "*")
            for kind, section in (("request", "requests"), ("limit", "limits")):
                for resource, raw in (entry.get(section) or {}).items():
                    try:
                        amount = raw if isinstance(raw, int) else to_canonical(resource, raw)
                    except (QuantityError, TypeError, ValueError):
                        continue
                    self.metrics.recommendation.labels(target, name, resource, kind).set(
                        base_units(resource, amount)
                    )

    # ------------------------------------------------------------------ cluster
    def pending(self, demand: PendingDemand) -> None:
        """The pass's pending upsize demand (`cluster.pending`) into its two gauges. A
        pool and resource (or cause) the pass no longer has goes to 0 for one pass, then
        is removed: a scrape sees the demand end, and no pool stays exported for ever."""
        values: dict[tuple[str, str, str], float] = {}
        for (pool, resource), amount in demand.by_pool.items():
            values[("demand", pool, resource)] = base_units(resource, amount)
        for (pool, cause), count in demand.pods_by_pool.items():
            values[("pods", pool, cause)] = float(count)
        for key, before in self._pending_last.items():
            if key not in values and before != 0:
                values[key] = 0.0
        gauges = {
            "demand": self.metrics.pending_upsize_demand,
            "pods": self.metrics.pending_upsize_pods,
        }
        for kind, a, b in set(self._pending_last) - set(values):
            gauges[kind].remove(a, b)
        for (kind, a, b), value in values.items():
            gauges[kind].labels(a, b).set(value)
        self._pending_last = values

    def observe(self, snapshot: ClusterSnapshot) -> list[EmitEvent]:
        """Node charge gaps and OOM kills from the current snapshot. Returns OOM Events."""
        for node in snapshot.nodes:
            gaps: dict[str, int] = {}
            for pod in snapshot.pods_on_node(node):
                for r, v in charge_gap(pod).items():
                    gaps[r] = gaps.get(r, 0) + v
            for resource in COMPUTE_RESOURCES:
                gap = gaps.get(resource, 0)
                self.metrics.node_charge_gap.labels(node, resource).set(base_units(resource, gap))
        events: list[EmitEvent] = []
        for target, pods in pods_by_target(snapshot).items():
            for pod in pods:
                for status in pod.container_statuses:
                    if status.last_termination_reason != OOM_KILLED:
                        continue
                    seen_key = (pod.uid or pod.key, status.name)
                    if self._oom_seen.get(seen_key, -1) >= status.restart_count:
                        continue
                    self._oom_seen[seen_key] = status.restart_count
                    self.metrics.oom_kills.labels(target, status.name).inc()
                    self.new_ooms.append(
                        (pod, status.name, status.last_termination_time or snapshot.now)
                    )
                    events.append(
                        EmitEvent(
                            pod.namespace,
                            "Pod",
                            pod.name,
                            "OOMKilled",
                            f"container {status.name} was OOM-killed "
                            f"(restart {status.restart_count})",
                            "Warning",
                            pod.uid,
                        )
                    )
        return events

    def set_provisioning(self, target: str, resource: str, requested: float, used: float) -> None:
        """requests / usage for a target (both in the same unit); skipped without usage."""
        if used > 0:
            self.metrics.provisioning.labels(target, resource).set(requested / used)
