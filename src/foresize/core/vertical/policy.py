"""What the disruption worker reads from a target, and the worker's own settings.

A target is read once, by the one read-model (`foresize.core.cluster.target.TargetView`);
`policy_of` is the worker's strict use of it: a target whose spec has a problem is
refused with a one-line error naming the field (the admission and lifecycle decisions read
the same view tolerantly).

`WorkerConfig` holds operator-wide switches (capacity guard on/off, the label selector that
excludes workloads, back-off constants). Every constant says why it has its value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from foresize.core.api.vocabulary import DEFAULT_MAX_DISRUPTED
from foresize.core.cluster.disruption import batch_size
from foresize.core.cluster.snapshot import TargetObject
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.cluster.target_fields import parse_max_disrupted
from foresize.core.cluster.windows import UTC_ONLY, TimeZones
from foresize.core.errors import ForesizeError

__all__ = [
    "DEFAULT_MAX_DISRUPTED",
    "WorkerConfig",
    "batch_size",
    "parse_exclude_selector",
    "parse_max_disrupted",
    "policy_of",
]


# Kubernetes label syntax (apimachinery validation): an optional DNS-subdomain prefix and a
# name of at most 63 characters; a value of at most 63 characters (may be empty).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE_RE = re.compile(rf"^({_LABEL_NAME})?$")


def parse_exclude_selector(text: str | None, option: str = "--exclude-selector") -> dict[str, str]:
    """`key=value[,key=value...]` (matchLabels, as `kubectl -l` writes equality) into a
    label map; an error naming the option and the bad part otherwise. Empty: nothing."""
    out: dict[str, str] = {}
    if not text or not text.strip():
        return out
    if len(text) > 4096:
        raise ForesizeError(f"{option}: longer than 4096 characters")
    for part in text.split(","):
        key, eq, value = part.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _LABEL_KEY_RE.match(key) or not _LABEL_VALUE_RE.match(value):
            raise ForesizeError(
                f"{option}: {part.strip()!r} is not key=value with a valid label key and value"
            )
        out[key] = value
    return out


@dataclass(slots=True)
class WorkerConfig:
    """Operator-wide settings of the disruption worker."""

    # The scheduler-safety guard (architecture §3.2). Off only for the comparison test.
    capacity_guard: bool = True
    # Does a node autoscaler add nodes for Pending pods? True/False as told, None: read from
    # the nodes (Karpenter's label). With one, an upsize no node has room for is recreated
    # into Pending after its stall_timeout (`vertical.provision`).
    node_autoscaler: bool | None = None
    # Workloads (by their labels) the worker never touches (architecture §3.2: exclude by selector).
    exclude_selector: dict[str, str] = field(default_factory=dict)
    # A 429 without retryAfterSeconds (the DisruptionBudget case) is retried after this:
    # long enough not to hammer the API, short enough to follow a PDB that frees up.
    eviction_retry_default: float = 30.0
    # A pod selected by several PDBs (HTTP 500) will not become evictable by retrying: it
    # needs a person. Retry rarely so the event is not lost but nothing hot-loops.
    multi_pdb_backoff: float = 600.0
    # Circuit breaker (architecture §3.2): 3 no-progress cycles open it; 1m, 2m, 4m ... 1h.
    breaker_threshold: int = 3
    breaker_base_backoff: float = 60.0
    breaker_max_backoff: float = 3600.0
    # An eviction whose replacement pod never shows up (the workload was scaled down) stops
    # waiting for a verdict after this long and counts as neither progress nor failure.
    eviction_verdict_timeout: float = 900.0
    # A recreated pod "comes back right" when each suggested request is within this
    # fraction (admission rounds the same way, so this only absorbs rounding).
    match_tolerance: float = 0.02
    # Cluster-wide eviction pacing, VPA updater's `--eviction-rate-limit` /
    # `--eviction-rate-burst`: a token bucket holding up to `eviction_rate_burst` evictions,
    # refilled at `eviction_rate_limit` per second, shared by every target. None = off, as
    # in VPA (-1): each target's `max_disrupted` / `interval` already bound what a workload
    # loses, and a cluster-wide cap only makes sense sized to the cluster, by its operator.
    eviction_rate_limit: float | None = None
    eviction_rate_burst: int = 1
    # The zone database the maintenance windows are read with: the shells pass the
    # machine's (`adapters.timezones`); without one only UTC is known, and a window in any
    # other zone never opens (the safe side, said in the target's status).
    time_zones: TimeZones = UTC_ONLY
    # Why the usage history cannot be read whole this pass (a shared store down, refusing,
    # partial, skewed), or None: the pass then plans no new suggestion, acts on the last
    # ones, and each target's HistoryIncomplete condition says why (`guards`).
    history_problem: str | None = None


def policy_of(target: TargetObject) -> TargetView:
    """The target's read-model, checked: a ForesizeError naming the first bad field."""
    view = target_view(target)
    if view.errors:
        raise ForesizeError(view.errors[0])
    return view
