"""A container's usage history on the model grid, as the recommendation reads it, and
`load_histories`, which builds it from any `HistoryReader`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.history import OOM, UNKNOWN_KIND, HistoryReader, SeriesKey

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
    kinds: Sequence[str] = (UNKNOWN_KIND,),
    window: float = HISTORY_WINDOW,
    step: float = MODEL_STEP,
) -> dict[str, ContainerHistory]:
    """Container histories of one workload from any `HistoryReader` (SQLite, in-memory,
    Prometheus), on the model grid ending at `now`, with recent OOM kills; `kinds`: the
    kinds of history it reads (`history.history_kinds`: its own kind, and the history of
    an unknown kind while its name is its kind's alone), folded by their maximum."""
    length = max(1, int(window // step))
    # One read per resource for every container under every kind, folded over the kinds.
    keys = [SeriesKey(namespace, workload, c, k) for c in containers for k in kinds]
    shape = (len(containers), len(kinds), length)
    with np.errstate(all="ignore"):
        cpu = np.fmax.reduce(reader.window(keys, CPU, now, length, step).reshape(shape), axis=1)
        mem = np.fmax.reduce(reader.window(keys, MEMORY, now, length, step).reshape(shape), axis=1)
    out = {}
    for i, c in enumerate(containers):
        own = keys[i * len(kinds) : (i + 1) * len(kinds)]
        events = sorted(e for k in own for e in reader.events(k, OOM, now - window, now + 1e-9))
        seen = [t for t in (reader.first_seen(k) for k in own) if t is not None]
        out[c] = ContainerHistory(
            cpu=cpu[i],
            memory=mem[i],
            first_seen=min(seen) if seen else None,
            oom_times=[e[0] for e in events],
            oom_usage=[e[2] if e[2] > 0 else math.nan for e in events],
        )
    return out
