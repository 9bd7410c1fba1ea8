"""Recommendation for AIScaleTargets: the entry point the operator and the simulator call.

    result = recommend_target(params, histories, current, oom_state, now)
    result.suggestion      # foresize.core.cluster.model.Suggestion (requests and limits)
    result.oom_state       # carry to the next call (per container)
    result.forecast_state  # carry to the next call (rolling model scores), optional

`recommend_batch` does the same for many targets in one vectorised forecast (the
simulator's 2,000 containers every 15 minutes). Pure: histories, current resources, OOM
events and `now` come in; nothing is read from a clock, a file or the cluster, and
nothing here writes history (OOM floors are state, never usage).

The steps live one module each: the target's parameters (`params`), its histories
(`histories`), the request and result (`request`), the OOM floor (`oom`), the batch's
forecasts (`forecasts`, with the CPU day schedule in `schedule`) and the steps from a
forecast to a container's request (`finish`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from foresize.core.cluster.model import ResourceRequirements
from foresize.core.cluster.snapshot import TargetObject
from foresize.core.forecast.select import OnlineScores
from foresize.core.recommend.finish import finish_target
from foresize.core.recommend.forecasts import FleetTotals, forecast_rows
from foresize.core.recommend.histories import (
    ContainerHistory,
)
from foresize.core.recommend.oom import OOMState
from foresize.core.recommend.params import RESOURCES, RecommendParams
from foresize.core.recommend.request import CachedSchedule, RecommendResult, TargetRequest


def recommend_target(
    params: RecommendParams | TargetObject,
    histories: Mapping[str, ContainerHistory],
    current: Mapping[str, ResourceRequirements],
    oom_state: Mapping[str, OOMState] | None,
    now: float,
    *,
    forecast_state: Mapping[str, OnlineScores] | None = None,
) -> RecommendResult:
    """The vertical suggestion for one target.

    params: `RecommendParams` or an AIScaleTarget. histories: container name -> history.
    current: container name -> the resources in force now (spec of the pod template).
    oom_state: from the previous call (None at first). forecast_state: from the previous
    call, to keep a rolling backtest instead of a cold-start one (optional).
    """
    if not isinstance(params, RecommendParams):
        params = RecommendParams.from_target(params)
    req = TargetRequest(params, histories, current, oom_state, forecast_state)
    return recommend_batch([req], now)[0]


def recommend_batch(
    requests: Sequence[TargetRequest],
    now: float,
    *,
    memory_reference: float | None = None,
    fleet: FleetTotals | None = None,
) -> list[RecommendResult]:
    """`recommend_target` for many targets with one vectorised forecast per resource.

    Under a named mode, memory is sized at the level `allocate_risk` gives each container
    among all the containers of the batch (cheap protection is bought, expensive protection
    is sold), so the simulator passes its whole fleet in one call; a single target
    allocates among its own containers. `memory_reference` (bytes) overrides the fleet's
    average memory at the mode's level when the fleet is recommended in parts (the operator
    keeps it from earlier passes: `RecommendResult.at_mode`). `fleet`: the batch is one
    shard of a larger one (`recommend.stream`), recommended as that one would be."""
    reqs = resolve_requests(requests)
    rows = batch_rows(reqs)
    new_states: list[dict[str, OnlineScores] | None] = [
        None if r.forecast_state is None else {} for r in reqs
    ]
    new_schedules: list[dict[str, CachedSchedule] | None] = [
        None if r.schedule_state is None else {} for r in reqs
    ]
    fc = {
        res: forecast_rows(reqs, rows, res, new_states, now, memory_reference, new_schedules, fleet)
        for res in RESOURCES
    }
    results = [finish_target(ti, r, rows, fc, now, new_states[ti]) for ti, r in enumerate(reqs)]
    for result, schedules in zip(results, new_schedules, strict=True):
        result.schedule_state = schedules
    return results


def resolve_requests(requests: Sequence[TargetRequest]) -> list[TargetRequest]:
    """The requests with their parameters read (an AIScaleTarget's into `RecommendParams`)."""
    return [
        replace(
            r,
            params=r.params
            if isinstance(r.params, RecommendParams)
            else RecommendParams.from_target(r.params),
        )
        for r in requests
    ]


def batch_rows(reqs: Sequence[TargetRequest]) -> list[tuple[int, str]]:
    """The batch's rows: (request number, container) for each container with a history."""
    rows: list[tuple[int, str]] = []
    for ti, r in enumerate(reqs):
        for name in r.current:
            if name in r.histories:
                rows.append((ti, name))
    return rows
