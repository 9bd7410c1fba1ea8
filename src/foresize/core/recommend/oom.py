"""OOM remediation: THE OOM rule (`oom_bump`, with OOM_FACTOR and OOM_REPEAT_SECONDS beside
it) over many containers (`OOMArrays`, what the replay scores), and for one container the
floor carried between calls (`OOMState`) and `apply_ooms`, the rule on a fleet of one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from foresize.core.api.quantity import MIB
from foresize.core.recommend.core import DEFAULT_STABILIZATION, KILL_MEMORY

OOM_FACTOR = 1.2
"""At an OOM kill the memory floor is 1.2 x the larger of the request that was hit and the
usage seen (docs/architecture.md §3.1). Why 1.2: a kill shows demand above the request by an unknown
amount; 20% covers the growth of most working sets between two samples in one step,
and a repeat kill compounds (x1.44, x1.73, ...) so even a doubling is covered within a
few kills, while one spurious kill costs a fifth more memory for one stabilization window."""
OOM_REPEAT_SECONDS = 120.0
"""While OOMs continue, compound again at most every 2 minutes (docs/architecture.md
§3.1): kills within that time of a bump are the same episode (the bump has not landed)."""


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
    (`oom_bump`) on a fleet of one: x1.2 at a kill, compounding
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


@dataclass(slots=True)
class OOMArrays:
    """OOM floor state of many containers (memory bytes; times in seconds).

    The floor is a lower bound on the memory request until `until`; it is *not* usage and
    is never written to history, so it cannot inflate the next forecast.
    """

    floor: np.ndarray
    until: np.ndarray
    last_bump: np.ndarray
    count: np.ndarray

    @classmethod
    def empty(cls, n: int) -> OOMArrays:
        return cls(np.zeros(n), np.full(n, -np.inf), np.full(n, -np.inf), np.zeros(n, np.int64))

    def active_floor(self, now: float) -> np.ndarray:
        return np.where(self.until > now, self.floor, 0.0)


def oom_bump(
    state: OOMArrays,
    mask: np.ndarray,
    now: float,
    request: np.ndarray,
    usage: np.ndarray | None,
    stabilization: float = DEFAULT_STABILIZATION,
    safest: np.ndarray | None = None,
    kill_memory: float = KILL_MEMORY,
) -> OOMArrays:
    """THE OOM rule: record OOM kills at `now` for the containers in `mask`; returns the
    new state. The operator and the simulator apply it through
    `foresize.core.recommend.oom.apply_ooms` (one container, its kills one by one) and the
    replay benchmark calls it directly for the whole fleet, so what is scored is what runs.

    The new floor is OOM_FACTOR over the larger of the request that was hit, the usage
    seen at the kill and any active floor (so repeated kills compound), rounded up to
    1Mi. A kill within OOM_REPEAT_SECONDS of the last bump does not bump again (the first
    bump has not landed yet) but extends the hold. `safest` (optional, per container) is
    the latest forecast at the safest memory level (`MEMORY_RISK_LEVELS[-1]`): a kill ends
    the risk `allocate_risk` took, because the container is in one of its bursts, so a
    bump is at least that forecast (the burst its history knows), not only 1.2 x what was
    seen. The floor holds for `stabilization` seconds after the last kill, and at least
    `kill_memory` (what a kill teaches: this container's demand goes beyond its forecast;
    KILL_MEMORY at the default mode, the mode's from `memory_holds`).
    """
    mask = np.asarray(mask, dtype=bool)
    active = state.active_floor(now)
    base = np.fmax(np.asarray(request, dtype=np.float64), active)
    if usage is not None:
        base = np.fmax(base, np.asarray(usage, dtype=np.float64))
    can_bump = mask & (now - state.last_bump >= OOM_REPEAT_SECONDS)
    bump = base * OOM_FACTOR
    if safest is not None:
        bump = np.fmax(bump, np.asarray(safest, dtype=np.float64))
    bump = np.ceil(bump / MIB) * MIB
    floor = np.where(can_bump, bump, state.floor)
    floor = np.where(mask & ~can_bump, np.fmax(active, state.floor), floor)
    return OOMArrays(
        floor=floor,
        until=np.where(mask, now + max(stabilization, kill_memory), state.until),
        last_bump=np.where(can_bump, now, state.last_bump),
        count=state.count + mask,
    )
