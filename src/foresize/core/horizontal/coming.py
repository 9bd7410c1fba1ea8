"""The replicas an HPA is about to add: room the capacity guard keeps free (issue 27 part 3,
seed 004).

An in-place upsize sent ahead of a forecast peak holds its room from then on, until the
recommender lowers it again, which for memory is rarely within the day. If the HPA scales
the workload out at the peak, its new replicas need room the upsizes have taken, and on a
full node the scheduler preempts lower-priority pods of the same application for them
(seed 004's cascade) or leaves them Pending. So the guard keeps free, beside the Pending
pods, the replicas the HPA is forecast to add within `COMING_WINDOW`.

The forecast is the HPA's own arithmetic on the workload's summed usage (the `__total__`
history series): per Resource metric, ceil(peak total / (per-pod request x target
utilisation)) (or / the target average value), the highest over the metrics, within the
HPA's min/max. The peak is the highest 5-minute bucket of the last `COMING_WINDOW`: a
daily-seasonal forecast of the day ahead (yesterday's peak comes again), which is the
window an upsize sent now holds its room over. The coming replicas are that count minus
the replicas the workload asks for now (Pending ones included: they are already in the
scheduler's queue and counted by the guard as Pending pods).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import HorizontalPodAutoscaler, Workload
from foresize.core.cluster.replicas import predict_replicas
from foresize.core.history import TOTAL_CONTAINER, HistoryReader, SeriesKey, merged_window
from foresize.core.horizontal.planner import per_replica_capacity

COMING_WINDOW = 86400.0
"""How far ahead the guard keeps room for an HPA's scale-out: a day, the daily cycle an
upsize sent now lives through (memory suggestions follow the day's peak)."""
COMING_STEP = 300.0
"""The model grid (architecture §3.1): 5-minute buckets, each the maximum of its samples."""
# History stores CPU in cores and memory in bytes; the HPA's arithmetic here is in the
# canonical units of requests (millicores, bytes).
_TO_CANONICAL = {CPU: 1000.0, MEMORY: 1.0}


@dataclass(frozen=True, slots=True)
class ComingReplicas:
    """The HPA's forecast replica count for a workload, and how many it would add."""

    workload: Workload
    hpa: HorizontalPodAutoscaler
    replicas: int

    @property
    def added(self) -> int:
        return max(self.replicas - self.workload.replicas, 0)


def peak_totals(
    history: HistoryReader,
    workload: Workload,
    resources: set[str],
    now: float,
    kinds: Sequence[str] | None = None,
) -> dict[str, float]:
    """resource -> the highest 5-minute bucket of the workload's summed usage over the last
    `COMING_WINDOW`, in canonical units (resources with no sample left out); `kinds`: the
    kinds of history it reads (`history.history_kinds`; None: its own)."""
    key = SeriesKey(workload.namespace, workload.name, TOTAL_CONTAINER, workload.kind)
    length = int(COMING_WINDOW // COMING_STEP)
    out: dict[str, float] = {}
    for resource in sorted(resources & set(_TO_CANONICAL)):
        values = merged_window(
            history, key, kinds or (workload.kind,), resource, now, length, COMING_STEP
        )
        finite = values[np.isfinite(values)]
        if finite.size:
            out[resource] = float(finite.max()) * _TO_CANONICAL[resource]
    return out


def forecast_hpa_replicas(
    hpa: HorizontalPodAutoscaler,
    workload: Workload,
    peak: Mapping[str, float],
    pod_requests: Mapping[str, int] | None = None,
) -> int | None:
    """The replicas the HPA's arithmetic asks for at `peak` (resource -> total usage),
    with pods requesting `pod_requests` (default: the template's); None when no metric of
    the HPA has a peak."""
    capacity = per_replica_capacity(hpa, workload, pod_requests)
    best: int | None = None
    for resource, per_replica in capacity.items():
        if resource not in peak:
            continue
        n = predict_replicas(
            peak[resource],
            per_replica,
            min_replicas=hpa.min_replicas,
            max_replicas=hpa.max_replicas,
        )
        best = n if best is None else max(best, n)
    return best


def hpa_resources(hpa: HorizontalPodAutoscaler) -> set[str]:
    """The resources of the HPA's Resource metrics (the ones forecast here)."""
    if hpa.min_replicas > hpa.max_replicas:  # an HPA the API server would refuse
        return set()
    return {m.resource for m in hpa.metrics if m.type == "Resource" and m.resource}


def coming_replicas(
    hpa: HorizontalPodAutoscaler,
    workload: Workload,
    history: HistoryReader,
    now: float,
    pod_requests: Mapping[str, int] | None = None,
    kinds: Sequence[str] | None = None,
) -> ComingReplicas | None:
    """The HPA's forecast count over the coming `COMING_WINDOW` for `workload` (None: no
    Resource metric with history); `kinds`: as `peak_totals`."""
    resources = hpa_resources(hpa)
    if not resources:
        return None
    peak = peak_totals(history, workload, resources, now, kinds)
    n = forecast_hpa_replicas(hpa, workload, peak, pod_requests)
    if n is None:
        return None
    return ComingReplicas(workload, hpa, n)
