"""The Foresize API (group `foresize.io`, version `v1`) as pydantic v2 models.

One source of truth: the operator, the webhooks, the simulator and the CRD YAML (generated
from these models by `foresize.api.crd`) all read these types.

Conventions (see docs/api.md):

- Python attribute names are the API field names: camelCase where the Kubernetes API uses
  camelCase (`scaleTargetRef`, `minReplicas`, `hasEnoughDataToScale`), snake_case where the
  product vocabulary does (`forecast_blocks`, `update_policy`, `max_disrupted`). The one
  exception is `metadata.deletion_timestamp` (JSON `deletionTimestamp`).
- Durations are float seconds in Python, parsed from Go-style strings (`15m`, `1h30m`,
  `60s`; `d` for days is accepted too) and written back as Go-compatible strings.
- CPU quantities are int millicores, memory quantities int bytes. Input follows Kubernetes
  units: a bare number is cores / bytes, as in a manifest (`cpu: 2` is 2000m). To build a
  model from canonical ints in Python, pass strings (`format_cpu(m)`) or use the
  `from_canonical` helpers.
- Timestamps are float epoch seconds, written as RFC 3339.
- `model_dump(by_alias=True, exclude_none=True)` gives valid Kubernetes JSON.

Cross-field rules are enforced here (model validators with messages naming the fields) and
again by CEL in the generated CRD, so a bad object is refused by the API server and a bad
file by the CLI with the same words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import ErrorDetails

from foresize.api.cron import MAX_CRON_LENGTH, check_cron
from foresize.api.duration import (
    DURATION_PATTERN,
    format_duration,
    parse_duration,
)
from foresize.api.hysteresis import (
    DEFAULT_VERTICAL_SCALE_DOWN_PERCENT,
    DEFAULT_VERTICAL_SCALE_UP_PERCENT,
    clears,
)
from foresize.api.labels import check_label_key, check_label_map, check_label_value
from foresize.api.quantity import (
    CPU,
    MEMORY,
    QuantityError,
    cpu_millis,
    format_bytes,
    format_cpu,
    format_quantity,
    to_bytes,
    to_canonical,
)
from foresize.api.selectors import selector_matches
from foresize.api.vocabulary import (
    FORECAST_MODES,
    SCALING_MODE_ALIASES,
    SCALING_MODES,
    UPDATE_MODES,
)
from foresize.errors import ForesizeError

GROUP = "foresize.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

AIScaleTargetKind = "AIScaleTarget"
DaemonSetAutoscalerKind = "DaemonSetAutoscaler"
ClusterAIScaleTemplateKind = "ClusterAIScaleTemplate"

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
"""Namespaces a ClusterAIScaleTemplate never selects unless listed in includedNamespaces."""

# --------------------------------------------------------------------------------------
# Durations
# --------------------------------------------------------------------------------------


def _duration_validator(positive: bool) -> Callable[[Any], float]:
    def validate(value: Any) -> float:
        seconds = parse_duration(value)
        if positive and seconds <= 0:
            raise ValueError("must be a positive duration (e.g. 60s, 15m)")
        return seconds

    return validate


_DURATION_SCHEMA = {"type": "string", "pattern": DURATION_PATTERN, "maxLength": 64}

Duration = Annotated[
    float,
    PlainValidator(_duration_validator(positive=False)),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(_DURATION_SCHEMA),
]
"""Float seconds; input `15m` / `1h30m` / `8d` / a number of seconds; output `15m`."""

PositiveDuration = Annotated[
    float,
    PlainValidator(_duration_validator(positive=True)),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(_DURATION_SCHEMA),
]

# --------------------------------------------------------------------------------------
# Quantities and timestamps
# --------------------------------------------------------------------------------------

QUANTITY_PATTERN = (
    r"^[+]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
)
_QUANTITY_SCHEMA = {
    "anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}],
    "x-kubernetes-int-or-string": True,
}


def _quantity_validator(resource: str) -> Callable[[Any], int]:
    def validate(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
            raise ValueError(f"must be a {resource} quantity such as 250m, 1.5, 512Mi")
        try:
            amount = to_canonical(resource, value)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        if amount < 0:
            raise ValueError(f"must not be negative, got {value!r}")
        return amount

    return validate


CpuQuantity = Annotated[
    int,
    PlainValidator(_quantity_validator(CPU)),
    PlainSerializer(format_cpu, return_type=str),
    WithJsonSchema(_QUANTITY_SCHEMA),
]
"""Int millicores; input `250m`, `0.5`, `2` (cores, as in a manifest); output `250m` / `2`."""

MemoryQuantity = Annotated[
    int,
    PlainValidator(_quantity_validator(MEMORY)),
    PlainSerializer(format_bytes, return_type=str),
    WithJsonSchema(_QUANTITY_SCHEMA),
]
"""Int bytes; input `512Mi`, `1G`, `1e9`, a number of bytes; output `512Mi`."""


def _validate_resource_map(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be a map of resource name to quantity")
    out: dict[str, int] = {}
    for name, amount in value.items():
        out[str(name)] = _quantity_validator(CPU if name == CPU else MEMORY)(amount)
    return out


def _format_resource_map(values: dict[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in values.items()}


ResourceMap = Annotated[
    dict[str, int],
    PlainValidator(_validate_resource_map),
    PlainSerializer(_format_resource_map),
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": _QUANTITY_SCHEMA,
            "maxProperties": 16,
        }
    ),
]
"""Resource name -> canonical int (cpu millicores, others base units); output a
Kubernetes `requests`/`limits` map."""


def parse_timestamp(value: Any) -> float:
    """RFC 3339 (`2026-11-29T08:00:00Z`) or epoch seconds -> float epoch seconds."""
    if isinstance(value, bool):
        raise ValueError("must be an RFC 3339 time")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return when.timestamp()
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"must be an RFC 3339 time, not {value!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    raise ValueError("must be an RFC 3339 time")


def format_timestamp(seconds: float) -> str:
    """Epoch seconds -> RFC 3339 in UTC (`2026-11-29T08:00:00Z`; fraction only if any)."""
    when = datetime.fromtimestamp(seconds, tz=UTC)
    if when.microsecond:
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


Timestamp = Annotated[
    float,
    PlainValidator(parse_timestamp),
    PlainSerializer(format_timestamp, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def _enum(allowed: tuple[str, ...], aliases: dict[str, str] | None = None) -> Callable[[Any], str]:
    aliases = aliases or {}
    listed = ", ".join(allowed)
    if aliases:
        listed += " (aliases: " + ", ".join(f"{a}={t}" for a, t in aliases.items()) + ")"

    def validate(value: Any) -> str:
        if isinstance(value, str):
            key = value.strip()
            if key in allowed:
                return key
            low = key.lower()
            if low in allowed:
                return low
            if low in aliases:
                return aliases[low]
        raise ValueError(f"must be one of {listed}, not {value!r}")

    return validate


def _enum_schema(allowed: tuple[str, ...], aliases: dict[str, str] | None = None) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "enum": list(allowed) + list(aliases or {})})


ScalingMode: TypeAlias = Annotated[
    str,
    PlainValidator(_enum(SCALING_MODES, SCALING_MODE_ALIASES)),
    _enum_schema(SCALING_MODES, SCALING_MODE_ALIASES),
]
"""autonomous | recommendation | observe; aliases auto, recommend, rec, observation."""


def normalize_scaling_mode(value: str) -> str:
    """`auto` -> `autonomous`, `rec` -> `recommendation`, ... (raises ValueError if unknown)."""
    return _enum(SCALING_MODES, SCALING_MODE_ALIASES)(value)


ForecastMode: TypeAlias = Annotated[
    str, PlainValidator(_enum(FORECAST_MODES)), _enum_schema(FORECAST_MODES)
]

UpdateMode: TypeAlias = Annotated[
    str, PlainValidator(_enum(UPDATE_MODES)), _enum_schema(UPDATE_MODES)
]

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Rollout")
DEFAULT_API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Rollout": "argoproj.io/v1alpha1",
}

CRON_PATTERN = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$"

CronSchedule = Annotated[
    str, Field(max_length=MAX_CRON_LENGTH, pattern=CRON_PATTERN), AfterValidator(check_cron)
]
"""A forecast_cron schedule, checked field by field (`api.cron`), as the webhook does."""

_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class _Base(BaseModel):
    """Spec types: unknown keys are errors (a typo must not be silently dropped)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_assignment=False,
        str_strip_whitespace=False,
    )


class _Open(BaseModel):
    """Status / metadata types: unknown keys are kept (other parts persist state there)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------------------
# Metadata and references
# --------------------------------------------------------------------------------------


class ObjectMeta(_Open):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    generation: int | None = None
    resourceVersion: str | None = None
    deletion_timestamp: Timestamp | None = Field(default=None, alias="deletionTimestamp")
    finalizers: list[str] = Field(default_factory=list)


class ScaleTargetRef(_Base):
    """The workload a target scales: Deployment, StatefulSet or Argo Rollout."""

    apiVersion: str | None = Field(default=None, max_length=253)
    kind: Annotated[str, PlainValidator(_enum(WORKLOAD_KINDS))] = Field(
        json_schema_extra={"enum": list(WORKLOAD_KINDS)}
    )
    name: str = Field(min_length=1, max_length=253)

    @model_validator(mode="after")
    def _default_api_version(self) -> ScaleTargetRef:
        if self.apiVersion is None:
            self.apiVersion = DEFAULT_API_VERSIONS[self.kind]
        return self


class DaemonSetRef(_Base):
    apiVersion: str = Field(default="apps/v1", max_length=253)
    kind: Literal["DaemonSet"] = "DaemonSet"
    name: str = Field(min_length=1, max_length=253)


class LabelSelectorRequirement(_Base):
    key: Annotated[str, Field(max_length=317), AfterValidator(check_label_key)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[Annotated[str, Field(max_length=63), AfterValidator(check_label_value)]] = Field(
        default_factory=list, max_length=64
    )


class LabelSelector(_Base):
    matchLabels: Annotated[dict[str, str], AfterValidator(check_label_map)] = Field(
        default_factory=dict
    )
    matchExpressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=32)

    def is_empty(self) -> bool:
        return not self.matchLabels and not self.matchExpressions

    def matches(self, labels: dict[str, str]) -> bool:
        """Kubernetes label-selector semantics; an empty selector matches nothing here
        (Foresize never wants to select everything by accident)."""
        return selector_matches(
            self.matchLabels,
            [(r.key, r.operator, r.values) for r in self.matchExpressions],
            labels,
        )


# --------------------------------------------------------------------------------------
# Forecast model settings
# --------------------------------------------------------------------------------------


class MetricModelOverride(_Base):
    """Per-metric (`model.metrics.cpu` / `.memory`) overrides of the forecast settings."""

    mode: ForecastMode | None = None
    percentile_value: float | None = Field(default=None, gt=0, le=100)
    forecast_buffer_percentage: float | None = Field(default=None, ge=0, le=1000)

    @model_validator(mode="after")
    def _percentile(self) -> MetricModelOverride:
        _check_percentile(self.mode, self.percentile_value)
        return self


class MetricOverrides(_Base):
    cpu: MetricModelOverride | None = None
    memory: MetricModelOverride | None = None


def _check_percentile(
    mode: str | None, percentile_value: float | None, allow_unset_mode: bool = False
) -> None:
    if mode == "percentile" and percentile_value is None:
        raise ValueError("percentile_value is required when mode is percentile")
    if percentile_value is not None and mode != "percentile":
        if allow_unset_mode and mode is None:
            return
        raise ValueError("percentile_value is only allowed when mode is percentile")


MIN_LOOKBACK_FLOOR = 3 * 3600.0


class ModelSpec(_Base):
    """How to forecast: horizon, cadence, which quantile, buffer, minimum history.

    Under `horizontal.model` / `vertical.model` the same type is a partial override: only
    the fields given there replace the target-level ones (see `effective_model`)."""

    forecast_blocks: PositiveDuration = 900.0
    """Forecast horizon: the forecast covers the maximum usage over this window."""
    forecast_interval: PositiveDuration | None = None
    """How often to forecast (at most forecast_blocks); exclusive with forecast_cron."""
    forecast_cron: CronSchedule | None = None
    """When to forecast, as a cron schedule; exclusive with forecast_interval."""
    mode: ForecastMode = "balanced"
    """Which quantile of the forecast to use (percentile: percentile_value)."""
    percentile_value: float | None = Field(default=None, gt=0, le=100)
    """The percentile for mode percentile, in (0, 100]."""
    forecast_buffer_percentage: float = Field(default=0.0, ge=0, le=1000)
    """Headroom added to the forecast, in percent."""
    min_lookback_to_scale: Duration = 86400.0
    """History needed before autonomous action (at least 3h)."""
    metrics: MetricOverrides | None = None
    """Per-metric overrides of mode, percentile_value and buffer."""

    @model_validator(mode="after")
    def _min_lookback(self) -> ModelSpec:
        if self.min_lookback_to_scale < MIN_LOOKBACK_FLOOR:
            raise ValueError("min_lookback_to_scale must be at least 3h")
        self.check_cross_fields()
        return self

    def check_cross_fields(self) -> None:
        """The rules that need the whole (effective) model; raises ValueError."""
        if self.forecast_interval is not None and self.forecast_cron is not None:
            raise ValueError("forecast_interval and forecast_cron are mutually exclusive")
        if self.forecast_interval is not None and self.forecast_interval > self.forecast_blocks:
            raise ValueError(
                f"forecast_interval ({format_duration(self.forecast_interval)}) must not "
                f"exceed forecast_blocks ({format_duration(self.forecast_blocks)})"
            )
        _check_percentile(self.mode, self.percentile_value)

    @property
    def cadence_seconds(self) -> float | None:
        """Seconds between forecasts: forecast_interval, else forecast_blocks; None when a
        cron schedule sets the cadence."""
        if self.forecast_cron is not None:
            return None
        return (
            self.forecast_interval if self.forecast_interval is not None else self.forecast_blocks
        )

    def merged(self, override: ModelOverride | None) -> ModelSpec:
        """This model with the fields given in `override` replacing ours. The cadence
        (interval/cron) is replaced as a unit; per-metric overrides merge by metric."""
        if override is None:
            return self
        data = self.model_dump(by_alias=True, exclude_none=True)
        given = override.model_dump(by_alias=True, exclude_none=True)
        if "forecast_interval" in given or "forecast_cron" in given:
            data.pop("forecast_interval", None)
            data.pop("forecast_cron", None)
        if "mode" in given and given["mode"] != "percentile":
            data.pop("percentile_value", None)
        metrics = data.pop("metrics", None) or {}
        for name, values in (given.pop("metrics", None) or {}).items():
            base = dict(metrics.get(name, {}))
            if "mode" in values and values["mode"] != "percentile":
                base.pop("percentile_value", None)
            metrics[name] = {**base, **values}
        data.update(given)
        if metrics:
            data["metrics"] = metrics
        return ModelSpec.model_validate(data)

    def for_metric(self, resource: str) -> ModelSpec:
        """The settings for one metric (`cpu` or `memory`) with its overrides applied."""
        over = getattr(self.metrics, resource, None) if self.metrics else None
        if over is None:
            return self
        data = self.model_dump(by_alias=True, exclude_none=True)
        data.pop("metrics", None)
        given = over.model_dump(exclude_none=True)
        if "mode" in given and given["mode"] != "percentile":
            data.pop("percentile_value", None)
        data.update(given)
        return ModelSpec.model_validate(data)


class ModelOverride(_Base):
    """`vertical.model` / `horizontal.model`: a partial ModelSpec. Only the fields given
    here replace the target-level ones (no defaults of its own)."""

    forecast_blocks: PositiveDuration | None = None
    forecast_interval: PositiveDuration | None = None
    forecast_cron: CronSchedule | None = None
    mode: ForecastMode | None = None
    percentile_value: float | None = Field(default=None, gt=0, le=100)
    forecast_buffer_percentage: float | None = Field(default=None, ge=0, le=1000)
    min_lookback_to_scale: Duration | None = None
    metrics: MetricOverrides | None = None

    @model_validator(mode="after")
    def _own_rules(self) -> ModelOverride:
        if self.forecast_interval is not None and self.forecast_cron is not None:
            raise ValueError("forecast_interval and forecast_cron are mutually exclusive")
        if self.percentile_value is not None and self.mode not in (None, "percentile"):
            raise ValueError("percentile_value is only allowed when mode is percentile")
        if (
            self.min_lookback_to_scale is not None
            and self.min_lookback_to_scale < MIN_LOOKBACK_FLOOR
        ):
            raise ValueError("min_lookback_to_scale must be at least 3h")
        return self


# --------------------------------------------------------------------------------------
# Vertical
# --------------------------------------------------------------------------------------


class LimitPolicy(_Base):
    """`limit.ratio`: limit = request x ratio (>= 1). Absent: limits left as they are."""

    ratio: float = Field(ge=1, le=1000)


class CpuPolicy(_Base):
    lowerbound: CpuQuantity
    """Smallest CPU request Foresize sets."""
    upperbound: CpuQuantity | None = None
    """Largest CPU request Foresize sets."""
    limit: LimitPolicy | None = None

    @model_validator(mode="after")
    def _bounds(self) -> CpuPolicy:
        if self.upperbound is not None and self.upperbound < self.lowerbound:
            raise ValueError("lowerbound must not exceed upperbound")
        return self


class MemoryPolicy(_Base):
    lowerbound: MemoryQuantity
    """Smallest memory request Foresize sets."""
    upperbound: MemoryQuantity | None = None
    """Largest memory request Foresize sets."""
    limit: LimitPolicy | None = None

    @model_validator(mode="after")
    def _bounds(self) -> MemoryPolicy:
        if self.upperbound is not None and self.upperbound < self.lowerbound:
            raise ValueError("lowerbound must not exceed upperbound")
        return self


class ContainerPolicy(_Base):
    """Bounds for one container (`name`) or every container (`*`)."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$")
    cpu: CpuPolicy | None = None
    memory: MemoryPolicy | None = None

    def policy(self, resource: str) -> CpuPolicy | MemoryPolicy | None:
        return self.cpu if resource == CPU else self.memory if resource == MEMORY else None


def _check_unique_containers(containers: list[ContainerPolicy]) -> None:
    seen: set[str] = set()
    for entry in containers:
        if entry.name in seen:
            raise ValueError(f"containers: container {entry.name!r} is listed twice")
        seen.add(entry.name)


def _memory_only() -> list[Literal["cpu", "memory"]]:
    return ["memory"]


class UpdatePolicy(_Base):
    update_mode: UpdateMode = "recreate"
    """initial: admission only; recreate: evict; in_place: resize running pods;
    in_place_or_recreate: resize, evict when stalled."""
    recreate_resources: Annotated[list[Literal["cpu", "memory"]], AfterValidator(_unique)] = Field(
        default_factory=_memory_only, max_length=2
    )


def _unique(values: list[Any] | None) -> list[Any] | None:
    """Set-like lists (`x-kubernetes-list-type: set` in the CRD) refuse duplicates."""
    if values is not None:
        seen: set[Any] = set()
        for value in values:
            if value in seen:
                raise ValueError(f"duplicate value {value!r}")
            seen.add(value)
    return values


_MAX_DISRUPTED_HINT = "must be an integer >= 1 or a percentage (e.g. 3 or 20%)"
# An integer >= 1, or a percentage in (0, 100].
MAX_DISRUPTED_PATTERN = (
    r"^([1-9][0-9]*|(100(\.0+)?|[1-9][0-9]?(\.[0-9]+)?|0?\.[0-9]*[1-9][0-9]*)%)$"
)
_MAX_DISRUPTED_RE = re.compile(MAX_DISRUPTED_PATTERN)


def _validate_max_disrupted(value: Any) -> int | str:
    if isinstance(value, bool):
        raise ValueError(_MAX_DISRUPTED_HINT)
    if isinstance(value, int):
        if value < 1:
            raise ValueError(_MAX_DISRUPTED_HINT)
        return value
    if isinstance(value, str) and _MAX_DISRUPTED_RE.match(value):
        return value if value.endswith("%") else int(value)
    raise ValueError(_MAX_DISRUPTED_HINT)


MaxDisrupted = Annotated[
    int | str,
    PlainValidator(_validate_max_disrupted),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": MAX_DISRUPTED_PATTERN},
            ],
            "x-kubernetes-int-or-string": True,
        }
    ),
]


class DisruptionPolicy(_Base):
    """How many pods may change at once, how often, and when a stalled resize gives up."""

    max_disrupted: MaxDisrupted = "20%"
    """Pods changed per batch: a count, or a percentage of replicas rounded up (at least 1)."""
    interval: PositiveDuration = 60.0
    """Minimum time between batches."""
    stall_timeout: PositiveDuration = 120.0
    """How long an in-place resize may stall before in_place_or_recreate evicts the pod."""
    release_deferred_after: PositiveDuration | None = None
    """Opt-in: give up a Deferred resize that has held node capacity this long."""

    def max_disrupted_for(self, replicas: int) -> int:
        """Pods that may be disrupted in one batch for a target of `replicas` pods:
        a percentage is rounded up; the result is at least 1."""
        value = self.max_disrupted
        if isinstance(value, int):
            return max(1, value)
        percent = Decimal(value.rstrip("%"))
        return max(1, math.ceil(Decimal(max(replicas, 0)) * percent / 100))


class OomRemediation(_Base):
    enabled: bool = True
    """Raise memory x1.2 on OOM kills (again every 2 minutes while they continue)."""
    stabilization_window: PositiveDuration | None = None
    """How long the raised floor holds; default max(forecast interval, 1h)."""

    def window_for(self, forecast_interval: float | None) -> float:
        """The hold time of an OOM floor: the configured window, else
        max(forecast_interval, 1h)."""
        if self.stabilization_window is not None:
            return self.stabilization_window
        return max(forecast_interval or 0.0, 3600.0)


class ResourceAmounts(_Base):
    cpu: CpuQuantity | None = None
    memory: MemoryQuantity | None = None


ThresholdType = Annotated[
    str,
    PlainValidator(_enum(("percent", "absolute"))),
    WithJsonSchema({"type": "string", "enum": ["percent", "absolute"]}),
]


def _check_threshold(kind: str, percent: Any, absolute: Any) -> None:
    if kind == "percent" and percent is None:
        raise ValueError("percent is required when type is percent")
    if kind == "absolute" and absolute is None:
        raise ValueError("absolute is required when type is absolute")


class VerticalThreshold(_Base):
    """A change smaller than this is not worth acting on (hysteresis). `absolute` is per
    resource (`{cpu: 50m, memory: 64Mi}`)."""

    type: ThresholdType = "percent"
    percent: float | None = Field(default=None, ge=0, le=1000)
    absolute: ResourceAmounts | None = None

    @model_validator(mode="after")
    def _given(self) -> VerticalThreshold:
        _check_threshold(self.type, self.percent, self.absolute)
        return self

    def exceeded(self, resource: str, current: int, proposed: int) -> bool:
        """The hysteresis rule of `foresize.api.hysteresis`, for one resource."""
        delta = abs(proposed - current)
        if self.type != "absolute" and current <= 0:
            return delta > 0
        limit = getattr(self.absolute, resource, None) if self.absolute else None
        return bool(clears(self.type, self.percent or 0.0, limit, current, delta))


class VerticalScalingBehavior(_Base):
    # Absent directions use DEFAULT_VERTICAL_SCALE_UP/DOWN_PERCENT (effective_scale_*).
    scale_up: VerticalThreshold | None = None
    scale_down: VerticalThreshold | None = None

    def effective_scale_up(self) -> VerticalThreshold:
        """The scale-up threshold in force (the documented default when none is given)."""
        if self.scale_up is not None:
            return self.scale_up
        return VerticalThreshold(type="percent", percent=DEFAULT_VERTICAL_SCALE_UP_PERCENT)

    def effective_scale_down(self) -> VerticalThreshold:
        """The scale-down threshold in force (the documented default when none is given)."""
        if self.scale_down is not None:
            return self.scale_down
        return VerticalThreshold(type="percent", percent=DEFAULT_VERTICAL_SCALE_DOWN_PERCENT)

    def is_significant(self, resource: str, current: int, proposed: int) -> bool:
        """Whether changing `resource` from `current` to `proposed` (canonical ints) clears
        the hysteresis threshold of its direction. A direction without a threshold uses
        the documented default (up 5%, down 10%; `VerticalScalingBehavior()` is the rule
        of a target that sets no scaling_behavior)."""
        if proposed == current:
            return False
        rule = self.effective_scale_up() if proposed > current else self.effective_scale_down()
        return rule.exceeded(resource, current, proposed)


class HorizontalThreshold(_Base):
    type: ThresholdType = "percent"
    percent: float | None = Field(default=None, ge=0, le=1000)
    absolute: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _given(self) -> HorizontalThreshold:
        _check_threshold(self.type, self.percent, self.absolute)
        return self

    def exceeded(self, current: int, proposed: int) -> bool:
        """The hysteresis rule of `foresize.api.hysteresis`, on replica counts."""
        delta = abs(proposed - current)
        if self.type != "absolute" and current <= 0:
            return delta > 0
        return bool(clears(self.type, self.percent or 0.0, self.absolute or 0, current, delta))


class HorizontalScalingBehavior(_Base):
    scale_up: HorizontalThreshold | None = None
    scale_down: HorizontalThreshold | None = None

    def is_significant(self, current: int, proposed: int) -> bool:
        if proposed == current:
            return False
        rule = self.scale_up if proposed > current else self.scale_down
        return True if rule is None else rule.exceeded(current, proposed)


HpaResourcePolicy: TypeAlias = Annotated[
    str, PlainValidator(_enum(("leave", "override"))), _enum_schema(("leave", "override"))
]


class VerticalSpec(_Base):
    mode: ScalingMode = "recommendation"
    """autonomous, recommendation or observe (aliases auto, recommend, rec, observation)."""
    model: ModelOverride | None = None
    """Overrides of the target's model for vertical scaling (only the fields given)."""
    containers: list[ContainerPolicy] = Field(default_factory=list, max_length=64)
    """Bounds per container name, or * for all."""
    update_policy: UpdatePolicy = Field(default_factory=UpdatePolicy)
    disruption: DisruptionPolicy = Field(default_factory=DisruptionPolicy)
    oom_remediation: OomRemediation = Field(default_factory=OomRemediation)
    scaling_behavior: VerticalScalingBehavior | None = None
    hpa_resource_policy: HpaResourcePolicy = "leave"
    """leave: do not change the request of a resource an HPA scales on; override: change
    it anyway."""

    @model_validator(mode="after")
    def _unique(self) -> VerticalSpec:
        _check_unique_containers(self.containers)
        return self


class HorizontalSpec(_Base):
    mode: ScalingMode = "recommendation"
    """autonomous, recommendation or observe (aliases auto, recommend, rec, observation)."""
    model: ModelOverride | None = None
    """Overrides of the target's model for horizontal scaling (only the fields given)."""
    minReplicas: int | None = Field(default=None, ge=1)
    """Lower bound of predicted replicas (default: the HPA's)."""
    maxReplicas: int | None = Field(default=None, ge=1)
    """Upper bound of predicted replicas (default: the HPA's)."""
    multipleOf: int | None = Field(default=None, ge=1)
    """Round predicted replicas up to a multiple of this; exclusive with allowedReplicas."""
    allowedReplicas: Annotated[
        list[Annotated[int, Field(ge=0)]] | None, AfterValidator(_unique)
    ] = Field(default=None, min_length=1, max_length=256)
    scaling_behavior: HorizontalScalingBehavior | None = None

    @model_validator(mode="after")
    def _replicas(self) -> HorizontalSpec:
        if (
            self.minReplicas is not None
            and self.maxReplicas is not None
            and self.minReplicas > self.maxReplicas
        ):
            raise ValueError(
                f"minReplicas ({self.minReplicas}) must not exceed maxReplicas ({self.maxReplicas})"
            )
        if self.multipleOf is not None and self.allowedReplicas is not None:
            raise ValueError("multipleOf and allowedReplicas are mutually exclusive")
        return self


# --------------------------------------------------------------------------------------
# AIScaleTarget
# --------------------------------------------------------------------------------------


class _ScalingSpec(_Base):
    """What AIScaleTarget and a ClusterAIScaleTemplate's target template share."""

    model: ModelSpec = Field(default_factory=ModelSpec)
    vertical: VerticalSpec | None = None
    horizontal: HorizontalSpec | None = None

    def effective_model(self, direction: Literal["vertical", "horizontal"]) -> ModelSpec:
        """The target-level model with `<direction>.model` overrides applied."""
        if direction not in ("vertical", "horizontal"):
            raise ValueError(f"direction must be vertical or horizontal, not {direction!r}")
        section = getattr(self, direction)
        return self.model.merged(section.model if section is not None else None)

    def oom_stabilization_window(self) -> float:
        """Hold time of an OOM floor: vertical.oom_remediation.stabilization_window, else
        max(the vertical forecast interval, 1h)."""
        remediation = self.vertical.oom_remediation if self.vertical else OomRemediation()
        return remediation.window_for(self.effective_model("vertical").cadence_seconds)

    @property
    def vertical_autonomous(self) -> bool:
        return self.vertical is not None and self.vertical.mode == "autonomous"

    @property
    def horizontal_autonomous(self) -> bool:
        return self.horizontal is not None and self.horizontal.mode == "autonomous"

    def _check_scaling(self) -> None:
        if self.vertical_autonomous and self.horizontal_autonomous:
            raise ValueError("only one of vertical.mode and horizontal.mode may be autonomous")
        for direction in ("vertical", "horizontal"):
            section = getattr(self, direction)
            if section is not None and section.model is not None:
                try:
                    self.effective_model(direction)
                except ValidationError as exc:
                    problems = "; ".join(_message(e) for e in exc.errors())
                    raise ValueError(f"{direction}.model (merged with model): {problems}") from None


class AIScaleTargetSpec(_ScalingSpec):
    scaleTargetRef: ScaleTargetRef | None = None
    """The workload (Deployment, StatefulSet, Argo Rollout); exclusive with selector."""
    selector: LabelSelector | None = None
    """Pods by label (vertical only); exclusive with scaleTargetRef."""

    @model_validator(mode="after")
    def _cross_fields(self) -> AIScaleTargetSpec:
        if (self.scaleTargetRef is None) == (self.selector is None):
            raise ValueError("exactly one of scaleTargetRef or selector must be set")
        if self.selector is not None and self.horizontal is not None:
            raise ValueError("horizontal needs scaleTargetRef (a selector is vertical only)")
        self._check_scaling()
        return self


class Condition(_Open):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    lastTransitionTime: Timestamp | None = None
    observedGeneration: int | None = None


class ForecastWindow(_Open):
    start: Timestamp
    end: Timestamp


class ContainerSuggestion(_Open):
    name: str
    requests: ResourceMap = Field(default_factory=dict)
    limits: ResourceMap = Field(default_factory=dict)

    @classmethod
    def from_canonical(
        cls, name: str, requests: dict[str, int], limits: dict[str, int] | None = None
    ) -> ContainerSuggestion:
        """Build from canonical ints (cpu millicores, memory bytes)."""
        return cls.model_validate(
            {
                "name": name,
                "requests": _format_resource_map(requests),
                "limits": _format_resource_map(limits or {}),
            }
        )


class VerticalSuggestion(_Open):
    uid: str
    containers: list[ContainerSuggestion] = Field(default_factory=list)
    forecast_window: ForecastWindow | None = None
    forecast_error: float | None = None
    created_at: Timestamp | None = None

    def for_container(self, name: str) -> ContainerSuggestion | None:
        wildcard = None
        for entry in self.containers:
            if entry.name == name:
                return entry
            if entry.name == "*":
                wildcard = entry
        return wildcard


class HorizontalSuggestion(_Open):
    uid: str = ""
    replicas: int = Field(ge=0)
    forecast_window: ForecastWindow | None = None
    forecast_error: float | None = None
    created_at: Timestamp | None = None


class OomFloor(_Open):
    """A raised memory floor after OOM kills: never go below `memory` until `until`."""

    container: str
    memory: MemoryQuantity
    since: Timestamp | None = None
    until: Timestamp | None = None
    last_oom: Timestamp | None = None
    oom_count: int = 0


class CircuitBreakerStatus(_Open):
    state: Literal["closed", "open", "half_open"] = "closed"
    suggestion_uid: str | None = None
    no_progress_cycles: int = 0
    opened_at: Timestamp | None = None
    retry_at: Timestamp | None = None
    backoff: Duration | None = None


class AIScaleTargetStatus(_Open):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    hasEnoughDataToScale: bool | None = None
    vertical_suggestion: VerticalSuggestion | None = None
    horizontal_suggestion: HorizontalSuggestion | None = None
    oom_floors: list[OomFloor] = Field(default_factory=list)
    pods_resized: int = 0
    pods_evicted: int = 0
    pods_stalled: int = 0
    circuit_breaker: CircuitBreakerStatus | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class _Object(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    KIND: ClassVar[str] = ""

    apiVersion: str = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="before")
    @classmethod
    def _fill_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("kind"):
            data = {**data, "kind": cls.KIND}
        return data

    @model_validator(mode="after")
    def _check_kind(self) -> _Object:
        if self.kind != self.KIND:
            raise ValueError(f"kind must be {self.KIND}, not {self.kind!r}")
        if self.apiVersion != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION}, not {self.apiVersion!r}")
        return self

    def to_kube(self) -> dict[str, Any]:
        """The object as Kubernetes JSON."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class AIScaleTarget(_Object):
    """Forecast-driven vertical and/or horizontal scaling of one workload (or pod selector)."""

    KIND: ClassVar[str] = AIScaleTargetKind
    spec: AIScaleTargetSpec
    status: AIScaleTargetStatus = Field(default_factory=AIScaleTargetStatus)


# --------------------------------------------------------------------------------------
# DaemonSetAutoscaler
# --------------------------------------------------------------------------------------


class DaemonSetAutoscalerSpec(_Base):
    scaleTargetRef: DaemonSetRef
    scaleMode: ScalingMode = "recommendation"
    """autonomous, recommendation or observe."""
    containers: list[ContainerPolicy] = Field(default_factory=list, max_length=64)
    percentile: float = Field(default=90.0, gt=0, le=100)
    """Usage percentile the requests are set to."""
    observationWindow: PositiveDuration = 8 * 86400.0
    """History the percentile is taken over."""
    minObservationWindow: PositiveDuration = 3 * 3600.0
    """History needed before acting."""
    scaleInterval: PositiveDuration = 900.0
    """How often running pods are resized in place."""

    @model_validator(mode="after")
    def _cross_fields(self) -> DaemonSetAutoscalerSpec:
        _check_unique_containers(self.containers)
        if self.minObservationWindow > self.observationWindow:
            raise ValueError("minObservationWindow must not exceed observationWindow")
        return self


class DaemonSetAutoscalerStatus(_Open):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    hasEnoughDataToScale: bool | None = None
    suggestion: VerticalSuggestion | None = None
    pods_resized: int = 0
    pods_seeded: int = 0
    pods_stalled: int = 0

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class DaemonSetAutoscaler(_Object):
    """Seeds and resizes the pods of one DaemonSet from a percentile of their usage."""

    KIND: ClassVar[str] = DaemonSetAutoscalerKind
    spec: DaemonSetAutoscalerSpec
    status: DaemonSetAutoscalerStatus = Field(default_factory=DaemonSetAutoscalerStatus)


# --------------------------------------------------------------------------------------
# ClusterAIScaleTemplate
# --------------------------------------------------------------------------------------


class TargetTemplateMeta(_Base):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class TargetTemplateSpec(_ScalingSpec):
    """An AIScaleTarget spec without the workload reference (the template fills it)."""

    @model_validator(mode="after")
    def _cross_fields(self) -> TargetTemplateSpec:
        self._check_scaling()
        return self


class TargetTemplate(_Base):
    metadata: TargetTemplateMeta = Field(default_factory=TargetTemplateMeta)
    spec: TargetTemplateSpec = Field(default_factory=TargetTemplateSpec)


NamespaceName = Annotated[str, Field(min_length=1, max_length=63, pattern=_NAME_PATTERN)]


class ClusterAIScaleTemplateSpec(_Base):
    selector: LabelSelector
    kinds: Annotated[
        list[Annotated[str, PlainValidator(_enum(WORKLOAD_KINDS))]], AfterValidator(_unique)
    ] = Field(
        default_factory=lambda: list(WORKLOAD_KINDS),
        min_length=1,
        max_length=3,
        json_schema_extra={"items": {"type": "string", "enum": list(WORKLOAD_KINDS)}},
    )
    template: TargetTemplate = Field(default_factory=TargetTemplate)
    conflictResolution: Annotated[str, PlainValidator(_enum(("skip", "override")))] = Field(
        default="skip", json_schema_extra={"enum": ["skip", "override"]}
    )
    includedNamespaces: Annotated[list[NamespaceName] | None, AfterValidator(_unique)] = Field(
        default=None, max_length=256
    )
    excludedNamespaces: Annotated[list[NamespaceName] | None, AfterValidator(_unique)] = Field(
        default=None, max_length=256
    )

    @model_validator(mode="after")
    def _cross_fields(self) -> ClusterAIScaleTemplateSpec:
        if self.includedNamespaces is not None and self.excludedNamespaces is not None:
            raise ValueError("includedNamespaces and excludedNamespaces are mutually exclusive")
        return self

    def selects_namespace(self, namespace: str) -> bool:
        """includedNamespaces if given; otherwise every namespace except excludedNamespaces
        and the system namespaces (which only an explicit includedNamespaces can select)."""
        if self.includedNamespaces is not None:
            return namespace in self.includedNamespaces
        if namespace in SYSTEM_NAMESPACES:
            return False
        return namespace not in (self.excludedNamespaces or [])

    def build_target(
        self, kind: str, name: str, namespace: str, template_name: str = ""
    ) -> AIScaleTarget:
        """The AIScaleTarget this template makes for workload kind/namespace/name."""
        spec = self.template.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        spec["scaleTargetRef"] = {"kind": kind, "name": name}
        labels = dict(self.template.metadata.labels)
        if template_name:
            labels["foresize.io/template"] = template_name
        return AIScaleTarget.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": dict(self.template.metadata.annotations),
                },
                "spec": spec,
            }
        )


class ClusterAIScaleTemplateStatus(_Open):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    targets: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)


class ClusterAIScaleTemplate(_Object):
    """Creates AIScaleTargets for workloads selected by label across namespaces."""

    KIND: ClassVar[str] = ClusterAIScaleTemplateKind
    spec: ClusterAIScaleTemplateSpec
    status: ClusterAIScaleTemplateStatus = Field(default_factory=ClusterAIScaleTemplateStatus)


# --------------------------------------------------------------------------------------
# Loading with errors that name the field
# --------------------------------------------------------------------------------------

KINDS: dict[str, type[AIScaleTarget | DaemonSetAutoscaler | ClusterAIScaleTemplate]] = {
    AIScaleTargetKind: AIScaleTarget,
    DaemonSetAutoscalerKind: DaemonSetAutoscaler,
    ClusterAIScaleTemplateKind: ClusterAIScaleTemplate,
}


def _loc_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        # pydantic adds union-branch / validator tags to the location; they are not fields.
        if "[" in part or part in ("int", "str", "float", "bool", "dict", "list"):
            continue
        out += f".{part}" if out else part
    return out


def _message(error: ErrorDetails) -> str:
    msg = str(error.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if error.get("type") == "extra_forbidden":
        msg = "unknown field"
    elif error.get("type") == "missing":
        msg = "required field is missing"
    return msg


def format_validation_error(exc: ValidationError, source: str = "") -> str:
    """`source: path: problem` lines, one per pydantic error."""
    lines = []
    for error in exc.errors():
        path = _loc_path(tuple(error.get("loc", ())))
        parts = [p for p in (source, path) if p]
        lines.append(_printable(": ".join([*parts, _message(error)])))
    return "\n".join(lines)


def _printable(line: str) -> str:
    """`line` with control characters escaped and its length bounded: a field name or a
    value from a hostile file must not split one error into several lines or flood them."""
    if not line.isprintable():
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    return line if len(line) <= 400 else line[:397] + "..."


_ObjectT = TypeVar("_ObjectT", bound="_Object")


def _parse(cls: type[_ObjectT], obj: Any, source: str) -> _ObjectT:
    where = f"{source}: " if source else ""
    if not isinstance(obj, dict):
        raise ForesizeError(f"{where}expected a mapping (a {cls.KIND} object)")
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        raise ForesizeError(format_validation_error(exc, source)) from None


def parse_target(obj: dict[str, Any], source: str = "") -> AIScaleTarget:
    """Kubernetes JSON/YAML of an AIScaleTarget -> model; ForesizeError naming the
    source and field path on bad input."""
    return _parse(AIScaleTarget, obj, source)


def parse_daemonset_autoscaler(obj: dict[str, Any], source: str = "") -> DaemonSetAutoscaler:
    return _parse(DaemonSetAutoscaler, obj, source)


def parse_template(obj: dict[str, Any], source: str = "") -> ClusterAIScaleTemplate:
    return _parse(ClusterAIScaleTemplate, obj, source)


def parse_object(
    obj: dict[str, Any], source: str = ""
) -> AIScaleTarget | DaemonSetAutoscaler | ClusterAIScaleTemplate:
    """Any Foresize object, dispatched on `kind`."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind not in KINDS:
        where = f"{source}: " if source else ""
        raise ForesizeError(f"{where}kind: must be one of {', '.join(KINDS)}, not {kind!r}")
    return _parse(KINDS[kind], obj, source)


__all__ = [
    "API_VERSION",
    "GROUP",
    "SYSTEM_NAMESPACES",
    "VERSION",
    "AIScaleTarget",
    "AIScaleTargetSpec",
    "AIScaleTargetStatus",
    "CircuitBreakerStatus",
    "ClusterAIScaleTemplate",
    "ClusterAIScaleTemplateSpec",
    "Condition",
    "ContainerPolicy",
    "ContainerSuggestion",
    "CpuPolicy",
    "DaemonSetAutoscaler",
    "DaemonSetAutoscalerSpec",
    "DisruptionPolicy",
    "ForecastWindow",
    "HorizontalSpec",
    "HorizontalSuggestion",
    "LabelSelector",
    "MemoryPolicy",
    "ModelSpec",
    "ObjectMeta",
    "OomFloor",
    "OomRemediation",
    "ScaleTargetRef",
    "UpdatePolicy",
    "VerticalSpec",
    "VerticalSuggestion",
    "cpu_millis",
    "format_duration",
    "format_timestamp",
    "normalize_scaling_mode",
    "parse_daemonset_autoscaler",
    "parse_duration",
    "parse_object",
    "parse_target",
    "parse_template",
    "parse_timestamp",
    "to_bytes",
]
