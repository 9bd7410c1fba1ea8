"""The horizontal pass (pure): from forecasts of the HPA's metrics to predicted replicas,
a scale-up ahead of a forecast peak, and the prediction published for the */scale webhook.

For each horizontally autonomous AIScaleTarget whose workload has an HPA:
- per HPA Resource metric with a target utilisation, one replica may carry
  (sum of the template's requests of that resource) x utilisation / 100;
- predicted = ceil(forecast total of that resource over the horizon / per-replica
  target), the highest over the metrics (as the HPA takes the highest), rounded by
  multipleOf / allowedReplicas and kept within the target's bounds (else the HPA's);
- the workload is scaled up at once when it runs fewer replicas than predicted
  (`PatchScale`); it is never scaled down here: the HPA does that, and the */scale
  webhook keeps every HPA write at or above the prediction;
- the prediction goes to `status.horizontal_suggestion` (what the webhook reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from foresize.core.api.types import format_timestamp
from foresize.core.cluster.actions import Action, PatchScale, WriteTargetStatus
from foresize.core.cluster.model import HorizontalPodAutoscaler, Workload
from foresize.core.cluster.qos import effective_requests
from foresize.core.cluster.replicas import predict_replicas
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView, target_view


@dataclass(slots=True)
class HorizontalPlan:
    actions: list[Action] = field(default_factory=list)
    predictions: dict[str, int] = field(default_factory=dict)  # target key -> replicas


def per_replica_capacity(
    hpa: HorizontalPodAutoscaler,
    workload: Workload,
    pod_requests: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """resource -> what one replica may carry before the HPA scales out (canonical units).
    A utilisation target is a share of the pod's request: `pod_requests` (the pod's
    summed container requests) where given, else the template's."""
    out: dict[str, float] = {}
    for m in hpa.metrics:
        if m.type != "Resource" or not m.resource:
            continue
        if m.target_utilization is not None:
            if pod_requests is not None:
                request = pod_requests.get(m.resource, 0)
            else:
                request = sum(
                    effective_requests(c).get(m.resource, 0) for c in workload.template.containers
                )
            if request > 0:
                out[m.resource] = request * m.target_utilization / 100.0
        elif m.target_average_value is not None and m.target_average_value > 0:
            out[m.resource] = float(m.target_average_value)
    return out


def predicted_replicas(
    target: TargetView,
    hpa: HorizontalPodAutoscaler,
    workload: Workload,
    forecast: Mapping[str, float],
) -> int | None:
    """The replicas the forecast needs (None when no metric has a forecast)."""
    capacity = per_replica_capacity(hpa, workload)
    best: int | None = None
    lo = target.min_replicas if target.min_replicas is not None else hpa.min_replicas
    hi = target.max_replicas if target.max_replicas is not None else hpa.max_replicas
    for resource, per_replica in capacity.items():
        if resource not in forecast:
            continue
        n = predict_replicas(
            forecast[resource],
            per_replica,
            min_replicas=lo,
            max_replicas=hi,
            multiple_of=target.multiple_of,
            allowed=target.allowed_replicas,
        )
        best = n if best is None else max(best, n)
    return best


def plan_horizontal(
    snapshot: ClusterSnapshot,
    forecasts: Mapping[str, Mapping[str, float]],
    now: float,
    *,
    horizon: float = 900.0,
) -> HorizontalPlan:
    """`forecasts`: target key ("namespace/name") -> resource -> forecast total usage of
    the workload over the next `horizon` (cpu millicores, memory bytes)."""
    plan = HorizontalPlan()
    if snapshot.paused:
        return plan
    for obj in snapshot.targets:
        target = target_view(obj)
        if not target.horizontal_autonomous or target.deleting or target.key not in forecasts:
            continue
        wl = snapshot.workload(target.ref_kind, target.namespace, target.ref_name)
        if wl is None:
            continue
        hpa = snapshot.hpa_for(wl)
        if hpa is None:
            continue
        n = predicted_replicas(target, hpa, wl, forecasts[target.key])
        if n is None:
            continue
        plan.predictions[target.key] = n
        if wl.replicas < n:
            plan.actions.append(PatchScale(wl.namespace, wl.kind, wl.name, n, target=target.key))
        if target.predicted_replicas != n:
            plan.actions.append(
                WriteTargetStatus(
                    target.namespace,
                    target.name,
                    {
                        "horizontal_suggestion": {
                            "uid": f"{target.key}@{int(now)}",
                            "replicas": n,
                            "forecast_window": {
                                "start": format_timestamp(now),
                                "end": format_timestamp(now + horizon),
                            },
                            "created_at": format_timestamp(now),
                        }
                    },
                )
            )
    return plan
