"""The `decay` model's VPA-style decaying histogram, and running maxima over windows.

A histogram per series of the forward maxima over the last `decay_window` known columns,
buckets `bucket_ratio` apart, column c weighing 2**(-(known - c) / half-life) at origin
`known`. Vectorised across series: the columns of a shard are bucketed at once, their
weights added by one `bincount` over the flattened (series, bucket) indices, the
quantiles read from one cumulative sum over the buckets, and each column's weight is
computed once for all series.

A series' maxima span a few dozen buckets of the ~900 from 1e-6 to 1e13 (a factor of
10 is 47 buckets), so each row keeps only the run of buckets it has used, from its own
lowest bucket (`lo`), all rows one width: the histogram is tens of columns wide instead
of ~900, and every per-origin pass over it (the decay, the cumulative sum) is that much
shorter. The numbers are those of the full-width histogram, bit for bit: each bucket
receives the same weights in the same order, and the buckets a row never used hold
exact zeros, which add nothing to a cumulative sum
(`tests/core/forecast/test_forecast_decay.py` checks against a series-by-series reference).

Nothing here reads a clock or a file.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:
    from foresize.core.forecast.models import ForecastConfig

DECAY_FLOOR = 1e-6
"""Values at or below this share the first bucket of the decaying histogram (1e-6 cores
or bytes is nothing in either unit); buckets then run `bucket_ratio` apart up to 1e13."""
DECAY_CEIL = 1e13

COLUMN_BLOCK = 288
"""Columns added to a histogram by one `bincount`: bounds the temporary index arrays
(2,000 series x 288 columns). Part of the numbers: a bucket's weights are summed a block
at a time, then added to what it holds."""
BUCKET_CELLS = 1 << 16
"""Cells bucketed at once (rows of the block): each step's temporary stays in the CPU's
cache instead of one pass over memory for each of the ~7 steps."""
ADD_CELLS = 1 << 15
"""Cells added to a histogram by one `bincount` (rows of the column block): its flat
indices and weights (256 KiB each) stay in the CPU's cache."""
LAYOUT_MARGIN = 8
"""Spare buckets on each side of a row's run when the layout is widened: a row whose
later maxima reach one bucket beyond its run (a factor of 1.05) does not make the whole
histogram be laid out again."""
RUNNING_MAX_BLOCK = 4
"""Columns per stored block maximum of `RunningMax`."""
EXTEND_CELLS = 1 << 17
"""Cells of usage read at once when `RunningMax` stores new block maxima (1 MiB)."""


class RunningMax:
    """Maxima (NaN ignored) of one matrix over windows of its columns that move forward,
    from block maxima kept between windows. Reads only columns the windows asked for hold
    (and columns before them): a block's maximum is stored once a window reached its end.

    The block maxima are stored block-major (a row of all series per block), so a
    window's maximum is one reduction over rows that numpy runs across the series at
    once; what its blocks do not cover is at most 2 x 3 single columns at its ends. The
    blocks start where the first window ends (`phase`): windows of a multiple of the
    block wide whose ends move by a multiple of it (the daily peaks at a backtest's
    origins) are then covered by blocks alone, without the single columns, which are
    slow to read (a cache line a row).
    """

    def __init__(self, series: int, retain: int, block: int = RUNNING_MAX_BLOCK) -> None:
        self.block = block
        self.retain = retain
        self.keep = max(1, retain // block)  # blocks kept behind the newest window's start
        self.start = 0  # block number of maxima[0]
        self.stored = 0
        self.phase: int | None = None  # block j holds columns phase + j * block onwards
        self.maxima = np.empty((2 * self.keep + 1, series))
        self.last_days: tuple[tuple[int, int, int], np.ndarray] | None = None

    def days(self, a: np.ndarray, hi: int, day: int, count: int) -> np.ndarray:
        """(series, count): column k the nanmax of a[:, hi - (k + 1) * day : hi - k * day]
        clipped to column 0, NaN where that is empty. The last answer is kept: the daily
        peaks and the decay's cap ask for the same days at an origin. Not to be written."""
        key = (hi, day, count)
        if self.last_days is not None and self.last_days[0] == key:
            return self.last_days[1]
        out = np.full((a.shape[0], count), np.nan)
        # Oldest day first: the block maxima then only move forward.
        for k in reversed(range(count)):
            end = hi - k * day
            if end > 0:
                out[:, k] = self.window(a, end - day, end)
        self.last_days = (key, out)
        return out

    def window(self, a: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """nanmax of a[:, lo:hi] (NaN for rows with no value; lo < hi)."""
        lo = max(0, lo)
        b = self.block
        if self.phase is None:
            self.phase = hi % b
        p = self.phase
        first, last = -(-(lo - p) // b), (hi - p) // b  # the whole blocks [first, last)
        if last <= first:
            return _fmax_columns(a[:, lo:hi])
        if self.stored == 0 or first < self.start or first > self.start + self.stored + self.keep:
            self.start, self.stored = first, 0  # moved back, or far ahead: start afresh
        if last > self.start + self.stored:
            self._extend(a, first, last)
        with np.errstate(invalid="ignore"):
            out: np.ndarray = np.fmax.reduce(
                self.maxima[first - self.start : last - self.start], axis=0
            )
        for c in [*range(lo, p + first * b), *range(p + last * b, hi)]:
            np.fmax(out, a[:, c], out=out)
        return out

    def _extend(self, a: np.ndarray, first: int, last: int) -> None:
        """Store the maxima of blocks up to `last` (exclusive), for a window from block
        `first` on."""
        b = self.block
        p = self.phase or 0
        have = self.start + self.stored
        need = last - have
        if self.stored + need > len(self.maxima):
            # Drop the blocks far behind (windows only move forward), or grow for a window
            # wider than was kept for.
            drop = min(self.stored, max(0, first - self.keep - self.start))
            kept = self.maxima[drop : self.stored].copy()
            size = max(len(self.maxima), len(kept) + need + self.keep)
            self.maxima = np.empty((size, self.maxima.shape[1]))
            self.maxima[: len(kept)] = kept
            self.start, self.stored = self.start + drop, len(kept)
        into = self.maxima[self.stored : self.stored + need]
        # A block of rows at a time, so the strided reads of its columns run in the CPU
        # cache (about half the time of whole columns).
        rows = max(1, EXTEND_CELLS // max(1, need * b))
        for r in range(0, a.shape[0], rows):
            blocks = a[r : r + rows, p + have * b : p + last * b].reshape(-1, need, b)
            new = np.fmax(blocks[:, :, 0], blocks[:, :, 1]) if b > 1 else blocks[:, :, 0].copy()
            for j in range(2, b):
                np.fmax(new, blocks[:, :, j], out=new)
            into[:, r : r + rows] = new.T
        self.stored += need


def _fmax_columns(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        out: np.ndarray = np.fmax.reduce(a, axis=1)
    return out


@functools.lru_cache(maxsize=16)
def bucket_count(ratio: float) -> int:
    """Buckets from DECAY_FLOOR to DECAY_CEIL, `ratio` apart (the gap bucket not counted)."""
    return int(np.ceil(np.log(DECAY_CEIL / DECAY_FLOOR) / np.log(ratio))) + 1


@functools.lru_cache(maxsize=16)
def bucket_type(ratio: float) -> type[np.signedinteger]:
    """The integer type of bucket numbers; its largest value marks a gap (`buckets`)."""
    return np.int16 if bucket_count(ratio) < np.iinfo(np.int16).max else np.int32


def buckets(cols: np.ndarray, ratio: float) -> np.ndarray:
    """Bucket of each value: floor(log(v / DECAY_FLOOR) / log(ratio)) + 1 clipped to
    [0, nb - 1] (`bucket_count`; zero, negative and -inf values in bucket 0, +inf in the
    last), and the largest value of `bucket_type` for NaN (a gap: above every bucket).
    Same shape as `cols`."""
    nb = bucket_count(ratio)
    kind = bucket_type(ratio)
    out = np.empty(cols.shape, dtype=kind)
    step = max(1, BUCKET_CELLS // max(1, cols.shape[-1]))
    log_ratio = np.log(ratio)
    gap = int(np.iinfo(kind).max)
    for r in range(0, cols.shape[0], step):
        _bucket_rows(cols[r : r + step], out[r : r + step], log_ratio, nb, gap)
    return out


def _bucket_rows(cols: np.ndarray, out: np.ndarray, log_ratio: float, nb: int, gap: int) -> None:
    # The same floating-point steps as the formula, in place, on a block that stays in
    # the CPU cache.
    b = np.divide(cols, DECAY_FLOOR)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.log(b, out=b)
        np.divide(b, log_ratio, out=b)
        np.floor(b, out=b)
        # NaN stays NaN through both (a gap, or the log of a negative value).
        np.maximum(b, -1.0, out=b)
        np.minimum(b, nb - 2.0, out=b)
        undefined = np.isnan(b)
        np.add(b, 1.0, out=out, casting="unsafe")
    if undefined.any():
        out[undefined] = np.where(np.isnan(cols[undefined]), gap, 0)


class DecayHistogram:
    """A decaying histogram of one matrix's maxima over the last `window` known columns,
    advanced origin by origin.

    Kept per matrix (see `PerMatrix`) so a backtest over increasing origins and a replay
    over increasing decisions add only the new columns (and remove those that left the
    window) instead of rebuilding. The result equals a rebuild up to float rounding: the
    columns (known - window, known], column c weighing 2**(-(known - c) / half-life).

    `hist[s, j]` is bucket `lo[s] + j` of row s; its last column collects the gaps (NaN),
    which count for nothing. `hi[s]` is the highest bucket row s has used (-1: none yet).
    """

    def __init__(self, cfg: ForecastConfig, series: int) -> None:
        self.key = _decay_key(cfg)
        self.ratio = cfg.bucket_ratio
        self.nb = bucket_count(self.ratio)
        self.gap = int(np.iinfo(bucket_type(self.ratio)).max)
        self.known = -1
        self.hl_steps = cfg.decay_half_life / cfg.step
        self.lo = np.full(series, self.nb, dtype=np.int64)
        self.hi = np.full(series, -1, dtype=np.int64)
        self.hist = np.zeros((series, 1))

    @property
    def width(self) -> int:
        """Buckets held a row (the gap column not counted)."""
        return int(self.hist.shape[1]) - 1

    def dense(self) -> np.ndarray:
        """The histogram over every bucket (series x nb), for tests and inspection."""
        s, w = self.hist.shape[0], self.width
        out = np.zeros((s, self.nb + w))
        cols = self.lo[:, None] + np.arange(w)[None, :]
        rows = np.broadcast_to(np.arange(s)[:, None], cols.shape)
        held = self.hi >= 0
        out[rows[held], cols[held]] = self.hist[held, :w]
        return out[:, : self.nb]

    def _fit(self, b: np.ndarray, gaps: bool) -> None:
        """Widen the layout so every row's run holds the buckets `b` (series x columns;
        `gaps`: some are gaps)."""
        new_hi = np.where(b != self.gap, b, -1).max(axis=1) if gaps else b.max(axis=1)
        if (new_hi < 0).all():
            return  # only gaps
        lo = np.minimum(self.lo, b.min(axis=1))  # a gap's number is above every bucket
        hi = np.maximum(self.hi, new_hi)
        held = hi >= 0
        if (lo[held] >= self.lo[held]).all() and (hi[held] < self.lo[held] + self.width).all():
            self.hi = hi
            return
        new_lo = np.where(held, np.maximum(lo - LAYOUT_MARGIN, 0), self.nb)
        had = self.hi >= 0
        # The new run holds the old one whole (its spare buckets too) and the new buckets.
        top = np.where(had, np.maximum(hi, self.lo + self.width - 1), hi)
        width = int((top - new_lo)[held].max()) + 1 + LAYOUT_MARGIN
        hist = np.zeros((b.shape[0], width + 1))
        if had.any():
            shift = (self.lo - new_lo)[had]
            cols = shift[:, None] + np.arange(self.width)[None, :]
            hist[np.nonzero(had)[0][:, None], cols] = self.hist[had, : self.width]
        self.lo, self.hi, self.hist = new_lo, hi, hist

    def _add(self, m: np.ndarray, lo: int, hi: int, known: int, sign: float) -> None:
        """hist += sign * columns [lo, hi) of m, each weighted as of origin `known`."""
        s = m.shape[0]
        for c0 in range(lo, hi, COLUMN_BLOCK):
            c1 = min(c0 + COLUMN_BLOCK, hi)
            b = buckets(m[:, c0:c1], self.ratio)
            gaps = bool((b == self.gap).any())
            if sign > 0:
                self._fit(b, gaps)
            width = self.width
            w = sign * np.exp2(-(known - np.arange(c0, c1)) / self.hl_steps)
            # A block of rows at a time, so the flat indices and the weights stay in the
            # CPU cache. A cell's weights are still summed in column order from zero, then
            # added to what it holds: the same numbers as for all rows at once.
            step = max(1, ADD_CELLS // (c1 - c0))
            # The weights of a block of rows, flat.
            weights = np.broadcast_to(w, (min(step, s), c1 - c0)).ravel()
            for r in range(0, s, step):
                rows = b[r : r + step]
                n = rows.shape[0]
                # Flat (series, bucket) cells; a gap's number lands past the row's run, and
                # the minimum takes it to the row's gap column.
                base = np.arange(n, dtype=np.int64) * (width + 1)
                at = rows + (base - self.lo[r : r + step])[:, None]
                if gaps:
                    np.minimum(at, (base + width)[:, None], out=at)
                self.hist[r : r + step] += np.bincount(
                    at.ravel(),
                    weights=weights[: rows.size],
                    minlength=n * (width + 1),
                ).reshape(n, width + 1)

    def advance(self, m: np.ndarray, known: int, window: int) -> None:
        if known <= self.known:
            return
        if known - self.known > window:
            # Nothing known is still in the window: start afresh at its first column.
            self.hist[:] = 0.0
            self.known = known - window
        else:
            # Remove the columns that leave the window, with the weight they have now
            # (the same weight they would have had in a rebuild, so the two agree).
            old_lo = max(0, self.known - window + 1)
            new_lo = max(0, known - window + 1)
            self.hist *= np.exp2(-(known - self.known) / self.hl_steps)
            if new_lo > old_lo:
                self._add(m, old_lo, new_lo, known, -1.0)
                # Emptied buckets keep rounding residue (about 1e-16 of their old weight):
                # zero everything far below the lightest column still in the window.
                lightest = np.exp2(-(window - 1) / self.hl_steps)
                self.hist[self.hist < 1e-9 * lightest] = 0.0
        self._add(m, self.known + 1, known + 1, known, 1.0)
        self.known = known

    def quantiles(self, qs: np.ndarray, cap: np.ndarray) -> np.ndarray:
        """Per row and quantile, the upper edge of the bucket where the cumulative weight
        reaches the quantile (capped by `cap`); NaN where the window holds no value."""
        width = self.width
        out = np.full((self.hist.shape[0], len(qs)), np.nan)
        if width == 0:
            return out  # no row has held a value yet
        cum = np.cumsum(self.hist[:, :width], axis=1)
        total = cum[:, -1]
        for i, q in enumerate(qs):
            level = (q * total)[:, None] * (1 - 1e-12)
            reached = cum >= level
            # Bucket 0 where the level is not above zero or never reached (the first bucket
            # over the full width is then the first to reach it).
            past_first = reached[:, -1] & (level[:, 0] > 0)
            k = np.where(past_first, self.lo + np.argmax(reached, axis=1), 0)
            # Upper edge of bucket k (bucket 0 holds everything up to DECAY_FLOOR).
            edge = DECAY_FLOOR * self.ratio ** k.astype(np.float64)
            out[:, i] = np.minimum(edge, cap)
        out[total <= 0] = np.nan
        return out


def _decay_key(cfg: ForecastConfig) -> tuple[float, float, float]:
    return (cfg.bucket_ratio, cfg.decay_half_life, cfg.step)


DECAY_CACHE_SIZE = 4
"""Matrices whose state is kept at once: a replay alternates a CPU and a memory matrix,
and a backtest may run beside it. A histogram holds series x a few dozen buckets; running
maxima, a quarter of the columns they retain (twice that at most)."""


S = TypeVar("S")


class PerMatrix(Generic[S]):
    """States of the last few matrices, each matched by identity (a state assumes its
    matrix is not written to while it is used, as every caller's are not).

    Holds only weak references to the matrices: a matrix nobody uses any more is freed,
    and its state is dropped at the next call. Shared by every caller in the process (the
    operator's pass runs in a worker thread; tests and benchmarks may call from others),
    so `lock` guards the states: hold it from `get` until done with the state, as a state
    is updated in place and two threads updating one would corrupt it. Held for one model
    call, which is short.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.entries: dict[int, tuple[weakref.ref[np.ndarray], S]] = {}

    def get(self, m: np.ndarray, fresh: Callable[[], S], usable: Callable[[S], bool]) -> S:
        """The state of `m`: its own if kept and `usable`, else `fresh()` (kept)."""
        for k in [k for k, (ref, _) in self.entries.items() if ref() is None]:
            del self.entries[k]
        entry = self.entries.pop(id(m), None)
        st = None if entry is None or entry[0]() is not m else entry[1]
        if st is None or not usable(st):
            st = fresh()
        self.entries[id(m)] = (weakref.ref(m), st)  # most recently used last
        while len(self.entries) > self.size:
            del self.entries[next(iter(self.entries))]
        return st

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


decay_cache: PerMatrix[DecayHistogram] = PerMatrix(DECAY_CACHE_SIZE)
"""The decaying histograms, by forward-maxima matrix."""
window_max_cache: PerMatrix[RunningMax] = PerMatrix(DECAY_CACHE_SIZE)
"""Running maxima of usage matrices (the daily peaks of `models.model_peaks`, the cap of
`models.model_decay`)."""


def decay_quantiles(
    m: np.ndarray, known: int, qs: np.ndarray, cfg: ForecastConfig, cap: np.ndarray
) -> np.ndarray:
    """The decaying histogram's quantiles of `m` at origin `known` (columns <= known are
    read), never above `cap`."""
    window = cfg.steps(cfg.decay_window)
    key = _decay_key(cfg)
    with decay_cache.lock:
        st = decay_cache.get(
            m, lambda: DecayHistogram(cfg, m.shape[0]), lambda h: h.key == key and h.known <= known
        )
        st.advance(m, known, window)
        return st.quantiles(qs, cap)


def day_max(a: np.ndarray, hi: int, day: int, count: int, retain: int) -> np.ndarray:
    """`RunningMax.days` of `a`'s running maxima (kept `retain` columns behind the newest
    window asked for): (rows, count), not to be written."""
    with window_max_cache.lock:
        st = window_max_cache.get(
            a, lambda: RunningMax(a.shape[0], retain), lambda r: r.retain == retain
        )
        return st.days(a, hi, day, count)


def window_max(a: np.ndarray, lo: int, hi: int, retain: int) -> np.ndarray:
    """nanmax of a[:, lo:hi] per row, from `a`'s running maxima (kept `retain` columns
    behind the newest window asked for): windows should move forward."""
    with window_max_cache.lock:
        st = window_max_cache.get(
            a, lambda: RunningMax(a.shape[0], retain), lambda r: r.retain == retain
        )
        return st.window(a, lo, hi)
