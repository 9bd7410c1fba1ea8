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
- a = u x (1 + `BAND_SHARE` x tolerance): the utilisation aimed at, half way into the
  band where the HPA proposes no change;
- replicas N = the HPA's own count at F with the template's per-pod request R0:
  ceil(F / (R0 x a)), within minReplicas / maxReplicas; the count published last is kept
  while its request stays within `REQUEST_DRIFT` of R0 (damping: the floor does not churn);
- per-pod request R = F / (N x a), within the containers' bounds and at least
  min(R0, P / (maxReplicas x u)) for the day's peak total P (a burst after a quiet
  forecast still fits within maxReplicas); if a bound clamps it, N is recomputed at the
  clamped R (within min/max).

At the forecast load the HPA's utilisation is then F / (N x R) = a, inside its tolerance:
it settles at N instead of chasing the request, and N x R = F / a covers the forecast with
the HPA's own headroom. Nothing in the pair reads the HPA's current count or the pods'
current request, so there is no loop to run away. R < R0 where the HPA cannot act: at
minReplicas (F / (min x a) < R0), in the band and in the rounding of the ceil; R > R0
when a kept count carries a rising forecast (up to `REQUEST_DRIFT`) and at maxReplicas,
where the HPA can add no pod. For a target average value V the request is not in the
HPA's arithmetic: N = ceil(F / V) and R = F / N (each pod's share of the forecast).

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


HPA_TOLERANCE = 0.1
"""The HPA controller's default tolerance: a usage ratio within 10% of 1 proposes no
change (`--horizontal-pod-autoscaler-tolerance`)."""
BAND_SHARE = 0.5
"""How far into the HPA's tolerance band the pair puts its utilisation at the forecast:
u x (1 + 0.5 x 10%). The HPA proposes no change anywhere in the band, so a pair aimed at u
itself pays for the lower half of the band for nothing; aimed at the band's upper edge, any
minute above the forecast would scale the HPA out. Half way keeps 5% of the forecast as
margin before the HPA acts (measured in docs/horizontal.md)."""
REQUEST_DRIFT = 0.25
"""How far (either way) the per-pod request may move from the template's while the
published replica count is kept: inside it, a new forecast moves the request (an in-place
resize) rather than the replicas, so the floor does not churn with every decision. Below it
only at minReplicas, where the HPA cannot act (the saving there)."""


def coordinate(
    hpa: HorizontalPodAutoscaler,
    forecast_total: float,
    template_request: int,
    *,
    lower: int | None = None,
    upper: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    peak: float | None = None,
    previous: Pair | None = None,
) -> Pair | None:
    """The (replicas, per-pod request) pair for a forecast total (canonical units; see the
    module's notes). `lower` / `upper`: the summed bounds of the pod's containers;
    `min_replicas` / `max_replicas`: the target's own bounds within the HPA's; `peak`: the
    workload's peak total of the last day (the request never drops below what carries it
    within maxReplicas at target); `previous`: the pair published last (its count is kept
    while the request stays within `REQUEST_DRIFT` of the template's)."""
    metric = coordinated_metric(hpa)
    if metric is None or template_request <= 0:
        return None
    lo = max(hpa.min_replicas, min_replicas or 0)
    hi = min(hpa.max_replicas, max_replicas) if max_replicas is not None else hpa.max_replicas
    hi = max(hi, lo)
    f = max(float(forecast_total), 0.0)
    if metric.target_utilization is None:
        value = float(metric.target_average_value or 0)
        n = predict_replicas(f, value, min_replicas=lo, max_replicas=hi)
        request = _clamp(_round_up(f / n), lower, upper)
        return Pair(n, request, f"averageValue target: each of {n} pods carries its share")
    u = metric.target_utilization / 100.0
    aim = u * (1.0 + BAND_SHARE * HPA_TOLERANCE)
    n = predict_replicas(f, template_request * aim, min_replicas=lo, max_replicas=hi)
    kept = (
        previous is not None
        and previous.replicas != n
        and _keeps(previous.replicas, f, aim, template_request, lo, hi)
    )
    if previous is not None and kept:
        n = previous.replicas
    want = _round_up(f / (n * aim))
    # The day's peak must fit within maxReplicas at target: a request lowered for a quiet
    # forecast would otherwise let a burst drive the HPA to maxReplicas at that request.
    # Never above the template's: where even that does not fit, the HPA alone would sit at
    # maxReplicas too.
    fits = 0
    if peak is not None and peak > 0:
        fits = min(_round_up(peak / (hi * u)), template_request)
    floor = max(lower or 0, fits)
    request = _clamp(want, floor or None, upper)
    if request != want:  # a bound moved the request: the HPA's count at it
        n = predict_replicas(f, request * aim, min_replicas=lo, max_replicas=hi)
        if request > want and fits > (lower or 0):
            why = f"request held so the day's peak fits within maxReplicas {hi} at target"
        else:
            why = f"request held at its {'lower' if request > want else 'upper'} bound"
    elif n == lo and lo > 0 and f < lo * template_request * aim:
        why = f"at minReplicas {lo} the template's request leaves the HPA below target"
    elif n == hi:
        why = f"at maxReplicas {hi}: the request carries what more replicas cannot"
    elif kept:
        why = f"{n} replicas kept, the request within {REQUEST_DRIFT:.0%} of the template's"
    else:
        why = "replicas as the HPA would run them at the forecast"
    util = f / (n * request) * 100.0 if request else 0.0
    return Pair(
        n,
        request,
        f"{why}; forecast utilisation {util:.0f}% (target {metric.target_utilization}%, "
        f"no HPA change up to {metric.target_utilization * (1 + HPA_TOLERANCE):.0f}%)",
    )


def _keeps(replicas: int, f: float, aim: float, template: int, lo: int, hi: int) -> bool:
    """Whether `replicas` still serve the forecast `f` with a request within
    `REQUEST_DRIFT` of the template's (any lower request at minReplicas, any higher one
    at maxReplicas)."""
    if not lo <= replicas <= hi or replicas <= 0:
        return False
    r = f / (replicas * aim)
    if r > template * (1.0 + REQUEST_DRIFT) and replicas < hi:
        return False
    return r >= template * (1.0 - REQUEST_DRIFT) or replicas == lo


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
