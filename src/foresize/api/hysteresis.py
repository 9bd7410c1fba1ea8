"""Hysteresis: the one rule deciding whether a resource change is worth making.

A `scaling_behavior` direction (`scale_up` or `scale_down`) is a `Threshold`: a change
smaller than it is not made. The vertical planner, the recommender (scalar and array
forms), the API types' `is_significant` and the replayed benchmark all decide with the
functions here, so a change the recommender proposes is never one the planner refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_VERTICAL_SCALE_UP_PERCENT = 5.0
"""Vertical hysteresis when `scaling_behavior.scale_up` is not given: upsizes protect
against throttling and OOM kills, so only noise-level moves (< 5%) are suppressed."""
DEFAULT_VERTICAL_SCALE_DOWN_PERCENT = 10.0
"""Vertical hysteresis when `scaling_behavior.scale_down` is not given: VPA's own 10%
threshold; each resize risks a disruption and a smaller saving is not worth one."""


@dataclass(frozen=True, slots=True)
class Threshold:
    """One direction of `scaling_behavior`: a change smaller than this is not made.

    `percent` of the current value, or an `absolute` amount per resource in canonical
    units (millicores, bytes); a resource without an absolute amount always passes.
    """

    type: str = "percent"  # percent | absolute
    percent: float = 0.0
    absolute: tuple[tuple[str, int], ...] = ()  # per resource: (("cpu", 50), ...)

    def significant(self, resource: str, current: int, desired: int) -> bool:
        """Whether moving `resource` from `current` to `desired` clears this threshold
        (no change never does; from nothing, any change does)."""
        delta = abs(desired - current)
        if delta == 0:
            return False
        if self.type == "absolute":
            limit = dict(self.absolute).get(resource)
            return limit is None or delta >= limit
        if current <= 0:
            return True
        return delta * 100.0 >= self.percent * current


DEFAULT_SCALE_UP = Threshold("percent", DEFAULT_VERTICAL_SCALE_UP_PERCENT)
DEFAULT_SCALE_DOWN = Threshold("percent", DEFAULT_VERTICAL_SCALE_DOWN_PERCENT)
