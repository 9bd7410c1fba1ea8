"""ClusterAIScalePolicy: a named, cluster-scoped policy (a preset and/or vertical and
horizontal settings) that AIScaleTargets inherit through the hierarchy
(`foresize.core.api.hierarchy`, docs/policies.md): the policy named `default` applies to
every target, a Namespace labelled `foresize.io/policy: NAME` gives its targets NAME, a
target's `spec.policy: NAME` names its own; the target's fields win over all of them."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, PlainValidator, model_validator

from foresize.core.api.fields import (
    ClusterAIScalePolicyKind,
    OpenModel,
    enum_schema,
    one_of,
)
from foresize.core.api.meta import APIObject
from foresize.core.api.presets import PRESET_NAMES
from foresize.core.api.target import Condition, ScalingSpec

DEFAULT_POLICY = "default"
"""The ClusterAIScalePolicy of this name is the cluster's default: one name, so there can
never be two defaults to choose between (StorageClass's is-default annotation can mark
several and Kubernetes then picks one by age)."""

POLICY_LABEL = "foresize.io/policy"
"""The Namespace label naming its ClusterAIScalePolicy (docs/policies.md: why a label)."""

PresetName = Annotated[str, PlainValidator(one_of(PRESET_NAMES)), enum_schema(PRESET_NAMES)]


class ClusterAIScalePolicySpec(ScalingSpec):
    """What the policy sets: a named preset, the policy it starts from (`policy`), and the
    same `model`, `vertical` and `horizontal` fields as an AIScaleTarget (only the fields
    given here apply; the others come from the level above)."""

    preset: PresetName | None = None
    """cost, balanced, performance or batch: laid under this policy's own fields."""

    @model_validator(mode="after")
    def _cross_fields(self) -> ClusterAIScalePolicySpec:
        self._check_scaling()
        return self


class ClusterAIScalePolicyStatus(OpenModel):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)


class ClusterAIScalePolicy(APIObject):
    """A named policy AIScaleTargets inherit: cluster default, per namespace, per target."""

    KIND: ClassVar[str] = ClusterAIScalePolicyKind
    spec: ClusterAIScalePolicySpec
    status: ClusterAIScalePolicyStatus = Field(default_factory=ClusterAIScalePolicyStatus)
