"""A flat, read-only view of a Foresize object (AIScaleTarget or DaemonSetAutoscaler) with
exactly the fields admission, lifecycle and horizontal decisions need.

The API models (`foresize.api.types`) are the source of truth; this module reads them
(or the equivalent plain manifest dicts, e.g. a YAML file loaded by `foresize webhook
--state`) tolerantly, so the decision code depends on a small stable shape rather than
on every detail of the CRD types. Quantities become canonical ints, durations float
seconds, modes their normalised names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from foresize.api.access import first as get
from foresize.api.duration import parse_duration
from foresize.api.quantity import CPU, MEMORY, to_canonical
from foresize.api.selectors import selector_matches
from foresize.api.vocabulary import SCALING_MODE_ALIASES, SCALING_MODES
from foresize.cluster.model import ContainerSuggestion, Suggestion

AUTONOMOUS = "autonomous"
RECOMMENDATION = "recommendation"
OBSERVE = "observe"

_MODE_ALIASES = {**{m: m for m in SCALING_MODES}, **SCALING_MODE_ALIASES}

# Normalised kinds of a scaleTargetRef.
_KIND_ALIASES = {
    "deployment": "Deployment",
    "statefulset": "StatefulSet",
    "rollout": "Rollout",
    "argo rollout": "Rollout",
    "argorollout": "Rollout",
    "daemonset": "DaemonSet",
    "replicaset": "ReplicaSet",
}

RECREATE_MODES = frozenset({"recreate", "in_place_or_recreate"})


def normalise_mode(value: Any) -> str:
    if value is None:
        return ""
    text = str(getattr(value, "value", value)).strip().lower()
    return _MODE_ALIASES.get(text, text)


def normalise_kind(value: Any) -> str:
    if not value:
        return ""
    text = str(value).strip()
    return _KIND_ALIASES.get(text.lower(), text)


def duration_seconds(value: Any, default: float) -> float:
    """Float seconds from a number or a duration string (`15m`, `1h30m`, `8d`)."""
    if value is None:
        return default
    if hasattr(value, "total_seconds"):
        value = value.total_seconds()
    return parse_duration(value)


def quantity(resource: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return to_canonical(resource, value)


@dataclass(frozen=True, slots=True)
class ResourcePolicy:
    """Bounds and limit ratio for one resource of one container."""

    lower: int | None = None
    upper: int | None = None
    limit_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class ContainerPolicy:
    name: str  # a container name or "*"
    cpu: ResourcePolicy | None = None
    memory: ResourcePolicy | None = None

    def for_resource(self, resource: str) -> ResourcePolicy | None:
        return self.cpu if resource == CPU else self.memory if resource == MEMORY else None


@dataclass(slots=True)
class TargetView:
    """What the decisions need to know about one AIScaleTarget or DaemonSetAutoscaler."""

    kind: str  # "AIScaleTarget" | "DaemonSetAutoscaler"
    namespace: str
    name: str
    uid: str = ""
    ref_kind: str = ""  # Deployment | StatefulSet | Rollout | DaemonSet ("" for selector)
    ref_name: str = ""
    selector: dict[str, str] | None = None  # matchLabels
    selector_expr: Any = None  # the full LabelSelector (matchExpressions too), if any
    vertical_mode: str = ""
    horizontal_mode: str = ""
    update_mode: str = "recreate"
    # Whether vertical autonomous mode may change the resource an HPA scales on
    # ("leave", the default, or "override"; architecture §3.2).
    hpa_resource_policy: str = "leave"
    containers: tuple[ContainerPolicy, ...] = ()
    min_replicas: int | None = None
    max_replicas: int | None = None
    multiple_of: int | None = None
    allowed_replicas: tuple[int, ...] = ()
    suggestion: Suggestion | None = None
    oom_floor: dict[str, int] = field(default_factory=dict)  # container -> memory bytes
    oom_floor_until: dict[str, float] = field(default_factory=dict)  # container -> expiry
    predicted_replicas: int | None = None
    prediction_until: float | None = None  # the prediction is stale after this time
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    # DaemonSetAutoscaler only.
    percentile: float = 90.0
    observation_window: float = 8 * 86400.0
    min_observation_window: float = 3 * 3600.0
    scale_interval: float = 15 * 60.0
    source: Any = None  # the object this view was read from

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def vertical_autonomous(self) -> bool:
        return self.vertical_mode == AUTONOMOUS

    @property
    def horizontal_autonomous(self) -> bool:
        return self.horizontal_mode == AUTONOMOUS

    @property
    def permits_recreation(self) -> bool:
        return self.update_mode in RECREATE_MODES

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a `selector` target selects a pod with `labels` (an empty selector
        selects nothing)."""
        if self.selector_expr is not None:
            return bool(self.selector_expr.matches(dict(labels)))
        return selector_matches(self.selector or {}, (), labels)

    def oom_floor_for(self, container: str, now: float) -> int | None:
        """The container's OOM memory floor still in force at `now`, if any."""
        for name in (container, "*"):
            floor = self.oom_floor.get(name)
            if floor:
                until = self.oom_floor_until.get(name)
                if until is None or until >= now:
                    return floor
        return None

    def policy_for(self, container: str) -> ContainerPolicy | None:
        """The container's policy: an exact name wins over `*`. With no `containers` list
        at all every container is managed without bounds."""
        if not self.containers:
            return ContainerPolicy(name="*")
        star = None
        for p in self.containers:
            if p.name == container:
                return p
            if p.name == "*":
                star = p
        return star


def _resource_policy(resource: str, obj: Any) -> ResourcePolicy | None:
    if obj is None:
        return None
    limit = get(obj, "limit")
    ratio = get(limit, "ratio") if limit is not None else get(obj, "limit_ratio", "limitRatio")
    return ResourcePolicy(
        lower=quantity(resource, get(obj, "lowerbound", "lower_bound", "lowerBound")),
        upper=quantity(resource, get(obj, "upperbound", "upper_bound", "upperBound")),
        limit_ratio=float(ratio) if ratio is not None else None,
    )


def container_policies(items: Iterable[Any] | None) -> tuple[ContainerPolicy, ...]:
    out = []
    for item in items or ():
        out.append(
            ContainerPolicy(
                name=str(get(item, "name", default="*")),
                cpu=_resource_policy(CPU, get(item, "cpu")),
                memory=_resource_policy(MEMORY, get(item, "memory")),
            )
        )
    return tuple(out)


def _resource_map(values: Any) -> dict[str, int]:
    if not values:
        return {}
    items = values.items() if isinstance(values, Mapping) else dict(values).items()
    out = {}
    for name, v in items:
        q = quantity(str(name), v)
        if q is not None:
            out[str(name)] = q
    return out


def suggestion_from(obj: Any) -> Suggestion | None:
    """A `Suggestion` from `status.vertical` (or an equivalent dict / Suggestion)."""
    if obj is None:
        return None
    if isinstance(obj, Suggestion):
        return obj
    containers_obj = get(obj, "containers", default=None)
    if not containers_obj:
        return None
    containers: dict[str, ContainerSuggestion] = {}
    if isinstance(containers_obj, Mapping):
        pairs = list(containers_obj.items())
    else:
        pairs = [(get(c, "name", default="*"), c) for c in containers_obj]
    for name, c in pairs:
        if isinstance(c, ContainerSuggestion):
            containers[str(name)] = c
            continue
        containers[str(name)] = ContainerSuggestion(
            name=str(name),
            requests=_resource_map(get(c, "requests")),
            limits=_resource_map(get(c, "limits")),
        )
    window = get(obj, "forecast_window", "forecastWindow")
    return Suggestion(
        uid=str(get(obj, "uid", "suggestion_uid", "suggestionUID", default="")),
        created_at=_seconds(get(obj, "created_at", "createdAt")),
        containers=containers,
        window_start=_seconds(get(window, "start", default=get(obj, "window_start"))),
        window_end=_seconds(get(window, "end", default=get(obj, "window_end"))),
    )


def _seconds(value: Any) -> float:
    """Epoch seconds from a float or an RFC 3339 string (manifest files)."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    from foresize.api.types import parse_timestamp

    return parse_timestamp(value)


def _oom_floors(status: Any) -> tuple[dict[str, int], dict[str, float]]:
    """status.oom_floors ([{container, memory, until}]) -> floors and their expiry."""
    floors: dict[str, int] = {}
    until: dict[str, float] = {}
    for entry in get(status, "oom_floors", "oomFloors", default=()) or ():
        name = str(get(entry, "container", "name", default="*"))
        q = quantity(MEMORY, get(entry, "memory"))
        if q:
            floors[name] = max(q, floors.get(name, 0))
            end = get(entry, "until")
            if end is not None:
                until[name] = _seconds(end)
    return floors, until


def _metadata(obj: Any) -> tuple[str, str, str, bool, tuple[str, ...]]:
    meta = get(obj, "metadata", default={})
    finalizers = tuple(get(meta, "finalizers", default=()) or ())
    deleting = get(meta, "deletion_timestamp", "deletionTimestamp") is not None
    return (
        str(get(meta, "namespace", default="default")),
        str(get(meta, "name", default="")),
        str(get(meta, "uid", default="")),
        deleting,
        finalizers,
    )


def _selector(obj: Any) -> dict[str, str] | None:
    if obj is None:
        return None
    labels = get(obj, "matchLabels", "match_labels", default=None)
    if labels is None and isinstance(obj, Mapping):
        labels = obj
    return {str(k): str(v) for k, v in dict(labels or {}).items()} or None


def _selector_expr(obj: Any) -> Any:
    if obj is None:
        return None
    if hasattr(obj, "matches"):
        return obj
    from foresize.api.types import LabelSelector

    return LabelSelector.model_validate(obj)


# A bounded memo of the two readers below. Reading a target is a pure function of the
# object's content, and every reconcile pass re-reads every target (the simulator runs
# tens of thousands of passes), so the view is kept per object and reused while the
# object's content is unchanged. The key is the object's identity AND a fingerprint of
# its content, so a replaced object or a recycled id() never gets a stale view. The
# fingerprint of an object carrying `metadata.uid` and `metadata.resourceVersion` is that
# pair, as Kubernetes clients' caches use it: the API server changes the resourceVersion
# on every write, and both shells replace such an object on each change, never edit it
# (`kube.state`, the simulator's status reflection); serialising the content instead
# cost the simulator a fifth of its time. Any other object (a manifest dict, a test's
# model) is fingerprinted by its full content, so one mutated in place is read again.
# Bounded so long runs with churning targets cannot grow it.
_VIEW_MEMO_LIMIT = 4096  # far above any real target count; cleared whole when reached
_view_memo: dict[tuple[str, int], tuple[Any, str, TargetView]] = {}


def _fingerprint(obj: Any) -> str | None:
    """The object's version ("uid@resourceVersion") if it carries one, else its full content
    as a string (None: not fingerprintable, not memoised)."""
    meta = get(obj, "metadata")
    uid = get(meta, "uid")
    version = get(meta, "resourceVersion", "resource_version")
    if uid and version:
        return f"{uid}@{version}"  # content JSON starts with "{": the two never collide
    try:
        dump = getattr(obj, "model_dump_json", None)
        if dump is not None:
            return str(dump())
        return json.dumps(obj, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return None


def _memoised(reader: str, obj: Any, read: Any) -> TargetView:
    fingerprint = _fingerprint(obj)
    if fingerprint is None:
        view: TargetView = read(obj)
        return view
    key = (reader, id(obj))
    hit = _view_memo.get(key)
    if hit is not None and hit[0] is obj and hit[1] == fingerprint:
        return hit[2]
    view = read(obj)
    if len(_view_memo) >= _VIEW_MEMO_LIMIT:
        _view_memo.clear()
    _view_memo[key] = (obj, fingerprint, view)
    return view


def target_view(obj: Any) -> TargetView:
    """Read an AIScaleTarget (API model or manifest dict) into a `TargetView`. The view is
    shared between reads of an unchanged object: treat it as read-only."""
    if isinstance(obj, TargetView):
        return obj
    return _memoised("AIScaleTarget", obj, _read_target)


def dsa_view(obj: Any) -> TargetView:
    """Read a DaemonSetAutoscaler (API model or manifest dict) into a `TargetView`. The
    view is shared between reads of an unchanged object: treat it as read-only."""
    if isinstance(obj, TargetView):
        return obj
    return _memoised("DaemonSetAutoscaler", obj, _read_dsa)


def _read_target(obj: Any) -> TargetView:
    namespace, name, uid, deleting, finalizers = _metadata(obj)
    spec = get(obj, "spec", default={})
    status = get(obj, "status", default={})
    ref = get(spec, "scaleTargetRef", "scale_target_ref")
    vertical = get(spec, "vertical")
    horizontal = get(spec, "horizontal")
    update_policy = get(vertical, "update_policy", "updatePolicy")
    h_status = get(status, "horizontal_suggestion", "horizontal")
    predicted = get(h_status, "replicas")
    allowed = get(horizontal, "allowedReplicas", "allowed_replicas", default=()) or ()
    until = get(get(h_status, "forecast_window"), "end")
    floors, floors_until = _oom_floors(status)
    return TargetView(
        kind="AIScaleTarget",
        namespace=namespace,
        name=name,
        uid=uid,
        ref_kind=normalise_kind(get(ref, "kind")),
        ref_name=str(get(ref, "name", default="")),
        selector=_selector(get(spec, "selector")),
        selector_expr=_selector_expr(get(spec, "selector")),
        vertical_mode=normalise_mode(get(vertical, "mode")),
        horizontal_mode=normalise_mode(get(horizontal, "mode")),
        update_mode=str(get(update_policy, "update_mode", "updateMode", default="recreate")),
        hpa_resource_policy=str(
            get(vertical, "hpa_resource_policy", "hpaResourcePolicy", default="leave")
        ).lower(),
        containers=container_policies(get(vertical, "containers")),
        min_replicas=_int_or_none(get(horizontal, "minReplicas", "min_replicas")),
        max_replicas=_int_or_none(get(horizontal, "maxReplicas", "max_replicas")),
        multiple_of=_int_or_none(get(horizontal, "multipleOf", "multiple_of")),
        allowed_replicas=tuple(sorted(int(x) for x in allowed)),
        suggestion=suggestion_from(get(status, "vertical_suggestion", "vertical")),
        oom_floor=floors,
        oom_floor_until=floors_until,
        predicted_replicas=_int_or_none(predicted),
        prediction_until=_seconds(until) if until is not None else None,
        deleting=deleting,
        finalizers=finalizers,
        source=obj,
    )


def _read_dsa(obj: Any) -> TargetView:
    namespace, name, uid, deleting, finalizers = _metadata(obj)
    spec = get(obj, "spec", default={})
    status = get(obj, "status", default={})
    ref = get(spec, "scaleTargetRef", "scale_target_ref")
    suggestion = suggestion_from(get(status, "suggestion", default=None))
    return TargetView(
        kind="DaemonSetAutoscaler",
        namespace=namespace,
        name=name,
        uid=uid,
        ref_kind="DaemonSet",
        ref_name=str(get(ref, "name", default="")),
        vertical_mode=normalise_mode(get(spec, "scaleMode", "scale_mode", default=RECOMMENDATION)),
        update_mode="in_place",
        containers=container_policies(get(spec, "containers")),
        suggestion=suggestion,
        deleting=deleting,
        finalizers=finalizers,
        percentile=float(get(spec, "percentile", default=90.0)),
        observation_window=duration_seconds(
            get(spec, "observationWindow", "observation_window"), 8 * 86400.0
        ),
        min_observation_window=duration_seconds(
            get(spec, "minObservationWindow", "min_observation_window"), 3 * 3600.0
        ),
        scale_interval=duration_seconds(get(spec, "scaleInterval", "scale_interval"), 900.0),
        source=obj,
    )


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)
