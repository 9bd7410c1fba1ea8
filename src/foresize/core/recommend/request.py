"""What the recommendation takes for one target (`TargetRequest`) and gives back
(`RecommendResult`), and the CPU day schedule carried between calls (`CachedSchedule`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.core.cluster.model import ResourceRequirements, Suggestion
from foresize.core.cluster.runtime import HeapCeiling
from foresize.core.forecast.select import OnlineScores
from foresize.core.recommend.explain import Explanation
from foresize.core.recommend.histories import ContainerHistory
from foresize.core.recommend.oom import OOMState
from foresize.core.recommend.params import RecommendParams


@dataclass(frozen=True, slots=True)
class CachedSchedule:
    """One container's CPU day schedule (`day_schedule`) as computed for a day, carried
    between calls by the caller: the schedule changes once a day, and at 10,000
    containers one computation takes seconds, so passes within the day reuse it.

    `key` holds everything the schedule is computed from: the day, the quantile, the
    horizon, and a digest of the history that `day_schedule` reads (the SCHEDULE_DAYS
    days before the day's midnight); a different key recomputes."""

    key: tuple[float, float, int, bytes]
    midnight: float
    slot: float
    opens: np.ndarray  # (K,) bool
    level: np.ndarray  # (K,)


@dataclass(slots=True)
class RecommendResult:
    suggestion: Suggestion
    oom_state: dict[str, OOMState]
    has_enough_data: bool
    forecast_state: dict[str, OnlineScores] | None = None
    # container -> resource -> value (canonical) the forecast asked for, before bounds
    forecasts: dict[str, dict[str, float]] = field(default_factory=dict)
    # container -> resource -> name of the selected model
    models: dict[str, dict[str, str]] = field(default_factory=dict)
    # container -> resource -> the quantile sized at (memory: after `allocate_risk`)
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)
    # container -> memory forecast at the mode's own level (bytes): what uniform sizing
    # would reserve; the operator's fleet mean of these is the next `memory_reference`
    at_mode: dict[str, float] = field(default_factory=dict)
    # container -> resource -> whether the suggestion differs beyond hysteresis
    changed: dict[str, dict[str, bool]] = field(default_factory=dict)
    # container -> its CPU day schedule: carry to the next call (None: not carried)
    schedule_state: dict[str, CachedSchedule] | None = None
    # container -> what the heap rule did or why it could not (`recommend.heap`)
    runtime_notes: dict[str, str] = field(default_factory=dict)
    # container -> the non-heap allowance (bytes) the heap rule used
    non_heap: dict[str, int] = field(default_factory=dict)
    # container -> the steps that made each request, recorded as they ran
    # (`recommend.explain`): the chain of a resource ends at the request suggested
    steps: dict[str, Explanation] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        """Unpacks as (suggestion, oom_state)."""
        return iter((self.suggestion, self.oom_state))


@dataclass(slots=True)
class TargetRequest:
    """One target's inputs for `recommend_batch`."""

    params: RecommendParams
    histories: Mapping[str, ContainerHistory]
    current: Mapping[str, ResourceRequirements]
    oom_state: Mapping[str, OOMState] | None = None
    forecast_state: Mapping[str, OnlineScores] | None = None
    # The CPU day schedules of the previous call (`CachedSchedule`); None recomputes
    # them on every call and carries nothing.
    schedule_state: Mapping[str, CachedSchedule] | None = None
    # container -> the heap ceiling its spec fixes (`cluster.runtime.heap_ceiling`):
    # memory never goes below it plus non-heap (`recommend.heap`).
    runtimes: Mapping[str, HeapCeiling] | None = None
