"""One-shot recommendations for plain usage series (pure: no I/O, no clock).

Each series is one workload container; it is put on the 5-minute model grid (max per
bucket) and sized through the recommender's entry point (`recommend_batch`), with its OOM
kills. Used by `foresize recommend` (Prometheus history or trace files) and by the kube
shell's horizontal forecast, so the same samples give the same recommendation anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass(slots=True)
class Recommendation:
    namespace: str
    workload: str
    container: str
    cpu_request: str | None
    memory_request: str | None
    cpu_millicores: int | None
    memory_bytes: int | None
    cpu_peak_cores: float | None
    memory_peak_bytes: int | None
    history_hours: float
    samples: int
    enough_data: bool
    oom_kills: int = 0
    throttled_share: float | None = None
    cpu_model: str = ""
    memory_model: str = ""
    memory_level: float | None = None  # the quantile memory was sized at (risk allocation)


def recommend_series(
    series: list[Any],
    *,
    mode: str = "balanced",
    buffer_percentage: float = 0.0,
    percentile_value: float | None = None,
    min_lookback: float = 86400.0,
    oom_kills: dict[Any, list[float]] | None = None,
    throttling: dict[Any, tuple[Any, Any]] | None = None,
    stabilization: float = 3600.0,
    now: float | None = None,
    allocate_memory_risk: bool = True,
) -> list[Recommendation]:
    """Recommendations for TraceSeries through the recommender's entry point
    (`foresize.core.recommend.target.recommend_batch`): each series is one container on the
    5-minute model grid (max per bucket) over the last 14 days before `now` (default: the
    newest sample), with its OOM kills; no bounds (nothing is known of the workload).
    Memory risk is allocated across the series (`allocate_risk`) unless
    `allocate_memory_risk` is false (series that are not one container's request)."""
    import numpy as np

    from foresize.core.api.quantity import CPU, MEMORY, MIB, format_bytes, format_cpu
    from foresize.core.cluster.model import ResourceRequirements
    from foresize.core.history import aligned_start, resample_max, window_start
    from foresize.core.recommend.histories import HISTORY_WINDOW, MODEL_STEP, ContainerHistory
    from foresize.core.recommend.params import RecommendParams, ResourceModel
    from foresize.core.recommend.request import TargetRequest
    from foresize.core.recommend.target import recommend_batch

    series = [s for s in series if s.timestamps.size]
    if not series:
        return []
    step = MODEL_STEP
    # "Now" is the start of the newest sample's bucket: the same samples give the same
    # answer whatever their offset inside the bucket.
    newest = max(float(s.timestamps[-1]) for s in series)
    end = float(now) if now is not None else aligned_start(newest, step)
    length = int(math.ceil(HISTORY_WINDOW / step))
    start = window_start(end, length, step)
    resource_model = ResourceModel(mode, percentile_value, buffer_percentage)
    params = RecommendParams(
        cpu=resource_model,
        memory=resource_model,
        min_lookback_to_scale=min_lookback,
        stabilization_window=stabilization,
        allocate_memory_risk=allocate_memory_risk,
    )
    oom_kills = oom_kills or {}
    throttling = throttling or {}
    requests = []
    grids = []
    for s in series:
        cpu = resample_max(s.timestamps, s.cpu, step, start, length)
        mem = (
            resample_max(s.timestamps, s.memory, step, start, length)
            if s.memory is not None
            else np.full(length, np.nan)
        )
        grids.append((cpu, mem))
        have = np.isfinite(cpu) | np.isfinite(mem)
        first = start + float(np.argmax(have)) * step if have.any() else None
        kills = sorted(t for t in oom_kills.get(s.key, []) if start <= t <= end + step)
        usage = []
        for t in kills:
            # The working-set peak in the hour before the kill stands for its usage.
            k = int((t - start) // step)
            window = mem[max(0, k - 12) : k + 1]
            usage.append(float(np.nanmax(window)) if np.isfinite(window).any() else math.nan)
        history = ContainerHistory(
            cpu=cpu, memory=mem, first_seen=first, oom_times=kills, oom_usage=usage
        )
        # A token current request: the recommender only sizes resources that are set.
        current = {s.key.container: ResourceRequirements({CPU: 1, MEMORY: MIB})}
        requests.append(TargetRequest(params, {s.key.container: history}, current))
    results = recommend_batch(requests, end)
    rows: list[Recommendation] = []
    for s, (cpu_col, mem_col), result in zip(series, grids, results, strict=True):
        name = s.key.container
        sugg = result.suggestion.containers.get(name)
        fc = result.forecasts.get(name, {})
        amounts: dict[str, int | None] = {}
        for res in (CPU, MEMORY):
            value = fc.get(res, math.nan)
            if not np.isfinite(value):
                amounts[res] = None
            elif result.has_enough_data and sugg is not None and res in sugg.requests:
                amounts[res] = int(sugg.requests[res])  # buffer, rounding, OOM floor applied
            else:
                # Not enough history for the recommender to act: show the forecast itself.
                buffered = value * (1.0 + buffer_percentage / 100.0)
                amounts[res] = int(
                    math.ceil(buffered / MIB) * MIB if res == MEMORY else math.ceil(buffered)
                )
        cpu_m, mem_b = amounts[CPU], amounts[MEMORY]
        have = np.isfinite(cpu_col) | np.isfinite(mem_col)
        samples = int(have.sum())
        history_hours = (length - int(np.argmax(have))) * step / 3600.0 if samples else 0.0
        throttled = throttling.get(s.key)
        share = (
            float(np.nanmean(throttled[1])) if throttled is not None and len(throttled[1]) else None
        )
        models = result.models.get(name, {})
        level = result.quantiles.get(name, {}).get(MEMORY)
        rows.append(
            Recommendation(
                namespace=s.key.namespace,
                workload=s.key.workload,
                container=name,
                cpu_request=format_cpu(int(cpu_m)) if cpu_m else None,
                memory_request=format_bytes(int(mem_b)) if mem_b else None,
                cpu_millicores=int(cpu_m) if cpu_m else None,
                memory_bytes=int(mem_b) if mem_b else None,
                cpu_peak_cores=round(float(np.nanmax(cpu_col)), 6)
                if np.isfinite(cpu_col).any()
                else None,
                memory_peak_bytes=int(np.nanmax(mem_col)) if np.isfinite(mem_col).any() else None,
                history_hours=round(history_hours, 2),
                samples=samples,
                enough_data=bool(result.has_enough_data),
                oom_kills=len(history_kills(oom_kills, s.key, start, end, step)),
                throttled_share=share,
                cpu_model=models.get(CPU, ""),
                memory_model=models.get(MEMORY, ""),
                memory_level=level if mem_b else None,
            )
        )
    return rows


_Key = TypeVar("_Key", bound=Hashable)


def history_kills(
    oom_kills: Mapping[_Key, list[float]], key: _Key, start: float, end: float, step: float
) -> list[float]:
    return [t for t in oom_kills.get(key, []) if start <= t <= end + step]
