"""The static request (foresize.core.recommend.static): the mode's quantile of 15-minute peaks
over 14 d, 7 d and 1 d, the highest; never below the recent history at that risk."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from foresize.core.history import SeriesKey, TraceSeries, aligned_start
from foresize.core.recommend.static import static_request, window_peaks

STEP = 300.0


def test_window_peaks_are_block_maxima_aligned_to_the_epoch():
    y = np.array([9.0, 1, 2, 3, np.nan, np.nan, np.nan, 5, 4, 6])
    # The grid starts 5 minutes into a 15-minute block: [9, 1], [2, 3, nan], [nan, nan, 5],
    # [4, 6] (partial blocks at both ends).
    np.testing.assert_array_equal(window_peaks(y, STEP, 900.0 * 7 + STEP), [9.0, 3.0, 5.0, 6.0])
    # 10 minutes in: [9], [1, 2, 3], [nan x 3], [5, 4, 6].
    np.testing.assert_array_equal(
        window_peaks(y, STEP, 900.0 * 7 + 2 * STEP), [9.0, 3.0, np.nan, 6.0]
    )


def test_the_highest_span_wins_and_recent_growth_is_not_averaged_away():
    rng = np.random.default_rng(7)
    days = 14
    y = rng.uniform(1.0, 2.0, days * 288)
    y[-288:] += 1.0  # the last day runs one unit higher
    value, spans = static_request(y, STEP, 0.98, 0.0)
    assert list(spans) == ["14d", "7d", "1d"]
    assert value == spans["1d"] > spans["14d"]
    peaks = window_peaks(y, STEP, 0.0)
    # At most 2% of the last day's windows exceed it: the mode's risk, in the recent data.
    assert np.mean(peaks[-96:] > value) <= 0.02
    assert value == np.quantile(peaks[-96:], 0.98, method="higher")


def test_short_history_is_labelled_as_what_it_is():
    y = np.full(2 * 288, np.nan)
    y[-288 * 2 :] = np.linspace(1, 2, 2 * 288)
    value, spans = static_request(np.concatenate([np.full(12 * 288, np.nan), y]), STEP, 0.99, 0.0)
    assert list(spans) == ["all 48h", "1d"]
    assert value == spans["1d"]
    assert static_request(np.full(100, np.nan), STEP, 0.9, 0.0)[1] == {}


def live_history(minutes: int, seed: int) -> TraceSeries:
    """Two days of 1-minute CPU samples: a quiet baseline with short bursts (one to three
    minutes, a few an hour), so whether two bursts share a 15-minute block decides the
    p98 of the daily blocks."""
    rng = np.random.default_rng(seed)
    t = T0 + 60.0 * np.arange(minutes)
    cpu = rng.uniform(0.05, 0.1, minutes)
    starts = np.flatnonzero(rng.random(minutes) < 0.004)
    for k in starts:
        cpu[k : k + int(rng.integers(1, 4))] = rng.uniform(0.3, 1.2)
    return TraceSeries(SeriesKey("shop", "web", "app"), t, cpu, np.full(minutes, 2.0**30))


T0 = 1796000400.0  # a multiple of 900 s: 2026-12-01 00:20 UTC
DAYS_OF_DATA = 2


@pytest.mark.parametrize("seed", [3, 7])
def test_a_growing_history_never_cycles_minute_by_minute(seed):
    """ux.md N1: the history grows by a minute at a time from t to t + 15 min (one block
    boundary crossed, as on a live cluster). Within one epoch-aligned 15-minute block the
    request can only rise (the newest block gains samples); at the boundary the oldest
    block leaves the span. Blocks counted back from the newest sample instead re-cut the
    whole history every 5 minutes, and the request went up and down (up to 4.3x in the
    audit; on these seeds 1086m, 1190m, 1086m and 1055m, 958m, 1055m within 16 minutes)."""
    from foresize.front.report.recommendations import build_rows

    full = live_history(DAYS_OF_DATA * 1440 + 16, seed)
    base = DAYS_OF_DATA * 1440 - 7  # t: 7 minutes before a block boundary
    got = []
    for k in range(16):
        n = base + k
        s = TraceSeries(full.key, full.timestamps[:n], full.cpu[:n], full.memory[:n])
        (row,) = build_rows([s], [], quantiles={"cpu": 0.98, "memory": 0.999})
        got.append((aligned_start(float(s.timestamps[-1]), 900.0), row.cpu.request))
    for (block_a, a), (block_b, b) in itertools.pairwise(got):
        if block_a == block_b:
            assert b >= a, got
    values = [v for _, v in got]
    assert sum(b < a for a, b in itertools.pairwise(values)) <= 1, values
    assert not returns_to_a_value_it_left(values), values


def returns_to_a_value_it_left(values: list) -> bool:
    return any(
        values[j] != a and a in values[j + 1 :]
        for i, a in enumerate(values)
        for j in range(i + 1, len(values))
    )


def test_a_span_without_readings_is_left_out_not_a_traceback():
    """A container that stopped reporting two days before the end has 14 d and 7 d peaks
    and none in the last day: `foresize recommend --traces ... --end` on the Bitbrains
    development set stopped with an IndexError from np.quantile on the empty day."""
    y = np.full(14 * 288, np.nan)
    y[: 10 * 288] = np.linspace(1.0, 2.0, 10 * 288)
    value, spans = static_request(y, STEP, 0.98, 0.0)
    assert list(spans) == ["14d", "7d"]
    assert value == max(spans.values()) == spans["7d"]  # the growth of days 7-10
