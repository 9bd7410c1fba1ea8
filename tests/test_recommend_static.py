"""The static request (foresize.core.recommend.static): the mode's quantile of 15-minute peaks
over 14 d, 7 d and 1 d, the highest; never below the recent history at that risk."""

from __future__ import annotations

import numpy as np

from foresize.core.recommend.static import static_request, window_peaks

STEP = 300.0


def test_window_peaks_are_block_maxima_aligned_to_the_end():
    y = np.array([9.0, 1, 2, 3, np.nan, np.nan, np.nan, 5, 4, 6])
    # Blocks of 3 from the end: [1,2,3], [nan x3], [5,4,6]; the leading 9 is dropped.
    np.testing.assert_array_equal(window_peaks(y, STEP), [3.0, np.nan, 6.0])


def test_the_highest_span_wins_and_recent_growth_is_not_averaged_away():
    rng = np.random.default_rng(7)
    days = 14
    y = rng.uniform(1.0, 2.0, days * 288)
    y[-288:] += 1.0  # the last day runs one unit higher
    value, spans = static_request(y, STEP, 0.98)
    assert list(spans) == ["14d", "7d", "1d"]
    assert value == spans["1d"] > spans["14d"]
    peaks = window_peaks(y, STEP)
    # At most 2% of the last day's windows exceed it: the mode's risk, in the recent data.
    assert np.mean(peaks[-96:] > value) <= 0.02
    assert value == np.quantile(peaks[-96:], 0.98, method="higher")


def test_short_history_is_labelled_as_what_it_is():
    y = np.full(2 * 288, np.nan)
    y[-288 * 2 :] = np.linspace(1, 2, 2 * 288)
    value, spans = static_request(np.concatenate([np.full(12 * 288, np.nan), y]), STEP, 0.99)
    assert list(spans) == ["all 48h", "1d"]
    assert value == spans["1d"]
    assert static_request(np.full(100, np.nan), STEP, 0.9)[1] == {}
