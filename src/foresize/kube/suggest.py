"""Turning collected history into each target's `status.vertical_suggestion` (no I/O).

Every forecast interval the operator asks `plan_suggestions` for status writes: for each
AIScaleTarget in recommendation or autonomous mode it takes the history of the target's
workload containers, runs the recommender (forecast of the max over the horizon at the
mode's quantile, buffer, rounding, OOM floor — the same function `foresize recommend`
uses), applies the target's per-container bounds and `limit.ratio` (without a ratio a
request never exceeds the container's existing limit), and writes the suggestion with
`hasEnoughDataToScale`. Autonomous targets get a suggestion only once they have
`min_lookback_to_scale` of history, so nothing acts on a forecast made from minutes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from foresize.api.quantity import CPU, MEMORY, format_quantity
from foresize.cluster.actions import WriteTargetStatus
from foresize.cluster.snapshot import ClusterSnapshot
from foresize.history.traces import SeriesKey, TraceSeries
from foresize.kube.convert import format_time


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        if obj is None:
            return None
        obj = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return obj


def _bounded(
    resource: str, value: int, policy: Any, existing_limit: int | None
) -> tuple[int, int | None]:
    """Clamp to [lowerbound, upperbound]; derive the limit from limit.ratio if set."""
    res_policy = _get(policy, resource)
    limit = None
    if res_policy is not None:
        lower = _get(res_policy, "lowerbound")
        upper = _get(res_policy, "upperbound")
        if lower is not None:
            value = max(value, int(lower))
        if upper is not None:
            value = min(value, int(upper))
        ratio = _get(res_policy, "limit", "ratio")
        if ratio is not None:
            limit = int(value * float(ratio))
            if resource == MEMORY:
                limit = -(-limit // 2**20) * 2**20
    if limit is None and existing_limit:
        value = min(value, existing_limit)
    return value, limit


def effective_model(target: Any) -> Any:
    """The target's model with `vertical.model` overrides applied (API model), if any."""
    spec = _get(target, "spec")
    if hasattr(spec, "effective_model"):
        return spec.effective_model("vertical")
    return _get(spec, "model")


def cadence_of(target: Any, default: float) -> float:
    """Seconds between forecasts for the target (a cron cadence falls back to `default`)."""
    model = effective_model(target)
    cadence = getattr(model, "cadence_seconds", None)
    return float(cadence) if cadence else default


def plan_suggestions(
    snapshot: ClusterSnapshot,
    history: Any,
    now: float,
    due: Callable[[Any], bool] | None = None,
) -> list[WriteTargetStatus]:
    """Status writes carrying fresh vertical suggestions for the snapshot's targets
    (only those `due` accepts, when given: the shell keeps each target's cadence)."""
    from foresize.cli.recommend import recommend_series

    writes: list[WriteTargetStatus] = []
    for target in snapshot.targets:
        if due is not None and not due(target):
            continue
        mode = _get(target, "spec", "vertical", "mode")
        if mode not in ("recommendation", "autonomous"):
            continue
        ns = _get(target, "metadata", "namespace")
        name = _get(target, "metadata", "name")
        ref = _get(target, "spec", "scaleTargetRef")
        if ref is None:
            continue
        workload = snapshot.workload(_get(ref, "kind"), ns, _get(ref, "name"))
        if workload is None:
            continue
        model = effective_model(target)

        def pick(field: str, default: Any, model: Any = model) -> Any:
            value = _get(model, field)
            return default if value is None else value

        series: list[TraceSeries] = []
        templates = {c.name: c for c in workload.template.containers}
        for cname in templates:
            s = history.series(SeriesKey(ns, workload.name, cname))
            if s is not None:
                series.append(s)
        if not series:
            continue
        rows = recommend_series(
            series,
            mode=pick("mode", "balanced"),
            buffer_percentage=float(pick("forecast_buffer_percentage", 0.0)),
            percentile_value=pick("percentile_value", None),
            min_lookback=float(pick("min_lookback_to_scale", 86400.0)),
        )
        enough = all(r.enough_data for r in rows)
        containers = []
        for r in rows:
            spec_container = templates.get(r.container)
            policy = _get(target, "spec", "vertical")
            policy = (
                policy.container_policy(r.container)
                if hasattr(policy, "container_policy")
                else None
            )
            requests: dict[str, str] = {}
            limits: dict[str, str] = {}
            for resource, amount in ((CPU, r.cpu_millicores), (MEMORY, r.memory_bytes)):
                if amount is None:
                    continue
                existing = spec_container.resources.limits.get(resource) if spec_container else None
                value, limit = _bounded(resource, int(amount), policy, existing)
                requests[resource] = format_quantity(resource, value)
                if limit is not None:
                    limits[resource] = format_quantity(resource, limit)
            entry: dict[str, Any] = {"name": r.container, "requests": requests}
            if limits:
                entry["limits"] = limits
            containers.append(entry)
        status: dict[str, Any] = {"hasEnoughDataToScale": enough}
        if containers and (enough or mode == "recommendation"):
            horizon = float(pick("forecast_blocks", 900.0))
            digest = hashlib.sha256(json.dumps(containers, sort_keys=True).encode()).hexdigest()
            status["vertical_suggestion"] = {
                # Content-addressed: the same recommendation keeps its uid (the circuit
                # breaker and stall tracking are per suggestion).
                "uid": digest[:16],
                "containers": containers,
                "forecast_window": {"start": format_time(now), "end": format_time(now + horizon)},
                "created_at": format_time(now),
            }
        writes.append(WriteTargetStatus(ns, name, status))
    return writes


def horizontal_forecasts(
    snapshot: ClusterSnapshot, history: Any, now: float
) -> dict[str, dict[str, float]]:
    """Target key -> resource -> forecast of the workload's total usage over the horizon
    (cpu millicores, memory bytes), for horizontally autonomous targets; the input of the
    horizontal planner."""
    from foresize.cli.recommend import recommend_series

    out: dict[str, dict[str, float]] = {}
    if not hasattr(history, "workload_total"):
        return out
    for target in snapshot.targets:
        if _get(target, "spec", "horizontal", "mode") != "autonomous":
            continue
        ref = _get(target, "spec", "scaleTargetRef")
        ns = _get(target, "metadata", "namespace")
        if ref is None:
            continue
        total = history.workload_total(ns, _get(ref, "name"))
        if total is None:
            continue
        model = _get(target, "spec")
        model = model.effective_model("horizontal") if hasattr(model, "effective_model") else None
        (row,) = recommend_series(
            [total],
            mode=getattr(model, "mode", "balanced") or "balanced",
            percentile_value=getattr(model, "percentile_value", None),
            buffer_percentage=float(getattr(model, "forecast_buffer_percentage", 0.0) or 0.0),
            min_lookback=float(getattr(model, "min_lookback_to_scale", 86400.0) or 86400.0),
        )
        if not row.enough_data:
            continue  # no autonomous scaling before min_lookback_to_scale
        forecast: dict[str, float] = {}
        if row.cpu_millicores is not None:
            forecast[CPU] = float(row.cpu_millicores)
        if row.memory_bytes is not None:
            forecast[MEMORY] = float(row.memory_bytes)
        if forecast:
            out[f"{ns}/{_get(target, 'metadata', 'name')}"] = forecast
    return out
