"""OOM remediation for one container: the floor an OOM kill raises, carried between calls
(`OOMState`), and `apply_ooms`, THE OOM rule (`core.oom_bump`) on a fleet of one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from foresize.core.recommend.core import KILL_MEMORY, OOMArrays, oom_bump


@dataclass(slots=True)
class OOMState:
    """Memory state of one container: the OOM floor (bytes) and the recent memory targets
    for the scale-down stabilization. Carried between calls by the caller."""

    floor: int = 0
    until: float = -math.inf
    last_bump: float = -math.inf
    last_seen_oom: float = -math.inf
    count: int = 0
    recent: tuple[tuple[float, float], ...] = ()  # (time, memory target before floors)

    def active(self, now: float) -> int:
        return self.floor if now < self.until else 0


def apply_ooms(
    state: OOMState,
    oom_times: Sequence[float],
    oom_usage: Sequence[float],
    request: int,
    now: float,
    stabilization: float,
    safest: float | None = None,
    kill_memory: float = KILL_MEMORY,
) -> OOMState:
    """Apply the OOM kills newer than the state has seen, oldest first, by THE OOM rule
    (`foresize.core.recommend.core.oom_bump`) on a fleet of one: x1.2 at a kill, compounding
    again if kills continue 2 minutes or more after the last bump, held for
    `stabilization` and at least `kill_memory` (the mode's, `memory_holds`); at least
    `safest` (the forecast at the safest memory level, bytes)."""
    events = sorted(
        (t, oom_usage[i] if i < len(oom_usage) else math.nan)
        for i, t in enumerate(oom_times)
        if t > state.last_seen_oom and t <= now
    )
    if not events:
        return replace(state)
    arrays = OOMArrays(
        floor=np.array([float(state.floor)]),
        until=np.array([state.until]),
        last_bump=np.array([state.last_bump]),
        count=np.array([state.count], dtype=np.int64),
    )
    one = np.ones(1, dtype=bool)
    known = safest is not None and math.isfinite(safest)
    for t, usage in events:
        arrays = oom_bump(
            arrays,
            one,
            t,
            np.array([float(request)]),
            np.array([usage if usage is not None else math.nan], dtype=np.float64),
            stabilization,
            safest=np.array([safest]) if known else None,
            kill_memory=kill_memory,
        )
    return replace(
        state,
        floor=int(arrays.floor[0]),
        until=float(arrays.until[0]),
        last_bump=float(arrays.last_bump[0]),
        last_seen_oom=events[-1][0],
        count=int(arrays.count[0]),
    )
