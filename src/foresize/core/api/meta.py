"""Object metadata, references to workloads, label selectors and the base of every
top-level Foresize object (`apiVersion`, `kind`, `metadata`)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    model_validator,
)

from foresize.core.api.access import JSONValue
from foresize.core.api.fields import (
    API_VERSION,
    DEFAULT_API_VERSIONS,
    WORKLOAD_KINDS,
    OpenModel,
    StrictModel,
    Timestamp,
    one_of,
)
from foresize.core.api.labels import check_label_key, check_label_map, check_label_value
from foresize.core.api.names import (
    DNS1123_SUBDOMAIN_MAX,
    DNS1123_SUBDOMAIN_PATTERN,
    check_dns_subdomain,
)
from foresize.core.api.selectors import selector_matches


class ObjectMeta(OpenModel):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    generation: int | None = None
    resourceVersion: str | None = None
    deletion_timestamp: Timestamp | None = Field(default=None, alias="deletionTimestamp")
    finalizers: list[str] = Field(default_factory=list)


WorkloadName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=DNS1123_SUBDOMAIN_MAX,
        json_schema_extra={"pattern": DNS1123_SUBDOMAIN_PATTERN},
    ),
    AfterValidator(check_dns_subdomain),
]
"""The name of a referenced workload. Deployments, StatefulSets, DaemonSets and Argo
Rollouts (a custom resource) are all named by an RFC 1123 subdomain (apps validation's
`ValidateDeploymentName` etc. are `NameIsDNSSubdomain`), so no other name can ever resolve:
`../kube-system/coredns`, `a/b` or `UPPER` is refused where it is written (the HPA's own
scaleTargetRef check, `IsValidPathSegmentName`, is looser: only `/`, `%`, `.` and `..`)."""


class ScaleTargetRef(StrictModel):
    """The workload a target scales: Deployment, StatefulSet, Argo Rollout or CronJob."""

    apiVersion: str | None = Field(default=None, max_length=253)
    kind: Annotated[str, PlainValidator(one_of(WORKLOAD_KINDS))] = Field(
        json_schema_extra={"enum": list(WORKLOAD_KINDS)}
    )
    name: WorkloadName

    @model_validator(mode="after")
    def _default_api_version(self) -> ScaleTargetRef:
        if self.apiVersion is None:
            self.apiVersion = DEFAULT_API_VERSIONS[self.kind]
        return self


class DaemonSetRef(StrictModel):
    apiVersion: str = Field(default="apps/v1", max_length=253)
    kind: Literal["DaemonSet"] = "DaemonSet"
    name: WorkloadName


class LabelSelectorRequirement(StrictModel):
    key: Annotated[str, Field(max_length=317), AfterValidator(check_label_key)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[Annotated[str, Field(max_length=63), AfterValidator(check_label_value)]] = Field(
        default_factory=list, max_length=64
    )


class LabelSelector(StrictModel):
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


class APIObject(BaseModel):
    """The base of every top-level Foresize object: apiVersion, kind, metadata."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    KIND: ClassVar[str] = ""

    apiVersion: str = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="before")
    @classmethod
    def _fill_kind(cls, data: JSONValue) -> JSONValue:
        if isinstance(data, dict) and not data.get("kind"):
            data = {**data, "kind": cls.KIND}
        return data

    @model_validator(mode="after")
    def _check_kind(self) -> APIObject:
        if self.kind != self.KIND:
            raise ValueError(f"kind must be {self.KIND}, not {self.kind!r}")
        if self.apiVersion != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION}, not {self.apiVersion!r}")
        return self

    def to_kube(self) -> dict[str, Any]:
        """The object as Kubernetes JSON. The spec holds only the fields that were set: a
        default written out would read back as set and override the policy hierarchy
        (docs/policies.md)."""
        data = self.model_dump(by_alias=True, exclude_none=True, mode="json")
        spec = getattr(self, "spec", None)
        if isinstance(spec, BaseModel):
            data["spec"] = spec.model_dump(
                by_alias=True, exclude_none=True, exclude_unset=True, mode="json"
            )
        return data
