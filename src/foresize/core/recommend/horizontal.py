"""The horizontal planner's input (no I/O): the forecast of each target's workload total
(the `__total__` history series) over the horizon, at the target's mode or at a given
quantile (the coordinated mode's central load)."""

from __future__ import annotations

from collections.abc import Callable

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import target_view
from foresize.core.history import (
    TOTAL_CONTAINER,
    HistoryReader,
    HistoryWorkload,
    history_kinds,
    trace_series,
)
from foresize.core.recommend.histories import HISTORY_WINDOW
from foresize.core.recommend.suggestions import effective_model


def horizontal_forecasts(
    snapshot: ClusterSnapshot,
    history: HistoryReader,
    now: float,
    wanted: Callable[[TargetObject], bool] | None = None,
    percentile: float | None = None,
) -> dict[str, dict[str, float]]:
    """Target key -> resource -> forecast of the workload's total usage over the horizon
    (cpu millicores, memory bytes), for the targets `wanted` accepts (default: the
    horizontally autonomous ones) with enough history; the input of the horizontal
    planner and of the coordinated mode. `percentile`: that quantile of the forecast (no
    buffer) instead of the target's mode (the coordinated mode's central load)."""
    from foresize.core.recommend.series import recommend_series

    out: dict[str, dict[str, float]] = {}
    for target in snapshot.targets:
        if wanted is not None and not wanted(target):
            continue
        view = target_view(target)
        if (wanted is None and not view.horizontal_autonomous) or not view.ref_kind:
            continue
        ns = view.namespace
        workload = HistoryWorkload(view.ref_kind, view.ref_name)
        total = trace_series(
            history,
            workload.key(ns, TOTAL_CONTAINER),
            now - HISTORY_WINDOW,
            now + 1,
            history_kinds(snapshot, ns, workload),
        )
        if total is None:
            continue
        model = effective_model(target, "horizontal")
        central = percentile is not None
        (row,) = recommend_series(
            [total],
            mode="percentile" if central else getattr(model, "mode", None) or "balanced",
            percentile_value=percentile if central else getattr(model, "percentile_value", None),
            buffer_percentage=0.0
            if central
            else float(getattr(model, "forecast_buffer_percentage", 0.0) or 0.0),
            min_lookback=float(getattr(model, "min_lookback_to_scale", 86400.0) or 86400.0),
            allocate_memory_risk=False,  # a workload's total, at the mode's own quantile
        )
        if not row.enough_data:
            continue  # no autonomous scaling before min_lookback_to_scale
        forecast: dict[str, float] = {}
        if row.cpu_millicores is not None:
            forecast[CPU] = float(row.cpu_millicores)
        if row.memory_bytes is not None:
            forecast[MEMORY] = float(row.memory_bytes)
        if forecast:
            out[view.key] = forecast
    return out
