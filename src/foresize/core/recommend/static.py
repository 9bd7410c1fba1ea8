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
"""Spans of history, ending at the newest sample, whose quantiles a static request covers."""


def window_peaks(values: np.ndarray, step: float, window: float = PEAK_WINDOW) -> np.ndarray:
    """The maxima of consecutive `window`-long blocks of a series on a `step` grid, the
    blocks aligned to its end (NaN where a block has no reading)."""
    k = max(1, round(window / step))
    v = np.asarray(values, dtype=np.float64)
    n = (v.size // k) * k
    blocks = v[v.size - n :].reshape(-1, k) if n else np.empty((0, k))
    out = np.full(blocks.shape[0], np.nan)
    have = np.isfinite(blocks).any(axis=1)
    if have.any():
        out[have] = np.nanmax(blocks[have], axis=1)
    return out


def static_request(values: np.ndarray, step: float, q: float) -> tuple[float, dict[str, float]]:
    """(the request, {span: the q-quantile of its 15-minute peaks}) for a series on a
    `step` grid ending at the newest sample: the highest of the spans' quantiles (each the
    smallest observed peak with at most 1 - q of the windows above it). NaN without data."""
    peaks = window_peaks(values, step)
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
        per_span[label] = float(np.quantile(recent, q, method="higher"))
    return max(per_span.values()), per_span
