"""Predictive replica counts (pure, architecture §3.5).

predicted = ceil(forecast of the HPA's metric over the horizon / per-replica target),
rounded up to `multipleOf` or to the next `allowedReplicas` entry, within
[minReplicas, maxReplicas]. The effective count is max(HPA's, predicted): Foresize scales
up ahead of a forecast peak and never below what the HPA asks.

`predict_replicas_many` does the same over numpy arrays for fleets of targets.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np


def round_replicas(
    n: int,
    *,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    multiple_of: int | None = None,
    allowed: Sequence[int] = (),
) -> int:
    """Round `n` up to the allowed grid, then keep it within bounds (on the grid where
    the grid has a value within them)."""
    lo = max(min_replicas if min_replicas is not None else 0, 0)
    hi = max_replicas
    n = max(int(n), lo)
    if allowed:
        grid = sorted(set(int(a) for a in allowed))
        in_bounds = [a for a in grid if a >= lo and (hi is None or a <= hi)]
        if in_bounds:
            i = bisect.bisect_left(in_bounds, n)
            return in_bounds[i] if i < len(in_bounds) else in_bounds[-1]
    elif multiple_of and multiple_of > 1:
        n = math.ceil(n / multiple_of) * multiple_of
        if hi is not None and n > hi:
            n = (hi // multiple_of) * multiple_of
            if n < lo:
                n = hi
    if hi is not None:
        n = min(n, hi)
    return max(n, lo)


def predict_replicas(
    forecast: float,
    per_replica_target: float,
    *,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    multiple_of: int | None = None,
    allowed: Sequence[int] = (),
) -> int:
    """Replicas needed so that the forecast load per replica stays at or below target.

    `forecast` is the forecast of the HPA's metric summed over the workload (e.g. total
    CPU millicores at the horizon's peak); `per_replica_target` is what one replica may
    carry (e.g. request x target utilisation)."""
    if per_replica_target <= 0:
        raise ValueError("per_replica_target must be > 0")
    # Tolerate float noise: 3.0000000001 replicas is 3.
    raw = math.ceil(round(max(forecast, 0.0) / per_replica_target, 9))
    return round_replicas(
        raw,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        multiple_of=multiple_of,
        allowed=allowed,
    )


def effective_replicas(
    hpa_replicas: int, predicted: int | None, *, max_replicas: int | None = None
) -> int:
    """max(HPA's, predicted). The prediction is capped by maxReplicas; the HPA's own
    count is never lowered."""
    if predicted is None:
        return hpa_replicas
    if max_replicas is not None:
        predicted = min(predicted, max_replicas)
    return max(hpa_replicas, predicted)


def predict_replicas_many(
    forecast: np.ndarray,
    per_replica_target: np.ndarray,
    min_replicas: np.ndarray,
    max_replicas: np.ndarray,
    multiple_of: np.ndarray | None = None,
) -> np.ndarray:
    """Vectorised `predict_replicas` (no allowedReplicas): int64 array, one per target."""
    forecast = np.maximum(np.asarray(forecast, dtype=float), 0.0)
    target = np.asarray(per_replica_target, dtype=float)
    if np.any(target <= 0):
        raise ValueError("per_replica_target must be > 0")
    raw = np.ceil(np.round(forecast / target, 9)).astype(np.int64)
    lo = np.maximum(np.asarray(min_replicas, dtype=np.int64), 0)
    hi = np.asarray(max_replicas, dtype=np.int64)
    n = np.maximum(raw, lo)
    if multiple_of is not None:
        m = np.maximum(np.asarray(multiple_of, dtype=np.int64), 1)
        up = -(-n // m) * m
        down = (hi // m) * m
        n = np.where(up > hi, np.where(down >= lo, down, hi), up)
    out: np.ndarray = np.maximum(np.minimum(n, hi), lo)
    return out
