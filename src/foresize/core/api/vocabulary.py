"""The API's words, as plain constants: mode names and their aliases.

One home for the vocabulary the pydantic types (`api.types`), the admission decisions and
the vertical policy all check against. Plain tuples and dicts, no pydantic: the webhook's
pure decisions import this without loading the API models.
"""

from __future__ import annotations

SCALING_MODES = ("autonomous", "recommendation", "observe")
"""`vertical.mode`, `horizontal.mode`, a DaemonSetAutoscaler's `scaleMode`."""

SCALING_MODE_ALIASES = {
    "auto": "autonomous",
    "recommend": "recommendation",
    "rec": "recommendation",
    "observation": "observe",
}
"""Accepted spellings (any case) and the mode each stands for."""

FORECAST_MODES = (
    "undershoot",
    "cost_optimized",
    "balanced",
    "assurance_optimized",
    "overshoot",
    "percentile",
)
"""`model.mode`: the named risk levels of `foresize.core.recommend.core`, and `percentile`."""

UPDATE_MODES = ("initial", "recreate", "in_place", "in_place_or_recreate")
"""`vertical.update_policy.update_mode`."""

DEFAULT_MIN_REPLICAS = 2
"""`vertical.update_policy.min_replicas`, like VPA's updater default (`--min-replicas=2`):
evicting the last ready replica of a workload is an outage until its replacement is
Ready, so a single-replica target must opt in with 1."""
