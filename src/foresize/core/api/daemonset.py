"""DaemonSetAutoscaler: right-sizing of a DaemonSet's pods from their observed usage."""

from __future__ import annotations

from typing import ClassVar

from pydantic import (
    Field,
    model_validator,
)

from foresize.core.api.fields import (
    DaemonSetAutoscalerKind,
    OpenModel,
    PositiveDuration,
    ScalingMode,
    StrictModel,
)
from foresize.core.api.maintenance import Maintenance
from foresize.core.api.meta import APIObject, DaemonSetRef
from foresize.core.api.policy import ContainerPolicy, check_unique_containers
from foresize.core.api.target import Condition, VerticalSuggestion


class DaemonSetAutoscalerSpec(StrictModel):
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
    maintenance: Maintenance | None = None
    """Windows outside which running pods are not resized: with restrict: disruptive (the
    default) a resize that restarts a container waits for a window, with restrict: all
    every resize does. New pods are still seeded at admission."""

    @model_validator(mode="after")
    def _cross_fields(self) -> DaemonSetAutoscalerSpec:
        check_unique_containers(self.containers)
        if self.minObservationWindow > self.observationWindow:
            raise ValueError("minObservationWindow must not exceed observationWindow")
        return self


class DaemonSetAutoscalerStatus(OpenModel):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    hasEnoughDataToScale: bool | None = None
    suggestion: VerticalSuggestion | None = None
    pods_resized: int = 0
    pods_seeded: int = 0
    pods_stalled: int = 0

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class DaemonSetAutoscaler(APIObject):
    """Seeds and resizes the pods of one DaemonSet from a percentile of their usage."""

    KIND: ClassVar[str] = DaemonSetAutoscalerKind
    spec: DaemonSetAutoscalerSpec
    status: DaemonSetAutoscalerStatus = Field(default_factory=DaemonSetAutoscalerStatus)
