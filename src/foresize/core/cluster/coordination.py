"""Coordinated vertical and horizontal sizing on the HPA's own metric (issue 27 part 1;
`hpa_resource_policy: coordinate`, docs/horizontal.md).

An HPA on the utilisation of a resource wants desired = ceil(N x usage/N / (request x u))
= ceil(F / (request x u)) replicas for a total usage F, so whatever the per-pod request,
at equilibrium it holds total requests near F / u. A vertical autoscaler that sizes the
request from per-pod usage fights it (lower request -> more replicas -> lower per-pod
usage -> lower request ... until maxReplicas). Coordination breaks the loop by deciding
the pair from the forecast total alone:

- F is the central (median) forecast of the total: the HPA's own headroom (1/u) covers
  the bursts above it, so a high quantile on top would pay for that headroom twice;
- replicas N = the HPA's own count at F with the template's per-pod request R0:
  ceil(F / (R0 x u)), within minReplicas / maxReplicas;
- per-pod request R = F / (N x u), within the containers' bounds; if a bound clamps it, N
  is recomputed at the clamped R (within min/max).

At the forecast load the HPA's utilisation is then F / (N x R) = u, its target: it
settles at N instead of chasing the request, and N x R = F / u covers the forecast with
the HPA's own headroom (1/u). Nothing in the pair reads the HPA's current count or the
pods' current request, so there is no loop to run away. R < R0 where the HPA cannot act:
at minReplicas (F / (min x u) < R0) and in the rounding of the ceil; R > R0 only at
maxReplicas, where the HPA can add no pod. For a target average value V the request is
not in the HPA's arithmetic: N = ceil(F / V) and R = F / N (each pod's share of the
forecast).

Coordination needs exactly one metric, of type Resource, on cpu or memory, with a
utilisation or average-value target, and minReplicas <= maxReplicas; anything else is
left alone (`coordination_problem` says why) and the HPA's resource is treated as under
`leave`. The HPA itself is never written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from foresize.core.cluster.model import HorizontalPodAutoscaler, HPAMetric, HPAScalingRules
from foresize.core.cluster.replicas import predict_replicas

COORDINATED_RESOURCES = ("cpu", "memory")
KEDA_HPA_PREFIX = "keda-hpa-"
"""KEDA names the HPA it creates for a ScaledObject `keda-hpa-<scaledobject>`."""


def describe_hpa(hpa: HorizontalPodAutoscaler) -> str:
    """The object a user wrote: the ScaledObject behind a KEDA HPA, or the HPA."""
    if hpa.name.startswith(KEDA_HPA_PREFIX):
        return f"ScaledObject {hpa.namespace}/{hpa.name[len(KEDA_HPA_PREFIX) :]}"
    return f"HorizontalPodAutoscaler {hpa.namespace}/{hpa.name}"


def coordination_problem(hpa: HorizontalPodAutoscaler) -> str | None:
    """Why the HPA cannot be coordinated with (None: it can)."""
    what = describe_hpa(hpa)
    if hpa.min_replicas > hpa.max_replicas:
        return f"{what}: minReplicas {hpa.min_replicas} > maxReplicas {hpa.max_replicas}"
    if len(hpa.metrics) != 1:
        noun = "triggers" if what.startswith("ScaledObject") else "metrics"
        return (
            f"{what} has {len(hpa.metrics)} {noun}: its replicas may follow any of them, so "
            "no request can hold its utilisation at target"
        )
    (m,) = hpa.metrics
    if m.type == "ContainerResource":
        return f"{what} scales on one container's {m.resource}; only pod metrics are coordinated"
    if m.type != "Resource":
        return f"{what} scales on a {m.type or 'unknown'} metric, which Foresize cannot read"
    if m.resource not in COORDINATED_RESOURCES:
        return f"{what} scales on resource {m.resource!r}, which Foresize does not size"
    if m.target_utilization is None and not m.target_average_value:
        return f"{what} has no averageUtilization or averageValue target for {m.resource}"
    if m.target_utilization is not None and m.target_utilization <= 0:
        return f"{what}: averageUtilization {m.target_utilization} is not positive"
    return None


def coordinated_metric(hpa: HorizontalPodAutoscaler) -> HPAMetric | None:
    """The HPA's one metric coordination works on (None: `coordination_problem`)."""
    return None if coordination_problem(hpa) is not None else hpa.metrics[0]


@dataclass(frozen=True, slots=True)
class Pair:
    """The coordinated decision: `replicas` pods of `request` each (canonical units)."""

    replicas: int
    request: int
    reason: str


def coordinate(
    hpa: HorizontalPodAutoscaler,
    forecast_total: float,
    template_request: int,
    *,
    lower: int | None = None,
    upper: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
) -> Pair | None:
    """The (replicas, per-pod request) pair for a forecast total (canonical units; see the
    module's notes). `lower` / `upper`: the summed bounds of the pod's containers;
    `min_replicas` / `max_replicas`: the target's own bounds within the HPA's."""
    metric = coordinated_metric(hpa)
    if metric is None or template_request <= 0:
        return None
    lo = max(hpa.min_replicas, min_replicas or 0)
    hi = min(hpa.max_replicas, max_replicas) if max_replicas is not None else hpa.max_replicas
    hi = max(hi, lo)
    f = max(float(forecast_total), 0.0)
    if metric.target_utilization is not None:
        u = metric.target_utilization / 100.0
        n = predict_replicas(f, template_request * u, min_replicas=lo, max_replicas=hi)
        want = _round_up(f / (n * u))
        request = _clamp(want, lower, upper)
        if request != want:  # a bound moved the request: the HPA's count at it
            n = predict_replicas(f, request * u, min_replicas=lo, max_replicas=hi)
            why = f"request held at its {'lower' if request > want else 'upper'} bound"
        elif n == lo and lo > 0 and f < lo * template_request * u:
            why = f"at minReplicas {lo} the template's request leaves the HPA below target"
        elif n == hi:
            why = f"at maxReplicas {hi}: the request carries what more replicas cannot"
        else:
            why = "replicas as the HPA would run them at the forecast, request at its target"
        util = f / (n * request) * 100.0 if request else 0.0
        return Pair(
            n,
            request,
            f"{why}; forecast utilisation {util:.0f}% (target {metric.target_utilization}%)",
        )
    value = float(metric.target_average_value or 0)
    n = predict_replicas(f, value, min_replicas=lo, max_replicas=hi)
    request = _clamp(_round_up(f / n), lower, upper)
    return Pair(n, request, f"averageValue target: each of {n} pods carries its share")


HPA_TOLERANCE = 0.1
"""The HPA controller's default tolerance: a usage ratio within 10% of 1 proposes no
change (`--horizontal-pod-autoscaler-tolerance`)."""


def still_holds(pair: Pair, hpa: HorizontalPodAutoscaler, forecast_total: float) -> bool:
    """Whether a published pair still does its job for a new forecast: the HPA would
    propose no change at the forecast load (its ratio within the tolerance). Re-deciding
    then would only move replicas and requests the HPA itself would leave alone."""
    metric = coordinated_metric(hpa)
    if metric is None or pair.request <= 0 or pair.replicas <= 0:
        return False
    if not hpa.min_replicas <= pair.replicas <= hpa.max_replicas:
        return False
    if metric.target_utilization is not None:
        target = pair.replicas * pair.request * metric.target_utilization / 100.0
    else:
        target = pair.replicas * float(metric.target_average_value or 0)
    if target <= 0:
        return False
    return abs(max(forecast_total, 0.0) / target - 1.0) <= HPA_TOLERANCE


def _round_up(v: float) -> int:
    # Float noise first: 300.0000001 millicores is 300m.
    return max(int(math.ceil(round(v, 6))), 1)


def _clamp(v: int, lower: int | None, upper: int | None) -> int:
    if lower is not None and v < lower:
        v = lower
    if upper is not None and v > upper:
        v = upper
    return v


# behavior.scaleUp when the HPA does not set one (the API server's
# GenerateHPAScaleUpRules): 100% or 4 pods per 15 s, whichever is more.
DEFAULT_SCALE_UP_POLICIES = (("Percent", 100), ("Pods", 4))


def scale_up_allowance(current: int, rules: HPAScalingRules | None) -> int:
    """The most replicas the HPA's scale-up behaviour lets one step reach from `current`
    (a replica floor raised ahead of a peak goes no faster than the HPA itself would):
    per policy current + pods or ceil(current x (1 + percent)), the highest (selectPolicy
    Max, the default) or the lowest (Min); Disabled allows no raise."""
    if rules is not None and rules.select_policy == "Disabled":
        return current
    if rules is not None and rules.policies:
        policies = [(p.type, p.value) for p in rules.policies]
    else:
        policies = list(DEFAULT_SCALE_UP_POLICIES)
    sizes = [
        current + value if kind == "Pods" else math.ceil(current * (1 + value / 100.0))
        for kind, value in policies
    ]
    pick = min if rules is not None and rules.select_policy == "Min" else max
    return max(pick(sizes), current)


def split_request(request: int, per_container: Mapping[str, int]) -> dict[str, int]:
    """A pod request split over its containers in proportion to `per_container` (their
    suggested requests), rounded up so the parts sum to at least `request`."""
    total = sum(per_container.values())
    if total <= 0:
        return {}
    return {name: _round_up(request * v / total) for name, v in per_container.items()}
