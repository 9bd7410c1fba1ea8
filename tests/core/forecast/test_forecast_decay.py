"""The decaying-histogram model: against a straightforward reference series by series, its
incremental path equals a rebuild, per matrix; and the running maxima it is capped by."""

from __future__ import annotations

import gc
import math
import weakref

import numpy as np
import pytest

from foresize.core.forecast import decay, models
from foresize.core.forecast.decay import (
    DECAY_FLOOR,
    DecayHistogram,
    RunningMax,
    bucket_count,
    buckets,
)
from foresize.core.forecast.models import ForecastConfig, forward_max, model_decay

CFG = ForecastConfig()
QS = np.array([0.01, 0.1, 0.5, 0.9, 0.99, 0.999])
DAY_STEPS = CFG.steps(86400.0)
HOUR_STEPS = CFG.steps(3600.0)
WINDOW = CFG.steps(CFG.decay_window)
NB = bucket_count(CFG.bucket_ratio)


def _usage(seed: int, days: int, series: int = 12) -> np.ndarray:
    """Noisy series whose level moves every two days (so columns that leave the 8-day
    window shift the quantiles), with gaps."""
    rng = np.random.default_rng(seed)
    t = days * DAY_STEPS
    level = np.repeat(rng.uniform(0.1, 10.0, (series, days // 2 + 1)), 2 * DAY_STEPS, axis=1)
    y = level[:, :t] * rng.lognormal(0.0, 0.3, (series, t))
    y[rng.random((series, t)) < 0.02] = np.nan
    return y


def _edge_cases(seed: int, t: int) -> np.ndarray:
    """Seeded random series, and one row for each edge case."""
    rng = np.random.default_rng(seed)
    y = rng.lognormal(0.0, 1.5, (14, t))
    y[rng.random(y.shape) < 0.05] = np.nan  # NaN gaps
    y[0] = np.nan  # empty series
    y[1] = 0.0  # all zeros
    y[2] = np.nan
    y[2, t // 2] = 3.0  # a single sample
    y[3] = 1e15  # above the last bucket's edge (1e13)
    y[4, ::5] = 1e300  # huge, among ordinary values
    y[5, : t // 3] = np.nan  # a history that starts late (left-padded)
    y[6, t // 3 :] = np.nan  # a history that stopped
    y[7] = 1e-9  # below the first bucket's edge
    y[8, t // 2 :] *= 1e6  # a level shift far beyond the row's buckets so far
    y[9, ::3] = np.inf
    y[10] = -1.0  # negative (bucket 0, as zero)
    y[11, : t // 2] = 1e12  # huge, then ordinary: the row spans ~900 buckets
    return y


def _bucket(v: float) -> int:
    """The bucket of one value, with math.log: floor(log(v / 1e-6) / log(1.05)) + 1 in
    [0, NB - 1]; values at or below 0 in bucket 0."""
    if v <= 0.0:
        return 0
    if math.isinf(v):
        return NB - 1
    return min(NB - 1, max(0, math.floor(math.log(v / DECAY_FLOOR) / math.log(1.05)) + 1))


def _reference(m: np.ndarray, known: int, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fresh histogram per series, column by column, and its quantiles: (hist, values)."""
    hl = CFG.decay_half_life / CFG.step
    hist = np.zeros((m.shape[0], NB))
    out = np.full((m.shape[0], len(qs)), np.nan)
    for s in range(m.shape[0]):
        cols = range(max(0, known - WINDOW + 1), known + 1)
        for c in cols:
            if not math.isnan(m[s, c]):
                hist[s, _bucket(float(m[s, c]))] += 2.0 ** (-(known - c) / hl)
        total = hist[s].sum()
        if total <= 0:
            continue
        seen = [float(m[s, c]) for c in cols if not math.isnan(m[s, c])]
        cum = np.cumsum(hist[s])
        for i, q in enumerate(qs):
            k = int(np.argmax(cum >= q * total * (1 - 1e-12)))
            out[s, i] = min(DECAY_FLOOR * 1.05**k, max(seen))
    return hist, out


@pytest.fixture(autouse=True)
def _fresh_cache():
    decay.decay_cache.clear()
    decay.window_max_cache.clear()
    yield
    decay.decay_cache.clear()
    decay.window_max_cache.clear()


def _state(m: np.ndarray) -> DecayHistogram:
    ((_ref, st),) = [e for e in decay.decay_cache.entries.values() if e[0]() is m]
    return st


@pytest.mark.parametrize("seed", [0, 1])
def test_histogram_and_quantiles_equal_a_reference_series_by_series(seed):
    """Advanced origin by origin (columns added, leaving the window, rows widening their
    run of buckets), the histogram and quantiles are those a reference builds afresh.
    Tolerance 1e-12: the incremental sums round differently from a fresh sum (~1e-15),
    and a bucket's edge is a power computed by numpy here and by Python there."""
    t = WINDOW + 3 * DAY_STEPS
    y = _edge_cases(seed, t)
    m = forward_max(y, CFG.h)
    rng = np.random.default_rng(seed + 10)
    origins = np.cumsum(rng.integers(1, 400, 40)) + CFG.h
    checked = 0
    for o in origins[origins < t]:
        got = model_decay(y, m, int(o), QS, CFG)
        if checked < 6 and (o > WINDOW or rng.random() < 0.3):
            hist, want = _reference(m, int(o) - CFG.h, QS)
            np.testing.assert_allclose(_state(m).dense(), hist, rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(got, want, rtol=1e-12)
            checked += 1
    assert checked >= 3
    assert np.isnan(got[0]).all()  # the empty series
    assert (got[1] == 0.0).all()  # all zeros: bucket 0, capped by the largest (0)


def test_a_wrong_bucket_or_decay_is_caught():
    """The comparison above is strict: one value's weight moved one bucket, or a
    histogram decayed with a half-life 1% off, is told apart from the reference."""
    y = _usage(3, 9, series=3)
    m = forward_max(y, CFG.h)
    known = m.shape[1] - 1 - CFG.h
    model_decay(y, m, known + CFG.h, QS, CFG)
    hist, _ = _reference(m, known, QS)
    dense = _state(m).dense()
    np.testing.assert_allclose(dense, hist, rtol=1e-12)
    moved = dense.copy()
    b = int(np.flatnonzero(moved[0])[0])
    moved[0, b + 1] += 2.0 ** (-WINDOW / 288)  # the lightest column's weight
    moved[0, b] -= 2.0 ** (-WINDOW / 288)
    assert not np.allclose(moved, hist, rtol=1e-12, atol=1e-300)
    slower = ForecastConfig(decay_half_life=1.01 * CFG.decay_half_life)
    decay.decay_cache.clear()
    model_decay(y, m, known + CFG.h, QS, slower)
    assert not np.allclose(_state(m).dense(), hist, rtol=1e-12, atol=1e-300)


def test_buckets_follow_the_formula_at_and_around_bucket_edges():
    k = np.arange(1, NB - 1)
    inside = DECAY_FLOOR * 1.05 ** (k - 0.5)  # the middle of bucket k
    got = buckets(inside[None, :], CFG.bucket_ratio)[0]
    assert (got == k).all()
    above = DECAY_FLOOR * 1.05 ** (k - 1) * (1 + 1e-9)  # just above bucket k's lower edge
    assert (buckets(above[None, :], CFG.bucket_ratio)[0] == k).all()
    special = np.array([[0.0, -5.0, -np.inf, 1e-7, DECAY_FLOOR / 2, np.inf, 1e300, np.nan]])
    gap = np.iinfo(buckets(special, 1.05).dtype).max
    assert buckets(special, CFG.bucket_ratio)[0].tolist() == [0, 0, 0, 0, 0, NB - 1, NB - 1, gap]
    # The cache-sized row blocks change nothing: one row alone, or many at once.
    many = np.random.default_rng(2).lognormal(0, 3, (500, 300))
    whole = buckets(many, CFG.bucket_ratio)
    assert all((buckets(many[i : i + 1], CFG.bucket_ratio) == whole[i]).all() for i in (0, 499))
    assert (whole[:5] == [[_bucket(float(v)) for v in row] for row in many[:5]]).all()


def test_no_rows_and_no_values():
    y = np.zeros((0, 400))
    assert model_decay(y, forward_max(y, CFG.h), 399, QS, CFG).shape == (0, len(QS))
    y = np.full((3, 400), np.nan)
    assert np.isnan(model_decay(y, forward_max(y, CFG.h), 399, QS, CFG)).all()


def test_incremental_decay_equals_a_rebuild_after_the_window_slides():
    y = _usage(1, 12)
    m = forward_max(y, CFG.h)
    # Irregular steps between origins (1 to 40 columns), as decisions and backtests take.
    steps = np.random.default_rng(7).integers(1, 41, y.shape[1])
    origins = CFG.h + np.cumsum(steps)
    origins = origins[origins < y.shape[1] - 1]
    # Several origins past the 8-day window (and one inside it).
    checks = {int(origins[np.searchsorted(origins, d * DAY_STEPS)]) for d in (3, 9, 10, 11)}
    for o in origins:
        incremental = model_decay(y, m, int(o), QS, CFG)
        if o in checks:
            rebuilt = model_decay(y.copy(), m.copy(), int(o), QS, CFG)  # a matrix never seen
            np.testing.assert_allclose(incremental, rebuilt, rtol=1e-12)
            checks.discard(int(o))
    assert not checks


def test_alternating_matrices_give_what_each_gives_alone():
    ya, yb = _usage(2, 10), _usage(3, 10, series=7)
    ma, mb = forward_max(ya, CFG.h), forward_max(yb, CFG.h)
    origins = list(range(CFG.h, ya.shape[1] - 1, 2 * HOUR_STEPS))
    alone_a = [model_decay(ya, ma, o, QS, CFG) for o in origins]
    decay.decay_cache.clear()
    alone_b = [model_decay(yb, mb, o, QS, CFG) for o in origins]
    decay.decay_cache.clear()
    for o, a, b in zip(origins, alone_a, alone_b, strict=True):
        np.testing.assert_allclose(model_decay(ya, ma, o, QS, CFG), a, rtol=1e-12)
        np.testing.assert_allclose(model_decay(yb, mb, o, QS, CFG), b, rtol=1e-12)


def test_alternating_matrices_keep_their_own_state(monkeypatch):
    built = []
    original = DecayHistogram.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(DecayHistogram, "__init__", counting)
    ya, yb = _usage(4, 3), _usage(5, 3)
    ma, mb = forward_max(ya, CFG.h), forward_max(yb, CFG.h)
    for o in range(DAY_STEPS, ya.shape[1] - 1, HOUR_STEPS):
        model_decay(ya, ma, o, QS, CFG)
        model_decay(yb, mb, o, QS, CFG)
    assert len(built) == 2


def test_the_cache_does_not_keep_a_matrix_alive():
    y = _usage(6, 2)
    m = forward_max(y, CFG.h)
    model_decay(y, m, DAY_STEPS, QS, CFG)
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("retain", [8, 288, 2304])
def test_running_max_equals_the_max_of_each_window(retain):
    """Windows mostly moving forward, sometimes back or far ahead, of any width."""
    rng = np.random.default_rng(retain)
    a = rng.random((6, 4000))
    a[a < 0.3] = np.nan
    a[0] = np.nan
    running, lo = RunningMax(6, retain), 0
    for _ in range(600):
        lo = min(3990, max(0, lo + int(rng.integers(-40, 60))))
        hi = min(4000, lo + int(rng.integers(1, 900)))
        if rng.random() < 0.01:
            lo = int(rng.integers(0, 3990))
            hi = lo + 1
        with np.errstate(invalid="ignore"):
            want = np.fmax.reduce(a[:, lo:hi], axis=1)
        assert np.array_equal(running.window(a, lo, hi), want, equal_nan=True)


def test_running_max_reads_no_column_past_the_window():
    a = np.random.default_rng(1).random((3, 100))
    poisoned = a.copy()
    poisoned[:, 60:] = 1e9
    running = RunningMax(3, 40)
    for lo in range(0, 40, 3):
        assert np.array_equal(running.window(poisoned, lo, lo + 20), a[:, lo : lo + 20].max(axis=1))


def test_the_decay_cap_and_the_daily_peaks_are_the_maxima_of_their_windows():
    """The decay's cap comes from the daily peaks at the same origin where they cover its
    window (its two first columns apart), else from the running maxima: each equal to
    the maximum of its columns, at every origin of a backtest and of a young history."""
    y = _usage(8, 10)
    y[1] = np.nan  # a row with no value
    y[2, ::7] = np.inf
    day, days = models._peak_days(CFG)
    window = CFG.steps(CFG.decay_window)
    spacing = CFG.steps(CFG.backtest_spacing)
    last = y.shape[1] - 1
    origins = [o for o in range(CFG.h, last, 97)] + [last - k * spacing for k in range(8, -1, -1)]
    firsts = [max(0, o - CFG.h - window + 1) + 1 for o in origins]
    # A spike on each cap's first column, the earlier the higher: a cap that missed its
    # first column would be lower. One matrix, so the running maxima move as in a backtest.
    y[3, firsts] = 1e9 - np.asarray(firsts, dtype=np.float64)
    for o, lo in zip(origins, firsts, strict=True):
        with np.errstate(invalid="ignore"):
            want = np.fmax.reduce(y[:, lo : o + 1], axis=1)
            peaks = np.stack(
                [
                    np.fmax.reduce(y[:, max(0, e - day) : e], axis=1)
                    if e > 0
                    else np.full(len(y), np.nan)
                    for e in (o + 1 - k * day for k in range(days))
                ],
                axis=1,
            )
        assert np.array_equal(models._cap(y, o, lo, CFG), want, equal_nan=True), o
        assert np.array_equal(models._daily_peaks(y, o, CFG), peaks, equal_nan=True), o
