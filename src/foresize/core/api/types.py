"""The Foresize API (group `foresize.io`, version `v1`) as pydantic v2 models.

One source of truth: the operator, the webhooks, the simulator and the CRD YAML (generated
from these models by `foresize.core.api.crd`) all read these types.

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

The models live in one module per object: `fields` (units, enumerations, bases), `meta`
(metadata, references, selectors), `model` (forecast settings), `policy` (vertical and
horizontal policies), `maintenance` (windows and change budgets), `target`
(AIScaleTarget), `daemonset`, `template` (ClusterAIScaleTemplate), `cluster_policy`
(ClusterAIScalePolicy, its named `presets`, merged by `hierarchy`) and `load` (parsing
with errors naming the field). This module re-exports them: import the API from here.
"""

from __future__ import annotations

from foresize.core.api.cluster_policy import (
    DEFAULT_POLICY,
    POLICY_LABEL,
    ClusterAIScalePolicy,
    ClusterAIScalePolicySpec,
    ClusterAIScalePolicyStatus,
)
from foresize.core.api.daemonset import (
    DaemonSetAutoscaler,
    DaemonSetAutoscalerSpec,
    DaemonSetAutoscalerStatus,
)
from foresize.core.api.duration import format_duration, parse_duration
from foresize.core.api.fields import (
    API_VERSION,
    CRON_PATTERN,
    DEFAULT_API_VERSIONS,
    GROUP,
    QUANTITY_PATTERN,
    SYSTEM_NAMESPACES,
    VERSION,
    WORKLOAD_KINDS,
    AIScaleTargetKind,
    ClusterAIScalePolicyKind,
    ClusterAIScaleTemplateKind,
    CpuQuantity,
    CronSchedule,
    DaemonSetAutoscalerKind,
    Duration,
    ForecastMode,
    MemoryQuantity,
    PositiveDuration,
    ResourceMap,
    ScalingMode,
    Timestamp,
    UpdateMode,
    format_timestamp,
    normalize_scaling_mode,
    parse_timestamp,
)
from foresize.core.api.load import (
    KINDS,
    format_validation_error,
    parse_daemonset_autoscaler,
    parse_object,
    parse_policy,
    parse_target,
    parse_template,
)
from foresize.core.api.maintenance import ChangeBudgets, Maintenance, MaintenanceWindow
from foresize.core.api.meta import (
    APIObject,
    DaemonSetRef,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    ScaleTargetRef,
)
from foresize.core.api.model import (
    MIN_LOOKBACK_FLOOR,
    MetricModelOverride,
    MetricOverrides,
    ModelOverride,
    ModelSpec,
)
from foresize.core.api.policy import (
    MAX_DISRUPTED_PATTERN,
    ContainerPolicy,
    CpuPolicy,
    DisruptionPolicy,
    HorizontalScalingBehavior,
    HorizontalSpec,
    HorizontalThreshold,
    HpaResourcePolicy,
    LimitPolicy,
    MaxDisrupted,
    MemoryPolicy,
    OomRemediation,
    ResourceAmounts,
    RuntimePolicy,
    StartupBoost,
    StartupSettle,
    ThresholdType,
    UpdatePolicy,
    VerticalScalingBehavior,
    VerticalSpec,
    VerticalThreshold,
)
from foresize.core.api.quantity import cpu_millis, to_bytes
from foresize.core.api.target import (
    AIScaleTarget,
    AIScaleTargetSpec,
    AIScaleTargetStatus,
    CircuitBreakerStatus,
    Condition,
    ContainerExplanation,
    ContainerSuggestion,
    CoordinationStatus,
    ExplanationStep,
    ForecastWindow,
    HorizontalSuggestion,
    OomFloor,
    PolicyField,
    PolicyStatus,
    ShadowPolicy,
    TargetExplanation,
    VerticalSuggestion,
)
from foresize.core.api.template import (
    ClusterAIScaleTemplate,
    ClusterAIScaleTemplateSpec,
    ClusterAIScaleTemplateStatus,
    NamespaceName,
    TargetTemplate,
    TargetTemplateMeta,
    TargetTemplateSpec,
)

__all__ = [
    "API_VERSION",
    "CRON_PATTERN",
    "DEFAULT_API_VERSIONS",
    "DEFAULT_POLICY",
    "GROUP",
    "KINDS",
    "MAX_DISRUPTED_PATTERN",
    "MIN_LOOKBACK_FLOOR",
    "POLICY_LABEL",
    "QUANTITY_PATTERN",
    "SYSTEM_NAMESPACES",
    "VERSION",
    "WORKLOAD_KINDS",
    "AIScaleTarget",
    "AIScaleTargetKind",
    "AIScaleTargetSpec",
    "AIScaleTargetStatus",
    "APIObject",
    "ChangeBudgets",
    "CircuitBreakerStatus",
    "ClusterAIScalePolicy",
    "ClusterAIScalePolicyKind",
    "ClusterAIScalePolicySpec",
    "ClusterAIScalePolicyStatus",
    "ClusterAIScaleTemplate",
    "ClusterAIScaleTemplateKind",
    "ClusterAIScaleTemplateSpec",
    "ClusterAIScaleTemplateStatus",
    "Condition",
    "ContainerExplanation",
    "ContainerPolicy",
    "ContainerSuggestion",
    "CoordinationStatus",
    "CpuPolicy",
    "CpuQuantity",
    "CronSchedule",
    "DaemonSetAutoscaler",
    "DaemonSetAutoscalerKind",
    "DaemonSetAutoscalerSpec",
    "DaemonSetAutoscalerStatus",
    "DaemonSetRef",
    "DisruptionPolicy",
    "Duration",
    "ExplanationStep",
    "ForecastMode",
    "ForecastWindow",
    "HorizontalScalingBehavior",
    "HorizontalSpec",
    "HorizontalSuggestion",
    "HorizontalThreshold",
    "HpaResourcePolicy",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LimitPolicy",
    "Maintenance",
    "MaintenanceWindow",
    "MaxDisrupted",
    "MemoryPolicy",
    "MemoryQuantity",
    "MetricModelOverride",
    "MetricOverrides",
    "ModelOverride",
    "ModelSpec",
    "NamespaceName",
    "ObjectMeta",
    "OomFloor",
    "OomRemediation",
    "PolicyField",
    "PolicyStatus",
    "PositiveDuration",
    "ResourceAmounts",
    "ResourceMap",
    "RuntimePolicy",
    "ScaleTargetRef",
    "ScalingMode",
    "ShadowPolicy",
    "StartupBoost",
    "StartupSettle",
    "TargetExplanation",
    "TargetTemplate",
    "TargetTemplateMeta",
    "TargetTemplateSpec",
    "ThresholdType",
    "Timestamp",
    "UpdateMode",
    "UpdatePolicy",
    "VerticalScalingBehavior",
    "VerticalSpec",
    "VerticalSuggestion",
    "VerticalThreshold",
    "cpu_millis",
    "format_duration",
    "format_timestamp",
    "format_validation_error",
    "normalize_scaling_mode",
    "parse_daemonset_autoscaler",
    "parse_duration",
    "parse_object",
    "parse_policy",
    "parse_target",
    "parse_template",
    "parse_timestamp",
    "to_bytes",
]
