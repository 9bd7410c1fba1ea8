"""The one read-model of a Foresize object (AIScaleTarget or DaemonSetAutoscaler): a flat,
read-only `TargetView` with the fields every decision needs — admission, lifecycle,
horizontal, the vertical disruption worker (`vertical.policy.policy_of` checks its
`errors`) and the recommender (`recommend.params.RecommendParams.from_view`).

The API models (`foresize.core.api.types`) are the source of truth; this module reads them
(or the equivalent plain manifest dicts, e.g. a YAML file loaded by `foresize webhook
--state`) tolerantly, so the decision code depends on a small stable shape rather than
on every detail of the CRD types. Quantities become canonical ints, durations float
seconds, modes their normalised names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from foresize.core.api.access import JSONValue
from foresize.core.api.access import first as get
from foresize.core.api.containers import ANY_CONTAINER, entry_for
from foresize.core.api.duration import parse_duration, parse_duration_field
from foresize.core.api.hysteresis import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, Threshold
from foresize.core.api.jobs import CRONJOB_UPDATE_MODE, RESIZING_MODES, RUNS_KINDS
from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.api.selectors import selector_matches
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
    SCALING_MODES,
    UPDATE_MODES,
    canonical_word,
)
from foresize.core.cluster.boost import BoostPolicy, Settle
from foresize.core.cluster.model import Suggestion
from foresize.core.cluster.snapshot import DsaObject, TargetObject
from foresize.core.cluster.target_fields import (
    AUTONOMOUS,
    RECOMMENDATION,
    RECREATE_MODES,
    SELECTOR_OPERATORS,
    ContainerPolicy,
    conditions_of,
    container_policies,
    epoch_seconds,
    metadata_of,
    normalise_kind,
    normalise_mode,
    normalise_update_mode,
    oom_floors,
    parse_max_disrupted,
    persisted_of,
    quantity,
    selector_of,
    shadow_policies,
    suggestion_from,
)
from foresize.core.cluster.view_memo import memoised
from foresize.core.cluster.windows import (
    BudgetPolicy,
    MaintenancePolicy,
    read_budgets,
    read_maintenance,
)
from foresize.core.errors import ForesizeError

if TYPE_CHECKING:
    from foresize.core.api.target import ShadowPolicy


@dataclass(frozen=True, slots=True)
class ResourceForecast:
    """How one resource (cpu or memory) is forecast: `model.mode`, its percentile and the
    buffer, with the target's per-metric overrides applied."""

    mode: str
    percentile_value: float | None = None
    buffer_percentage: float = 0.0


@dataclass(frozen=True, slots=True)
class ForecastSettings:
    """The vertical forecast model of an AIScaleTarget, as the recommender reads it."""

    forecast_blocks: float
    forecast_interval: float  # seconds between forecasts (forecast_blocks under a cron)
    min_lookback_to_scale: float
    cpu: ResourceForecast
    memory: ResourceForecast
    oom_stabilization_window: float


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
    vertical_mode: str = ""
    horizontal_mode: str = ""
    update_mode: str = "recreate"
    # Whether vertical autonomous mode may change the resource an HPA scales on
    # ("leave", the default, or "override"; architecture §3.2).
    hpa_resource_policy: str = DEFAULT_HPA_RESOURCE_POLICY
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
    labels: dict[str, str] = field(default_factory=dict)  # the target object's own labels
    # matchExpressions of a selector target: (key, operator, values).
    selector_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # The vertical disruption worker's settings (spec.vertical.disruption, update_policy,
    # scaling_behavior).
    recreate_resources: tuple[str, ...] = ("memory",)
    # update_policy.min_replicas: evict only while this many replicas are ready.
    eviction_min_replicas: int = DEFAULT_MIN_REPLICAS
    max_disrupted: int | str = DEFAULT_MAX_DISRUPTED
    disruption_interval: float = DEFAULT_INTERVAL
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    release_deferred_after: float = DEFAULT_RELEASE_DEFERRED_AFTER
    release_deferred: str = DEFAULT_RELEASE_DEFERRED  # fit | allocated | never
    scale_up: Threshold = DEFAULT_SCALE_UP
    scale_down: Threshold = DEFAULT_SCALE_DOWN
    oom_enabled: bool = True
    # spec.vertical.startup_boost (`cluster.boost`): None, no boost.
    startup_boost: BoostPolicy | None = None
    keep_heap_consistent: bool = False  # spec.vertical.runtime's (`admission.heap`)
    # spec.vertical.maintenance and budgets (`cluster.windows`): None, not set.
    maintenance: MaintenancePolicy | None = None
    budgets: BudgetPolicy | None = None
    # The recommender's model settings (None: read from a plain manifest dict).
    forecast: ForecastSettings | None = None
    # Problems found reading the spec, one line each naming the field. The tolerant users
    # (admission, lifecycle) read on; the vertical worker refuses the target.
    errors: tuple[str, ...] = ()
    # DaemonSetAutoscaler only.
    percentile: float = 90.0
    observation_window: float = 8 * 86400.0
    min_observation_window: float = 3 * 3600.0
    scale_interval: float = 15 * 60.0
    # What the controllers persisted in the status, read here and nowhere else:
    # `status.conditions` as plain dicts (`persisted` reads the rest).
    conditions: tuple[dict[str, JSONValue], ...] = ()
    # spec.shadow: the policies scored beside the target's own (`recommend.shadow`).
    shadows: tuple[ShadowPolicy, ...] = ()
    # The object this view was read from (the API model, or a manifest / watch dict).
    source: TargetObject | DsaObject | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def persisted(self, key: str) -> dict[str, JSONValue] | None:
        """What a controller persisted in `status.<key>` (`disruption`, `lifecycle`), as a
        plain dict; None when there is none."""
        return persisted_of(get(self.source, "status"), key)

    @property
    def vertical_autonomous(self) -> bool:
        return self.vertical_mode == AUTONOMOUS

    @property
    def coordinates(self) -> bool:
        """Vertical autonomous mode choosing the HPA's resource request and a replica
        floor together (`hpa_resource_policy: coordinate`)."""
        return self.vertical_autonomous and self.hpa_resource_policy == "coordinate"

    @property
    def horizontal_autonomous(self) -> bool:
        return self.horizontal_mode == AUTONOMOUS

    @property
    def permits_recreation(self) -> bool:
        return self.update_mode in RECREATE_MODES

    @property
    def has_selector(self) -> bool:
        return bool(self.selector or self.selector_expressions)

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a `selector` target selects a pod with `labels`: LabelSelector semantics
        (all of matchLabels and matchExpressions); an empty selector selects nothing, and
        so does one with an unknown operator (never every pod of a namespace by accident)."""
        if any(op not in SELECTOR_OPERATORS for _, op, _ in self.selector_expressions):
            return False
        return selector_matches(self.selector or {}, self.selector_expressions, labels)

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
            return ContainerPolicy(name=ANY_CONTAINER)
        return entry_for(self.containers, container)


def target_view(obj: TargetObject | TargetView) -> TargetView:
    """Read an AIScaleTarget (API model or manifest dict) into a `TargetView`. The view is
    shared between reads of an unchanged object: treat it as read-only."""
    if isinstance(obj, TargetView):
        return obj
    return memoised("AIScaleTarget", obj, _read_target)


def dsa_view(obj: DsaObject | TargetView) -> TargetView:
    """Read a DaemonSetAutoscaler (API model or manifest dict) into a `TargetView`. The
    view is shared between reads of an unchanged object: treat it as read-only."""
    if isinstance(obj, TargetView):
        return obj
    return memoised("DaemonSetAutoscaler", obj, _read_dsa)


def _read_target(obj: JSONValue) -> TargetView:
    namespace, name, uid, deleting, finalizers = metadata_of(obj)
    spec = get(obj, "spec", default={})
    status = get(obj, "status", default={})
    ref = get(spec, "scaleTargetRef", "scale_target_ref")
    vertical = get(spec, "vertical")
    horizontal = get(spec, "horizontal")
    h_status = get(status, "horizontal_suggestion", "horizontal")
    predicted = get(h_status, "replicas")
    allowed = get(horizontal, "allowedReplicas", "allowed_replicas", default=()) or ()
    until = get(get(h_status, "forecast_window"), "end")
    floors, floors_until = oom_floors(status)
    where = f"AIScaleTarget {namespace}/{name}"
    errors: list[str] = []
    selector, expressions = selector_of(get(spec, "selector"), where, errors)
    vertical_fields = _read_vertical(vertical, f"{where}: spec.vertical", errors)
    if normalise_kind(get(ref, "kind")) in RUNS_KINDS:
        # `api.jobs`: a CronJob's pods are sized at creation only, whatever a manifest
        # dict (not validated by the API types) says.
        if vertical_fields["update_mode"] in RESIZING_MODES:
            errors.append(
                f"{where}: spec.vertical.update_policy.update_mode: a CronJob's pods are "
                f"sized when they are created ({CRONJOB_UPDATE_MODE}), never resized or evicted"
            )
        vertical_fields["update_mode"] = CRONJOB_UPDATE_MODE
    labels = get(get(obj, "metadata", default={}), "labels", default={}) or {}
    return TargetView(
        kind="AIScaleTarget",
        namespace=namespace,
        name=name,
        uid=uid,
        ref_kind=normalise_kind(get(ref, "kind")),
        ref_name=str(get(ref, "name", default="")),
        selector=selector,
        selector_expressions=expressions,
        horizontal_mode=normalise_mode(get(horizontal, "mode")),
        containers=container_policies(get(vertical, "containers")),
        min_replicas=_int_or_none(get(horizontal, "minReplicas", "min_replicas")),
        max_replicas=_int_or_none(get(horizontal, "maxReplicas", "max_replicas")),
        multiple_of=_int_or_none(get(horizontal, "multipleOf", "multiple_of")),
        allowed_replicas=tuple(sorted(int(x) for x in allowed)),
        suggestion=suggestion_from(get(status, "vertical_suggestion", "vertical")),
        conditions=conditions_of(status),
        shadows=shadow_policies(spec),
        oom_floor=floors,
        oom_floor_until=floors_until,
        predicted_replicas=_int_or_none(predicted),
        prediction_until=epoch_seconds(until) if until is not None else None,
        deleting=deleting,
        finalizers=finalizers,
        labels={str(k): str(v) for k, v in dict(labels).items()},
        forecast=_forecast_settings(spec),
        errors=tuple(errors),
        source=obj,
        **vertical_fields,
    )


def _read_vertical(vertical: JSONValue, where: str, errors: list[str]) -> dict[str, Any]:
    """spec.vertical's modes, update policy, disruption pacing and hysteresis. A bad field
    is recorded in `errors` (one line naming it) and read as its default."""
    out: dict[str, Any] = {}
    mode_raw = get(vertical, "mode")
    out["vertical_mode"] = normalise_mode(mode_raw)
    if mode_raw is not None and out["vertical_mode"] not in SCALING_MODES:
        errors.append(f"{where}.mode: unknown mode {out['vertical_mode']!r}")
    update_policy = get(vertical, "update_policy", "updatePolicy")
    update_raw = get(update_policy, "update_mode", "updateMode", default="recreate")
    update_mode = normalise_update_mode(update_raw)
    if update_mode is None:
        errors.append(
            f"{where}.update_policy.update_mode: unknown {str(update_raw)!r}"
            f" (one of {UPDATE_MODES})"
        )
    out["update_mode"] = update_mode or "recreate"
    recreate = get(update_policy, "recreate_resources", default=None)
    if recreate is None:
        recreate = get(vertical, "recreate_resources", default=["memory"])
    out["recreate_resources"] = tuple(str(r) for r in recreate)
    min_ready = get(update_policy, "min_replicas", "minReplicas", default=DEFAULT_MIN_REPLICAS)
    if isinstance(min_ready, bool) or not isinstance(min_ready, int) or min_ready < 1:
        errors.append(f"{where}.update_policy.min_replicas: expected an integer >= 1")
    else:
        out["eviction_min_replicas"] = min_ready
    hpa_raw = get(
        vertical, "hpa_resource_policy", "hpaResourcePolicy", default=DEFAULT_HPA_RESOURCE_POLICY
    )
    hpa_policy = canonical_word(hpa_raw, HPA_RESOURCE_POLICIES)
    if hpa_policy is None:
        errors.append(
            f"{where}.hpa_resource_policy: expected one of {', '.join(HPA_RESOURCE_POLICIES)}"
        )
    out["hpa_resource_policy"] = hpa_policy or DEFAULT_HPA_RESOURCE_POLICY
    disruption = get(vertical, "disruption")
    d = f"{where}.disruption"
    readers: list[tuple[str, Any]] = [
        (
            "max_disrupted",
            lambda: parse_max_disrupted(
                get(disruption, "max_disrupted", "maxDisrupted"), f"{d}.max_disrupted"
            ),
        ),
        (
            "disruption_interval",
            lambda: (
                parse_duration_field(
                    get(disruption, "interval", default=DEFAULT_INTERVAL), f"{d}.interval"
                )
                or 0.0
            ),
        ),
        (
            "stall_timeout",
            lambda: (
                parse_duration_field(
                    get(disruption, "stall_timeout", "stallTimeout", default=DEFAULT_STALL_TIMEOUT),
                    f"{d}.stall_timeout",
                )
                or 0.0
            ),
        ),
        (
            "release_deferred_after",
            lambda: (
                parse_duration_field(
                    get(
                        disruption,
                        "release_deferred_after",
                        "releaseDeferredAfter",
                        default=DEFAULT_RELEASE_DEFERRED_AFTER,
                    ),
                    f"{d}.release_deferred_after",
                )
                or DEFAULT_RELEASE_DEFERRED_AFTER
            ),
        ),
        (
            "release_deferred",
            lambda: _release_deferred(
                get(disruption, "release_deferred", "releaseDeferred"), f"{d}.release_deferred"
            ),
        ),
    ]
    behavior = get(vertical, "scaling_behavior", "scalingBehavior")
    sb = f"{where}.scaling_behavior"
    for key, names, default in (
        ("scale_up", ("scale_up", "scaleUp"), DEFAULT_SCALE_UP),
        ("scale_down", ("scale_down", "scaleDown"), DEFAULT_SCALE_DOWN),
    ):
        readers.append((key, partial(_threshold, get(behavior, *names), f"{sb}.{key}", default)))
    readers.append(("maintenance", partial(read_maintenance, vertical, where)))
    readers.append(("budgets", partial(read_budgets, vertical, where)))
    for key, read in readers:
        try:
            out[key] = read()
        except ForesizeError as exc:
            errors.append(str(exc))
    remediation = get(vertical, "oom_remediation", "oomRemediation")
    out["oom_enabled"] = bool(get(remediation, "enabled", default=True))
    out["keep_heap_consistent"] = get(get(vertical, "runtime"), "keep_heap_consistent") is True
    boost = get(vertical, "startup_boost", "startupBoost")
    if boost is not None:
        try:
            out["startup_boost"] = _boost_policy(boost, f"{where}.startup_boost")
        except (ForesizeError, ValueError, TypeError) as exc:
            errors.append(str(exc))
    return out


def _release_deferred(raw: JSONValue, where: str) -> str:
    """spec.vertical.disruption.release_deferred: fit, allocated or never."""
    if raw is None:
        return DEFAULT_RELEASE_DEFERRED
    value = canonical_word(raw, RELEASE_DEFERRED)
    if value is None:
        raise ForesizeError(f"{where}: expected one of {', '.join(RELEASE_DEFERRED)}, not {raw!r}")
    return value


def _boost_policy(boost: JSONValue, where: str) -> BoostPolicy:
    """spec.vertical.startup_boost (an API model or a plain manifest dict)."""
    factor = get(boost, "cpu_factor", "cpuFactor")
    cpu = get(boost, "cpu")
    if (factor is None) == (cpu is None):
        raise ForesizeError(f"{where}: exactly one of cpu_factor and cpu must be set")
    if factor is not None and (
        isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 < factor <= 100
    ):
        raise ForesizeError(f"{where}.cpu_factor: expected a number above 1, at most 100")
    return BoostPolicy(
        factor=float(factor) if factor is not None else None,
        cpu=quantity(CPU, cpu),
        max_cpu=quantity(CPU, get(boost, "max_cpu", "maxCpu")),
        duration=parse_duration_field(get(boost, "duration"), f"{where}.duration"),
        settle=_settle(get(boost, "settle"), f"{where}.settle"),
    )


def _settle(raw: JSONValue, where: str) -> Settle | None:
    """startup_boost.settle (absent: the boost does not wait for usage to settle)."""
    if raw is None:
        return None
    default = Settle()
    samples = get(raw, "samples")
    below = get(raw, "below")
    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 20
    ):
        raise ForesizeError(f"{where}.samples: expected a whole number from 1 to 20")
    if below is not None and (
        isinstance(below, bool) or not isinstance(below, int | float) or not 0 < below <= 4
    ):
        raise ForesizeError(f"{where}.below: expected a number above 0, at most 4")
    timeout = parse_duration_field(get(raw, "timeout"), f"{where}.timeout")
    if timeout is not None and timeout <= 0:
        raise ForesizeError(f"{where}.timeout: expected a duration above zero")
    return Settle(
        samples=int(samples) if samples is not None else default.samples,
        below=float(below) if below is not None else default.below,
        timeout=timeout if timeout is not None else default.timeout,
    )


def _threshold(obj: JSONValue, field_name: str, default: Threshold) -> Threshold:
    """One scaling_behavior direction; a direction not given uses the API's documented
    default (the recommender applies the same), so the planner never churns pods over
    changes the recommender would not make."""
    if obj is None:
        return default
    kind = str(get(obj, "type", default="percent")).lower()
    if kind not in ("percent", "absolute"):
        raise ForesizeError(f"{field_name}.type: expected percent or absolute, got {kind!r}")
    percent = float(get(obj, "percent", "percentage", default=0.0))
    absolute_raw = get(obj, "absolute")
    absolute: list[tuple[str, int]] = []
    for resource in (CPU, MEMORY):
        amount = get(absolute_raw, resource)
        if amount is not None:
            try:
                canonical = quantity(resource, amount)
            except ValueError as exc:
                raise ForesizeError(f"{field_name}.absolute.{resource}: {exc}") from None
            absolute.append((resource, int(canonical or 0)))
    return Threshold(kind, percent, tuple(absolute))


def _forecast_settings(spec: JSONValue) -> ForecastSettings | None:
    """The vertical forecast model, from an API model's spec (its merge rules for
    per-direction and per-metric overrides live on the API types)."""
    if not hasattr(spec, "effective_model"):
        return None
    model = spec.effective_model("vertical")
    per = {}
    for resource in (CPU, MEMORY):
        m = model.for_metric(resource)
        per[resource] = ResourceForecast(m.mode, m.percentile_value, m.forecast_buffer_percentage)
    cadence = model.cadence_seconds or model.forecast_blocks
    return ForecastSettings(
        forecast_blocks=float(model.forecast_blocks),
        forecast_interval=float(cadence),
        min_lookback_to_scale=float(model.min_lookback_to_scale),
        cpu=per[CPU],
        memory=per[MEMORY],
        oom_stabilization_window=float(spec.oom_stabilization_window()),
    )


def _read_dsa(obj: JSONValue) -> TargetView:
    namespace, name, uid, deleting, finalizers = metadata_of(obj)
    spec = get(obj, "spec", default={})
    status = get(obj, "status", default={})
    ref = get(spec, "scaleTargetRef", "scale_target_ref")
    suggestion = suggestion_from(get(status, "suggestion", default=None))
    where = f"DaemonSetAutoscaler {namespace}/{name}: spec"
    try:
        maintenance = read_maintenance(spec, where)
    except ForesizeError as exc:
        # A field the API would refuse, read from a manifest dict: no window can be
        # trusted, so every window-guarded resize is held and the status says why.
        maintenance = MaintenancePolicy((), problems=(str(exc),))
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
        conditions=conditions_of(status),
        deleting=deleting,
        finalizers=finalizers,
        percentile=float(get(spec, "percentile", default=90.0)),
        observation_window=parse_duration(
            get(spec, "observationWindow", "observation_window", default=8 * 86400.0)
        ),
        min_observation_window=parse_duration(
            get(spec, "minObservationWindow", "min_observation_window", default=3 * 3600.0)
        ),
        scale_interval=parse_duration(get(spec, "scaleInterval", "scale_interval", default=900.0)),
        maintenance=maintenance,
        source=obj,
    )


def _int_or_none(value: JSONValue) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)
