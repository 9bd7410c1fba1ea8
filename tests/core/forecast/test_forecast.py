"""Forecasts of the max over the horizon: models, pinball loss, selection, calibration."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.core.forecast.models import (
    MODELS,
    ForecastConfig,
    all_models,
    forward_max,
    nanquantile,
    pinball,
)
from foresize.core.forecast.select import (
    DEFAULT_MODEL,
    OnlineScores,
    backtest_scores,
    choose,
    forecast_max,
    online_step,
)
from foresize.core.forecast.synthetic import make_series

CFG = ForecastConfig()


def test_forward_max_is_the_max_of_the_next_h_and_keeps_gaps():
    y = np.array([[1.0, 5.0, np.nan, 2.0, np.nan, np.nan, np.nan, 7.0]])
    m = forward_max(y, 3)
    assert m[0, 0] == 5.0  # max(5, nan, 2)
    assert m[0, 1] == 2.0
    assert np.isnan(m[0, 3])  # next three all missing
    assert m[0, 4] == 7.0
    assert np.isnan(m[0, 7])  # beyond the end


def test_nanquantile_matches_numpy():
    rng = np.random.default_rng(0)
    a = rng.random((5, 50))
    a[a < 0.2] = np.nan
    qs = np.array([0.1, 0.5, 0.99])
    assert np.allclose(nanquantile(a, qs), np.nanquantile(a, qs, axis=1).T)
    assert np.isnan(nanquantile(np.full((1, 4), np.nan), qs)).all()


def test_forward_max_by_blocks_of_rows_equals_the_definition():
    """Rows are computed a block at a time (`FORWARD_MAX_CELLS`): every block, the last
    one short, gives the maximum of the next h columns, NaN where all are missing."""
    from foresize.core.forecast.models import FORWARD_MAX_CELLS

    rng = np.random.default_rng(4)
    t = 700
    rows = 2 * (FORWARD_MAX_CELLS // t) + 3  # two whole blocks and a short one
    y = rng.random((rows, t))
    y[rng.random(y.shape) < 0.3] = np.nan
    want = np.full_like(y, np.nan)
    for c in range(t - 1):
        ahead = y[:, c + 1 : c + 4]
        seen = ~np.isnan(ahead).all(axis=1)
        want[seen, c] = np.nanmax(ahead[seen], axis=1)
    assert np.array_equal(forward_max(y, 3), want, equal_nan=True)
    assert np.isnan(forward_max(y[:, :2], 5)[:, 1]).all()  # h beyond the columns


def test_nanquantile_counts_the_values_of_rows_with_and_without_gaps():
    rng = np.random.default_rng(1)
    a = rng.random((40, 3, 30))
    a[::3, :, ::4] = np.nan  # some rows with gaps, the others whole
    a[5, 1] = np.nan  # one with no value at all
    qs = np.array([0.0, 0.3, 0.98, 1.0])
    got = nanquantile(a, qs)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = np.moveaxis(np.nanquantile(a, qs, axis=-1), 0, -1)
    assert np.allclose(got, want, equal_nan=True)
    assert np.isnan(got[5, 1]).all() and not np.isnan(got[5, 0]).any()


def test_nanquantile_of_rows_without_gaps_matches_numpy():
    """No row has a gap (the shortcut that reads every row's quantiles as the same
    columns): the same as numpy's interpolation, in 2 and 3 dimensions, for one value a
    row too."""
    rng = np.random.default_rng(2)
    qs = np.array([0.0, 0.3, 0.98, 0.999, 1.0])
    for a in (rng.random((40, 288)), rng.random((6, 4, 13)), rng.random((5, 1))):
        want = np.moveaxis(np.quantile(a, qs, axis=-1), 0, -1)
        np.testing.assert_allclose(nanquantile(a, qs), want, rtol=1e-15, atol=0)
        np.testing.assert_allclose(nanquantile(a.copy(), qs, scratch=True), want, rtol=1e-15)


def test_pinball_loss():
    assert pinball(np.array(10.0), np.array(8.0), 0.9) == pytest.approx(1.8)
    assert pinball(np.array(10.0), np.array(12.0), 0.9) == pytest.approx(0.2)


def test_models_do_not_read_the_future():
    """Changing data after the origin must not change any model's forecast."""
    y = make_series("seasonal", 3, days=9, seed=1)
    o = y.shape[1] - 50
    qs = np.array([0.5, 0.99])
    a = all_models(y, forward_max(y, CFG.h), o, qs, CFG)
    y2 = y.copy()
    y2[:, o + 1 :] *= 100.0
    b = all_models(y2, forward_max(y2, CFG.h), o, qs, CFG)
    assert np.allclose(a, b, equal_nan=True)


def test_quantiles_are_ordered_and_cover_the_max():
    y = make_series("spiky", 20, days=8, seed=2)
    f = forecast_max(y[:, :-3], np.array([0.5, 0.9, 0.99]), CFG)
    v = f.values
    assert (np.diff(v, axis=1) >= -1e-9).all()
    # The forecast is of the max over 15 minutes, so its median is above the median sample.
    assert np.median(v[:, 1]) > np.median(np.nanmedian(y, axis=1))


def test_slot_model_upsizes_ahead_of_a_recurring_peak():
    y = make_series("seasonal", 1, days=8, seed=3)
    # Origin at 11:00 on day 8: the daily peak is around 13:00; slot_day forecasts the
    # level due at this time of day, higher than what the last hours alone show at 07:00.
    per_day = 288
    o_morning = 7 * per_day + 7 * 12
    o_noon = 7 * per_day + 13 * 12
    m = forward_max(y, CFG.h)
    i = MODELS.index("slot_day")
    morning = all_models(y, m, o_morning, np.array([0.9]), CFG)[i, 0, 0]
    noon = all_models(y, m, o_noon, np.array([0.9]), CFG)[i, 0, 0]
    assert noon > 2 * morning


def test_selection_picks_different_models_for_seasonal_flat_and_spiky():
    """The rolling backtest gives each shape what suits it: seasonal -> the time-of-day
    slot model, flat -> the default (no model beats it by the switch margin), spiky ->
    a pooled long-window tail model. Majority over 20 seeded series of each kind."""
    cfg = ForecastConfig(backtest_origins=16, backtest_spacing=5400.0)
    picks = {}
    for kind in ("seasonal", "flat", "spiky"):
        y = make_series(kind, 20, days=14, seed=11)
        f = forecast_max(y, np.array([0.99]), cfg)
        picks[kind] = MODELS[int(np.bincount(f.model[:, 0], minlength=len(MODELS)).argmax())]
    assert picks["seasonal"] == "slot_day"
    assert picks["flat"] == MODELS[DEFAULT_MODEL]
    assert picks["spiky"] not in (picks["seasonal"], picks["flat"])
    assert len(set(picks.values())) == 3


def test_choose_keeps_default_unless_clearly_better():
    scores = np.full((len(MODELS), 3, 1), 1.0)
    scores[MODELS.index("decay"), 0, 0] = 0.95  # 5% better: noise
    scores[MODELS.index("decay"), 1, 0] = 0.5  # 50% better: switch
    scores[:, 2, 0] = np.nan  # unscored
    best = choose(scores)[:, 0]
    assert best[0] == DEFAULT_MODEL
    assert best[1] == MODELS.index("decay")
    assert best[2] == DEFAULT_MODEL


def test_backtest_scores_shape_and_missing_history():
    y = make_series("flat", 4, days=3, seed=5)
    y[0] = np.nan
    s = backtest_scores(y, np.array([0.9]), CFG)
    assert s.shape == (len(MODELS), 4, 1)
    assert np.isnan(s[:, 0]).all()
    assert np.isnan(s[MODELS.index("slot_week"), 1:]).all()  # no week of history yet
    f = forecast_max(y, np.array([0.9]), CFG)
    assert np.isnan(f.values[0, 0]) and np.isfinite(f.values[1:, 0]).all()


def test_online_calibration_reaches_the_target_miss_rate():
    """Pooled adaptive calibration: over many decisions, windows whose max exceeds the
    issued q-quantile approach 1 - q, even where raw empirical tails are biased low."""
    rng = np.random.default_rng(7)
    s, t = 40, 288 * 10
    y = rng.lognormal(0.0, 0.6, size=(s, t))  # heavy-ish tails, no structure
    q = 0.98
    m = forward_max(y, CFG.h)
    st = OnlineScores.empty(s, 1)
    misses = n = 0
    for o in range(288 * 2, t - CFG.h, 3):
        f, st = online_step(st, y, o, np.array([q]), CFG, m=m)
        if o > 288 * 5:
            misses += int((m[:, o] > f.values[:, 0]).sum())
            n += s
    rate = misses / n
    assert 0.01 < rate < 0.03
    assert (st.log_factor != 0.0).any()


def test_online_state_survives_a_sliding_window():
    """With `base`, a state carried across calls on a sliding window scores the right
    columns (same result as one growing array)."""
    y = make_series("seasonal", 3, days=16, seed=9)
    qs = np.array([0.9])
    a = OnlineScores.empty(3, 1)
    b = OnlineScores.empty(3, 1)
    width = 288 * 15  # longer than any model looks back (two weeks and an hour)
    for o in range(width, width + 144, 3):
        fa, a = online_step(a, y, o, qs, CFG)
        base = o + 1 - width
        fb, b = online_step(b, y[:, base : o + 1], width - 1, qs, CFG, base=base)
    assert np.allclose(a.loss, b.loss)
    assert np.allclose(fa.values, fb.values)
    assert a.last_origin == b.last_origin


def test_forecast_max_in_blocks_equals_all_at_once(monkeypatch):
    """Rows are forecast in blocks to bound memory; the blocks change no number."""
    from foresize.core.forecast import select

    y = np.concatenate([make_series(k, 4, days=3, seed=13) for k in ("spiky", "growing")])
    qs = np.array([0.9, 0.999])
    whole = select.forecast_max(y, qs)
    monkeypatch.setattr(select, "SERIES_SHARD", 3)
    parts = select.forecast_max(y, qs)
    assert np.array_equal(parts.values, whole.values, equal_nan=True)
    assert np.array_equal(parts.model, whole.model)
    assert parts.per_model.shape == whole.per_model.shape


def _hourly(days: int, high_hours, low=0.2, high=1.0) -> np.ndarray:
    hours = (np.arange(days * 288) % 288) / 12.0
    inside = np.zeros(len(hours), dtype=bool)
    for a, b in high_hours:
        inside |= (hours >= a) & (hours < b)
    return np.where(inside, high, low)


def test_day_schedule_cuts_each_series_day_around_its_own_peak():
    """Each series gets its own segments: a peak from 13:00 to 17:00 is held from 13:00
    to 17:00 only (blocks fixed at 08:00 and 16:00 would hold it 16 hours); a peak across
    midnight (22:00-02:00) is one segment wrapping the day; the quantile is of the
    15-minute maxima within the segment on past days."""
    from foresize.core.forecast.models import day_schedule

    cfg = ForecastConfig()
    t0 = 1_700_006_400.0  # midnight UTC
    days = 4
    y = np.stack([_hourly(days, [(13, 17)]), _hourly(days, [(22, 24), (0, 2)])])
    m = forward_max(y, cfg.h)
    o = days * 288 - 1  # 23:55 of day 4: the schedule of day 5
    day = day_schedule(m, o, t0 + o * cfg.step, np.array([0.99]), cfg, 3, 7, 3600.0)
    hour = 3600.0
    t = t0 + days * 86400.0
    assert np.flatnonzero(day.opens[0, 0]).tolist() == [0, 13, 17]
    two = day_schedule(m, o, t0 + o * cfg.step, np.array([0.99]), cfg, 2, 7, 3600.0)
    assert np.flatnonzero(two.opens[1, 0]).tolist() == [2, 22]  # not at midnight
    level, opens = day.at(t + 13 * hour, 900.0)
    assert level[0, 0] == 1.0 and opens[0, 0]
    level, opens = day.at(t + 14 * hour, 900.0)
    assert level[0, 0] == 1.0 and not opens[0, 0]
    level, opens = day.at(t + 17 * hour, 900.0)
    assert level[0, 0] == 0.2 and opens[0, 0]
    level, opens = day.at(t + 8 * hour, 900.0)
    assert level[0, 0] == 0.2 and not opens[0, 0]  # 08:00 is no boundary of this series
    level, opens = two.at(t + 1 * hour, 900.0)
    assert level[1, 0] == 1.0 and not opens[1, 0]  # the wrapped segment after midnight
    level, _ = two.at(t + 12 * hour, 900.0)
    assert level[1, 0] == 0.2
    # Seconds to the next segment start: 14:30 -> 17:00; 18:00 -> midnight, the next
    # start (the cut wraps the day); 01:00 of the wrapped segment -> 02:00.
    assert day.remaining(t + 14.5 * hour)[0, 0] == 2.5 * hour
    assert day.remaining(t + 18 * hour)[0, 0] == 6 * hour
    assert two.remaining(t + 12 * hour)[1, 0] == 10 * hour  # 22:00
    assert two.remaining(t + 1 * hour)[1, 0] == 1 * hour


def test_day_schedule_reads_only_the_days_before():
    """The schedule of a day depends on the days before it only (every decision of the
    day sees the same one), and is NaN before a full day of history."""
    from foresize.core.forecast.models import day_schedule

    cfg = ForecastConfig()
    t0 = 1_700_006_400.0
    rng = np.random.default_rng(3)
    y = rng.random((2, 5 * 288))
    o = 4 * 288 + 100  # 08:20 of day 5
    base = day_schedule(
        forward_max(y, cfg.h), o, t0 + o * cfg.step, np.array([0.9]), cfg, 3, 7, 3600.0
    )
    y2 = y.copy()
    y2[:, 4 * 288 :] = 50.0  # today's samples, up to now and beyond
    again = day_schedule(
        forward_max(y2, cfg.h), o, t0 + o * cfg.step, np.array([0.9]), cfg, 3, 7, 3600.0
    )
    assert np.array_equal(base.level, again.level) and np.array_equal(base.opens, again.opens)
    early = day_schedule(
        forward_max(y, cfg.h), 100, t0 + 100 * cfg.step, np.array([0.5]), cfg, 3, 7, 3600.0
    )
    assert np.isnan(early.level).all()


def test_cyclic_partition_minimises_the_area_held_above_the_profile():
    from foresize.core.forecast.models import cyclic_partition

    # The peak wraps midnight (slots 5 and 0): held by one segment from slot 5; the
    # rest costs 2 (1 x 1 held at 3) at best.
    prof = np.array([[5.0, 1.0, 3.0, 1.0, 1.0, 5.0], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]])
    got = cyclic_partition(prof, 3)
    assert np.flatnonzero(got[0]).tolist() == [1, 3, 5]
    assert np.flatnonzero(got[1]).tolist() == [0, 1, 2]  # a flat day: the earliest starts
    assert cyclic_partition(prof, 1).sum(axis=1).tolist() == [1, 1]


def test_mixed_rows_are_the_rows_of_the_whole_set():
    """`make_mixed_rows` draws a shard of `make_mixed` alone (the forecast bench streams)."""
    from foresize.core.forecast.synthetic import make_mixed, make_mixed_rows

    whole = make_mixed(2345, days=1, seed=3)
    for start, stop in [(0, 2345), (1, 7), (1000, 2345), (1999, 2001), (2344, 2345), (5, 5)]:
        assert np.array_equal(make_mixed_rows(2345, start, stop, days=1, seed=3), whole[start:stop])
    with pytest.raises(ValueError, match="rows 3:9 are not within 0:5"):
        make_mixed_rows(5, 3, 9)
