"""The forecast upsize demand of the coming window, per node pool, and the headroom step
of the pass (`cluster.headroom` holds the placeholders and their sizing).

For every running pod of an autonomous AIScaleTarget's workload that has a suggestion
(without one Foresize resizes nothing), per container and resource: what the pod will
request over the coming `window` minus what it requests once this pass's resizes are
sent; summed per node pool of the pod's node. What it will request is the larger of its
suggestion (or the request after this pass) and the level the forecast sees over the
window (`coming_levels`, read once per `GROWTH_STEP`), at most `MAX_GROWTH` times that:

- CPU: Foresize's own day schedule of the container (`recommend.schedule`, kept in the
  pass state), its highest segment level within the window: the request moves to the
  next segment's level at its start, which is the upsize to make room for; without a
  schedule (less than a day of history, a baseline recommender), the container's peak
  over the same window one day earlier (seasonal-naive: the daily peak comes back);
- memory: that seasonal peak plus THE memory rule's headroom (`MEMORY_HEADROOM`, 10%):
  the memory request holds the recent peak, so it only grows where the coming window's
  peak is above it.

`headroom_actions` turns it into the pass's actions: the placeholders the capacity guard
took for this pass's resizes released first (`ReleaseHeadroom`, before any resize is
sent), and the placeholder Deployments sized to the demand left after this pass
(`EnsureHeadroom`), growing at once and shrinking only after `SHRINK_AFTER` (a
forecast that wobbles by one placeholder must not churn pods, nor a node autoscaler),
except by the placeholders this pass released: their demand has landed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.actions import Action, EnsureHeadroom, ReleaseHeadroom, ResizePod
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.headroom import (
    HEADROOM_LABEL,
    HeadroomConfig,
    is_placeholder,
    plan_headroom,
    pool_of,
)
from foresize.core.cluster.model import Pod, ResourceMap, Suggestion
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.history import (
    HistoryReader,
    HistoryWorkload,
    SeriesKey,
    history_kinds,
    merged_window,
)
from foresize.core.recommend.core import MEMORY_HEADROOM
from foresize.core.recommend.request import CachedSchedule

DAY = 86400.0
GROWTH_STEP = 300.0
"""History is read on the models' 5-minute grid, and a container's growth once per step."""
WINDOW_EPS = 1e-6
MAX_GROWTH = 4.0
"""A request more than 4x the one in force within one window is noise on a near-idle
series, not a coming peak: the coming level is capped there."""
SHRINK_AFTER = 600.0
"""A pool's placeholders shrink only after the demand stayed lower for 10 minutes: a
forecast wobbling by one placeholder must not delete and recreate pods every pass."""

Levels = dict[str, float]  # resource -> a request level, canonical units


@dataclass(slots=True)
class HeadroomState:
    """What the headroom step keeps between passes (lost on restart: rebuilt in a pass)."""

    levels: dict[str, tuple[float, Levels]] = field(default_factory=dict)  # ns/wl/container
    lower_since: dict[str, float] = field(default_factory=dict)  # pool -> since when lower


def schedule_level(schedule: CachedSchedule, now: float, window: float) -> float | None:
    """The highest level of the day schedule over [now, now + window] (cores), None where
    the schedule has none there."""
    slots = int(schedule.level.shape[0])
    if slots == 0 or schedule.slot <= 0:
        return None
    k0 = min(int(((now - schedule.midnight) % DAY) // schedule.slot), slots - 1)
    ahead = max(1, math.ceil(window / schedule.slot))
    levels = schedule.level[[(k0 + i) % slots for i in range(ahead + 1)]]
    return float(np.nanmax(levels)) if np.isfinite(levels).any() else None


def seasonal_peak(
    history: HistoryReader,
    key: SeriesKey,
    resource: str,
    now: float,
    window: float,
    kinds: Sequence[str] | None = None,
) -> float | None:
    """The container's peak over the same window one day earlier (cores or bytes), None
    without a sample there; `kinds`: the kinds of history read (`history.history_kinds`;
    None: the key's own)."""
    # The last bucket holds the window's end (just before it: the bucket ending there).
    end = now - DAY + window - WINDOW_EPS
    length = max(1, math.ceil(window / GROWTH_STEP))
    values = merged_window(history, key, kinds or (key.kind,), resource, end, length, GROWTH_STEP)
    return float(np.nanmax(values)) if np.isfinite(values).any() else None


def coming_levels(
    history: HistoryReader | None,
    schedule: CachedSchedule | None,
    key: SeriesKey,
    now: float,
    window: float,
    kinds: Sequence[str] | None = None,
) -> Levels:
    """Per resource, the request (canonical units) the forecast sees the container at over
    the coming window (module notes); resources it has no view of are left out."""
    out: Levels = {}
    level = schedule_level(schedule, now, window) if schedule is not None else None
    if level is None and history is not None:
        level = seasonal_peak(history, key, CPU, now, window, kinds)
    if level is not None:
        out[CPU] = level * 1000.0  # cores -> millicores
    memory = (
        seasonal_peak(history, key, MEMORY, now, window, kinds) if history is not None else None
    )
    if memory is not None:
        out[MEMORY] = memory * (1.0 + MEMORY_HEADROOM)  # THE memory rule's headroom
    return out


def _targeted_pods(
    snapshot: ClusterSnapshot, target: TargetObject
) -> tuple[TargetView, HistoryWorkload, list[Pod]] | None:
    """(its view, the workload its history is kept under, running pods) of an autonomous
    scaleTargetRef target."""
    try:
        view = target_view(target)
    except Exception:  # an unreadable spec: the worker reports it
        return None
    if not view.vertical_autonomous or view.deleting or not view.ref_kind:
        return None
    wl = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
    if wl is None:
        return None
    pods = [
        p
        for p in snapshot.pods_of(wl)
        if p.phase == "Running" and p.node_name and not p.terminating
    ]
    return view, HistoryWorkload(wl.kind, wl.name), pods


def forecast_demand(
    snapshot: ClusterSnapshot,
    now: float,
    suggestions: Mapping[str, Suggestion],
    schedules: Mapping[str, Mapping[str, CachedSchedule]],
    history: HistoryReader | None,
    config: HeadroomConfig,
    state: HeadroomState,
    resized: Mapping[str, Mapping[str, ResourceMap]] | None = None,
) -> dict[str, ResourceMap]:
    """pool -> the forecast upsize demand of the coming window (module notes). `resized`:
    pod key -> container -> the requests this pass's resizes set (what "now" is)."""
    resized = resized or {}
    demand: dict[str, ResourceMap] = {}
    seen: set[str] = set()
    for target in snapshot.targets:
        found = _targeted_pods(snapshot, target)
        if found is None:
            continue
        view, workload, pods = found
        kinds = history_kinds(snapshot, view.namespace, workload)
        tkey = view.key
        # This pass's (or this shell's) suggestion, else the one in the target's status
        # (a target another shard's replica recommends for).
        sugg = suggestions.get(tkey) or view.suggestion
        for pod in pods:
            if is_placeholder(pod, config.namespace):
                continue
            pool = pool_of(snapshot.nodes.get(pod.node_name or ""), config)
            if not config.wanted(pool):
                continue
            grow = demand.setdefault(pool, {})
            for c in pod.containers:
                gkey = f"{pod.namespace}/{workload.name}/{c.name}"
                seen.add(gkey)
                cs = sugg.for_container(c.name) if sugg is not None else None
                if cs is None:
                    continue  # no suggestion yet: Foresize will not resize it
                cached = state.levels.get(gkey)
                if cached is None or not 0 <= now - cached[0] < GROWTH_STEP:
                    sched = schedules.get(tkey, {}).get(c.name)
                    key = workload.key(pod.namespace, c.name)
                    cached = state.levels[gkey] = (
                        now,
                        coming_levels(history, sched, key, now, config.window, kinds),
                    )
                current = {**c.resources.requests, **resized.get(pod.key, {}).get(c.name, {})}
                for r in (CPU, MEMORY):
                    if r not in current or r not in cs.requests:
                        continue  # never a request the pod does not declare (QoS)
                    base = max(current[r], cs.requests[r])
                    coming = min(base * MAX_GROWTH, max(base, cached[1].get(r, 0.0)))
                    need = math.ceil(coming) - current[r]
                    if need > 0:
                        grow[r] = grow.get(r, 0) + need
    for gone in set(state.levels) - seen:
        del state.levels[gone]
    return demand


def _resized(actions: list[Action]) -> dict[str, dict[str, ResourceMap]]:
    out: dict[str, dict[str, ResourceMap]] = {}
    for a in actions:
        if isinstance(a, ResizePod):
            pod = out.setdefault(f"{a.namespace}/{a.name}", {})
            for c in a.containers:
                pod[c.name] = {r: v for r, v in c.requests.items() if v is not None}
    return out


def _paced(
    snapshot: ClusterSnapshot,
    wanted: list[EnsureHeadroom],
    config: HeadroomConfig,
    state: HeadroomState,
    now: float,
    released: Mapping[str, int],
) -> list[EnsureHeadroom]:
    """Growth at once; a shrink only once it has been wanted for `SHRINK_AFTER`, but for
    the placeholders this pass's upsizes released (`released`: pool -> count): their
    demand has landed, and kept replicas would only recreate them Pending, for a node
    autoscaler to add a node nothing will use."""
    out = []
    pools = set()
    for ensure in wanted:
        pools.add(ensure.pool)
        wl = snapshot.workload("Deployment", ensure.namespace, ensure.name)
        if wl is None or ensure.replicas >= wl.replicas:
            state.lower_since.pop(ensure.pool, None)
            out.append(ensure)
            continue
        since = state.lower_since.setdefault(ensure.pool, now)
        if now - since >= SHRINK_AFTER:
            state.lower_since.pop(ensure.pool, None)
            out.append(ensure)
            continue
        consumed = max(ensure.replicas, wl.replicas - released.get(ensure.pool, 0))
        if consumed < wl.replicas:
            out.append(replace(ensure, replicas=consumed))
    for pool in set(state.lower_since) - pools:
        del state.lower_since[pool]
    return out


def headroom_actions(
    snapshot: ClusterSnapshot,
    now: float,
    config: HeadroomConfig,
    state: HeadroomState,
    ledger: NodeLedger,
    planned: list[Action],
    suggestions: Mapping[str, Suggestion],
    schedules: Mapping[str, Mapping[str, CachedSchedule]],
    history: HistoryReader | None,
    sizing: ClusterSnapshot | None = None,
) -> tuple[list[Action], list[Action]]:
    """(releases to send before every resize of the pass, Deployments to size after it).

    Every replica releases what its own resizes need; the Deployments are sized by one
    replica only, over the whole cluster (`sizing`: the unfiltered snapshot, None on the
    other replicas), so two shards never fight over one Deployment."""
    releases: list[Action] = [
        ReleaseHeadroom(
            p.namespace,
            p.name,
            p.node_name or "",
            uid=p.uid,
            reason=f"room for an upsize on node {p.node_name}",
        )
        for p in ledger.released
    ]
    if sizing is None:
        return releases, []
    demand = forecast_demand(
        sizing, now, suggestions, schedules, history, config, state, _resized(planned)
    )
    released: dict[str, int] = {}
    for p in ledger.released:
        pool = p.labels.get(HEADROOM_LABEL, "")
        released[pool] = released.get(pool, 0) + 1
    ensure = _paced(sizing, plan_headroom(sizing, demand, config), config, state, now, released)
    return releases, list(ensure)


__all__ = [
    "HeadroomState",
    "coming_levels",
    "forecast_demand",
    "headroom_actions",
    "schedule_level",
    "seasonal_peak",
]
