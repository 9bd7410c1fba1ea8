"""A container's usage history on the model grid, as the recommendation reads it, and
`load_histories`, which builds it from any `HistoryReader`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.history import OOM, HistoryReader, SeriesKey

MODEL_STEP = 300.0
"""Models run on the 5-minute grid (architecture §3.1)."""
HISTORY_WINDOW = 14 * 86400.0
"""How much history a recommendation reads: the retention (14 days)."""
TO_CANONICAL = {CPU: 1000.0, MEMORY: 1.0}
"""History units (cores, bytes) to the canonical units of requests (millicores, bytes)."""


@dataclass(slots=True)
class ContainerHistory:
    """A container's usage on the 5-minute model grid, last column = the bucket of `now`.

    cpu in cores, memory in bytes, NaN = no sample (arrays of one target may differ in
    length; they are aligned at their end). `first_seen` is the oldest sample's time.
    `oom_times` are OOM kills observed (any that are newer than the state has seen are
    applied). Build it with `foresize.core.recommend.histories.load_histories` from any
    `HistoryReader`.
    """

    cpu: np.ndarray
    memory: np.ndarray
    first_seen: float | None = None
    oom_times: Sequence[float] = ()
    oom_usage: Sequence[float] = ()  # memory usage at each kill, if known (else NaN/absent)


def load_histories(
    reader: HistoryReader,
    namespace: str,
    workload: str,
    containers: Sequence[str],
    now: float,
    *,
    window: float = HISTORY_WINDOW,
    step: float = MODEL_STEP,
) -> dict[str, ContainerHistory]:
    """Container histories of one workload from any `HistoryReader` (SQLite, in-memory,
    Prometheus), on the model grid ending at `now`, with recent OOM kills."""
    length = max(1, int(window // step))
    keys = [SeriesKey(namespace, workload, c) for c in containers]
    cpu = reader.window(keys, CPU, now, length, step)
    mem = reader.window(keys, MEMORY, now, length, step)
    out = {}
    for i, (c, k) in enumerate(zip(containers, keys, strict=True)):
        events = reader.events(k, OOM, now - window, now + 1e-9)
        out[c] = ContainerHistory(
            cpu=cpu[i],
            memory=mem[i],
            first_seen=reader.first_seen(k),
            oom_times=[e[0] for e in events],
            oom_usage=[e[2] if e[2] > 0 else math.nan for e in events],
        )
    return out
