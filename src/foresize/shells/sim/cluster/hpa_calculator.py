"""The HPA's replica calculator, after kubernetes `pkg/controller/podautoscaler`
(`replica_calculator.go`): per-pod metrics and requests in, a proposal out:
`ceil(ready pods x usage / target)` outside the tolerance band, with Pending and
not-yet-Ready pods (CPU) set aside, terminating and Failed pods ignored, and pods without
metrics assumed to damp the move (100% of their request on a scale down, 0% on a scale
up), never letting that assumption reverse the direction. Time is an argument (simulated
seconds); the tests are upstream's own tables. The controller is `hpa.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from foresize.core.api.quantity import CPU

# kube-controller-manager defaults (`--horizontal-pod-autoscaler-*`).
TOLERANCE = 0.1  # a usage ratio within 1 +- 0.1 proposes no change
CPU_INITIALIZATION_PERIOD = 300.0  # a new pod's CPU samples are doubted this long
INITIAL_READINESS_DELAY = 30.0  # a pod unready this soon after start "has never been ready"


class HPAError(Exception):
    """The calculator cannot propose for this metric (upstream returns an error)."""


@dataclass(frozen=True, slots=True)
class PodSample:
    """One pod of the target as the replica calculator lists it. Requests are
    milli-units (millicores; bytes x 1000), as upstream's `MilliValue()`."""

    name: str
    request: int | None  # the pod's request of the resource; None: a container has none
    phase: str = "Running"
    ready: bool | None = True  # the Ready condition's status; None: no condition yet
    ready_changed: float = -math.inf  # lastTransitionTime of the Ready condition
    start_time: float | None = -math.inf  # status.startTime; None: not set
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class PodMetric:
    """One pod's sample from the metrics API (milli-units), when and over what span."""

    value: int
    at: float = 0.0
    window: float = 60.0


@dataclass(frozen=True, slots=True)
class Tolerances:
    """The band of usage ratios that proposes no change (1 - down .. 1 + up)."""

    down: float = TOLERANCE
    up: float = TOLERANCE

    def within(self, ratio: float) -> bool:
        return 1.0 - self.down <= ratio <= 1.0 + self.up


@dataclass(frozen=True, slots=True)
class PodGroups:
    ready: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(
    pods: Sequence[PodSample],
    metrics: dict[str, PodMetric],
    resource: str,
    now: float,
    *,
    cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
    initial_readiness_delay: float = INITIAL_READINESS_DELAY,
) -> PodGroups:
    """Upstream's groupPods: terminating and Failed pods are ignored, Pending ones are
    unready, pods without a sample are missing; for CPU a pod is also unready while its
    samples cannot be trusted yet (within the initialization period: not Ready, or no
    full metric window since it became Ready; after it: unready and never been Ready)."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for p in pods:
        if p.deleting or p.phase == "Failed":
            ignored.add(p.name)
            continue
        if p.phase == "Pending":
            unready.add(p.name)
            continue
        metric = metrics.get(p.name)
        if metric is None:
            missing.add(p.name)
            continue
        if resource == CPU:
            if p.ready is None or p.start_time is None:
                not_ready = True
            elif p.start_time + cpu_initialization_period > now:
                not_ready = (not p.ready) or metric.at < p.ready_changed + metric.window
            else:
                not_ready = (not p.ready) and (
                    p.start_time + initial_readiness_delay > p.ready_changed
                )
            if not_ready:
                unready.add(p.name)
                continue
        ready += 1
    return PodGroups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def utilization_ratio(
    metrics: dict[str, int], requests: dict[str, int], target_utilization: int
) -> tuple[float, int, int]:
    """(usage ratio, utilization percent, average raw value) over pods with both a metric
    and a request. The percentage is an integer (truncated), and the ratio is taken from
    it, as upstream does: 33.3% of a 50% target is a ratio of 0.66, not 0.667."""
    total = req_total = n = 0
    for name, value in metrics.items():
        if name not in requests:
            continue
        total += value
        req_total += requests[name]
        n += 1
    if req_total == 0:
        raise HPAError("no metrics returned matched known pods")
    utilization = total * 100 // req_total
    return utilization / target_utilization, utilization, total // n


def pod_requests(pods: Sequence[PodSample], resource: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        if p.request is None:
            raise HPAError(f"missing request for {resource} in pod {p.name}")
        out[p.name] = p.request
    return out


def _usable(
    pods: Sequence[PodSample],
    metrics: dict[str, PodMetric],
    resource: str,
    now: float,
    periods: tuple[float, float],
) -> tuple[PodGroups, dict[str, int]]:
    """The groups, and the samples of the pods neither ignored nor unready."""
    if not metrics:
        raise HPAError(
            f"unable to get metrics for resource {resource}: "
            "no metrics returned from resource metrics API"
        )
    if not pods:
        raise HPAError("no pods returned by selector while calculating replica count")
    groups = group_pods(
        pods,
        metrics,
        resource,
        now,
        cpu_initialization_period=periods[0],
        initial_readiness_delay=periods[1],
    )
    usable = {
        name: m.value
        for name, m in metrics.items()
        if name not in groups.ignored and name not in groups.unready
    }
    if not usable:
        raise HPAError("did not receive metrics for targeted pods (pods might be unready)")
    return groups, usable


DEFAULT_PERIODS = (CPU_INITIALIZATION_PERIOD, INITIAL_READINESS_DELAY)


def resource_replicas(
    current: int,
    target_utilization: int,
    pods: Sequence[PodSample],
    metrics: dict[str, PodMetric],
    resource: str,
    now: float,
    tolerances: Tolerances = Tolerances(),
    periods: tuple[float, float] = DEFAULT_PERIODS,
) -> tuple[int, int, int]:
    """GetResourceReplicas: (proposed replicas, utilization %, average raw value)."""
    groups, values = _usable(pods, metrics, resource, now, periods)
    requests = pod_requests(pods, resource)
    ratio, utilization, raw = utilization_ratio(values, requests, target_utilization)
    with_unready = bool(groups.unready) and ratio > 1.0
    if not with_unready and not groups.missing:
        if tolerances.within(ratio):
            return current, utilization, raw
        return math.ceil(ratio * groups.ready), utilization, raw
    if groups.missing:
        if ratio < 1.0:
            # A scale down counts missing pods at their whole request (or the target,
            # when it is above 100%): they may be busy.
            fallback = max(100, target_utilization)
            for name in groups.missing:
                values[name] = requests[name] * fallback // 100
        elif ratio > 1.0:
            for name in groups.missing:  # a scale up counts them idle
                values[name] = 0
    if with_unready:
        for name in groups.unready:  # a scale up counts pods not yet Ready as idle
            values[name] = 0
    new_ratio, _, _ = utilization_ratio(values, requests, target_utilization)
    return _damped(current, ratio, new_ratio, len(values), tolerances), utilization, raw


def _damped(current: int, ratio: float, new_ratio: float, n: int, tol: Tolerances) -> int:
    """The proposal after the assumptions for missing and unready pods: none when it
    falls in the band or when the assumptions reverse the direction of the move."""
    if tol.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    proposal = math.ceil(new_ratio * n)
    if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
        return current
    return proposal


def average_value_replicas(
    current: int,
    target_value: int,
    pods: Sequence[PodSample],
    metrics: dict[str, PodMetric],
    resource: str,
    now: float,
    tolerances: Tolerances = Tolerances(),
    periods: tuple[float, float] = DEFAULT_PERIODS,
) -> tuple[int, int]:
    """GetRawResourceReplicas (calcPlainMetricReplicas): a resource's averageValue
    target. Missing pods count at the target on a scale down, at 0 on a scale up."""
    groups, values = _usable(pods, metrics, resource, now, periods)
    usage = sum(values.values()) // len(values)
    ratio = usage / target_value
    with_unready = bool(groups.unready) and ratio > 1.0
    if not with_unready and not groups.missing:
        if tolerances.within(ratio):
            return current, usage
        return math.ceil(ratio * groups.ready), usage
    if groups.missing:
        if ratio < 1.0:
            for name in groups.missing:
                values[name] = target_value
        elif ratio > 1.0:
            for name in groups.missing:
                values[name] = 0
    if with_unready:
        for name in groups.unready:
            values[name] = 0
    new_ratio = (sum(values.values()) // len(values)) / target_value
    return _damped(current, ratio, new_ratio, len(values), tolerances), usage
