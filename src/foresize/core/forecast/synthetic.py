"""Seeded synthetic usage series of known shapes (for the forecast benchmark and tests).

Kinds: `seasonal` (a daily cycle with a sharp working-hours peak), `flat` (a constant
level with small noise), `spiky` (a low level with rare short bursts at random times),
`growing` (a steady upward trend, like a leak or a growing cache). Pure: a seed in,
arrays out.
"""

from __future__ import annotations

import numpy as np

KINDS = ("seasonal", "flat", "spiky", "growing")
DAY = 86400.0


def make_series(
    kind: str, n: int, days: float = 14.0, step: float = 300.0, seed: int = 0
) -> np.ndarray:
    """`n` series of one kind, shape (n, days*86400/step), starting at midnight."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / step)) * step
    level = rng.uniform(0.5, 2.0, size=(n, 1))
    if kind == "seasonal":
        phase = (t % DAY) / DAY
        # Busy from ~9:00 to ~18:00, quiet at night: a smooth bump, 4x the night level.
        bump = np.exp(-(((phase - 0.55) / 0.12) ** 2))
        y = level * (0.25 + bump)[None, :] * (1 + 0.05 * rng.standard_normal((n, t.size)))
    elif kind == "flat":
        y = level * (1 + 0.02 * rng.standard_normal((n, t.size)))
    elif kind == "spiky":
        base = level * 0.2 * (1 + 0.05 * rng.standard_normal((n, t.size)))
        spikes = rng.random((n, t.size)) < 0.01
        y = np.where(spikes, level * rng.uniform(2.0, 4.0, size=(n, t.size)), base)
    elif kind == "growing":
        trend = 1.0 + 2.0 * t / t[-1]
        y = level * trend[None, :] * (1 + 0.03 * rng.standard_normal((n, t.size)))
    else:
        raise ValueError(f"unknown kind {kind!r} (one of {KINDS})")
    out: np.ndarray = np.maximum(y, 0.0)
    return out


MIXED_CHUNK = 500
"""make_mixed draws each kind in blocks of 500 series: a kind's draws take several
temporaries of the output's size, so drawing 10,000 series at once peaks at about four
times the output (the forecast benchmark reports its peak memory)."""


def make_mixed(n: int, days: float = 14.0, step: float = 300.0, seed: int = 0) -> np.ndarray:
    """`n` series, the kinds in equal shares (interleaved); each block of MIXED_CHUNK series
    of a kind has its own seed, so the result depends only on (n, days, step, seed)."""
    width = int(days * DAY / step)
    out = np.empty((n, width))
    for i, k in enumerate(KINDS):
        rows = np.arange(i, n, len(KINDS))
        for b, c0 in enumerate(range(0, len(rows), MIXED_CHUNK)):
            block = rows[c0 : c0 + MIXED_CHUNK]
            out[block] = make_series(k, len(block), days, step, seed + i + len(KINDS) * b)
    return out
