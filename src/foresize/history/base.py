"""The read interface every history backend offers (in-memory numpy, SQLite, Prometheus).

Series are keyed by namespace/workload/container (`SeriesKey`), never by pod, so a
workload's history outlives its pods, a scale to zero, or its target being deleted and
re-created within retention. Resources are "cpu" (cores, float) and "memory" (bytes).
Times are float Unix seconds passed by the caller; nothing here reads a clock.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from foresize.history.traces import SeriesKey

RESOURCES = ("cpu", "memory")
OOM = "oom"
THROTTLE = "throttle"
EVENT_KINDS = (OOM, THROTTLE)


class HistoryReader(Protocol):
    def series(
        self, key: SeriesKey, resource: str, start: float, end: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of the stored samples in [start, end), NaN where missing."""
        ...

    def window(
        self, keys: list[SeriesKey], resource: str, end: float, length: int, step: float
    ) -> np.ndarray:
        """(len(keys), length) matrix on the `step` grid whose last bucket contains `end`
        (bucket = max of the samples in it; NaN = no sample). Buckets are aligned to
        multiples of `step` so time-of-day slots line up across calls."""
        ...

    def events(
        self, key: SeriesKey, kind: str | None, start: float, end: float
    ) -> list[tuple[float, str, float]]:
        """(time, kind, value) of OOM / throttling events in [start, end)."""
        ...

    def first_seen(self, key: SeriesKey) -> float | None:
        """Time of the oldest stored sample of the key (for hasEnoughDataToScale)."""
        ...


def check_resource(resource: str) -> None:
    if resource not in RESOURCES:
        raise ValueError(f"unknown resource {resource!r} (one of {RESOURCES})")


def window_start(end: float, length: int, step: float) -> float:
    """Start of the first bucket of a `length`-bucket window whose last bucket holds `end`."""
    return float(np.floor(end / step) * step - (length - 1) * step)
