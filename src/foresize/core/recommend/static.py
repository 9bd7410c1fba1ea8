"""Static recommendations: one request to write into a manifest and keep (pure).

The operator re-sizes every 15 minutes, so its forecast covers the next 15 minutes. A
request written into a manifest stays for weeks: it must hold for the whole coming period
at the mode's risk. The mode's quantile is a miss rate per 15-minute window
(`foresize.core.recommend.core.MODE_CPU_QUANTILES`: balanced CPU is short in ~2 windows a day),
so the static request is the mode's quantile of the 15-minute peaks of the history, taken
over several spans ending now and the highest kept: a workload that grew lately is sized
for what it does now, not for its quieter average fortnight.
"""

from __future__ import annotations

import math

import numpy as np

PEAK_WINDOW = 900.0
"""15 minutes: the window the modes' miss rates are defined on (the operator's horizon)."""
STATIC_SPANS: tuple[tuple[str, float], ...] = (
    ("14d", 14 * 86400.0),  # the whole retention
    ("7d", 7 * 86400.0),  # the last weekly cycle
    ("1d", 86400.0),  # the last daily cycle: recent growth is not averaged away
)
"""Spans of history, in whole 15-minute blocks up to the one holding the newest sample, whose
quantiles a static request covers."""


def window_peaks(
    values: np.ndarray, step: float, start: float, window: float = PEAK_WINDOW
) -> np.ndarray:
    """The maxima of the `window`-long blocks of a series on a `step` grid whose first
    column is at `start`, the blocks aligned to multiples of `window` since the epoch
    (`foresize.core.history.aligned_start`), oldest first; the first and the last block
    may be partial (NaN where a block has no reading). A new sample then only raises the
    newest block or opens the next one: the blocks already cut stay as they were."""
    from foresize.core.history import block_numbers

    v = np.asarray(values, dtype=np.float64)
    if not v.size:
        return np.empty(0)
    blocks = block_numbers(start, v.size, step, window)
    index = blocks - blocks[0]
    out = np.full(int(index[-1]) + 1, -np.inf)
    finite = np.isfinite(v)
    np.maximum.at(out, index[finite], v[finite])
    out[np.isneginf(out)] = np.nan
    return out


def static_request(
    values: np.ndarray, step: float, q: float, start: float
) -> tuple[float, dict[str, float]]:
    """(the request, {span: the q-quantile of its 15-minute peaks}) for a series on a
    `step` grid whose first column is at `start`, ending at the newest sample: the highest
    of the spans' quantiles (each the smallest observed peak with at most 1 - q of the
    windows above it), a span being the last blocks up to the one holding the newest
    sample. NaN without data."""
    peaks = window_peaks(values, step, start)
    have = np.flatnonzero(np.isfinite(peaks))
    per_span: dict[str, float] = {}
    if not have.size:
        return math.nan, per_span
    covered = peaks.size - int(have[0])  # windows from the first reading to the end
    seen: set[int] = set()
    for name, span in STATIC_SPANS:
        n = min(max(1, math.ceil(span / PEAK_WINDOW)), covered)
        if n in seen:
            continue  # a span longer than the history is the whole history, once
        seen.add(n)
        label = name if n * PEAK_WINDOW >= span else f"all {n * PEAK_WINDOW / 3600:g}h"
        recent = peaks[-n:]
        recent = recent[np.isfinite(recent)]
        if not recent.size:
            continue  # no reading in the span (the container stopped reporting before it)
        per_span[label] = float(np.quantile(recent, q, method="higher"))
    return max(per_span.values()), per_span
