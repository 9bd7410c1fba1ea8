"""Forecasts for every (target, container) row of a batch, one vectorised forecast per
group of rows that share a horizon and levels, and the one level each row is sized at
(`RowForecasts`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.forecast.models import ForecastConfig
from foresize.core.forecast.select import (
    MissCounts,
    OnlineScores,
    add_counts,
    backtest_scores,
    calibration_counts,
    forecast_max,
    online_step,
)
from foresize.core.recommend.core import (
    CPU_RAISE_QUANTILE,
    allocate_risk,
    interval_range,
    risk_levels,
)
from foresize.core.recommend.histories import MODEL_STEP, TO_CANONICAL
from foresize.core.recommend.params import RecommendParams
from foresize.core.recommend.request import CachedSchedule, TargetRequest
from foresize.core.recommend.schedule import Row, cpu_schedule


@dataclass(slots=True)
class RowForecasts:
    """Per (target, container) row of a batch, for one resource (canonical units)."""

    value: np.ndarray  # the forecast at the level the row is sized at
    model: np.ndarray  # the model that gave it
    level: np.ndarray  # that level (the mode's quantile, or the allocated memory level)
    safest: np.ndarray  # the forecast at the row's safest allowed level (OOM bump floor)
    at_mode: np.ndarray  # the forecast at the mode's own level (the fleet reference)
    raise_at: np.ndarray  # CPU: the forecast at CPU_RAISE_QUANTILE; else NaN
    schedule: np.ndarray  # CPU: the request of the day's segment (`day_schedule`); else NaN
    opens: np.ndarray  # CPU: this decision is the first of the row's segment; else False
    remaining: np.ndarray  # CPU: seconds to the row's next segment start; else NaN
    last_max: np.ndarray  # CPU: the highest usage sample of the last interval; else NaN
    last_min: np.ndarray  # CPU: the lowest usage sample of the last interval; else NaN
    # the backtest score of the model that gave `value`: its mean pinball loss at `level`
    # (canonical units; NaN before any forecast was scored)
    error: np.ndarray = field(default_factory=lambda: np.zeros(0))


_GroupKey = tuple[float, bool, tuple[float, ...]]
"""Rows forecast together: (forecast horizon, carries a forecast state, levels)."""
_Signature = tuple[int | None, tuple[int, ...], int]
"""Rows whose forecast states line up (`OnlineScores.signature`): stepped together."""


@dataclass(slots=True)
class FleetTotals:
    """What couples the rows of a batch, over every shard of a fleet recommended shard by
    shard (`recommend.stream`): per resource and group, the width of the history matrix
    (rows are right-aligned in one matrix, and the decaying histogram's column blocks
    follow its columns), and per group of lined-up states, the calibration's miss counts
    of each scored origin (the calibration pools its rows). With them, each shard is
    forecast exactly as in one batch of the whole fleet."""

    width: dict[tuple[str, _GroupKey], int] = field(default_factory=dict)
    pooled: dict[tuple[str, _GroupKey, _Signature], dict[int, MissCounts]] = field(
        default_factory=dict
    )

    def add(self, reqs: Sequence[TargetRequest], rows: Sequence[Row], now: float) -> None:
        """Count one shard in (its requests with resolved params, `target.batch_rows`)."""
        for res in (CPU, MEMORY):
            row_levels = [_row_levels(reqs[ti].params, res) for ti, _name in rows]
            for key, ks in _forecast_groups(reqs, rows, row_levels).items():
                group = [rows[k] for k in ks]
                y = _history_matrix(reqs, group, res)
                wkey = (res, key)
                self.width[wkey] = max(self.width.get(wkey, 0), y.shape[1])
                if not key[1]:
                    continue
                cfg = ForecastConfig(step=MODEL_STEP, horizon=key[0])
                base = int(math.floor(now / MODEL_STEP)) - (y.shape[1] - 1)
                states = _row_states(reqs, group, res, len(key[2]))
                for sig, idxs in _lined_up(states).items():
                    stacked = OnlineScores.stack([states[i] for i in idxs])
                    found = calibration_counts(stacked, y[idxs], y.shape[1] - 1, cfg, base)
                    into = self.pooled.setdefault((res, key, sig), {})
                    for origin, counts in found.items():
                        had = into.get(origin)
                        into[origin] = counts if had is None else add_counts(had, counts)


def forecast_rows(
    reqs: Sequence[TargetRequest],
    rows: Sequence[Row],
    res: str,
    new_states: list[dict[str, OnlineScores] | None],
    now: float,
    memory_reference: float | None = None,
    new_schedules: list[dict[str, CachedSchedule] | None] | None = None,
    fleet: FleetTotals | None = None,
) -> RowForecasts:
    """Forecast every (target, container) row for `res` at its mode's levels, then pick
    one level per row: the mode's quantile, or for memory under a named mode the level
    `allocate_risk` gives it among the rows of the whole batch.

    Rows sharing a horizon and levels are forecast together; targets that carry a
    forecast state use the rolling backtest, others a cold-start one. `fleet`: this
    batch is a shard of a larger one, forecast as that one would be (`FleetTotals`).
    """
    if not rows:
        empty = np.full(0, np.nan)
        return RowForecasts(
            empty,
            np.full(0, "", dtype=object),
            empty,
            empty,
            empty,
            empty,
            empty,
            empty > 0,
            empty,
            empty,
            empty,
            empty,
        )
    row_levels = [_row_levels(reqs[ti].params, res) for ti, _name in rows]
    all_levels = np.array(sorted({q for lv in row_levels for q in lv}))
    values = np.full((len(rows), len(all_levels)), np.nan)
    models = np.full((len(rows), len(all_levels)), "", dtype=object)
    errors = np.full((len(rows), len(all_levels)), np.nan)
    schedule = np.full(len(rows), np.nan)
    opens = np.zeros(len(rows), dtype=bool)
    remaining = np.full(len(rows), np.nan)
    last_max = np.full(len(rows), np.nan)
    last_min = np.full(len(rows), np.nan)
    for (blocks, online, levels), ks in _forecast_groups(reqs, rows, row_levels).items():
        cfg = ForecastConfig(step=MODEL_STEP, horizon=blocks)
        group = [rows[k] for k in ks]
        width = fleet.width.get((res, (blocks, online, levels)), 0) if fleet else 0
        y = _history_matrix(reqs, group, res, width)
        qs = np.array(levels)
        base = int(math.floor(now / MODEL_STEP)) - (y.shape[1] - 1)
        if res == CPU:
            schedule[ks], opens[ks], remaining[ks] = cpu_schedule(
                reqs, group, y, base, cfg, now, new_schedules
            )
            # What each container did since the last decision (`scheduled_cpu`).
            last = y[:, -cfg.h :] * TO_CANONICAL[CPU]
            last_max[ks], last_min[ks] = interval_range(last)
        if online:
            pooled = None
            if fleet is not None:
                key = (blocks, online, levels)
                pooled = {sig: v for (r, k, sig), v in fleet.pooled.items() if (r, k) == (res, key)}
            group_values, group_models, group_errors = _online_forecast(
                reqs, group, res, y, qs, cfg, base, new_states, pooled
            )
        else:
            scores = backtest_scores(y, qs, cfg)
            f = forecast_max(y, qs, cfg, scores)
            group_values, group_models = f.values, f.model_names()
            group_errors = np.take_along_axis(scores, f.model[None], axis=0)[0]
        cols = np.searchsorted(all_levels, qs)
        for i, k in enumerate(ks):
            values[k, cols] = group_values[i]
            models[k, cols] = group_models[i]
            errors[k, cols] = group_errors[i]
    return _pick_levels(
        reqs,
        rows,
        res,
        row_levels,
        all_levels,
        values,
        models,
        (schedule, opens, remaining, last_max, last_min),
        memory_reference,
        errors,
    )


def _row_levels(p: RecommendParams, res: str) -> tuple[float, ...]:
    """The quantiles one row of `res` is forecast at."""
    m = p.model(res)
    if res == CPU:
        # The scheduled request (`scheduled_cpu`): also forecast at the raise quantile.
        return tuple(sorted({CPU_RAISE_QUANTILE, m.quantile(res)}))
    if p.allocate_memory_risk:
        return risk_levels(m.mode, res, m.percentile_value)
    return (m.quantile(res),)


def _forecast_groups(
    reqs: Sequence[TargetRequest], rows: Sequence[Row], row_levels: Sequence[tuple[float, ...]]
) -> dict[_GroupKey, list[int]]:
    """Row numbers by what lets them share one vectorised forecast."""
    groups: dict[_GroupKey, list[int]] = {}
    for k, (ti, _name) in enumerate(rows):
        p = reqs[ti].params
        key = (p.forecast_blocks, reqs[ti].forecast_state is not None, row_levels[k])
        groups.setdefault(key, []).append(k)
    return groups


def _history_matrix(
    reqs: Sequence[TargetRequest], group: Sequence[Row], res: str, width: int = 0
) -> np.ndarray:
    """The group's histories of `res`, right-aligned (newest last), NaN-padded at the left
    (to `width` columns at least)."""
    series = [
        np.asarray(getattr(reqs[ti].histories[name], res), dtype=np.float64) for ti, name in group
    ]
    length = max(width, max(len(v) for v in series))
    y = np.full((len(series), max(length, 1)), np.nan)
    for i, v in enumerate(series):
        if len(v):
            y[i, length - len(v) :] = v
    return y


def _online_forecast(
    reqs: Sequence[TargetRequest],
    group: Sequence[Row],
    res: str,
    y: np.ndarray,
    qs: np.ndarray,
    cfg: ForecastConfig,
    base: int,
    new_states: list[dict[str, OnlineScores] | None],
    pooled: Mapping[_Signature, Mapping[int, MissCounts]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rolling backtest: one state per (target, container, resource), stacked into one
    vectorised step where the states line up (same decision history). Origins are
    absolute bucket numbers, so states survive the window sliding. Stores each row's next
    state in `new_states`; returns the group's values, model names and the backtest score
    of the model used, (rows, levels). `pooled`: the fleet's calibration counts."""
    states = _row_states(reqs, group, res, len(qs))
    by_sig = _lined_up(states)
    values = np.full((len(group), len(qs)), np.nan)
    names = np.full((len(group), len(qs)), "", dtype=object)
    errors = np.full((len(group), len(qs)), np.nan)
    for sig, idxs in by_sig.items():
        stacked = OnlineScores.stack([states[i] for i in idxs])
        counts = None if pooled is None else pooled.get(sig, {})
        f, st2 = online_step(stacked, y[idxs], y.shape[1] - 1, qs, cfg, base=base, pooled=counts)
        names_all = f.model_names()
        errors_all = np.take_along_axis(st2.scores(), f.model[None], axis=0)[0]
        for j, i in enumerate(idxs):
            ti, name = group[i]
            target_states = new_states[ti]
            if target_states is not None:
                target_states[f"{name}/{res}"] = st2.row(j)
            values[i] = f.values[j]
            names[i] = names_all[j]
            errors[i] = errors_all[j]
    return values, names, errors


def _row_states(
    reqs: Sequence[TargetRequest], group: Sequence[Row], res: str, levels: int
) -> list[OnlineScores]:
    """Each row's carried forecast state for `res` (an empty one where none fits)."""
    states = []
    for ti, name in group:
        carried = reqs[ti].forecast_state
        st = carried.get(f"{name}/{res}") if carried is not None else None
        if st is None or st.loss.shape[1:] != (1, levels):
            st = OnlineScores.empty(1, levels)
        states.append(st)
    return states


def _lined_up(states: Sequence[OnlineScores]) -> dict[_Signature, list[int]]:
    """Row numbers by state signature: the rows one `online_step` steps together."""
    by_sig: dict[_Signature, list[int]] = {}
    for i, st in enumerate(states):
        by_sig.setdefault(st.signature(), []).append(i)
    return by_sig


def _pick_levels(
    reqs: Sequence[TargetRequest],
    rows: Sequence[Row],
    res: str,
    row_levels: Sequence[tuple[float, ...]],
    all_levels: np.ndarray,
    values: np.ndarray,
    models: np.ndarray,
    schedule: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    memory_reference: float | None,
    errors: np.ndarray,
) -> RowForecasts:
    """One level per row from the forecasts at every level (canonical units)."""
    mode_q = np.array([reqs[ti].params.model(res).quantile(res) for ti, _ in rows])
    own = np.searchsorted(all_levels, mode_q)
    idx = np.arange(len(rows))
    ref = memory_reference / TO_CANONICAL[res] if memory_reference else None
    pick = allocate_risk(values, all_levels, mode_q, reference=ref) if res == MEMORY else own
    top = np.array([np.searchsorted(all_levels, max(lv)) for lv in row_levels])
    unit = TO_CANONICAL[res]
    nan = np.full(len(rows), np.nan)
    sched, opens, remaining, last_max, last_min = schedule
    if res == CPU:
        raise_at = values[:, int(np.searchsorted(all_levels, CPU_RAISE_QUANTILE))] * unit
    else:
        raise_at, sched, opens, remaining, last_max, last_min = nan, nan, nan > 0, nan, nan, nan
    return RowForecasts(
        value=values[idx, pick] * unit,
        model=models[idx, pick],
        level=all_levels[pick],
        safest=values[idx, top] * unit,
        at_mode=values[idx, own] * unit,
        raise_at=raise_at,
        schedule=sched,
        opens=opens,
        remaining=remaining,
        last_max=last_max,
        last_min=last_min,
        error=errors[idx, pick] * unit,
    )
