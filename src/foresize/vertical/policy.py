"""What the disruption worker reads from a target, and the worker's own settings.

`TargetPolicy` is the flat, validated view of one AIScaleTarget's vertical spec that the
planner works from. `policy_of` builds it from the API model (`foresize.api.types`), and is
lenient about shape so that it also accepts plain dicts (status round trips, tests) —
durations may be float seconds or strings such as "2m".

`WorkerConfig` holds operator-wide switches (capacity guard on/off, the label selector that
excludes workloads, back-off constants). Every constant says why it has its value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from foresize.api import duration
from foresize.api.access import first as _get
from foresize.api.selectors import selector_matches
from foresize.api.types import (
    DEFAULT_MIN_REPLICAS,
    DEFAULT_VERTICAL_SCALE_DOWN_PERCENT,
    DEFAULT_VERTICAL_SCALE_UP_PERCENT,
)
from foresize.api.vocabulary import UPDATE_MODES
from foresize.errors import ForesizeError

DEFAULT_MAX_DISRUPTED = "20%"
DEFAULT_INTERVAL = 60.0
DEFAULT_STALL_TIMEOUT = 120.0

_MODE_ALIASES = {
    "auto": "autonomous",
    "autonomous": "autonomous",
    "recommend": "recommendation",
    "rec": "recommendation",
    "recommendation": "recommendation",
    "observe": "observe",
    "observation": "observe",
}
_UPDATE_ALIASES = {
    "initial": "initial",
    "recreate": "recreate",
    "in_place": "in_place",
    "inplace": "in_place",
    "in_place_or_recreate": "in_place_or_recreate",
    "inplaceorrecreate": "in_place_or_recreate",
}


def parse_duration(value: Any, field_name: str) -> float | None:
    """Float seconds from a number or a Go-style duration string ("90s", "2m", "1h30m")."""
    if value is None:
        return None
    try:
        return duration.parse_duration(value)
    except duration.DurationError as exc:
        raise ForesizeError(f"{field_name}: {exc}") from None


def parse_max_disrupted(value: Any, field_name: str = "disruption.max_disrupted") -> int | str:
    """An int >= 1 or a percentage string "N%" (0 < N <= 100)."""
    if value is None:
        return DEFAULT_MAX_DISRUPTED
    if isinstance(value, bool):
        raise ForesizeError(
            f"{field_name}: expected an integer >= 1 or a percentage, got {value!r}"
        )
    if isinstance(value, int):
        if value < 1:
            raise ForesizeError(f"{field_name}: must be at least 1, got {value}")
        return value
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            pct = -1.0
        if not 0 < pct <= 100:
            raise ForesizeError(f"{field_name}: percentage must be in (0, 100], got {value!r}")
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ForesizeError(f"{field_name}: expected an integer >= 1 or a percentage, got {value!r}")


def batch_size(max_disrupted: int | str, replicas: int) -> int:
    """Pods that may be disrupted at once: a percentage of replicas rounded up, at least 1."""
    if isinstance(max_disrupted, int):
        return max(1, max_disrupted)
    pct = float(max_disrupted.rstrip("%"))
    # Round the percentage up (20% of 11 replicas is 3), never below one pod.
    return max(1, math.ceil(pct * max(replicas, 0) / 100.0 - 1e-9))


@dataclass(frozen=True, slots=True)
class Threshold:
    """A scaling_behavior threshold: changes smaller than this are not worth a disruption."""

    type: str = "percent"  # percent | absolute
    percent: float = 0.0
    absolute: tuple[tuple[str, int], ...] = ()  # per resource: (("cpu", 50), ...)

    def significant(self, resource: str, current: int, desired: int) -> bool:
        delta = abs(desired - current)
        if delta == 0:
            return False
        if self.type == "absolute":
            limit = dict(self.absolute).get(resource)
            return limit is None or delta >= limit
        if current <= 0:
            return True
        return delta * 100.0 >= self.percent * current


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """The vertical settings of one target, normalised."""

    key: str  # "namespace/name"
    namespace: str
    name: str
    uid: str = ""
    mode: str = "recommendation"  # autonomous | recommendation | observe
    update_mode: str = "recreate"
    recreate_resources: tuple[str, ...] = ("memory",)
    min_replicas: int = DEFAULT_MIN_REPLICAS  # evict only while this many replicas are ready
    max_disrupted: int | str = DEFAULT_MAX_DISRUPTED
    interval: float = DEFAULT_INTERVAL
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    release_deferred_after: float | None = None
    hpa_resource_policy: str = "leave"  # leave | override
    scale_up: Threshold = Threshold()
    scale_down: Threshold = Threshold()
    ref_kind: str | None = None
    ref_name: str | None = None
    selector: dict[str, str] = field(default_factory=dict)
    # matchExpressions: (key, operator, values) with In | NotIn | Exists | DoesNotExist
    selector_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    deleting: bool = False

    @property
    def has_selector(self) -> bool:
        return bool(self.selector or self.selector_expressions)

    def selects(self, labels: dict[str, str]) -> bool:
        """LabelSelector semantics (all of matchLabels and matchExpressions); an empty
        selector selects nothing (never every pod of a namespace by accident)."""
        return selector_matches(self.selector, self.selector_expressions, labels)


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


def _threshold(obj: Any, field_name: str, default_percent: float) -> Threshold:
    # A direction without a threshold uses the API's documented default, the same rule the
    # recommender applies, so the planner never churns pods over changes it would not make.
    if obj is None:
        return Threshold("percent", default_percent)
    kind = str(_get(obj, "type", default="percent")).lower()
    if kind not in ("percent", "absolute"):
        raise ForesizeError(f"{field_name}.type: expected percent or absolute, got {kind!r}")
    percent = float(_get(obj, "percent", "percentage", default=0.0))
    absolute_raw = _get(obj, "absolute")
    absolute: list[tuple[str, int]] = []
    for r in ("cpu", "memory"):
        v = _get(absolute_raw, r)
        if v is not None:
            absolute.append((r, int(v)))
    return Threshold(kind, percent, tuple(absolute))


def policy_of(target: Any) -> TargetPolicy:
    """Normalise an AIScaleTarget (API model or dict) into a `TargetPolicy`."""
    meta = _get(target, "metadata")
    spec = _get(target, "spec")
    name = str(_get(meta, "name", default=""))
    namespace = str(_get(meta, "namespace", default="default"))
    where = f"AIScaleTarget {namespace}/{name}: spec.vertical"
    vertical = _get(spec, "vertical")
    ref = _get(spec, "scaleTargetRef", "scale_target_ref")
    raw_selector = _get(spec, "selector")
    selector: dict[str, str] = {}
    expressions: list[tuple[str, str, tuple[str, ...]]] = []
    if raw_selector is not None:
        match_labels = _get(raw_selector, "matchLabels", "match_labels")
        match_expr = _get(raw_selector, "matchExpressions", "match_expressions")
        if match_labels is None and match_expr is None and isinstance(raw_selector, dict):
            match_labels = raw_selector  # a plain label map
        selector = {str(k): str(v) for k, v in (match_labels or {}).items()}
        for i, e in enumerate(match_expr or []):
            op = str(_get(e, "operator", default=""))
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise ForesizeError(
                    f"AIScaleTarget {namespace}/{name}: spec.selector.matchExpressions[{i}]"
                    f".operator: unknown {op!r}"
                )
            values = tuple(str(v) for v in (_get(e, "values", default=[]) or []))
            expressions.append((str(_get(e, "key", default="")), op, values))
    mode_raw = str(_get(vertical, "mode", default="recommendation")).lower()
    mode = _MODE_ALIASES.get(mode_raw)
    if mode is None:
        raise ForesizeError(f"{where}.mode: unknown mode {mode_raw!r}")
    update_policy = _get(vertical, "update_policy", "updatePolicy")
    um_raw = str(_get(update_policy, "update_mode", "updateMode", default="recreate"))
    update_mode = _UPDATE_ALIASES.get(um_raw.lower().replace("-", "_"))
    if update_mode is None:
        raise ForesizeError(
            f"{where}.update_policy.update_mode: unknown {um_raw!r} (one of {UPDATE_MODES})"
        )
    recreate = _get(update_policy, "recreate_resources", default=None)
    if recreate is None:
        recreate = _get(vertical, "recreate_resources", default=["memory"])
    disruption = _get(vertical, "disruption")
    d = f"{where}.disruption"
    behavior = _get(vertical, "scaling_behavior", "scalingBehavior")
    hpa_policy = str(_get(vertical, "hpa_resource_policy", default="leave")).lower()
    if hpa_policy not in ("leave", "override"):
        raise ForesizeError(f"{where}.hpa_resource_policy: expected leave or override")
    labels = dict(_get(meta, "labels", default={}) or {})
    return TargetPolicy(
        key=f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        uid=str(_get(meta, "uid", default="")),
        mode=mode,
        update_mode=update_mode,
        recreate_resources=tuple(str(r) for r in recreate),
        min_replicas=_min_replicas(update_policy, f"{where}.update_policy.min_replicas"),
        max_disrupted=parse_max_disrupted(
            _get(disruption, "max_disrupted", "maxDisrupted"), f"{d}.max_disrupted"
        ),
        interval=parse_duration(
            _get(disruption, "interval", default=DEFAULT_INTERVAL), f"{d}.interval"
        )
        or 0.0,
        stall_timeout=parse_duration(
            _get(disruption, "stall_timeout", "stallTimeout", default=DEFAULT_STALL_TIMEOUT),
            f"{d}.stall_timeout",
        )
        or 0.0,
        release_deferred_after=parse_duration(
            _get(disruption, "release_deferred_after", "releaseDeferredAfter"),
            f"{d}.release_deferred_after",
        ),
        hpa_resource_policy=hpa_policy,
        scale_up=_threshold(
            _get(behavior, "scale_up", "scaleUp"),
            f"{where}.scaling_behavior.scale_up",
            DEFAULT_VERTICAL_SCALE_UP_PERCENT,
        ),
        scale_down=_threshold(
            _get(behavior, "scale_down", "scaleDown"),
            f"{where}.scaling_behavior.scale_down",
            DEFAULT_VERTICAL_SCALE_DOWN_PERCENT,
        ),
        ref_kind=_get(ref, "kind"),
        ref_name=_get(ref, "name"),
        selector=dict(selector),
        selector_expressions=tuple(expressions),
        labels=labels,
        deleting=_get(meta, "deletion_timestamp", "deletionTimestamp") is not None,
    )


def _min_replicas(update_policy: Any, where: str) -> int:
    value = _get(update_policy, "min_replicas", "minReplicas", default=DEFAULT_MIN_REPLICAS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ForesizeError(f"{where}: expected an integer >= 1, got {value!r}")
    return int(value)
