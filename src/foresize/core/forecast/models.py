"""Cheap forecasters of the distribution of the MAXIMUM usage over the next horizon.

All functions work on many series at once: `y` is a float matrix (series x time) on a
fixed step (NaN = missing), whose last column is "now". The quantity forecast is

    M[t] = max(y[t+1], ..., y[t+h])      (h = horizon / step)

i.e. the peak the request must cover until the next decision. Each model returns, per
series and per asked quantile q, an estimate of the q-quantile of M at the last column.
Nothing here reads a clock or a file; times are passed in.

Models (constants are documented where they are defined, in `ForecastConfig`):
- `recent`: empirical quantile of M over the last day. Follows level shifts fast.
- `slot_day`: time-of-day slot quantile: M at the same time of day on previous days,
  pooled with neighbouring slots (daily seasonality; upsizes ahead of recurring peaks).
- `slot_week`: the same for the same time of the week (weekly seasonality).
- `decay`: VPA-style exponentially decaying histogram of M (buckets 5% apart, 24 h
  half-life): a robust long-memory estimate for flat series.
- `persist`: now + quantile of the recent rises (M[t] - y[t]): short-term persistence,
  good for sticky (memory-like) and trending series.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from foresize.core.forecast.decay import day_max, decay_quantiles, window_max

DAY = 86400.0
WEEK = 7 * DAY

MODELS = ("recent", "slot_day", "slot_week", "decay", "persist", "peaks")
TIME_OF_DAY_MODELS = ("slot_day", "slot_week")
"""The models that forecast from the same time of the day or week on past days: a raise
they ask for anticipates a recurring peak, where the others' repeat the last day's
history (`recommend.core.scheduled_cpu`)."""


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    """Forecasting constants. Each value has a reason that does not depend on a data set."""

    step: float = 300.0
    """5 minutes: the model grid of architecture §3.1 (1-minute samples reduced to their max)."""
    horizon: float = 900.0
    """`forecast_blocks` default (15 minutes): the request must cover the peak until the
    next decision."""
    recent_window: float = DAY
    """One day: the shortest window that still contains a full daily cycle, so a `recent`
    quantile is not fooled by the quiet half of the day."""
    slot_neighbours: float = 1800.0
    """±30 minutes: daily patterns drift by tens of minutes from day to day (batch jobs
    start late, users log on early); pooling 13 slots a day also gives enough points for a
    high quantile from a few days."""
    slot_days: int = 14
    """The history retention (14 days): every stored day is used."""
    week_neighbours: float = 3600.0
    """±1 hour for the weekly slot: only 1–2 weeks of history exist, so pool wider."""
    weeks: int = 2
    decay_half_life: float = DAY
    """VPA's documented half-life for its decaying histograms (24 h)."""
    decay_window: float = 8 * DAY
    """VPA's history length (8 days); older points weigh < 1/256 anyway."""
    bucket_ratio: float = 1.05
    """VPA's histogram resolution: buckets 5% apart."""
    persist_window: float = DAY
    """Rises observed over one day (a full daily cycle) give the spread of `persist`."""
    backtest_origins: int = 8
    """Past origins in a cold-start backtest: enough to average out single spikes while a
    10,000-series selection stays within seconds."""
    backtest_spacing: float = 3 * 3600.0
    """Origins 3 hours apart span a full day with 8 origins (all times of day are scored)."""
    score_half_life: float = 3 * DAY
    """Online model scores forget with a 3-day half-life: a model that stopped fitting
    (a workload changed) loses its lead within days, yet one bad hour does not flip it."""
    calibration_rate: float = 0.05
    """Calibration step: a window missed by all series moves the factor by ~5% (the
    smallest change the default hysteresis acts on); at the target miss rate it stays put."""
    models: tuple[str, ...] = ("recent", "slot_day", "slot_week", "decay", "persist", "peaks")
    """The candidate models (all by default)."""
    calibration_min: float = -0.7
    calibration_max: float = 1.4
    """The calibration factor stays within [x0.5, x4]: it corrects a bias, it must not
    become the forecast."""

    @property
    def h(self) -> int:
        return max(1, round(self.horizon / self.step))

    def steps(self, seconds: float) -> int:
        return max(1, round(seconds / self.step))


def forward_max(y: np.ndarray, h: int) -> np.ndarray:
    """M[:, t] = nanmax(y[:, t+1 : t+h+1]); NaN where all are missing or beyond the end."""
    s, t = y.shape
    out = np.empty((s, t), dtype=y.dtype)
    # A block of rows at a time, so the h passes over it run in the CPU cache.
    step = max(1, FORWARD_MAX_CELLS // max(1, t))
    for r in range(0, s, step):
        rows = out[r : r + step]
        # The first of the h columns as is, then fmax with the others (fmax ignores NaN
        # unless both sides are NaN: gaps never become values).
        rows[:, t - 1 :] = np.nan
        rows[:, : t - 1] = y[r : r + step, 1:]
        for k in range(2, min(h, t - 1) + 1):
            np.fmax(rows[:, : t - k], y[r : r + step, k:], out=rows[:, : t - k])
    return out


FORWARD_MAX_CELLS = 1 << 15
"""Cells of `forward_max` per block of rows (256 KiB of output)."""


def nanquantile(a: np.ndarray, qs: np.ndarray, scratch: bool = False) -> np.ndarray:
    """Quantiles along the last axis ignoring NaN (linear interpolation). (..., W) -> (..., Q).

    np.nanquantile is ~50x slower on many short rows; this sorts once for all quantiles.
    `scratch`: `a` is the caller's temporary, sorted in place instead of a copy.
    """
    if scratch:
        a.sort(axis=-1)  # NaN sort last
        s = a
    else:
        s = np.sort(a, axis=-1)
    qs = np.asarray(qs, dtype=np.float64)
    width = a.shape[-1]
    gaps = np.isnan(s[..., -1]) if width else None
    if gaps is not None and not gaps.any():
        # No row has a gap: every row's positions are the same, read as columns (the
        # same numbers as per row below).
        pos1 = qs * (width - 1)
        lo1 = np.floor(pos1).astype(np.int64)
        hi1 = np.minimum(lo1 + 1, width - 1)
        vlo1, vhi1 = s[..., lo1], s[..., hi1]
        same: np.ndarray = vlo1 + (vhi1 - vlo1) * (pos1 - lo1)
        return same
    # Values a row: all of them where its last sorted value is one, else counted on the
    # rows with gaps only.
    n = np.full(a.shape[:-1], width, dtype=np.int64)
    if gaps is not None:
        n[gaps] = np.sum(~np.isnan(s[gaps]), axis=-1)
    pos = qs * np.maximum(n[..., None] - 1, 0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(n[..., None] - 1, 0))
    frac = pos - lo
    vlo = np.take_along_axis(s, lo, axis=-1)
    vhi = np.take_along_axis(s, hi, axis=-1)
    out: np.ndarray = vlo + (vhi - vlo) * frac
    out[n == 0] = np.nan
    return out


def _window(m: np.ndarray, end: int, length: int) -> np.ndarray:
    """m[:, end-length+1 : end+1] clipped to the array start."""
    start = max(0, end - length + 1)
    return m[:, start : end + 1]


def model_recent(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    known = o - cfg.h  # the latest M fully observed at origin o
    if known < 0:
        return np.full((y.shape[0], len(qs)), np.nan)
    return nanquantile(_window(m, known, cfg.steps(cfg.recent_window)), qs)


def _slot_gather(m: np.ndarray, o: int, period: int, count: int, nb: int, h: int) -> np.ndarray:
    idx = []
    for d in range(1, count + 1):
        centre = o - d * period
        for delta in range(-nb, nb + 1):
            j = centre + delta
            if 0 <= j <= o - h:
                idx.append(j)
    if not idx:
        return np.full((m.shape[0], 1), np.nan)
    return m[:, np.asarray(idx)]  # a copy (the models sort it in place)


def model_slot_day(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    pts = _slot_gather(
        m, o, cfg.steps(DAY), cfg.slot_days, round(cfg.slot_neighbours / cfg.step), cfg.h
    )
    return nanquantile(pts, qs, scratch=True)


def model_slot_week(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    pts = _slot_gather(
        m, o, cfg.steps(WEEK), cfg.weeks, round(cfg.week_neighbours / cfg.step), cfg.h
    )
    return nanquantile(pts, qs, scratch=True)


def model_decay(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    """VPA-style decaying histogram of the max (24 h half-life, buckets 5% apart), over the
    VPA history length (8 days), never above the largest max of those 8 days (`decay`)."""
    known = o - cfg.h
    if known < 0:
        return np.full((y.shape[0], len(qs)), np.nan)
    # The largest max of the window, m[:, known - window + 1 : known + 1], is the largest
    # of the usage it was taken over (m[c] is the max of y[c + 1 : c + h + 1]).
    start = max(0, known - cfg.steps(cfg.decay_window) + 1)
    cap = _cap(y, o, start + 1, cfg)
    return decay_quantiles(m, known, np.asarray(qs, dtype=np.float64), cfg, cap)


def _cap(y: np.ndarray, o: int, lo: int, cfg: ForecastConfig) -> np.ndarray:
    """nanmax of y[:, lo : o + 1]. The daily peaks at origin `o` (`_daily_peaks`, which
    `peaks` asks for at the same origin) cover its columns from `first` on: their maximum
    and that of the few columns before them, where they lie within the window; else from
    the running maxima. A maximum is the same in any grouping."""
    day, days = _peak_days(cfg)
    first = max(0, o + 1 - days * day)
    retain = _usage_retained(cfg)
    if first < lo or first == o + 1:
        return window_max(y, lo, o + 1, retain)
    with np.errstate(invalid="ignore"):
        out: np.ndarray = np.fmax.reduce(_daily_peaks(y, o, cfg), axis=1)
    if lo < first:
        np.fmax(out, window_max(y, lo, first, retain), out=out)
    return out


def _peak_days(cfg: ForecastConfig) -> tuple[int, int]:
    """(columns a day, days) of the daily peaks: the whole days of the decay's window."""
    day = cfg.steps(DAY)
    return day, cfg.steps(cfg.decay_window) // day


def _daily_peaks(y: np.ndarray, o: int, cfg: ForecastConfig) -> np.ndarray:
    """(S, days): column k the usage's max over the day ending k days before column o
    (inclusive), NaN before the first column; not to be written."""
    day, days = _peak_days(cfg)
    return day_max(y, o + 1, day, days, _usage_retained(cfg))


def _usage_retained(cfg: ForecastConfig) -> int:
    """Columns of usage the running maxima keep behind a window: the decay's window and
    the horizon (the daily peaks need less)."""
    return cfg.steps(cfg.decay_window) + cfg.h


def model_persist(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    known = o - cfg.h
    if known < 0:
        return np.full((y.shape[0], len(qs)), np.nan)
    n = cfg.steps(cfg.persist_window)
    start = max(0, known - n + 1)
    rises = m[:, start : known + 1] - y[:, start : known + 1]
    # Persist from the latest observed sample (the newest may be missing); an hour back at
    # most, because an older level says little about the next 15 minutes.
    lo = max(0, o - cfg.steps(3600.0))
    tail = y[:, lo : o + 1]
    fin = np.isfinite(tail)
    last = tail.shape[1] - 1 - np.argmax(fin[:, ::-1], axis=1)
    now = np.where(fin.any(axis=1), tail[np.arange(tail.shape[0]), last], np.nan)
    out: np.ndarray = np.maximum(now[:, None] + nanquantile(rises, qs, scratch=True), 0.0)
    return out


def model_peaks(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    """Decayed quantile of daily peaks (VPA's memory estimator, without its margin).

    The q-quantile of a 15-minute max is the q**n quantile of a day's max when the n
    windows of a day are independent, so the day-level quantile asked for is q**n.
    """
    day, ndays = _peak_days(cfg)
    peaks = _daily_peaks(y, o, cfg)
    weights = np.exp2(-np.arange(ndays) * DAY / cfg.decay_half_life)
    order = np.argsort(np.where(np.isnan(peaks), np.inf, peaks), axis=1)
    sv = np.take_along_axis(peaks, order, axis=1)
    sw = np.where(np.isnan(sv), 0.0, weights[order])
    cum = np.cumsum(sw, axis=1)
    total = cum[:, -1:]
    out = np.empty((y.shape[0], len(qs)))
    per_day = day / cfg.h
    for i, q in enumerate(qs):
        qd = q**per_day
        k = np.argmax(cum >= qd * total - 1e-12, axis=1)
        out[:, i] = sv[np.arange(len(k)), k]
    out[total[:, 0] <= 0] = np.nan
    return out


MODEL_FUNCS = {
    "recent": model_recent,
    "slot_day": model_slot_day,
    "slot_week": model_slot_week,
    "decay": model_decay,
    "persist": model_persist,
    "peaks": model_peaks,
}


def all_models(
    y: np.ndarray, m: np.ndarray, o: int, qs: np.ndarray, cfg: ForecastConfig
) -> np.ndarray:
    """Every model's forecast at origin column `o`: array (models, S, Q).

    Models left out of `cfg.models` are NaN (never selected)."""
    nan = np.full((y.shape[0], len(qs)), np.nan)
    return np.stack(
        [MODEL_FUNCS[name](y, m, o, qs, cfg) if name in cfg.models else nan for name in MODELS]
    )


def pinball(actual: np.ndarray, forecast: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Quantile (pinball) loss; broadcasts actual (..., S, 1) against forecast (..., S, Q)."""
    diff = actual - forecast
    loss: np.ndarray = np.where(diff >= 0, qs * diff, (qs - 1.0) * diff)
    return loss


@dataclass(frozen=True, slots=True)
class DaySchedule:
    """One day's scheduled request per series and quantile (`day_schedule`).

    The day (from midnight UTC) is cut into slots; `opens[s, q, k]` is true where one of
    the series' segments starts at slot k, and `level[s, q, k]` is the request of the
    segment holding slot k (NaN where its history has no window)."""

    midnight: float
    """Absolute time (seconds) of the day's midnight UTC."""
    slot: float
    """Slot length (seconds); segments start on slot boundaries."""
    opens: np.ndarray  # (S, Q, K) bool
    level: np.ndarray  # (S, Q, K)

    def at(self, t: float, interval: float) -> tuple[np.ndarray, np.ndarray]:
        """(values, opens), each (S, Q), for a decision that applies from time `t`:
        the level of the segment holding `t`, and whether `t` lies within `interval`
        after that segment's start (the decision is the first of its segment)."""
        into_day = (t - self.midnight) % DAY
        k = min(int(into_day // self.slot), self.level.shape[2] - 1)
        first = (into_day - k * self.slot) < interval
        return self.level[:, :, k], self.opens[:, :, k] & first

    def remaining(self, t: float) -> np.ndarray:
        """(S, Q) seconds from `t` to the start of the next segment after the slot holding
        `t` (the day's cut wraps midnight; a day cut once: a whole day after that slot)."""
        into_day = (t - self.midnight) % DAY
        slots = self.level.shape[2]
        k = min(int(into_day // self.slot), slots - 1)
        ahead = np.roll(self.opens, -(k + 1), axis=2)  # index 0: the slot after k
        steps = np.where(ahead.any(axis=2), np.argmax(ahead, axis=2) + 1, slots)
        out: np.ndarray = (k + steps) * self.slot - into_day
        return out


@functools.lru_cache(maxsize=16)
def _partitions(slots: int, blocks: int) -> np.ndarray:
    """(P, blocks) every choice of `blocks` segment starts among `slots` (sorted)."""
    return np.array(list(itertools.combinations(range(slots), blocks)), dtype=np.int64)


PARTITION_CHUNK = 2048
"""Rows scheduled at once: bounds the (rows, cuts, segments) gather to about 100 MB at 24
slots and 3 segments (2,024 cuts), and the windows of a week to about 30 MB."""


def cyclic_partition(profile: np.ndarray, blocks: int) -> np.ndarray:
    """(R, K) profile -> (R, K) bool, the slots that start a segment: the cut of the cyclic
    day into `blocks` contiguous segments that minimises the area between each segment's
    peak and the profile (what holding each segment's peak reserves above the profile).
    Ties keep the earliest starts (a flat profile is cut at midnight)."""
    r, k = profile.shape
    blocks = max(1, min(blocks, k))
    pp = np.concatenate([profile, profile], axis=1)
    # area[:, s, n]: the segment of n slots starting at slot s (wrapping past midnight).
    area = np.zeros((r, k, k + 1))
    peak = pp[:, :k].copy()
    total = pp[:, :k].copy()
    for n in range(1, k + 1):
        if n > 1:
            np.fmax(peak, pp[:, n - 1 : n - 1 + k], out=peak)
            total += pp[:, n - 1 : n - 1 + k]
        area[:, :, n] = n * peak - total
    parts = _partitions(k, blocks)
    lengths = np.diff(np.concatenate([parts, parts[:, :1] + k], axis=1), axis=1)
    # In units of the day's total, rounded: sums of the same values in another order
    # differ in the last bits, and ties must keep the earliest starts.
    scale = np.abs(profile).sum(axis=1)
    area /= np.where(scale > 0, scale, 1.0)[:, None, None]
    opens = np.zeros((r, k), dtype=bool)
    for lo in range(0, r, PARTITION_CHUNK):
        a = area[lo : lo + PARTITION_CHUNK]
        best = np.argmin(np.round(a[:, parts, lengths].sum(axis=2), 9), axis=1)
        opens[np.arange(lo, lo + len(best))[:, None], parts[best]] = True
    return opens


def day_schedule(
    m: np.ndarray,
    o: int,
    t_origin: float,
    qs: np.ndarray,
    cfg: ForecastConfig,
    blocks: int,
    days: int,
    slot: float,
) -> DaySchedule:
    """The scheduled request of the day holding the next sample, per series and quantile,
    from the `days` days before it (the same whatever the decision within the day).

    For each slot of the day (`slot` seconds, from midnight UTC) the `qs`-quantile of the
    forecast target M (the max of the next h samples) over the windows that lay within
    that slot on the previous days gives a profile; the cyclic day is cut into `blocks`
    segments where that profile's shape says (`cyclic_partition`: each series its own
    boundaries, around its own peaks), and a segment's request is the quantile of all the
    windows within it (per window: a q of 0.98 is short in 2% of the segment's 15-minute
    windows, as for the 15-minute forecasts). `t_origin` is the absolute time (seconds) of
    column `o`; only columns of `m` before the day's first sample are read. Level NaN
    where no previous day has data."""
    qs = np.asarray(qs, dtype=np.float64)
    period = cfg.steps(DAY)
    n = max(1, min(period, cfg.steps(slot)))
    k = period // n
    blocks = max(1, min(blocks, k))
    nxt = int(round((t_origin + cfg.step) % DAY / cfg.step)) % period
    d0 = o + 1 - nxt  # column of the day's first sample
    midnight = t_origin + cfg.step - nxt * cfg.step
    s = m.shape[0]
    # windows[:, j, w]: the windows of slot j on the previous days (NaN-padded).
    per_slot: list[list[int]] = []
    for j in range(k):
        cols: list[int] = []
        for day in range(1, days + 1):
            s0 = d0 - day * period + j * n
            # M[c] covers samples c+1 .. c+h: the windows that lie within the slot.
            lo, hi = max(s0 - 1, 0), min(s0 + n - 1 - cfg.h, d0 - 1 - cfg.h)
            if hi >= lo:
                cols.extend(range(lo, hi + 1))
        per_slot.append(cols)
    opens = np.zeros((s, len(qs), k), dtype=bool)
    level = np.full((s, len(qs), k), np.nan)
    for lo in range(0, s, PARTITION_CHUNK):
        rows = slice(lo, lo + PARTITION_CHUNK)
        opens[rows], level[rows] = _segments(m[rows], per_slot, qs, blocks)
    return DaySchedule(midnight=midnight, slot=n * cfg.step, opens=opens, level=level)


def _segments(
    m: np.ndarray, per_slot: list[list[int]], qs: np.ndarray, blocks: int
) -> tuple[np.ndarray, np.ndarray]:
    """`day_schedule` for a chunk of rows: (opens, level), each (S, Q, K)."""
    s, k = m.shape[0], len(per_slot)
    width = max(1, max(len(c) for c in per_slot))
    windows = np.full((s, k, width), np.nan)
    for j, cols in enumerate(per_slot):
        if cols:
            windows[:, j, : len(cols)] = m[:, np.asarray(cols)]
    profile = nanquantile(windows, qs)  # (S, K, Q)
    opens = np.zeros((s, len(qs), k), dtype=bool)
    level = np.full((s, len(qs), k), np.nan)
    known = np.isfinite(profile)
    for qi, q in enumerate(qs):
        prof = profile[:, :, qi]
        # A slot without history weighs like the series' highest: no segment is cut to
        # save on hours nobody has seen.
        high = np.nanmax(np.where(known[:, :, qi], prof, -np.inf), axis=1, keepdims=True)
        prof = np.where(known[:, :, qi], prof, np.where(np.isfinite(high), high, 0.0))
        cut = cyclic_partition(prof, blocks)
        opens[:, qi] = cut
        # Slots before the first start belong to the last segment (it wraps midnight).
        segment = (np.cumsum(cut, axis=1) - 1) % blocks
        for b in range(blocks):
            inside = segment == b
            pooled = np.where(inside[:, :, None], windows, np.nan).reshape(s, -1)
            value = nanquantile(pooled, np.array([q]))[:, 0]
            level[:, qi] = np.where(inside, value[:, None], level[:, qi])
    return opens, level
