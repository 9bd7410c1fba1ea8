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
"""`vertical.update_policy.update_mode`: no aliases (the CRD's enum lists exactly these)."""


def canonical_word(
    value: object, allowed: tuple[str, ...], aliases: dict[str, str] | None = None
) -> str | None:
    """`value` in its canonical spelling, or None when the API refuses it.

    The one spelling rule for every word above: surrounding blanks ignored, any case, and
    an alias (any case) stands for its word. The pydantic types and the read-model
    (`core.cluster.target`) both ask this, so they accept exactly the same words.
    """
    if not isinstance(value, str):
        return None
    key = value.strip()
    if key in allowed:
        return key
    low = key.lower()
    if low in allowed:
        return low
    return (aliases or {}).get(low)


HPA_RESOURCE_POLICIES = ("leave", "override", "coordinate")
"""`vertical.hpa_resource_policy`: leave the HPA's resource alone, override (size it as any
other), or coordinate (choose the per-pod request and the replica floor together so the
HPA's utilisation sits at its target at the forecast load; `core.cluster.coordination`)."""

DEFAULT_HPA_RESOURCE_POLICY = "leave"
"""The request of a resource an HPA scales on is left alone unless the target opts in:
changing it would shift the HPA's utilisation arithmetic under it (architecture §3.2)."""

# spec.vertical.disruption defaults (docs/api.md), for the models and the read-model alike.
# 20%: a rollout-like batch, so a resize wave never takes more than a fifth of a workload at
# once. 60s between batches: one readiness cycle of a typical pod. 120s stall: an in-place
# resize the kubelet has not applied by then is not coming (it falls back to recreation
# where allowed).
DEFAULT_MAX_DISRUPTED = "20%"
DEFAULT_INTERVAL = 60.0
DEFAULT_STALL_TIMEOUT = 120.0
# How a Deferred resize that has held node capacity for `release_deferred_after` is let go
# (`vertical.modes`): `fit` shrinks the ask to what the node has room for now, `allocated`
# patches it back to what the kubelet allocated, `never` keeps it (and the capacity it
# holds) until room frees up. The defaults are the evidence of `foresize bench deferred`
# (docs/vertical.md).
RELEASE_DEFERRED = ("fit", "allocated", "never")
DEFAULT_RELEASE_DEFERRED = "fit"
DEFAULT_RELEASE_DEFERRED_AFTER = 60.0

DEFAULT_MIN_REPLICAS = 2
"""`vertical.update_policy.min_replicas`, like VPA's updater default (`--min-replicas=2`):
evicting the last ready replica of a workload is an outage until its replacement is
Ready, so a single-replica target must opt in with 1."""
