"""The vertical and horizontal policies of a target: container bounds, update policy,
disruption pacing, OOM remediation, hysteresis thresholds, replica limits."""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from decimal import Decimal
from typing import Annotated, Literal, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    Field,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)

from foresize.core.api.duration import shown
from foresize.core.api.fields import (
    REPLICAS_MAX,
    CpuQuantity,
    MemoryQuantity,
    PositiveDuration,
    ScalingMode,
    StrictModel,
    UpdateMode,
    enum_schema,
    one_of,
)
from foresize.core.api.hysteresis import (
    DEFAULT_VERTICAL_SCALE_DOWN_PERCENT,
    DEFAULT_VERTICAL_SCALE_UP_PERCENT,
    clears,
)
from foresize.core.api.maintenance import ChangeBudgets, Maintenance
from foresize.core.api.model import ModelOverride
from foresize.core.api.quantity import (
    CPU,
    MEMORY,
    format_quantity,
)
from foresize.core.api.vocabulary import (
    DEFAULT_HPA_RESOURCE_POLICY,
    DEFAULT_INTERVAL,
    DEFAULT_MAX_DISRUPTED,
    DEFAULT_MIN_REPLICAS,
    DEFAULT_RELEASE_DEFERRED,
    DEFAULT_RELEASE_DEFERRED_AFTER,
    DEFAULT_STALL_TIMEOUT,
    HPA_RESOURCE_POLICIES,
    RELEASE_DEFERRED,
)


class LimitPolicy(StrictModel):
    """`limit.ratio`: limit = request x ratio (>= 1). Absent: limits left as they are."""

    ratio: float = Field(ge=1, le=1000)


def _check_bounds(resource: str, lower: int | None, upper: int | None) -> None:
    """lowerbound <= upperbound, the error on the upperbound with both amounts (the
    leading field name becomes the error's path: `api.load.format_validation_error`)."""
    if upper is not None and lower is not None and upper < lower:
        raise ValueError(
            f"upperbound: {format_quantity(resource, upper)} is below lowerbound "
            f"{format_quantity(resource, lower)}"
        )


class CpuPolicy(StrictModel):
    lowerbound: CpuQuantity | None = None
    """Smallest CPU request Foresize sets (absent: none here; a policy above may set one)."""
    upperbound: CpuQuantity | None = None
    """Largest CPU request Foresize sets."""
    limit: LimitPolicy | None = None

    @model_validator(mode="after")
    def _bounds(self) -> CpuPolicy:
        _check_bounds(CPU, self.lowerbound, self.upperbound)
        return self


class MemoryPolicy(StrictModel):
    lowerbound: MemoryQuantity | None = None
    """Smallest memory request Foresize sets (absent: none here; a policy above may set
    one)."""
    upperbound: MemoryQuantity | None = None
    """Largest memory request Foresize sets."""
    limit: LimitPolicy | None = None

    @model_validator(mode="after")
    def _bounds(self) -> MemoryPolicy:
        _check_bounds(MEMORY, self.lowerbound, self.upperbound)
        return self


class ContainerPolicy(StrictModel):
    """Bounds for one container (`name`) or every container (`*`)."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$")
    cpu: CpuPolicy | None = None
    memory: MemoryPolicy | None = None

    def policy(self, resource: str) -> CpuPolicy | MemoryPolicy | None:
        return self.cpu if resource == CPU else self.memory if resource == MEMORY else None


def check_unique_containers(containers: list[ContainerPolicy]) -> None:
    """Each container name once; the error names the second entry and the first."""
    seen: dict[str, int] = {}
    for i, entry in enumerate(containers):
        if entry.name in seen:
            raise ValueError(
                f"containers[{i}].name: container {entry.name!r} is listed twice (first at"
                f" containers[{seen[entry.name]}])"
            )
        seen[entry.name] = i


def _memory_only() -> list[Literal["cpu", "memory"]]:
    return ["memory"]


class UpdatePolicy(StrictModel):
    update_mode: UpdateMode = "recreate"
    """initial: admission only; recreate: evict; in_place: resize running pods;
    in_place_or_recreate: resize, evict when stalled."""
    recreate_resources: Annotated[list[Literal["cpu", "memory"]], AfterValidator(unique)] = Field(
        default_factory=_memory_only, max_length=2
    )
    min_replicas: int = Field(default=DEFAULT_MIN_REPLICAS, ge=1, le=REPLICAS_MAX)
    """A ready pod is evicted only while its workload has at least this many ready
    replicas (the pod included), so evictions leave min_replicas - 1 ready and never take
    the last ready replica down; set 1 to allow evicting a single-replica workload. Pods
    that are not ready and in-place resizes are not affected."""


_Item = TypeVar("_Item", bound=Hashable)


def unique(values: list[_Item] | None) -> list[_Item] | None:
    """Set-like lists (`x-kubernetes-list-type: set` in the CRD) refuse duplicates."""
    if values is not None:
        seen: set[_Item] = set()
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


def _validate_max_disrupted(value: object) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and _MAX_DISRUPTED_RE.match(value):
        return value if value.endswith("%") else int(value)
    raise ValueError(f"{_MAX_DISRUPTED_HINT}, not {shown(value)}")


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


ReleaseDeferred: TypeAlias = Annotated[
    str, PlainValidator(one_of(RELEASE_DEFERRED)), enum_schema(RELEASE_DEFERRED)
]


class DisruptionPolicy(StrictModel):
    """How many pods may change at once, how often, and when a stalled resize gives up."""

    max_disrupted: MaxDisrupted = DEFAULT_MAX_DISRUPTED
    """Pods changed per batch: a count, or a percentage of replicas rounded up (at least 1)."""
    interval: PositiveDuration = DEFAULT_INTERVAL
    """Minimum time between batches."""
    stall_timeout: PositiveDuration = DEFAULT_STALL_TIMEOUT
    """How long an in-place resize may stall before in_place_or_recreate evicts the pod."""
    release_deferred_after: PositiveDuration = DEFAULT_RELEASE_DEFERRED_AFTER
    """A Deferred resize that has held node capacity this long is released (see
    release_deferred)."""
    release_deferred: ReleaseDeferred = DEFAULT_RELEASE_DEFERRED
    """fit: shrink the ask to what the node has room for; allocated: back to what the
    kubelet allocated; never: hold it until room frees up."""

    def max_disrupted_for(self, replicas: int) -> int:
        """Pods that may be disrupted in one batch for a target of `replicas` pods:
        a percentage is rounded up; the result is at least 1."""
        value = self.max_disrupted
        if isinstance(value, int):
            return max(1, value)
        percent = Decimal(value.rstrip("%"))
        return max(1, math.ceil(Decimal(max(replicas, 0)) * percent / 100))


class OomRemediation(StrictModel):
    enabled: bool = True
    """Raise memory x1.2 on OOM kills (again every 2 minutes while they continue)."""
    stabilization_window: PositiveDuration | None = None
    """How long the raised floor holds; default max(forecast interval, 1h)."""
    outside_windows: bool = False
    """Let an OOM fix (the x1.2 memory raise of a pod OOM-killed in the last 10 minutes)
    act outside the maintenance windows; the budgets still count it."""

    def window_for(self, forecast_interval: float | None) -> float:
        """The hold time of an OOM floor: the configured window, else
        max(forecast_interval, 1h)."""
        if self.stabilization_window is not None:
            return self.stabilization_window
        return max(forecast_interval or 0.0, 3600.0)


class ResourceAmounts(StrictModel):
    cpu: CpuQuantity | None = None
    memory: MemoryQuantity | None = None


ThresholdType = Annotated[
    str,
    PlainValidator(one_of(("percent", "absolute"))),
    WithJsonSchema({"type": "string", "enum": ["percent", "absolute"]}),
]


def _check_threshold(kind: str, percent: object, absolute: object) -> None:
    if kind == "percent" and percent is None:
        raise ValueError("percent is required when type is percent")
    if kind == "absolute" and absolute is None:
        raise ValueError("absolute is required when type is absolute")


class VerticalThreshold(StrictModel):
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
        """The hysteresis rule of `foresize.core.api.hysteresis`, for one resource."""
        delta = abs(proposed - current)
        if self.type != "absolute" and current <= 0:
            return delta > 0
        limit = getattr(self.absolute, resource, None) if self.absolute else None
        return bool(clears(self.type, self.percent or 0.0, limit, current, delta))


class VerticalScalingBehavior(StrictModel):
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


class HorizontalThreshold(StrictModel):
    type: ThresholdType = "percent"
    percent: float | None = Field(default=None, ge=0, le=1000)
    absolute: int | None = Field(default=None, ge=0, le=REPLICAS_MAX)

    @model_validator(mode="after")
    def _given(self) -> HorizontalThreshold:
        _check_threshold(self.type, self.percent, self.absolute)
        return self

    def exceeded(self, current: int, proposed: int) -> bool:
        """The hysteresis rule of `foresize.core.api.hysteresis`, on replica counts."""
        delta = abs(proposed - current)
        if self.type != "absolute" and current <= 0:
            return delta > 0
        return bool(clears(self.type, self.percent or 0.0, self.absolute or 0, current, delta))


class HorizontalScalingBehavior(StrictModel):
    scale_up: HorizontalThreshold | None = None
    scale_down: HorizontalThreshold | None = None

    def is_significant(self, current: int, proposed: int) -> bool:
        if proposed == current:
            return False
        rule = self.scale_up if proposed > current else self.scale_down
        return True if rule is None else rule.exceeded(current, proposed)


class StartupSettle(StrictModel):
    """When a start-up boost's usage has settled: the pod is Ready and its last `samples`
    CPU usage samples since Ready (metrics-server polls) each show every boosted container
    under `below` times the CPU request it returns to. Usage never seen does not settle:
    `timeout` after Ready the boost ends anyway (a Warning Event says so)."""

    samples: int = Field(default=3, ge=1, le=20)
    """Consecutive usage samples under the level."""
    below: float = Field(default=1.0, gt=0, le=4)
    """The level, as a fraction of the unboosted CPU request."""
    timeout: PositiveDuration = 600.0
    """The longest the boost waits after Ready for usage to settle."""


class StartupBoost(StrictModel):
    """More CPU for a new pod while it starts (JIT, caches), then back to its suggestion
    by an in-place resize. Exactly one of `cpu_factor` and `cpu`."""

    cpu_factor: float | None = Field(default=None, gt=1, le=100)
    """The admitted CPU request (and limit, where set) times this."""
    cpu: CpuQuantity | None = None
    """The CPU request while starting, absolute (never below the admitted request)."""
    max_cpu: CpuQuantity | None = None
    """The boosted request never exceeds this (nor the container's cpu.upperbound)."""
    duration: PositiveDuration | None = None
    """How long the boost lasts from the pod's start; absent: until the pod is Ready (or,
    with `settle`, until its usage settles; `duration` then caps it)."""
    settle: StartupSettle | None = None
    """End the boost once the pod is Ready and its CPU usage has settled, not at Ready."""

    @model_validator(mode="after")
    def _one(self) -> StartupBoost:
        if (self.cpu_factor is None) == (self.cpu is None):
            raise ValueError("exactly one of cpu_factor and cpu must be set")
        return self


class RuntimePolicy(StrictModel):
    """What Foresize may do to a managed runtime's heap settings (docs/webhooks.md,
    "Heap settings"). Off by default: rewriting a process's flags is the owner's call."""

    keep_heap_consistent: bool = False
    """When the pod webhook writes a memory limit, rewrite an absolute heap setting the
    spec gives literally (-Xmx / -XX:MaxHeapSize, GOMEMLIMIT, DOTNET_GCHeapHardLimit) to
    the new limit minus the learned non-heap allowance, within half and twice the value
    written; a percentage (-XX:MaxRAMPercentage) already follows the limit and is left."""


HpaResourcePolicy: TypeAlias = Annotated[
    str, PlainValidator(one_of(HPA_RESOURCE_POLICIES)), enum_schema(HPA_RESOURCE_POLICIES)
]


class VerticalSpec(StrictModel):
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
    hpa_resource_policy: HpaResourcePolicy = DEFAULT_HPA_RESOURCE_POLICY
    """leave: do not change the request of a resource an HPA scales on; override: change
    it anyway; coordinate: choose that request and a replica floor together, so that at
    the forecast load the HPA's utilisation sits at its target (docs/horizontal.md)."""
    startup_boost: StartupBoost | None = None
    """More CPU at admission for the start-up period, then an in-place unboost."""
    runtime: RuntimePolicy | None = None
    """Managed runtimes' heap settings kept consistent with the limits written."""
    maintenance: Maintenance | None = None
    """Windows outside which disruptive actions (or all changes) wait (docs/windows.md)."""
    budgets: ChangeBudgets | None = None
    """Changes per workload per day, disruptions per namespace per hour (docs/windows.md)."""

    @model_validator(mode="after")
    def _unique(self) -> VerticalSpec:
        check_unique_containers(self.containers)
        return self


class HorizontalSpec(StrictModel):
    mode: ScalingMode = "recommendation"
    """autonomous, recommendation or observe (aliases auto, recommend, rec, observation)."""
    model: ModelOverride | None = None
    """Overrides of the target's model for horizontal scaling (only the fields given)."""
    minReplicas: int | None = Field(default=None, ge=1, le=REPLICAS_MAX)
    """Lower bound of predicted replicas (default: the HPA's)."""
    maxReplicas: int | None = Field(default=None, ge=1, le=REPLICAS_MAX)
    """Upper bound of predicted replicas (default: the HPA's)."""
    multipleOf: int | None = Field(default=None, ge=1, le=REPLICAS_MAX)
    """Round predicted replicas up to a multiple of this; exclusive with allowedReplicas."""
    allowedReplicas: Annotated[
        list[Annotated[int, Field(ge=0, le=REPLICAS_MAX)]] | None, AfterValidator(unique)
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
