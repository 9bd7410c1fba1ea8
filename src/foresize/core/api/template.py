"""ClusterAIScaleTemplate: AIScaleTargets created for the workloads it selects."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import (
    AfterValidator,
    Field,
    PlainValidator,
    model_validator,
)

from foresize.core.api.fields import (
    SCALABLE_KINDS,
    SYSTEM_NAMESPACES,
    ClusterAIScaleTemplateKind,
    OpenModel,
    StrictModel,
    one_of,
)
from foresize.core.api.meta import APIObject, LabelSelector
from foresize.core.api.names import DNS1123_LABEL_MAX, DNS1123_LABEL_PATTERN, check_dns_label
from foresize.core.api.policy import unique
from foresize.core.api.target import AIScaleTarget, Condition, ScalingSpec


class TargetTemplateMeta(StrictModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class TargetTemplateSpec(ScalingSpec):
    """An AIScaleTarget spec without the workload reference (the template fills it)."""

    @model_validator(mode="after")
    def _cross_fields(self) -> TargetTemplateSpec:
        self._check_scaling()
        return self


class TargetTemplate(StrictModel):
    metadata: TargetTemplateMeta = Field(default_factory=TargetTemplateMeta)
    spec: TargetTemplateSpec = Field(default_factory=TargetTemplateSpec)


NamespaceName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=DNS1123_LABEL_MAX,
        json_schema_extra={"pattern": DNS1123_LABEL_PATTERN},
    ),
    AfterValidator(check_dns_label),
]
"""A namespace is named by an RFC 1123 label: no dots (`kube.system` is no namespace)."""


class ClusterAIScaleTemplateSpec(StrictModel):
    selector: LabelSelector
    kinds: Annotated[
        list[Annotated[str, PlainValidator(one_of(SCALABLE_KINDS))]],
        AfterValidator(unique),
    ] = Field(
        default_factory=lambda: list(SCALABLE_KINDS),
        min_length=1,
        max_length=3,
        json_schema_extra={"items": {"type": "string", "enum": list(SCALABLE_KINDS)}},
    )
    template: TargetTemplate = Field(default_factory=TargetTemplate)
    conflictResolution: Annotated[str, PlainValidator(one_of(("skip", "override")))] = Field(
        default="skip", json_schema_extra={"enum": ["skip", "override"]}
    )
    includedNamespaces: Annotated[list[NamespaceName] | None, AfterValidator(unique)] = Field(
        default=None, max_length=256
    )
    excludedNamespaces: Annotated[list[NamespaceName] | None, AfterValidator(unique)] = Field(
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
        # Only the fields the template sets: the rest stays unset, for the policy
        # hierarchy to fill (docs/policies.md).
        spec = self.template.spec.model_dump(
            by_alias=True, exclude_none=True, exclude_unset=True, mode="json"
        )
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


class ClusterAIScaleTemplateStatus(OpenModel):
    observedGeneration: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    targets: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)


class ClusterAIScaleTemplate(APIObject):
    """Creates AIScaleTargets for workloads selected by label across namespaces."""

    KIND: ClassVar[str] = ClusterAIScaleTemplateKind
    spec: ClusterAIScaleTemplateSpec
    status: ClusterAIScaleTemplateStatus = Field(default_factory=ClusterAIScaleTemplateStatus)
