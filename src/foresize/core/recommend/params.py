"""What a recommendation needs from an AIScaleTarget: per-resource modes, bounds,
hysteresis and the OOM settings (`RecommendParams`, built from the target's read-model)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from foresize.core.api.containers import entry_for
from foresize.core.api.hysteresis import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, Threshold
from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.snapshot import TargetObject
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.cluster.target_fields import ContainerPolicy
from foresize.core.errors import ForesizeError
from foresize.core.recommend.core import (
    DEFAULT_MODE,
    DEFAULT_STABILIZATION,
    memory_holds,
    mode_quantile,
)

RESOURCES = (CPU, MEMORY)
"""The resources a recommendation sizes, in the order it sizes them."""


@dataclass(frozen=True, slots=True)
class ResourceModel:
    mode: str = DEFAULT_MODE
    percentile_value: float | None = None
    buffer_percentage: float = 0.0

    def quantile(self, resource: str) -> float:
        return mode_quantile(self.mode, resource, self.percentile_value)


@dataclass(frozen=True, slots=True)
class RecommendParams:
    """Everything the recommendation needs from an AIScaleTarget (or a test)."""

    uid: str = ""
    forecast_blocks: float = 900.0
    forecast_interval: float = 900.0
    cpu: ResourceModel = field(default_factory=ResourceModel)
    memory: ResourceModel = field(default_factory=ResourceModel)
    min_lookback_to_scale: float = 86400.0
    containers: tuple[ContainerPolicy, ...] = ()
    scale_up: Mapping[str, Threshold] = field(
        default_factory=lambda: {CPU: DEFAULT_SCALE_UP, MEMORY: DEFAULT_SCALE_UP}
    )
    scale_down: Mapping[str, Threshold] = field(
        default_factory=lambda: {CPU: DEFAULT_SCALE_DOWN, MEMORY: DEFAULT_SCALE_DOWN}
    )
    oom_enabled: bool = True
    stabilization_window: float = DEFAULT_STABILIZATION
    # The memory ratchet's window (seconds; 0 = off). None: the memory mode's own hold
    # (`memory_holds`), never shorter than the OOM stabilization window.
    memory_stabilization: float | None = None
    # Memory risk allocated across the batch (`allocate_risk`); off for forecasts that
    # are not one container's request (a workload's total for the horizontal planner).
    allocate_memory_risk: bool = True

    def model(self, resource: str) -> ResourceModel:
        return self.cpu if resource == CPU else self.memory

    def memory_holds(self) -> tuple[float, float]:
        """(the memory ratchet's window, the kill memory) in seconds: the memory mode's
        (`foresize.core.recommend.core.memory_holds`), the ratchet never shorter than the OOM
        stabilization window, or `memory_stabilization` when given."""
        ratchet, kill = memory_holds(self.memory.quantile(MEMORY))
        if self.memory_stabilization is not None:
            return self.memory_stabilization, kill
        return max(ratchet, self.stabilization_window), kill

    def bounds(self, container: str) -> ContainerPolicy:
        """The container's bounds: its own entry, else `*`, else none."""
        return entry_for(self.containers, container) or ContainerPolicy(container)

    @classmethod
    def from_target(cls, target: TargetObject) -> RecommendParams:
        """From an `foresize.core.api.types.AIScaleTarget`, through its read-model."""
        return cls.from_view(target_view(target))

    @classmethod
    def from_view(cls, view: TargetView) -> RecommendParams:
        """From the target's read-model (`foresize.core.cluster.target.TargetView`)."""
        forecast = view.forecast
        if forecast is None:
            raise ForesizeError(
                f"{view.kind} {view.key}: the recommendation needs the API model, not a"
                " plain manifest"
            )
        per = {
            r: ResourceModel(m.mode, m.percentile_value, m.buffer_percentage)
            for r, m in ((CPU, forecast.cpu), (MEMORY, forecast.memory))
        }
        return cls(
            uid=view.uid,
            forecast_blocks=forecast.forecast_blocks,
            forecast_interval=forecast.forecast_interval,
            cpu=per[CPU],
            memory=per[MEMORY],
            min_lookback_to_scale=forecast.min_lookback_to_scale,
            containers=view.containers,
            scale_up={r: view.scale_up for r in RESOURCES},
            scale_down={r: view.scale_down for r in RESOURCES},
            oom_enabled=view.oom_enabled,
            stabilization_window=forecast.oom_stabilization_window,
        )
