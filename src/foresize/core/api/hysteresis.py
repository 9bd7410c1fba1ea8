"""Hysteresis: the one rule deciding whether a change is worth making.

A `scaling_behavior` direction (`scale_up` or `scale_down`) is a threshold: a change
smaller than it is not made. `clears` is the rule; everything that decides hysteresis
calls it — the vertical planner (`Threshold.significant`), the recommender (scalar and
numpy-array forms, `recommend.core.passes_hysteresis`), the API types' `is_significant`
(vertical and horizontal), and so the simulator's VPA reference and the replayed
benchmark, which apply the same rule with VPA's own 10% in both directions. A change the
recommender proposes is therefore never one the planner refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


@overload
def clears(
    kind: str, percent: float, absolute: float | None, current: float, delta: float
) -> bool: ...
@overload
def clears(
    kind: str,
    percent: float,
    absolute: float | None,
    current: NDArray[np.float64],
    delta: NDArray[np.float64],
) -> NDArray[np.bool_]: ...
def clears(
    kind: str,
    percent: float,
    absolute: float | None,
    current: float | NDArray[np.float64],
    delta: float | NDArray[np.float64],
) -> bool | NDArray[np.bool_]:
    """Whether a change of size `delta` (>= 0) from `current` clears one direction's
    threshold: `delta >= absolute` for an absolute threshold (none given: any change
    does), else `delta >= percent% of current`. Works elementwise on numpy arrays.
    (Kept in integer-friendly form, `delta x 100 >= percent x current`, so a change of
    exactly the threshold clears it whatever the float rounding of percent / 100.)"""
    if kind == "absolute":
        if absolute is None:
            return delta >= 0
        return delta >= absolute
    return delta * 100.0 >= percent * current


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
        if self.type != "absolute" and current <= 0:
            return True
        # The last amount given for the resource, as a dict of the pairs would keep it
        # (read without building one: the planner asks for every resource of every pod).
        limit = next((v for r, v in reversed(self.absolute) if r == resource), None)
        return bool(clears(self.type, self.percent, limit, current, delta))


DEFAULT_SCALE_UP = Threshold("percent", DEFAULT_VERTICAL_SCALE_UP_PERCENT)
DEFAULT_SCALE_DOWN = Threshold("percent", DEFAULT_VERTICAL_SCALE_DOWN_PERCENT)
