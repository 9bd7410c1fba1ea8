"""Forecast model settings (`spec.model` and its per-direction, per-metric overrides)."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from foresize.core.api.duration import (
    format_duration,
)
from foresize.core.api.fields import (
    CronSchedule,
    Duration,
    ForecastMode,
    PositiveDuration,
    StrictModel,
)


class MetricModelOverride(StrictModel):
    """Per-metric (`model.metrics.cpu` / `.memory`) overrides of the forecast settings."""

    mode: ForecastMode | None = None
    percentile_value: float | None = Field(default=None, gt=0, le=100)
    forecast_buffer_percentage: float | None = Field(default=None, ge=0, le=1000)

    @model_validator(mode="after")
    def _percentile(self) -> MetricModelOverride:
        _check_percentile(self.mode, self.percentile_value)
        return self


class MetricOverrides(StrictModel):
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


class ModelSpec(StrictModel):
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


class ModelOverride(StrictModel):
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
