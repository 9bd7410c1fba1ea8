"""The parts of a Foresize object the read-model (`cluster.target.TargetView`) reads
tolerantly, from API models or plain manifest dicts alike: mode and kind names, quantities,
container bounds, the stored suggestion and OOM floors, metadata and the selector."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from foresize.core.api.access import JSONValue
from foresize.core.api.access import first as get
from foresize.core.api.quantity import CPU, MEMORY, to_canonical
from foresize.core.api.vocabulary import (
    DEFAULT_MAX_DISRUPTED,
    SCALING_MODE_ALIASES,
    SCALING_MODES,
    UPDATE_MODES,
    canonical_word,
)
from foresize.core.cluster.model import ContainerSuggestion, Suggestion
from foresize.core.errors import ForesizeError

if TYPE_CHECKING:
    from foresize.core.api.target import ShadowPolicy

AUTONOMOUS = "autonomous"
RECOMMENDATION = "recommendation"
OBSERVE = "observe"

MODE_ALIASES = {**{m: m for m in SCALING_MODES}, **SCALING_MODE_ALIASES}

# Normalised kinds of a scaleTargetRef.
KIND_ALIASES = {
    "deployment": "Deployment",
    "statefulset": "StatefulSet",
    "rollout": "Rollout",
    "argo rollout": "Rollout",
    "argorollout": "Rollout",
    "daemonset": "DaemonSet",
    "replicaset": "ReplicaSet",
    "cronjob": "CronJob",
    "jobgroup": "JobGroup",
}

RECREATE_MODES = frozenset({"recreate", "in_place_or_recreate"})

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def normalise_mode(value: JSONValue) -> str:
    if value is None:
        return ""
    text = str(getattr(value, "value", value)).strip().lower()
    return MODE_ALIASES.get(text, text)


def normalise_kind(value: JSONValue) -> str:
    if not value:
        return ""
    text = str(value).strip()
    return KIND_ALIASES.get(text.lower(), text)


def normalise_update_mode(value: JSONValue) -> str | None:
    """`update_mode` in its canonical spelling, or None where the API refuses it (the
    spelling rule is the API's own, so the read-model accepts exactly what it accepts)."""
    return canonical_word(getattr(value, "value", value), UPDATE_MODES)


def parse_max_disrupted(
    value: JSONValue, field_name: str = "disruption.max_disrupted"
) -> int | str:
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


def quantity(resource: str, value: JSONValue) -> int | None:
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


def resource_policy(resource: str, obj: JSONValue) -> ResourcePolicy | None:
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
                cpu=resource_policy(CPU, get(item, "cpu")),
                memory=resource_policy(MEMORY, get(item, "memory")),
            )
        )
    return tuple(out)


def resource_map(values: JSONValue) -> dict[str, int]:
    if not values:
        return {}
    items = values.items() if isinstance(values, Mapping) else dict(values).items()
    out = {}
    for name, v in items:
        q = quantity(str(name), v)
        if q is not None:
            out[str(name)] = q
    return out


def suggestion_from(obj: JSONValue) -> Suggestion | None:
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
            requests=resource_map(get(c, "requests")),
            limits=resource_map(get(c, "limits")),
        )
    window = get(obj, "forecast_window", "forecastWindow")
    return Suggestion(
        uid=str(get(obj, "uid", "suggestion_uid", "suggestionUID", default="")),
        created_at=epoch_seconds(get(obj, "created_at", "createdAt")),
        containers=containers,
        window_start=epoch_seconds(get(window, "start", default=get(obj, "window_start"))),
        window_end=epoch_seconds(get(window, "end", default=get(obj, "window_end"))),
    )


def epoch_seconds(value: JSONValue) -> float:
    """Epoch seconds from a float or an RFC 3339 string (manifest files)."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    from foresize.core.api.types import parse_timestamp

    return parse_timestamp(value)


def oom_floors(status: JSONValue) -> tuple[dict[str, int], dict[str, float]]:
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
                until[name] = epoch_seconds(end)
    return floors, until


def metadata_of(obj: JSONValue) -> tuple[str, str, str, bool, tuple[str, ...]]:
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


def selector_of(
    obj: JSONValue, where: str, errors: list[str]
) -> tuple[dict[str, str] | None, tuple[tuple[str, str, tuple[str, ...]], ...]]:
    """matchLabels (a plain label map is read as one) and matchExpressions."""
    if obj is None:
        return None, ()
    labels = get(obj, "matchLabels", "match_labels", default=None)
    raw_expressions = get(obj, "matchExpressions", "match_expressions", default=None)
    if labels is None and raw_expressions is None and isinstance(obj, Mapping):
        labels = obj
    expressions = []
    for i, e in enumerate(raw_expressions or ()):
        op = str(get(e, "operator", default=""))
        if op not in SELECTOR_OPERATORS:
            errors.append(f"{where}: spec.selector.matchExpressions[{i}].operator: unknown {op!r}")
        values = tuple(str(v) for v in (get(e, "values", default=()) or ()))
        expressions.append((str(get(e, "key", default="")), op, values))
    match_labels = {str(k): str(v) for k, v in dict(labels or {}).items()} or None
    return match_labels, tuple(expressions)


def conditions_of(status: object) -> tuple[dict[str, JSONValue], ...]:
    """`status.conditions` as plain dicts (API models or dicts alike): a merge patch
    replaces the whole list, so a writer of one condition writes the others back as read."""
    out = []
    for c in get(status, "conditions", default=()) or ():
        out.append(
            c.model_dump(mode="json", exclude_none=True) if hasattr(c, "model_dump") else dict(c)
        )
    return tuple(out)


# A model class -> the names its instances answer without a fallback (its fields and the
# class's attributes): fixed per class, so read once.
_class_names: dict[type, frozenset[str]] = {}


def _names_of(cls: type) -> frozenset[str]:
    names = _class_names.get(cls)
    if names is None:
        names = _class_names[cls] = frozenset(dir(cls)) | frozenset(
            getattr(cls, "model_fields", {})
        )
    return names


def persisted_of(status: object, key: str) -> dict[str, JSONValue] | None:
    """What a controller of Foresize persisted in `status.<key>` (the vertical worker's
    `disruption`, the lifecycle's `lifecycle`): an extra field of the API model or a key of
    a dict, as a plain dict; None when there is none (or it is not a mapping)."""
    if status is None:
        return None
    if hasattr(status, "model_dump"):
        extra = getattr(status, "model_extra", None) or {}
        if key in extra:
            value = extra[key]
        elif key in _names_of(type(status)):
            value = getattr(status, key, None)
        else:
            # Neither a field, an attribute nor an extra: None, what `getattr` gives after
            # the model raised (and caught) an AttributeError, ~10 us a target every pass.
            value = None
        if value is not None and hasattr(value, "model_dump"):
            dumped: dict[str, JSONValue] = value.model_dump(by_alias=True)
            return dumped
    else:
        value = get(status, key)
    return dict(value) if isinstance(value, Mapping) else None


def shadow_policies(spec: object) -> tuple[ShadowPolicy, ...]:
    """The target's `spec.shadow` entries as API objects (those that do not parse are left
    out: the validating webhook and `foresize validate` refuse them)."""
    from foresize.core.api.target import ShadowPolicy

    out = []
    for entry in get(spec, "shadow", default=()) or ():
        try:
            out.append(
                entry if isinstance(entry, ShadowPolicy) else ShadowPolicy.model_validate(entry)
            )
        except ValueError:
            continue
    return tuple(out)
