"""The CPU request of the day's segment for the rows of a batch (`day_schedule`, THE CPU
rule's schedule), reusing the schedules carried between calls (`CachedSchedule`): the
schedule changes once a day, and at 10,000 containers one computation takes seconds."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from foresize.core.api.quantity import CPU
from foresize.core.forecast.models import (
    DAY,
    DaySchedule,
    ForecastConfig,
    day_schedule,
    forward_max,
)
from foresize.core.recommend.core import SCHEDULE_BLOCKS, SCHEDULE_DAYS, SCHEDULE_SLOT
from foresize.core.recommend.histories import MODEL_STEP, TO_CANONICAL
from foresize.core.recommend.request import CachedSchedule, TargetRequest

Row = tuple[int, str]
"""A row of a batch: (index of the target in the batch, container name)."""


def cpu_schedule(
    reqs: Sequence[TargetRequest],
    group: Sequence[Row],
    y: np.ndarray,
    base: int,
    cfg: ForecastConfig,
    now: float,
    new_schedules: list[dict[str, CachedSchedule] | None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's scheduled request at its mode's quantile for the segment of the day that
    holds `now` (`day_schedule`, canonical units), whether this decision is the first
    of that segment (a decision every `forecast_blocks`) and the seconds to the next
    segment's start (`DaySchedule.remaining`). Rows whose target carries a schedule state
    reuse the schedule computed for the same key (`CachedSchedule`) and store theirs in
    `new_schedules`."""
    schedule = np.full(len(group), np.nan)
    opens = np.zeros(len(group), dtype=bool)
    remaining = np.full(len(group), np.nan)
    mode_q = np.array([reqs[ti].params.model(CPU).quantile(CPU) for ti, _name in group])
    interval = np.array([reqs[ti].params.forecast_blocks for ti, _name in group])
    t_origin = (base + y.shape[1] - 1) * MODEL_STEP
    carried = any(reqs[ti].schedule_state is not None for ti, _name in group)
    digests = _schedule_digests(y, t_origin, cfg) if carried else None
    for q in np.unique(mode_q):
        sel = np.nonzero(mode_q == q)[0]
        day = _day_schedules(reqs, group, y, sel, t_origin, float(q), cfg, digests, new_schedules)
        for every in np.unique(interval[sel]):
            part = sel[interval[sel] == every]
            level, first = day.at(now, float(every))
            at = np.searchsorted(sel, part)
            schedule[part] = level[at, 0] * TO_CANONICAL[CPU]
            opens[part] = first[at, 0]
        remaining[sel] = day.remaining(now)[:, 0]
    return schedule, opens, remaining


def _schedule_digests(y: np.ndarray, t_origin: float, cfg: ForecastConfig) -> list[bytes]:
    """Per row, a digest of the history `day_schedule` reads for the day holding the next
    sample: the SCHEDULE_DAYS days before that day's midnight (NaN before the matrix)."""
    period = cfg.steps(DAY)
    nxt = int(round((t_origin + cfg.step) % DAY / cfg.step)) % period
    d0 = y.shape[1] - nxt  # column of the day's first sample
    lo = d0 - SCHEDULE_DAYS * period
    missing = max(0, -lo).to_bytes(8, "little")
    out = []
    for row in y[:, max(lo, 0) : max(d0, 0)]:
        # A row of the span is one contiguous block of `y`: hashed in place, not copied.
        digest = hashlib.blake2b(missing, digest_size=16)
        digest.update(row.data if row.flags.c_contiguous else row.tobytes())
        out.append(digest.digest())
    return out


def _day_schedules(
    reqs: Sequence[TargetRequest],
    group: Sequence[Row],
    y: np.ndarray,
    sel: np.ndarray,
    t_origin: float,
    q: float,
    cfg: ForecastConfig,
    digests: Sequence[bytes] | None,
    new_schedules: list[dict[str, CachedSchedule] | None] | None,
) -> DaySchedule:
    """The day schedules (`day_schedule` at quantile `q`) of the rows `sel` of the group:
    carried ones where their key matches, the others computed together (all of them
    when no target carries a schedule state: `digests` None)."""
    day_key = float((t_origin + cfg.step) // DAY)
    keys = [(day_key, q, cfg.h, digests[i] if digests is not None else b"") for i in sel]
    cached: list[CachedSchedule | None] = []
    for i, key in zip(sel, keys, strict=True):
        ti, name = group[i]
        carried = reqs[ti].schedule_state
        hit = carried.get(name) if carried is not None and digests is not None else None
        cached.append(hit if hit is not None and hit.key == key else None)
    miss = [j for j, c in enumerate(cached) if c is None]
    fresh: DaySchedule | None = None
    if miss:
        fresh = day_schedule(
            forward_max(y[sel[miss]], cfg.h),
            y.shape[1] - 1,
            t_origin,
            np.array([q]),
            cfg,
            SCHEDULE_BLOCKS,
            SCHEDULE_DAYS,
            SCHEDULE_SLOT,
        )
        for m, j in enumerate(miss):
            cached[j] = CachedSchedule(
                keys[j],
                fresh.midnight,
                fresh.slot,
                fresh.opens[m, 0].copy(),
                fresh.level[m, 0].copy(),
            )
    entries = [c for c in cached if c is not None]
    if new_schedules is not None:
        for i, entry in zip(sel, entries, strict=True):
            ti, name = group[i]
            target_schedules = new_schedules[ti]
            if target_schedules is not None:
                target_schedules[name] = entry
    if fresh is not None and len(miss) == len(sel):
        return fresh
    first = entries[0]
    return DaySchedule(
        midnight=first.midnight,
        slot=first.slot,
        opens=np.stack([e.opens for e in entries])[:, None, :],
        level=np.stack([e.level for e in entries])[:, None, :],
    )
