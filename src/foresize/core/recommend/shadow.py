"""Shadow policies (issue 24): what other policies would have requested, scored.

A target names up to `MAX_SHADOW_POLICIES` policies (`spec.shadow[] {name, model}`). At
every suggestion of the target the operator also runs each of them through the same
recommender (`recommend_batch`) on the same live history, with their own OOM floors,
rolling backtests and day schedules, and the published requests after their own
hysteresis. Each run keeps its decisions over the history window (14 days); the requests
in force between decisions, on the model grid, are scored against the usage that came by
THE scoring (`recommend.score`, the one `bench recommend` uses): slack, shortfall, the
samples under, events (CPU crossings; memory: OOM kills, samples over the request) and
changes per series-day. The target's own policy is scored the same way under the name
`active`. A shadow never acts. The decisions are the operator's memory: an operator
restart starts them again (the status says since when they are scored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from foresize.core.api.access import JSONValue, get_path
from foresize.core.api.fields import format_timestamp
from foresize.core.api.quantity import CPU, MEMORY, format_resource_map
from foresize.core.recommend.score import ResourceScore, score_resource

if TYPE_CHECKING:
    from foresize.core.forecast.select import OnlineScores
    from foresize.core.recommend.histories import ContainerHistory
    from foresize.core.recommend.oom import OOMState
    from foresize.core.recommend.params import RecommendParams
    from foresize.core.recommend.request import CachedSchedule

RESOURCES = (CPU, MEMORY)
_UNIT = {CPU: 1000.0, MEMORY: 1.0}  # history units (cores, bytes) -> canonical

Requests = dict[str, dict[str, int]]
"""container -> resource -> request (canonical) of one decision."""


@dataclass(slots=True)
class ShadowRun:
    """One policy's decisions on one target, and the state its recommender carries."""

    decisions: list[tuple[float, Requests]] = field(default_factory=list)
    oom: dict[str, OOMState] = field(default_factory=dict)
    forecast: dict[str, OnlineScores] = field(default_factory=dict)
    schedule: dict[str, CachedSchedule] = field(default_factory=dict)

    def record(self, now: float, requests: Requests, window: float) -> None:
        """Keep a decision; forget those older than `window` but the one in force then."""
        self.decisions.append((now, requests))
        old = [i for i, (t, _) in enumerate(self.decisions) if t < now - window]
        if len(old) > 1:
            del self.decisions[: old[-1]]

    def latest(self) -> Requests | None:
        return self.decisions[-1][1] if self.decisions else None


def shadow_params(target: JSONValue, policy: JSONValue, base: RecommendParams) -> RecommendParams:
    """The recommendation parameters of `policy` on `target`: the target's own (`base`)
    with the forecast model's fields the policy gives replacing the target's."""
    from foresize.core.recommend.params import ResourceModel

    spec = get_path(target, "spec")
    model = spec.effective_model("vertical").merged(policy.model)
    per = {}
    for resource in RESOURCES:
        m = model.for_metric(resource)
        per[resource] = ResourceModel(m.mode, m.percentile_value, m.forecast_buffer_percentage)
    return replace(
        base,
        uid=f"{base.uid}/shadow/{policy.name}",
        forecast_blocks=float(model.forecast_blocks),
        min_lookback_to_scale=float(model.min_lookback_to_scale),
        cpu=per[CPU],
        memory=per[MEMORY],
    )


def request_matrix(
    decisions: Sequence[tuple[float, Requests]],
    container: str,
    resource: str,
    base: int,
    columns: int,
    step: float,
) -> np.ndarray:
    """The request in force at each column of a grid (column 0 = bucket `base`): a
    decision made in bucket b applies from bucket b + 1 on (as in the replay: a decision
    after sample i applies from the next sample). NaN before the first decision."""
    if not decisions:
        return np.full(columns, np.nan)
    starts = np.array([int(math.floor(t / step)) - base + 1 for t, _ in decisions])
    values = np.array(
        [
            np.nan if (v := r.get(container, {}).get(resource)) is None else float(v)
            for _, r in decisions
        ]
    )
    # The decision in force at each column: the last one that started at or before it
    # (decisions are kept in time order).
    at = np.searchsorted(starts, np.arange(columns), side="right") - 1
    return np.where(at >= 0, values[np.maximum(at, 0)], np.nan)


def score_run(
    decisions: Sequence[tuple[float, Requests]],
    histories: Mapping[str, ContainerHistory],
    containers: Sequence[str],
    now: float,
    step: float,
) -> dict[str, ResourceScore]:
    """The score of a run's decisions against the containers' usage (the model grid ending
    at the bucket of `now`), per resource, from the bucket after its first decision."""
    names = [c for c in containers if c in histories]
    if not decisions or not names:
        return {}
    out = {}
    for resource in RESOURCES:
        series = [np.asarray(getattr(histories[c], resource), dtype=np.float64) for c in names]
        columns = max(len(s) for s in series)
        usage = np.full((len(names), columns), np.nan)
        for i, s in enumerate(series):
            usage[i, columns - len(s) :] = s * _UNIT[resource]
        base = int(math.floor(now / step)) - (columns - 1)
        requests = np.stack(
            [request_matrix(decisions, c, resource, base, columns, step) for c in names]
        )
        first = int(math.floor(decisions[0][0] / step)) - base + 1
        scored_from = np.full(len(names), max(first, 0), dtype=np.int64)
        out[resource] = score_resource(resource, usage, requests, scored_from, step)
    return out


def score_entry(name: str, run: ShadowRun, scores: Mapping[str, ResourceScore]) -> dict[str, Any]:
    """One `status.shadow[]` entry: the policy, since when it is scored, its latest
    requests and its score per resource."""
    latest = run.latest() or {}
    return {
        "name": name,
        "since": format_timestamp(run.decisions[0][0]) if run.decisions else None,
        "decisions": len(run.decisions),
        "requests": [
            {"name": c, "requests": format_resource_map(dict(r))} for c, r in latest.items()
        ],
        "score": {res: sc.as_dict() for res, sc in scores.items()},
    }
