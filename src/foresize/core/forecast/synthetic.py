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
    return make_mixed_rows(n, 0, n, days, step, seed)


def make_mixed_rows(
    n: int, start: int, stop: int, days: float = 14.0, step: float = 300.0, seed: int = 0
) -> np.ndarray:
    """Rows `start:stop` of `make_mixed(n, ...)`, drawing only the blocks they fall in, so
    a caller can stream `n` series by shards without holding them all."""
    if not 0 <= start <= stop <= n:
        raise ValueError(f"rows {start}:{stop} are not within 0:{n}")
    width = int(days * DAY / step)
    out = np.empty((stop - start, width))
    kinds = len(KINDS)
    for i, k in enumerate(KINDS):
        count = len(range(i, n, kinds))  # series of kind i in the whole set
        # Positions (within kind i) of the rows asked for: row = i + kinds * position.
        lo = max(0, -(-(start - i) // kinds))
        hi = max(lo, -(-(stop - i) // kinds))
        for b in range(lo // MIXED_CHUNK, -(-hi // MIXED_CHUNK)):
            b0, b1 = b * MIXED_CHUNK, min((b + 1) * MIXED_CHUNK, count)
            p0, p1 = max(lo, b0), min(hi, b1)
            if p1 <= p0:
                continue
            block = make_series(k, b1 - b0, days, step, seed + i + kinds * b)
            rows = i + kinds * np.arange(p0, p1) - start
            out[rows] = block[p0 - b0 : p1 - b0]
    return out
