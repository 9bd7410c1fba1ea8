"""Recommendation for AIScaleTargets: the entry point the operator and the simulator call.

    result = recommend_target(params, histories, current, oom_state, now)
    result.suggestion      # foresize.core.cluster.model.Suggestion (requests and limits)
    result.oom_state       # carry to the next call (per container)
    result.forecast_state  # carry to the next call (rolling model scores), optional

`recommend_batch` does the same for many targets in one vectorised forecast (the
simulator's 2,000 containers every 15 minutes). Pure: histories, current resources, OOM
events and `now` come in; nothing is read from a clock, a file or the cluster, and
nothing here writes history (OOM floors are state, never usage).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from foresize.core.api.containers import entry_for
from foresize.core.api.hysteresis import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, Threshold
from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import (
    Container,
    ContainerSuggestion,
    ResourceRequirements,
    Suggestion,
)
from foresize.core.cluster.qos import qos_class_of
from foresize.core.cluster.runtime import HeapCeiling
from foresize.core.cluster.target import ContainerPolicy, ResourcePolicy, TargetView, target_view
from foresize.core.errors import ForesizeError
from foresize.core.forecast.models import (
    DAY,
    TIME_OF_DAY_MODELS,
    DaySchedule,
    ForecastConfig,
    day_schedule,
    forward_max,
)
from foresize.core.forecast.select import OnlineScores, backtest_scores, forecast_max, online_step
from foresize.core.recommend.core import (
    CPU_DROP_FACTOR,
    CPU_RAISE_QUANTILE,
    CPU_RAISE_SHARE,
    DEFAULT_MODE,
    DEFAULT_STABILIZATION,
    KILL_MEMORY,
    MEMORY_HEADROOM,
    MEMORY_PEAK_WINDOW,
    MIB,
    SCHEDULE_BLOCKS,
    SCHEDULE_DAYS,
    SCHEDULE_SLOT,
    OOMArrays,
    allocate_risk,
    interval_range,
    memory_holds,
    memory_request,
    mode_quantile,
    oom_bump,
    recent_peak,
    risk_levels,
    scheduled_cpu,
)
from foresize.core.recommend.explain import Explanation, amount, duration_words, history_words
from foresize.core.recommend.heap import heap_bound_note, heap_floor

MODEL_STEP = 300.0
"""Models run on the 5-minute grid (architecture §3.1)."""
HISTORY_WINDOW = 14 * 86400.0
"""How much history a recommendation reads: the retention (14 days)."""

RESOURCES = (CPU, MEMORY)
_UNIT = {CPU: 1000.0, MEMORY: 1.0}  # history units (cores, bytes) -> canonical


# --- Parameters ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceModel:
    mode: str = DEFAULT_MODE
    percentile_value: float | None = None
    buffer_percentage: float = 0.0

    def quantile(self, resource: str) -> float:
        return mode_quantile(self.mode, resource, self.percentile_value)


@dataclass(frozen=True, slots=True)
class RecommendParams:
    """Everything the recommendation needs from an AIScaleTarget (or a test)."""

    uid: str = ""
    forecast_blocks: float = 900.0
    forecast_interval: float = 900.0
    cpu: ResourceModel = field(default_factory=ResourceModel)
    memory: ResourceModel = field(default_factory=ResourceModel)
    min_lookback_to_scale: float = 86400.0
    containers: tuple[ContainerPolicy, ...] = ()
    scale_up: Mapping[str, Threshold] = field(
        default_factory=lambda: {CPU: DEFAULT_SCALE_UP, MEMORY: DEFAULT_SCALE_UP}
    )
    scale_down: Mapping[str, Threshold] = field(
        default_factory=lambda: {CPU: DEFAULT_SCALE_DOWN, MEMORY: DEFAULT_SCALE_DOWN}
    )
    oom_enabled: bool = True
    stabilization_window: float = DEFAULT_STABILIZATION
    # The memory ratchet's window (seconds; 0 = off). None: the memory mode's own hold
    # (`memory_holds`), never shorter than the OOM stabilization window.
    memory_stabilization: float | None = None
    # Memory risk allocated across the batch (`allocate_risk`); off for forecasts that
    # are not one container's request (a workload's total for the horizontal planner).
    allocate_memory_risk: bool = True

    def model(self, resource: str) -> ResourceModel:
        return self.cpu if resource == CPU else self.memory

    def memory_holds(self) -> tuple[float, float]:
        """(the memory ratchet's window, the kill memory) in seconds: the memory mode's
        (`foresize.core.recommend.core.memory_holds`), the ratchet never shorter than the OOM
        stabilization window, or `memory_stabilization` when given."""
        ratchet, kill = memory_holds(self.memory.quantile(MEMORY))
        if self.memory_stabilization is not None:
            return self.memory_stabilization, kill
        return max(ratchet, self.stabilization_window), kill

    def bounds(self, container: str) -> ContainerPolicy:
        """The container's bounds: its own entry, else `*`, else none."""
        return entry_for(self.containers, container) or ContainerPolicy(container)

    @classmethod
    def from_target(cls, target: Any) -> RecommendParams:
        """From an `foresize.core.api.types.AIScaleTarget`, through its read-model."""
        return cls.from_view(target_view(target))

    @classmethod
    def from_view(cls, view: TargetView) -> RecommendParams:
        """From the target's read-model (`foresize.core.cluster.target.TargetView`)."""
        forecast = view.forecast
        if forecast is None:
            raise ForesizeError(
                f"{view.kind} {view.key}: the recommendation needs the API model, not a"
                " plain manifest"
            )
        per = {
            r: ResourceModel(m.mode, m.percentile_value, m.buffer_percentage)
            for r, m in ((CPU, forecast.cpu), (MEMORY, forecast.memory))
        }
        return cls(
            uid=view.uid,
            forecast_blocks=forecast.forecast_blocks,
            forecast_interval=forecast.forecast_interval,
            cpu=per[CPU],
            memory=per[MEMORY],
            min_lookback_to_scale=forecast.min_lookback_to_scale,
            containers=view.containers,
            scale_up={r: view.scale_up for r in RESOURCES},
            scale_down={r: view.scale_down for r in RESOURCES},
            oom_enabled=view.oom_enabled,
            stabilization_window=forecast.oom_stabilization_window,
        )


# --- Inputs and state ---------------------------------------------------------------------


@dataclass(slots=True)
class ContainerHistory:
    """A container's usage on the 5-minute model grid, last column = the bucket of `now`.

    cpu in cores, memory in bytes, NaN = no sample (arrays of one target may differ in
    length; they are aligned at their end). `first_seen` is the oldest sample's time.
    `oom_times` are OOM kills observed (any that are newer than the state has seen are
    applied). Build it with `foresize.core.recommend.target.load_histories` from any
    `HistoryReader`.
    """

    cpu: np.ndarray
    memory: np.ndarray
    first_seen: float | None = None
    oom_times: Sequence[float] = ()
    oom_usage: Sequence[float] = ()  # memory usage at each kill, if known (else NaN/absent)


@dataclass(slots=True)
class OOMState:
    """Memory state of one container: the OOM floor (bytes) and the recent memory targets
    for the scale-down stabilization. Carried between calls by the caller."""

    floor: int = 0
    until: float = -math.inf
    last_bump: float = -math.inf
    last_seen_oom: float = -math.inf
    count: int = 0
    recent: tuple[tuple[float, float], ...] = ()  # (time, memory target before floors)

    def active(self, now: float) -> int:
        return self.floor if now < self.until else 0


@dataclass(frozen=True, slots=True)
class CachedSchedule:
    """One container's CPU day schedule (`day_schedule`) as computed for a day, carried
    between calls by the caller: the schedule changes once a day, and at 10,000
    containers one computation takes seconds, so passes within the day reuse it.

    `key` holds everything the schedule is computed from: the day, the quantile, the
    horizon, and a digest of the history that `day_schedule` reads (the SCHEDULE_DAYS
    days before the day's midnight); a different key recomputes."""

    key: tuple[float, float, int, bytes]
    midnight: float
    slot: float
    opens: np.ndarray  # (K,) bool
    level: np.ndarray  # (K,)


@dataclass(slots=True)
class RecommendResult:
    suggestion: Suggestion
    oom_state: dict[str, OOMState]
    has_enough_data: bool
    forecast_state: dict[str, OnlineScores] | None = None
    # container -> resource -> value (canonical) the forecast asked for, before bounds
    forecasts: dict[str, dict[str, float]] = field(default_factory=dict)
    # container -> resource -> name of the selected model
    models: dict[str, dict[str, str]] = field(default_factory=dict)
    # container -> resource -> the quantile sized at (memory: after `allocate_risk`)
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)
    # container -> memory forecast at the mode's own level (bytes): what uniform sizing
    # would reserve; the operator's fleet mean of these is the next `memory_reference`
    at_mode: dict[str, float] = field(default_factory=dict)
    # container -> resource -> whether the suggestion differs beyond hysteresis
    changed: dict[str, dict[str, bool]] = field(default_factory=dict)
    # container -> its CPU day schedule: carry to the next call (None: not carried)
    schedule_state: dict[str, CachedSchedule] | None = None
    # container -> what the heap rule did or why it could not (`recommend.heap`)
    runtime_notes: dict[str, str] = field(default_factory=dict)
    # container -> the steps that made each request, recorded as they ran
    # (`recommend.explain`): the chain of a resource ends at the request suggested
    steps: dict[str, Explanation] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        """Unpacks as (suggestion, oom_state)."""
        return iter((self.suggestion, self.oom_state))


# --- OOM remediation (scalar, per container) ----------------------------------------------


def apply_ooms(
    state: OOMState,
    oom_times: Sequence[float],
    oom_usage: Sequence[float],
    request: int,
    now: float,
    stabilization: float,
    safest: float | None = None,
    kill_memory: float = KILL_MEMORY,
) -> OOMState:
    """Apply the OOM kills newer than the state has seen, oldest first, by THE OOM rule
    (`foresize.core.recommend.core.oom_bump`) on a fleet of one: x1.2 at a kill, compounding
    again if kills continue 2 minutes or more after the last bump, held for
    `stabilization` and at least `kill_memory` (the mode's, `memory_holds`); at least
    `safest` (the forecast at the safest memory level, bytes)."""
    events = sorted(
        (t, oom_usage[i] if i < len(oom_usage) else math.nan)
        for i, t in enumerate(oom_times)
        if t > state.last_seen_oom and t <= now
    )
    if not events:
        return replace(state)
    arrays = OOMArrays(
        floor=np.array([float(state.floor)]),
        until=np.array([state.until]),
        last_bump=np.array([state.last_bump]),
        count=np.array([state.count], dtype=np.int64),
    )
    one = np.ones(1, dtype=bool)
    known = safest is not None and math.isfinite(safest)
    for t, usage in events:
        arrays = oom_bump(
            arrays,
            one,
            t,
            np.array([float(request)]),
            np.array([usage if usage is not None else math.nan], dtype=np.float64),
            stabilization,
            safest=np.array([safest]) if known else None,
            kill_memory=kill_memory,
        )
    return replace(
        state,
        floor=int(arrays.floor[0]),
        until=float(arrays.until[0]),
        last_bump=float(arrays.last_bump[0]),
        last_seen_oom=events[-1][0],
        count=int(arrays.count[0]),
    )


# --- The recommendation -------------------------------------------------------------------


@dataclass(slots=True)
class TargetRequest:
    """One target's inputs for `recommend_batch`."""

    params: RecommendParams
    histories: Mapping[str, ContainerHistory]
    current: Mapping[str, ResourceRequirements]
    oom_state: Mapping[str, OOMState] | None = None
    forecast_state: Mapping[str, OnlineScores] | None = None
    # The CPU day schedules of the previous call (`CachedSchedule`); None recomputes
    # them on every call and carries nothing.
    schedule_state: Mapping[str, CachedSchedule] | None = None
    # container -> the heap ceiling its spec fixes (`cluster.runtime.heap_ceiling`):
    # memory never goes below it plus non-heap (`recommend.heap`).
    runtimes: Mapping[str, HeapCeiling] | None = None


def recommend_target(
    params: RecommendParams | Any,
    histories: Mapping[str, ContainerHistory],
    current: Mapping[str, ResourceRequirements],
    oom_state: Mapping[str, OOMState] | None,
    now: float,
    *,
    forecast_state: Mapping[str, OnlineScores] | None = None,
) -> RecommendResult:
    """The vertical suggestion for one target.

    params: `RecommendParams` or an AIScaleTarget. histories: container name -> history.
    current: container name -> the resources in force now (spec of the pod template).
    oom_state: from the previous call (None at first). forecast_state: from the previous
    call, to keep a rolling backtest instead of a cold-start one (optional).
    """
    req = TargetRequest(params, histories, current, oom_state, forecast_state)
    return recommend_batch([req], now)[0]


def recommend_batch(
    requests: Sequence[TargetRequest], now: float, *, memory_reference: float | None = None
) -> list[RecommendResult]:
    """`recommend_target` for many targets with one vectorised forecast per resource.

    Under a named mode, memory is sized at the level `allocate_risk` gives each container
    among all the containers of the batch (cheap protection is bought, expensive protection
    is sold), so the simulator passes its whole fleet in one call; a single target
    allocates among its own containers. `memory_reference` (bytes) overrides the fleet's
    average memory at the mode's level when the fleet is recommended in parts (the operator
    keeps it from earlier passes: `RecommendResult.at_mode`)."""
    reqs = [
        replace(
            r,
            params=r.params
            if isinstance(r.params, RecommendParams)
            else RecommendParams.from_target(r.params),
        )
        for r in requests
    ]
    # Flatten (target, container) pairs that have a history.
    rows: list[tuple[int, str]] = []
    for ti, r in enumerate(reqs):
        for name in r.current:
            if name in r.histories:
                rows.append((ti, name))
    new_states: list[dict[str, OnlineScores] | None] = [
        None if r.forecast_state is None else {} for r in reqs
    ]
    new_schedules: list[dict[str, CachedSchedule] | None] = [
        None if r.schedule_state is None else {} for r in reqs
    ]
    fc = {
        res: _forecast(reqs, rows, res, new_states, now, memory_reference, new_schedules)
        for res in RESOURCES
    }
    results = [_finish(ti, r, rows, fc, now, new_states[ti]) for ti, r in enumerate(reqs)]
    for result, schedules in zip(results, new_schedules, strict=True):
        result.schedule_state = schedules
    return results


@dataclass(slots=True)
class _RowForecasts:
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


_Row = tuple[int, str]
"""A row of a batch: (index of the target in the batch, container name)."""

_GroupKey = tuple[float, bool, tuple[float, ...]]
"""Rows forecast together: (forecast horizon, carries a forecast state, levels)."""


def _forecast(
    reqs: Sequence[TargetRequest],
    rows: Sequence[_Row],
    res: str,
    new_states: list[dict[str, OnlineScores] | None],
    now: float,
    memory_reference: float | None = None,
    new_schedules: list[dict[str, CachedSchedule] | None] | None = None,
) -> _RowForecasts:
    """Forecast every (target, container) row for `res` at its mode's levels, then pick
    one level per row: the mode's quantile, or for memory under a named mode the level
    `allocate_risk` gives it among the rows of the whole batch.

    Rows sharing a horizon and levels are forecast together; targets that carry a
    forecast state use the rolling backtest, others a cold-start one.
    """
    if not rows:
        empty = np.full(0, np.nan)
        return _RowForecasts(
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
        y = _history_matrix(reqs, group, res)
        qs = np.array(levels)
        base = int(math.floor(now / MODEL_STEP)) - (y.shape[1] - 1)
        if res == CPU:
            schedule[ks], opens[ks], remaining[ks] = _cpu_schedule(
                reqs, group, y, base, cfg, now, new_schedules
            )
            # What each container did since the last decision (`scheduled_cpu`).
            last = y[:, -cfg.h :] * _UNIT[CPU]
            last_max[ks], last_min[ks] = interval_range(last)
        if online:
            group_values, group_models, group_errors = _online_forecast(
                reqs, group, res, y, qs, cfg, base, new_states
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
    reqs: Sequence[TargetRequest], rows: Sequence[_Row], row_levels: Sequence[tuple[float, ...]]
) -> dict[_GroupKey, list[int]]:
    """Row numbers by what lets them share one vectorised forecast."""
    groups: dict[_GroupKey, list[int]] = {}
    for k, (ti, _name) in enumerate(rows):
        p = reqs[ti].params
        key = (p.forecast_blocks, reqs[ti].forecast_state is not None, row_levels[k])
        groups.setdefault(key, []).append(k)
    return groups


def _history_matrix(reqs: Sequence[TargetRequest], group: Sequence[_Row], res: str) -> np.ndarray:
    """The group's histories of `res`, right-aligned (newest last), NaN-padded at the left."""
    series = [
        np.asarray(getattr(reqs[ti].histories[name], res), dtype=np.float64) for ti, name in group
    ]
    length = max(len(v) for v in series)
    y = np.full((len(series), max(length, 1)), np.nan)
    for i, v in enumerate(series):
        if len(v):
            y[i, length - len(v) :] = v
    return y


def _cpu_schedule(
    reqs: Sequence[TargetRequest],
    group: Sequence[_Row],
    y: np.ndarray,
    base: int,
    cfg: ForecastConfig,
    now: float,
    new_schedules: list[dict[str, CachedSchedule] | None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's scheduled request at its mode's quantile for the segment of the day that
    holds `now` (`day_schedule`, canonical units), whether this decision is the first
    of that segment (a decision every `forecast_blocks`) and the seconds to the next
    segment's start (`DaySchedule.remaining`). Rows whose target carries a schedule state
    reuse the schedule computed for the same key (`CachedSchedule`) and store theirs in
    `new_schedules`."""
    schedule = np.full(len(group), np.nan)
    opens = np.zeros(len(group), dtype=bool)
    remaining = np.full(len(group), np.nan)
    mode_q = np.array([reqs[ti].params.model(CPU).quantile(CPU) for ti, _name in group])
    interval = np.array([reqs[ti].params.forecast_blocks for ti, _name in group])
    t_origin = (base + y.shape[1] - 1) * MODEL_STEP
    carried = any(reqs[ti].schedule_state is not None for ti, _name in group)
    digests = _schedule_digests(y, t_origin, cfg) if carried else None
    for q in np.unique(mode_q):
        sel = np.nonzero(mode_q == q)[0]
        day = _day_schedules(reqs, group, y, sel, t_origin, float(q), cfg, digests, new_schedules)
        for every in np.unique(interval[sel]):
            part = sel[interval[sel] == every]
            level, first = day.at(now, float(every))
            at = np.searchsorted(sel, part)
            schedule[part] = level[at, 0] * _UNIT[CPU]
            opens[part] = first[at, 0]
        remaining[sel] = day.remaining(now)[:, 0]
    return schedule, opens, remaining


def _schedule_digests(y: np.ndarray, t_origin: float, cfg: ForecastConfig) -> list[bytes]:
    """Per row, a digest of the history `day_schedule` reads for the day holding the next
    sample: the SCHEDULE_DAYS days before that day's midnight (NaN before the matrix)."""
    period = cfg.steps(DAY)
    nxt = int(round((t_origin + cfg.step) % DAY / cfg.step)) % period
    d0 = y.shape[1] - nxt  # column of the day's first sample
    lo = d0 - SCHEDULE_DAYS * period
    missing = max(0, -lo).to_bytes(8, "little")
    out = []
    for row in y[:, max(lo, 0) : max(d0, 0)]:
        # A row of the span is one contiguous block of `y`: hashed in place, not copied.
        digest = hashlib.blake2b(missing, digest_size=16)
        digest.update(row.data if row.flags.c_contiguous else row.tobytes())
        out.append(digest.digest())
    return out


def _day_schedules(
    reqs: Sequence[TargetRequest],
    group: Sequence[_Row],
    y: np.ndarray,
    sel: np.ndarray,
    t_origin: float,
    q: float,
    cfg: ForecastConfig,
    digests: Sequence[bytes] | None,
    new_schedules: list[dict[str, CachedSchedule] | None] | None,
) -> DaySchedule:
    """The day schedules (`day_schedule` at quantile `q`) of the rows `sel` of the group:
    carried ones where their key matches, the others computed together (all of them
    when no target carries a schedule state: `digests` None)."""
    day_key = float((t_origin + cfg.step) // DAY)
    keys = [(day_key, q, cfg.h, digests[i] if digests is not None else b"") for i in sel]
    cached: list[CachedSchedule | None] = []
    for i, key in zip(sel, keys, strict=True):
        ti, name = group[i]
        carried = reqs[ti].schedule_state
        hit = carried.get(name) if carried is not None and digests is not None else None
        cached.append(hit if hit is not None and hit.key == key else None)
    miss = [j for j, c in enumerate(cached) if c is None]
    fresh: DaySchedule | None = None
    if miss:
        fresh = day_schedule(
            forward_max(y[sel[miss]], cfg.h),
            y.shape[1] - 1,
            t_origin,
            np.array([q]),
            cfg,
            SCHEDULE_BLOCKS,
            SCHEDULE_DAYS,
            SCHEDULE_SLOT,
        )
        for m, j in enumerate(miss):
            cached[j] = CachedSchedule(
                keys[j],
                fresh.midnight,
                fresh.slot,
                fresh.opens[m, 0].copy(),
                fresh.level[m, 0].copy(),
            )
    entries = [c for c in cached if c is not None]
    if new_schedules is not None:
        for i, entry in zip(sel, entries, strict=True):
            ti, name = group[i]
            target_schedules = new_schedules[ti]
            if target_schedules is not None:
                target_schedules[name] = entry
    if fresh is not None and len(miss) == len(sel):
        return fresh
    first = entries[0]
    return DaySchedule(
        midnight=first.midnight,
        slot=first.slot,
        opens=np.stack([e.opens for e in entries])[:, None, :],
        level=np.stack([e.level for e in entries])[:, None, :],
    )


def _online_forecast(
    reqs: Sequence[TargetRequest],
    group: Sequence[_Row],
    res: str,
    y: np.ndarray,
    qs: np.ndarray,
    cfg: ForecastConfig,
    base: int,
    new_states: list[dict[str, OnlineScores] | None],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rolling backtest: one state per (target, container, resource), stacked into one
    vectorised step where the states line up (same decision history). Origins are
    absolute bucket numbers, so states survive the window sliding. Stores each row's next
    state in `new_states`; returns the group's values, model names and the backtest score
    of the model used, (rows, levels)."""
    states = []
    for ti, name in group:
        carried = reqs[ti].forecast_state
        st = carried.get(f"{name}/{res}") if carried is not None else None
        if st is None or st.loss.shape[1:] != (1, len(qs)):
            st = OnlineScores.empty(1, len(qs))
        states.append(st)
    by_sig: dict[tuple[int | None, tuple[int, ...], int], list[int]] = {}
    for i, st in enumerate(states):
        by_sig.setdefault(st.signature(), []).append(i)
    values = np.full((len(group), len(qs)), np.nan)
    names = np.full((len(group), len(qs)), "", dtype=object)
    errors = np.full((len(group), len(qs)), np.nan)
    for idxs in by_sig.values():
        stacked = OnlineScores.stack([states[i] for i in idxs])
        f, st2 = online_step(stacked, y[idxs], y.shape[1] - 1, qs, cfg, base=base)
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


def _pick_levels(
    reqs: Sequence[TargetRequest],
    rows: Sequence[_Row],
    res: str,
    row_levels: Sequence[tuple[float, ...]],
    all_levels: np.ndarray,
    values: np.ndarray,
    models: np.ndarray,
    schedule: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    memory_reference: float | None,
    errors: np.ndarray,
) -> _RowForecasts:
    """One level per row from the forecasts at every level (canonical units)."""
    mode_q = np.array([reqs[ti].params.model(res).quantile(res) for ti, _ in rows])
    own = np.searchsorted(all_levels, mode_q)
    idx = np.arange(len(rows))
    ref = memory_reference / _UNIT[res] if memory_reference else None
    pick = allocate_risk(values, all_levels, mode_q, reference=ref) if res == MEMORY else own
    top = np.array([np.searchsorted(all_levels, max(lv)) for lv in row_levels])
    unit = _UNIT[res]
    nan = np.full(len(rows), np.nan)
    sched, opens, remaining, last_max, last_min = schedule
    if res == CPU:
        raise_at = values[:, int(np.searchsorted(all_levels, CPU_RAISE_QUANTILE))] * unit
    else:
        raise_at, sched, opens, remaining, last_max, last_min = nan, nan, nan > 0, nan, nan, nan
    return _RowForecasts(
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


def _finish(
    ti: int,
    r: TargetRequest,
    rows: Sequence[_Row],
    fc: dict[str, _RowForecasts],
    now: float,
    fstate: dict[str, OnlineScores] | None,
) -> RecommendResult:
    p: RecommendParams = r.params
    suggestion = Suggestion(
        uid=p.uid, created_at=now, window_start=now, window_end=now + p.forecast_blocks
    )
    oom_out: dict[str, OOMState] = {}
    forecasts: dict[str, dict[str, float]] = {}
    models: dict[str, dict[str, str]] = {}
    quantiles: dict[str, dict[str, float]] = {}
    mode_values: dict[str, float] = {}
    changed: dict[str, dict[str, bool]] = {}
    enough_all = True
    index = {(t, n): k for k, (t, n) in enumerate(rows)}
    proposed: dict[str, ResourceRequirements] = {}
    notes: dict[str, str] = {}
    explanations: dict[str, Explanation] = {}
    for name, cur in r.current.items():
        ex = explanations[name] = Explanation()
        hist = r.histories.get(name)
        bounds = p.bounds(name)
        k = index.get((ti, name))
        enough = (
            hist is not None
            and hist.first_seen is not None
            and now - hist.first_seen >= p.min_lookback_to_scale
        )
        enough_all = enough_all and enough
        # OOM floor (memory): apply kills newer than the state has seen.
        st = (r.oom_state or {}).get(name, OOMState())
        if p.oom_enabled and hist is not None and hist.oom_times:
            st = apply_ooms(
                st,
                hist.oom_times,
                hist.oom_usage,
                int(cur.requests.get(MEMORY, 0)),
                now,
                p.stabilization_window,
                float(fc[MEMORY].safest[k]) if k is not None else None,
                kill_memory=p.memory_holds()[1],
            )
        oom_out[name] = st
        new = cur.copy()
        forecasts[name], models[name], changed[name], quantiles[name] = {}, {}, {}, {}
        for res in RESOURCES:
            if k is None:
                held_value = cur.requests.get(res)
                ex.step(
                    "history",
                    res,
                    None if held_value is None else float(held_value),
                    "no usage history of this container: the request in force stays",
                )
                continue
            assert hist is not None  # a row exists only for a container with history
            peak, span = history_words(np.asarray(getattr(hist, res)) * _UNIT[res], MODEL_STEP)
            ex.step("history", res, peak, f"{span}; the highest usage seen {amount(res, peak)}")
            value = float(fc[res].value[k])
            forecasts[name][res] = value
            models[name][res] = str(fc[res].model[k])
            quantiles[name][res] = float(fc[res].level[k])
            if res == MEMORY and np.isfinite(fc[res].at_mode[k]):
                mode_values[name] = float(fc[res].at_mode[k])
            m = p.model(res)
            floor = st.active(now) if res == MEMORY else 0
            if not np.isfinite(value) or not enough or hist is None:
                # Not enough history (hasEnoughDataToScale false) or nothing to forecast
                # from: hold the current value, but an OOM floor still raises memory.
                have = cur.requests.get(res)
                why = (
                    "no forecast from this history"
                    if enough
                    else "less than min_lookback_to_scale"
                    f" ({duration_words(p.min_lookback_to_scale)}) of history"
                )
                ex.step(
                    "lookback",
                    res,
                    None if have is None else float(have),
                    f"{why}: the request in force stays",
                )
                if floor and floor > cur.requests.get(res, 0):
                    ex.step("oom_floor", res, float(floor), _floor_why(st, now))
                    _set(new, cur, res, float(floor), bounds.for_resource(res), ex)
                continue
            ex.step("forecast", res, value, _forecast_why(p, res, fc[res], k))
            buffer = 1.0 + m.buffer_percentage / 100.0
            target = value * buffer
            if m.buffer_percentage:
                ex.step(
                    "buffer",
                    res,
                    target,
                    f"forecast_buffer_percentage {m.buffer_percentage:g}%",
                )
            held = cur.requests.get(res)
            if res == CPU:
                # THE CPU rule (`scheduled_cpu`): the day segment's request, raised
                # where the forecast's median is above it and usage reached the request,
                # a burst met, a raise let go, a drop where the forecast is far under it.
                chosen = scheduled_cpu(
                    np.array([fc[res].schedule[k] * buffer]),
                    np.array([fc[res].raise_at[k] * buffer]),
                    np.array([target]),
                    np.array([float(held) if held is not None else math.nan]),
                    np.array([bool(fc[res].opens[k])]),
                    np.array([fc[res].last_max[k]]),
                    np.array([fc[res].last_min[k]]),
                    np.array([fc[res].remaining[k]]),
                    np.array([fc[res].model[k] in TIME_OF_DAY_MODELS]),
                )[0]
                raise_to = target
                if np.isfinite(chosen):
                    target = float(chosen)
                elif held is not None:
                    target = float(held)
                ex.step(
                    "schedule",
                    CPU,
                    target,
                    _schedule_why(target, raise_to, held, fc[res], k, buffer),
                )
            if res == MEMORY:
                target, st = _memory_target(target, st, hist, p, now, ex)
                oom_out[name] = st
                target = _heap_rule(
                    target, cur, hist, (r.runtimes or {}).get(name), name, notes, ex
                )
            target = ex.moved(
                "oom_floor", res, target, max(target, float(floor)), _floor_why(st, now)
            )
            # The OOM floor is raised over the lower bound but the upper bound and an
            # unmanaged limit remain the user's hard ceiling.
            _set(new, cur, res, target, bounds.for_resource(res), ex)
        proposed[name] = new
    proposed = _keep_qos(r.current, proposed, explanations)
    for name, new in proposed.items():
        changed[name] = _changes(p, r.current[name], new, explanations.get(name))
        suggestion.containers[name] = ContainerSuggestion(
            name, dict(new.requests), dict(new.limits)
        )
    return RecommendResult(
        suggestion=suggestion,
        oom_state=oom_out,
        has_enough_data=enough_all,
        forecast_state=fstate,
        forecasts=forecasts,
        models=models,
        quantiles=quantiles,
        at_mode=mode_values,
        changed=changed,
        runtime_notes=notes,
        steps=explanations,
    )


def _forecast_why(p: RecommendParams, res: str, fc: _RowForecasts, k: int) -> str:
    """The forecast step in words: the horizon, the mode's quantile (memory: the level the
    fleet's risk allocation gave), the model chosen by the backtest and its error."""
    m = p.model(res)
    level = float(fc.level[k])
    own = m.quantile(res)
    mode = f"mode {m.mode}" + (f" {m.percentile_value:g}" if m.mode == "percentile" else "")
    at = f"quantile {level:g} ({mode})"
    if res == MEMORY and not math.isclose(level, own):
        at = f"quantile {level:g} (the memory risk allocated across the fleet; {mode} asks {own:g})"
    err = float(fc.error[k])
    scored = (
        f"backtest error {amount(res, err)} (mean pinball loss of its past forecasts)"
        if math.isfinite(err)
        else "not backtested yet (the default model)"
    )
    return (
        f"the forecast of the max over the next {duration_words(p.forecast_blocks)} at {at};"
        f" model {fc.model[k]} chosen by the backtest, {scored}"
    )


def _schedule_why(
    target: float,
    raise_to: float,
    held: float | None,
    fc: _RowForecasts,
    k: int,
    buffer: float,
) -> str:
    """Which branch of THE CPU rule (`scheduled_cpu`) gave `target`, told from the values it
    chose between (the number itself is the rule's)."""
    level = float(fc.schedule[k]) * buffer
    opens = bool(fc.opens[k])
    last_max = float(fc.last_max[k])

    def same(a: float | None) -> bool:
        return a is not None and math.isfinite(a) and math.isclose(target, a, rel_tol=1e-9)

    segment = (
        f"the day segment's level {amount(CPU, level)} (quantile of these hours' 15-minute"
        f" maxima over the last {SCHEDULE_DAYS} days)"
    )
    if not math.isfinite(level):
        base = "less than a day of history: the forecast stands in for the day schedule"
        return base if same(raise_to) else f"{base}; the request in force stays"
    if same(level):
        return ("a segment of the day starts: " if opens else "") + segment
    if same(held) and not opens:
        if held is not None and held < level:
            return (
                "kept until the next segment of the day starts: mid-segment a request rises"
                " only where the forecast's median is above the segment's level and the"
                f" usage reached the request; {segment}"
            )
        return f"kept until the next segment of the day starts; {segment}"
    if same(raise_to):
        if held is not None and target < held:
            return (
                f"came down to the forecast: the request was over {CPU_DROP_FACTOR:g} times it"
                f" with the last interval under it; {segment}"
            )
        return f"raised to the forecast, above {segment}"
    if same(last_max):
        return (
            f"a burst met at once: every sample of the last interval was over"
            f" {1 / CPU_RAISE_SHARE:g} times the segment's level; raised to its highest sample"
        )
    return f"a raise let go: back to the larger of the forecast and {segment}"


def _floor_why(st: OOMState, now: float) -> str:
    """The OOM floor in words."""
    return (
        f"OOM floor {amount(MEMORY, st.floor)} after {st.count} OOM kill"
        f"{'s' if st.count != 1 else ''} (1.2 x the request hit or the usage at the kill,"
        f" compounding), held for {duration_words(max(st.until - now, 0.0))} more"
    )


def _heap_rule(
    target: float,
    cur: ResourceRequirements,
    hist: ContainerHistory,
    ceiling: HeapCeiling | None,
    name: str,
    notes: dict[str, str],
    ex: Explanation | None = None,
) -> float:
    """THE heap rule (`recommend.heap`): a memory target never below the container's heap
    ceiling (of the limit in force, which the running heap was sized from) + non-heap."""
    if ceiling is None or ceiling.runtime is None:
        return target
    if ceiling.unknown is not None:
        notes[name] = f"{ceiling.runtime} heap ceiling unknown: {ceiling.unknown}"
        return target
    peak = float(recent_peak(np.asarray(hist.memory, dtype=np.float64)[None, :], MODEL_STEP)[0])
    hf = heap_floor(ceiling, cur.limits.get(MEMORY), peak)
    if hf is None:
        notes[name] = f"{ceiling.runtime} heap is a share of the limit, and there is no limit"
        return target
    text = hf.describe(ceiling)
    bound = heap_bound_note(ceiling, hf, target)
    notes[name] = f"{text}; {bound}" if bound else text
    raised = max(target, float(hf.floor))
    return ex.moved("heap", MEMORY, target, raised, text) if ex is not None else raised


def _memory_target(
    target: float,
    st: OOMState,
    hist: ContainerHistory,
    p: RecommendParams,
    now: float,
    ex: Explanation | None = None,
) -> tuple[float, OOMState]:
    """A memory request from its forecast target by THE memory rule
    (`foresize.core.recommend.core.memory_request`, the one the replay scores) on a fleet of
    one: the headroom, the scale-down ratchet over the targets kept in `st.recent`, and
    the recent peak."""
    recent = tuple((t, np.array([v])) for t, v in st.recent)
    parts: dict[str, np.ndarray] = {}
    window = p.memory_holds()[0]
    peak = recent_peak(np.asarray(hist.memory, dtype=np.float64)[None, :], MODEL_STEP)
    value, kept = memory_request(np.array([target]), recent, now, window, peak, parts)
    if ex is not None:
        headroom, held = float(parts["headroom"][0]), float(parts["ratchet"][0])
        ex.step("headroom", MEMORY, headroom, f"+{MEMORY_HEADROOM:.0%} memory headroom")
        ex.moved(
            "ratchet",
            MEMORY,
            headroom,
            held,
            f"memory comes down only to the highest target of the last"
            f" {duration_words(window)} (scale-down stabilization)",
        )
        ex.moved(
            "recent_peak",
            MEMORY,
            held,
            float(value[0]),
            f"never below the highest usage of the last {duration_words(MEMORY_PEAK_WINDOW)}"
            f" ({amount(MEMORY, float(peak[0]))}) + {MEMORY_HEADROOM:.0%}",
        )
    return float(value[0]), replace(st, recent=tuple((t, float(v[0])) for t, v in kept))


def _changes(
    p: RecommendParams,
    cur: ResourceRequirements,
    new: ResourceRequirements,
    ex: Explanation | None = None,
) -> dict[str, bool]:
    """Per resource, whether the proposed request is a change worth making (hysteresis).
    A move it holds back is the last step of the resource's explanation: the request
    published stays the one in force (`recommend.suggestions`)."""
    out: dict[str, bool] = {}
    for res in RESOURCES:
        a, b = cur.requests.get(res), new.requests.get(res)
        if a is None or b is None or a == b:
            out[res] = a != b
            continue
        up = b > a
        th = p.scale_up[res] if up else p.scale_down[res]
        out[res] = th.significant(res, a, b)
        if not out[res] and ex is not None:
            amount_of = dict(th.absolute).get(res)
            limit = (
                f"{amount(res, amount_of)}"
                if th.type == "absolute" and amount_of is not None
                else f"{th.percent:g}%"
            )
            ex.step(
                "hysteresis",
                res,
                float(a),
                f"a move to {amount(res, b)} ({(b - a) / a:+.1%}) is under the scale"
                f"{'_up' if up else '_down'} threshold ({limit}): {amount(res, a)} stays",
            )
    return out


def round_up_request(res: str, value: float) -> int:
    """Round up to 1Mi / 1m, ignoring float noise (below a millionth of a MiB, a
    thousandth of a millicore): stores keep float32 samples, so 0.3 cores reads back as
    300.00001m, which is 300m, not 301m."""
    if res == MEMORY:
        return int(math.ceil(round(value / MIB, 6))) * MIB
    return int(math.ceil(round(value, 3)))


def _set(
    new: ResourceRequirements,
    cur: ResourceRequirements,
    res: str,
    target: float,
    b: ResourcePolicy | None,
    ex: Explanation | None = None,
) -> None:
    """Bounds, rounding and limits for one resource of one container (in place on `new`);
    each that binds is a step of `ex`."""
    ex = ex if ex is not None else Explanation()
    if res not in cur.requests and res not in cur.limits:
        # No request and no limit: setting one would change the pod's QoS class.
        ex.step(
            "qos",
            res,
            None,
            f"no {res} request or limit: setting one would change the pod's QoS class",
        )
        return
    b = b or ResourcePolicy()
    v = target
    if b.lower is not None:
        v = ex.moved(
            "lower_bound",
            res,
            v,
            max(v, b.lower),
            f"the container's {res} lowerbound {amount(res, b.lower)}",
        )
    if b.upper is not None:
        v = ex.moved(
            "upper_bound",
            res,
            v,
            min(v, b.upper),
            f"the container's {res} upperbound {amount(res, b.upper)}",
        )
    request = round_up_request(res, v)
    ex.moved("round", res, v, request, f"rounded up to {'1m' if res == CPU else '1Mi'}")
    if b.upper is not None:
        request = int(
            ex.moved(
                "upper_bound",
                res,
                request,
                min(request, int(b.upper)),
                f"the container's {res} upperbound {amount(res, b.upper)}",
            )
        )
    limit = cur.limits.get(res)
    if b.limit_ratio is not None and limit is not None:
        # Limits kept proportional: limit = request x ratio (rounded up).
        new.limits[res] = round_up_request(res, request * b.limit_ratio)
        ex.step(
            "limit_ratio",
            res,
            request,
            f"limit {amount(res, new.limits[res])} = request x limit.ratio {b.limit_ratio:g}",
        )
    elif limit is not None and request > limit:
        # Without limit.ratio the limit stays and a request never exceeds it.
        request = int(
            ex.moved(
                "limit",
                res,
                request,
                int(limit),
                f"the {res} limit in force"
                f" {amount(res, limit)} (no limit.ratio: limits are left as"
                " they are, and a request never exceeds its limit)",
            )
        )
    new.requests[res] = request


def _keep_qos(
    current: Mapping[str, ResourceRequirements],
    proposed: dict[str, ResourceRequirements],
    explanations: Mapping[str, Explanation] | None = None,
) -> dict[str, ResourceRequirements]:
    """Never change the pod's QoS class (architecture §3.1; simulator.md, resize validation).
    A request this moves is a step of its container's explanation."""
    before = qos_class_of(Container(n, r) for n, r in current.items())
    after = qos_class_of(Container(n, r) for n, r in proposed.items())
    if before == after:
        return proposed
    steps = explanations or {}
    fixed = {n: r.copy() for n, r in proposed.items()}
    if before == "Guaranteed":
        # Guaranteed needs request == limit everywhere: move limits with requests.
        for r in fixed.values():
            for res in RESOURCES:
                if res in r.requests:
                    r.limits[res] = r.requests[res]
    elif before == "Burstable" and after == "Guaranteed":
        # Every request landed on its limit: keep one CPU request 1m (or memory 1Mi)
        # under its limit, the smallest change that keeps the pod Burstable.
        for n, r in fixed.items():
            for res, unit in ((CPU, 1), (MEMORY, MIB)):
                lim = r.limits.get(res)
                if lim is not None and r.requests.get(res) == lim and lim > unit:
                    r.requests[res] = lim - unit
                    if n in steps:
                        steps[n].step(
                            "qos",
                            res,
                            r.requests[res],
                            "one request kept under its"
                            " limit: every request on its limit would make the"
                            " Burstable pod Guaranteed",
                        )
                    return fixed
    if qos_class_of(Container(n, r) for n, r in fixed.items()) != before:
        kept = {n: r.copy() for n, r in current.items()}
        for n, r in kept.items():
            for res in RESOURCES:
                if (
                    n in steps
                    and res in r.requests
                    and proposed[n].requests.get(res) != r.requests[res]
                ):
                    steps[n].step(
                        "qos",
                        res,
                        r.requests[res],
                        f"the suggestion would change the"
                        f" pod's QoS class ({before}): the requests in force stay",
                    )
        return kept
    return fixed


# --- Reading histories -------------------------------------------------------------------


def load_histories(
    reader: Any,
    namespace: str,
    workload: str,
    containers: Sequence[str],
    now: float,
    *,
    window: float = HISTORY_WINDOW,
    step: float = MODEL_STEP,
) -> dict[str, ContainerHistory]:
    """Container histories of one workload from any `HistoryReader` (SQLite, in-memory,
    Prometheus), on the model grid ending at `now`, with recent OOM kills."""
    from foresize.core.history import OOM, SeriesKey

    length = max(1, int(window // step))
    keys = [SeriesKey(namespace, workload, c) for c in containers]
    cpu = reader.window(keys, CPU, now, length, step)
    mem = reader.window(keys, MEMORY, now, length, step)
    out = {}
    for i, (c, k) in enumerate(zip(containers, keys, strict=True)):
        events = reader.events(k, OOM, now - window, now + 1e-9)
        out[c] = ContainerHistory(
            cpu=cpu[i],
            memory=mem[i],
            first_seen=reader.first_seen(k),
            oom_times=[e[0] for e in events],
            oom_usage=[e[2] if e[2] > 0 else math.nan for e in events],
        )
    return out
