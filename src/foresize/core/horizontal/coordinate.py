"""The coordinated mode's pass (pure; issue 27 parts 1 and 4; `cluster.coordination` holds
the arithmetic and docs/horizontal.md the argument).

For a target in vertical autonomous mode with `hpa_resource_policy: coordinate` whose
workload has an HPA Foresize can coordinate with, every fresh vertical suggestion is
rewritten before it is published:

- the HPA's resource gets the coordinated per-pod request R (split over the containers in
  proportion to their own suggestions; a limit of that resource keeps its ratio), so the
  disruption worker resizes running pods to it and the pod webhook admits new ones at it;
- `status.horizontal_suggestion.replicas` gets the coordinated count N, the replica floor
  the `*/scale` webhook keeps every HPA write at or above (so the floor and the requests
  are one decision: ceil(F / (R x u)) = N); the workload is scaled up to it at once, no
  faster than the HPA's `behavior.scaleUp` would (`scale_up_allowance`; Disabled: never);
  it is never scaled down here, the HPA does that with its own stabilization;
- `status.coordination` records the pair, the forecast, the HPA and why; an Event
  `Coordinated` says so whenever the pair changes.

The published count is kept while its request stays near the template's (the damping of
`cluster.coordination.coordinate`); at an unchanged count a move of R smaller than the
target's `scaling_behavior` threshold keeps the published R. The workload's peak total
of the last day (`peaks`) keeps R high enough for that peak to fit within maxReplicas.
Without a forecast of the workload's total yet, the HPA's resource is taken out of the
suggestion (nothing uncoordinated is applied) and status says it waits. An HPA it cannot
coordinate with (`coordination_problem`) leaves the resource alone as under `leave`, and
status says what was ignored and why. The HPA object is never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from foresize.core.api.fields import format_timestamp
from foresize.core.api.quantity import format_quantity, to_canonical
from foresize.core.cluster.actions import Action, EmitEvent, PatchScale, WriteTargetStatus
from foresize.core.cluster.coordination import (
    Pair,
    coordinate,
    coordination_problem,
    describe_hpa,
    scale_up_allowance,
    split_request,
)
from foresize.core.cluster.model import HorizontalPodAutoscaler, Workload
from foresize.core.cluster.qos import effective_requests
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.recommend.suggestions import entries_uid

COORDINATED_EVENT = "Coordinated"


@dataclass(slots=True)
class CoordinationPlan:
    actions: list[Action] = field(default_factory=list)
    pairs: dict[str, Pair] = field(default_factory=dict)  # target key -> its pair


def plan_coordination(
    snapshot: ClusterSnapshot,
    writes: list[WriteTargetStatus],
    forecasts: Mapping[str, Mapping[str, float]],
    now: float,
    previous: Mapping[str, Pair],
    *,
    horizon: float = 900.0,
    peaks: Mapping[str, Mapping[str, float]] | None = None,
) -> CoordinationPlan:
    """Rewrites, in place, the status `writes` of coordinating targets (see the module's
    notes); returns the scale-ups, events and the pairs decided. `forecasts`: target key
    -> resource -> the central forecast (median) of the workload's total usage over the
    horizon (canonical); `peaks`: target key -> resource -> the workload's peak total of
    the last day (canonical; `horizontal.coming.peak_totals`)."""
    plan = CoordinationPlan()
    by_key: dict[str, TargetView] = {}
    for obj in snapshot.targets:
        try:
            read = target_view(obj)
        except Exception:  # an unreadable spec: the worker reports it
            continue
        if read.coordinates and not read.deleting:
            by_key[read.key] = read
    for write in writes:
        key = f"{write.namespace}/{write.name}"
        found = by_key.get(key)
        if found is None or write.kind != "AIScaleTarget":
            continue
        view = found
        wl = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
        if wl is None:
            orphan = snapshot.hpa_naming(view.namespace, view.ref_kind, view.ref_name)
            if orphan is not None:  # the worker reports the missing workload itself
                write.status["coordination"] = _record(
                    "Ignored",
                    orphan,
                    now,
                    reason=f"{describe_hpa(orphan)} names {view.ref_kind} "
                    f"{view.namespace}/{view.ref_name}, which does not exist: nothing is "
                    "coordinated",
                )
            continue
        hpa = snapshot.hpa_for(wl)
        if hpa is None:
            continue
        claim = snapshot.vertical_claim_for(wl.kind, wl.namespace, wl.name)
        if claim is not None:  # refuse double control (the vertical guard's condition)
            write.status["coordination"] = _record(
                "Ignored",
                hpa,
                now,
                reason=f"{claim.describe()} also sizes the workload: no request or replica "
                "floor is set",
            )
            continue
        problem = coordination_problem(hpa)
        if problem is not None:
            write.status["coordination"] = _record(
                "Ignored", hpa, now, reason=f"{problem}; its resource's request is left alone"
            )
            continue
        pair = _decide(
            view, wl, hpa, forecasts.get(key, {}), previous.get(key), (peaks or {}).get(key, {})
        )
        resource = hpa.metrics[0].resource or ""
        if pair is None:
            _drop_resource(write.status, resource)
            write.status["coordination"] = _record(
                "Waiting",
                hpa,
                now,
                reason=f"no forecast of the workload's total {resource} yet; its request "
                "is left as it is",
            )
            continue
        _set_resource(write.status, resource, pair, wl)
        forecast = forecasts[key][resource]
        plan.pairs[key] = pair
        write.status["coordination"] = _record(
            "Coordinated",
            hpa,
            now,
            reason=pair.reason,
            resource=resource,
            replicas=pair.replicas,
            request=format_quantity(resource, pair.request),
            forecast_total=format_quantity(resource, int(round(forecast))),
        )
        prev = previous.get(key)
        if prev is None or (prev.replicas, prev.request) != (pair.replicas, pair.request):
            plan.actions.append(
                EmitEvent(
                    view.namespace,
                    "AIScaleTarget",
                    view.name,
                    COORDINATED_EVENT,
                    f"{pair.replicas} replicas x {resource} "
                    f"{format_quantity(resource, pair.request)} per pod with "
                    f"{describe_hpa(hpa)} (forecast total "
                    f"{format_quantity(resource, int(round(forecast)))}): {pair.reason}",
                    uid=view.uid,
                )
            )
        write.status["horizontal_suggestion"] = {
            "uid": f"{key}@{int(now)}",
            "replicas": pair.replicas,
            "forecast_window": {
                "start": format_timestamp(now),
                "end": format_timestamp(now + horizon),
            },
            "created_at": format_timestamp(now),
        }
        floor = min(pair.replicas, scale_up_allowance(wl.replicas, hpa.scale_up))
        if wl.replicas < floor:
            plan.actions.append(PatchScale(wl.namespace, wl.kind, wl.name, floor, target=key))
    return plan


def coordinating_targets(snapshot: ClusterSnapshot) -> dict[tuple[str, str, str], TargetView]:
    """(namespace, kind, name) of a workload -> the target coordinating it (readable, not
    being deleted)."""
    out: dict[tuple[str, str, str], TargetView] = {}
    for obj in snapshot.targets:
        try:
            view = target_view(obj)
        except Exception:  # an unreadable spec: the worker reports it
            continue
        if view.coordinates and not view.deleting:
            out[(view.namespace, view.ref_kind, view.ref_name)] = view
    return out


def coordinated_replicas_at(
    snapshot: ClusterSnapshot,
    wl: Workload,
    hpa: HorizontalPodAutoscaler,
    load: Mapping[str, float],
    targets: Mapping[tuple[str, str, str], TargetView] | None = None,
) -> int | None:
    """The count the coordinated pair takes at `load` (resource -> the workload's total,
    canonical) if a target coordinates `wl` with `hpa` (None otherwise): the HPA's count
    there, since the pair puts its utilisation inside its band. The capacity guard keeps
    room for it (`reconcile.coming_pods`): the request published now moves with each
    forecast (up to `REQUEST_DRIFT` above the template's while a count is kept), so the
    HPA's count at today's request understates its count at the peak, when the pair has
    lowered the request again. `targets`: `coordinating_targets(snapshot)`, when the
    caller asks for many workloads."""
    if coordination_problem(hpa) is not None:
        return None
    if snapshot.vertical_claim_for(wl.kind, wl.namespace, wl.name) is not None:
        return None
    found = (targets if targets is not None else coordinating_targets(snapshot)).get(
        (wl.namespace, wl.kind, wl.name)
    )
    if found is None:
        return None
    pair = _decide(found, wl, hpa, load, None, load)
    return pair.replicas if pair is not None else None


def _decide(
    view: TargetView,
    wl: Workload,
    hpa: HorizontalPodAutoscaler,
    forecast: Mapping[str, float],
    prev: Pair | None,
    peak: Mapping[str, float],
) -> Pair | None:
    resource = hpa.metrics[0].resource or ""
    if resource not in forecast:
        return None
    template = sum(effective_requests(c).get(resource, 0) for c in wl.template.containers)
    lower = upper = 0
    has_lower = has_upper = True
    for c in wl.template.containers:
        policy = view.policy_for(c.name)
        bounds = policy.for_resource(resource) if policy is not None else None
        if bounds is None or bounds.lower is None:
            has_lower = False
        else:
            lower += bounds.lower
        if bounds is None or bounds.upper is None:
            has_upper = False
        else:
            upper += bounds.upper
    pair = coordinate(
        hpa,
        forecast[resource],
        template,
        lower=lower if has_lower else None,
        upper=upper if has_upper else None,
        min_replicas=view.min_replicas,
        max_replicas=view.max_replicas,
        peak=peak.get(resource),
        previous=prev,
    )
    if pair is None or prev is None or pair.replicas != prev.replicas:
        return pair
    # The same count: a small move of the request is not worth a resize of every pod.
    rule = view.scale_up if pair.request > prev.request else view.scale_down
    if not rule.significant(resource, prev.request, pair.request):
        return Pair(pair.replicas, prev.request, pair.reason + " (request change below threshold)")
    return pair


def _entries(status: dict[str, Any]) -> list[dict[str, Any]]:
    sugg = status.get("vertical_suggestion")
    return list(sugg.get("containers") or []) if isinstance(sugg, dict) else []


def _drop_resource(status: dict[str, Any], resource: str) -> None:
    """Take the HPA's resource out of the suggestion: nothing uncoordinated is applied."""
    entries = _entries(status)
    for e in entries:
        for part in ("requests", "limits"):
            if isinstance(e.get(part), dict):
                e[part].pop(resource, None)
    if entries:
        status["vertical_suggestion"]["uid"] = entries_uid(entries)


def _set_resource(status: dict[str, Any], resource: str, pair: Pair, wl: Workload) -> None:
    """The coordinated request of `resource`, split over the suggestion's containers."""
    entries = _entries(status)
    if not entries:
        return
    template = {c.name: effective_requests(c).get(resource, 0) for c in wl.template.containers}
    weights: dict[str, int] = {}
    for e in entries:
        value = (e.get("requests") or {}).get(resource)
        weights[e["name"]] = (
            to_canonical(resource, value) if value is not None else template.get(e["name"], 0)
        )
    parts = split_request(pair.request, weights)
    for e in entries:
        new = parts.get(e["name"])
        if new is None or new <= 0:
            continue
        requests = dict(e.get("requests") or {})
        old = requests.get(resource)
        requests[resource] = format_quantity(resource, new)
        e["requests"] = requests
        limits = dict(e.get("limits") or {})
        if resource in limits and old is not None:
            ratio = to_canonical(resource, limits[resource]) / max(to_canonical(resource, old), 1)
            limits[resource] = format_quantity(resource, int(round(new * ratio)))
            e["limits"] = limits
    status["vertical_suggestion"]["uid"] = entries_uid(entries)


def _record(
    state: str, hpa: HorizontalPodAutoscaler, now: float, *, reason: str, **values: str | int
) -> dict[str, Any]:
    return {
        "state": state,
        "hpa": describe_hpa(hpa),
        **values,
        "reason": reason,
        "decided_at": format_timestamp(now),
    }
