"""AIScaleTarget: its spec (shared with the template's target template), its status and
the object."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from foresize.core.api.containers import entry_for
from foresize.core.api.fields import (
    REPLICAS_MAX,
    AIScaleTargetKind,
    Duration,
    MemoryQuantity,
    OpenModel,
    ResourceMap,
    StrictModel,
    Timestamp,
    error_message,
)
from foresize.core.api.jobs import RUNS_KINDS, cronjob_target_problem
from foresize.core.api.meta import APIObject, LabelSelector, ScaleTargetRef
from foresize.core.api.model import ModelOverride, ModelSpec
from foresize.core.api.names import dns_label_error, dns_subdomain_error
from foresize.core.api.policy import HorizontalSpec, OomRemediation, VerticalSpec
from foresize.core.api.quantity import format_resource_map


class ScalingSpec(StrictModel):
    """What AIScaleTarget and a ClusterAIScaleTemplate's target template share."""

    policy: str | None = Field(default=None, max_length=253)
    """A ClusterAIScalePolicy this spec starts from: its preset and fields apply under the
    fields given here, above the namespace's and the cluster's default (docs/policies.md)."""
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
        if self.policy is not None and (problem := dns_subdomain_error(self.policy)):
            raise ValueError(f"policy: {problem}")
        if self.vertical_autonomous and self.horizontal_autonomous:
            raise ValueError("only one of vertical.mode and horizontal.mode may be autonomous")
        for direction in ("vertical", "horizontal"):
            section = getattr(self, direction)
            if section is not None and section.model is not None:
                try:
                    self.effective_model(direction)
                except ValidationError as exc:
                    problems = "; ".join(error_message(e) for e in exc.errors())
                    raise ValueError(f"{direction}.model (merged with model): {problems}") from None


MAX_SHADOW_POLICIES = 4
"""A target runs at most 4 shadow policies: each is one more forecast of every container
per pass (the operator's pass time grows with them)."""
ACTIVE_POLICY = "active"
"""`status.shadow` scores the target's own policy under this name, beside its shadows."""


class ShadowPolicy(StrictModel):
    """A policy run in shadow on the target's live history (issue 24): what it would have
    requested, scored against the usage that came (`status.shadow`); it never acts."""

    name: str
    """A DNS label naming the shadow in status and metrics (not `active`)."""
    model: ModelOverride
    """The fields of `model` this policy changes (mode, percentile_value,
    forecast_buffer_percentage, ...), over the target's effective vertical model."""

    @model_validator(mode="after")
    def _check(self) -> ShadowPolicy:
        problem = dns_label_error(self.name)
        if problem:
            raise ValueError(f"name: {problem}")
        if self.name == ACTIVE_POLICY:
            raise ValueError(f"name: {ACTIVE_POLICY!r} is the target's own policy in status")
        return self


class AIScaleTargetSpec(ScalingSpec):
    scaleTargetRef: ScaleTargetRef | None = None
    """The workload (Deployment, StatefulSet, Argo Rollout, CronJob); exclusive with selector."""
    selector: LabelSelector | None = None
    """Pods by label (vertical only); exclusive with scaleTargetRef."""
    shadow: list[ShadowPolicy] = Field(default_factory=list, max_length=MAX_SHADOW_POLICIES)
    """Policies run in shadow on the same history and scored in `status.shadow`."""

    @model_validator(mode="after")
    def _cross_fields(self) -> AIScaleTargetSpec:
        if (self.scaleTargetRef is None) == (self.selector is None):
            raise ValueError("exactly one of scaleTargetRef or selector must be set")
        if self.selector is not None and self.horizontal is not None:
            raise ValueError("horizontal needs scaleTargetRef (a selector is vertical only)")
        if self.scaleTargetRef is not None and self.scaleTargetRef.kind in RUNS_KINDS:
            problem = cronjob_target_problem(self.vertical, self.horizontal)
            if problem is not None:
                raise ValueError(problem)
        names = [p.name for p in self.shadow]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"shadow: the names {', '.join(twice)} are given more than once")
        for i, policy in enumerate(self.shadow):
            try:
                self.effective_model("vertical").merged(policy.model)
            except ValidationError as exc:
                problems = "; ".join(error_message(e) for e in exc.errors())
                raise ValueError(f"shadow[{i}].model (merged with model): {problems}") from None
        self._check_scaling()
        return self


class Condition(OpenModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    lastTransitionTime: Timestamp | None = None
    observedGeneration: int | None = None


class ForecastWindow(OpenModel):
    start: Timestamp
    end: Timestamp


class ContainerSuggestion(OpenModel):
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
                "requests": format_resource_map(requests),
                "limits": format_resource_map(limits or {}),
            }
        )


class VerticalSuggestion(OpenModel):
    uid: str
    containers: list[ContainerSuggestion] = Field(default_factory=list)
    forecast_window: ForecastWindow | None = None
    forecast_error: float | None = None
    created_at: Timestamp | None = None

    def for_container(self, name: str) -> ContainerSuggestion | None:
        return entry_for(self.containers, name)


class HorizontalSuggestion(OpenModel):
    uid: str = ""
    replicas: int = Field(ge=0, le=REPLICAS_MAX)
    forecast_window: ForecastWindow | None = None
    forecast_error: float | None = None
    created_at: Timestamp | None = None


class OomFloor(OpenModel):
    """A raised memory floor after OOM kills: never go below `memory` until `until`."""

    container: str
    memory: MemoryQuantity
    since: Timestamp | None = None
    until: Timestamp | None = None
    last_oom: Timestamp | None = None
    oom_count: int = 0


class CircuitBreakerStatus(OpenModel):
    state: Literal["closed", "open", "half_open"] = "closed"
    suggestion_uid: str | None = None
    no_progress_cycles: int = 0
    opened_at: Timestamp | None = None
    retry_at: Timestamp | None = None
    backoff: Duration | None = None


class CoordinationStatus(OpenModel):
    """The coordinated mode's last decision (`hpa_resource_policy: coordinate`)."""

    state: Literal["Coordinated", "Waiting", "Ignored"]
    """Coordinated: the pair below is published; Waiting: no forecast of the workload's
    total yet, the HPA's resource left as it is; Ignored: the HPA cannot be coordinated
    with (the reason says what was ignored and why), its resource is left alone."""
    hpa: str
    """The HorizontalPodAutoscaler (or the ScaledObject behind a KEDA HPA)."""
    resource: str | None = None
    replicas: int | None = Field(default=None, ge=0, le=REPLICAS_MAX)
    """The replica floor published in horizontal_suggestion."""
    request: str | None = None
    """The per-pod request of `resource` (summed over its containers)."""
    forecast_total: str | None = None
    """The forecast of the workload's total usage of `resource` over the horizon."""
    reason: str = ""
    decided_at: Timestamp | None = None


class ExplanationStep(OpenModel):
    """One rule's contribution to a request (`foresize.core.recommend.explain.Step`)."""

    step: str
    resource: Literal["cpu", "memory"]
    value: float | None = None
    """The value this rule handed on: CPU millicores, memory bytes."""
    why: str = ""


class ContainerExplanation(OpenModel):
    name: str
    steps: list[ExplanationStep] = Field(default_factory=list)


class TargetExplanation(OpenModel):
    """Why each request of `vertical_suggestion` is what it is: per container, the steps
    the recommendation took, recorded as it computed; the last step of each resource is
    the request suggested (`foresize explain` prints it)."""

    created_at: Timestamp | None = None
    containers: list[ContainerExplanation] = Field(default_factory=list)


class PolicyField(OpenModel):
    """One field of the effective policy: its value (as written in a manifest) and the
    level it came from (`foresize.core.api.hierarchy`: `default`, `cluster/policy:NAME`,
    `namespace/policy:NAME`, `workload/policy:NAME`, each optionally `/preset:NAME`, or
    `target`)."""

    value: str
    source: str


class PolicyStatus(OpenModel):
    """The policy in force for the target (`status.policy`): the levels applied, lowest
    first, and every field of the effective spec with where its value came from."""

    chain: list[str] = Field(default_factory=list)
    fields: dict[str, PolicyField] = Field(default_factory=dict)
    kept: list[str] = Field(default_factory=list)
    """Local bounds kept over a conflicting bound from a level above, one line each."""
    problems: list[str] = Field(default_factory=list)
    """Levels left out (unknown policy or preset, a cycle, an invalid merge), one line each."""


class AIScaleTargetStatus(OpenModel):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    hasEnoughDataToScale: bool | None = None
    vertical_suggestion: VerticalSuggestion | None = None
    horizontal_suggestion: HorizontalSuggestion | None = None
    coordination: CoordinationStatus | None = None
    explanation: TargetExplanation | None = None
    oom_floors: list[OomFloor] = Field(default_factory=list)
    pods_resized: int = 0
    pods_evicted: int = 0
    pods_stalled: int = 0
    circuit_breaker: CircuitBreakerStatus | None = None
    policy: PolicyStatus | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class AIScaleTarget(APIObject):
    """Forecast-driven vertical and/or horizontal scaling of one workload (or pod selector)."""

    KIND: ClassVar[str] = AIScaleTargetKind
    spec: AIScaleTargetSpec
    status: AIScaleTargetStatus = Field(default_factory=AIScaleTargetStatus)
