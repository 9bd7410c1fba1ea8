"""The resource types the strict API server serves (built-in kinds and CRD versions), and
the object-path helpers its rules use."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from foresize.testing.apiserver.errors import ApiError
from foresize.testing.custom_resources import CustomResourceValidator

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    generation: bool = False  # metadata.generation maintained
    custom: bool = False
    unconditional_update: bool = True  # PUT without resourceVersion allowed
    scale_paths: tuple[str, str, str] | None = None  # spec, status replicas, selector

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.group}/{self.version}/{self.plural}"

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


_WORKLOAD_SCALE = (".spec.replicas", ".status.replicas", ".status.selector")

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("status",)),
    ResourceType("", "v1", "nodes", "Node", False, ("status",)),
    ResourceType("", "v1", "pods", "Pod", True, ("status", "resize", "eviction"), generation=True),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "services", "Service", True, ("status",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True),
    ResourceType("", "v1", "events", "Event", True),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        ("status",),
        generation=True,
    ),
    ResourceType(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        True,
        ("status",),
    ),
    *(
        ResourceType(
            "apps",
            "v1",
            plural,
            kind,
            True,
            ("status", "scale") if scale else ("status",),
            generation=True,
            scale_paths=_WORKLOAD_SCALE if scale else None,
        )
        for plural, kind, scale in (
            ("deployments", "Deployment", True),
            ("statefulsets", "StatefulSet", True),
            ("replicasets", "ReplicaSet", True),
            ("daemonsets", "DaemonSet", False),
        )
    ),
    *(
        ResourceType("batch", "v1", plural, kind, True, ("status",), generation=True)
        for plural, kind in (("cronjobs", "CronJob"), ("jobs", "Job"))
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("status",),
        generation=True,
    ),
    *(
        ResourceType("admissionregistration.k8s.io", "v1", plural, kind, False, generation=True)
        for plural, kind in (
            ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
            ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
        )
    ),
    *(
        ResourceType("rbac.authorization.k8s.io", "v1", plural, kind, namespaced)
        for plural, kind, namespaced in (
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
        )
    ),
    # metrics-server's read-only API (tests seed PodMetrics/NodeMetrics objects).
    ResourceType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True, verbs=("get", "list")),
    ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, verbs=("get", "list")),
)


def crd_types(crd: dict[str, Any]) -> list[tuple[ResourceType, CustomResourceValidator | None]]:
    """The served versions of a CustomResourceDefinition as resource types."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        subs = version.get("subresources") or {}
        scale = subs.get("scale")
        rtype = ResourceType(
            spec["group"],
            version["name"],
            names["plural"],
            names["kind"],
            spec.get("scope", "Namespaced") == "Namespaced",
            tuple(s for s in ("status", "scale") if s in subs),
            generation=True,
            custom=True,
            unconditional_update=False,
            scale_paths=(
                (
                    scale["specReplicasPath"],
                    scale["statusReplicasPath"],
                    scale.get("labelSelectorPath") or "",
                )
                if scale
                else None
            ),
        )
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        out.append((rtype, CustomResourceValidator(names["kind"], schema) if schema else None))
    return out


_SCALARS = (str, int, float, bool, type(None))


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists and scalars; anything else through
    `copy.deepcopy`): the store's copies of objects, about twice as fast as `deepcopy`,
    which keeps a memo of every value for aliasing a JSON document cannot have."""
    if type(value) is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) for v in value]
    if isinstance(value, _SCALARS):
        return value
    import copy

    return copy.deepcopy(value)


def now_iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def get_path(obj: Any, dotted: str) -> Any:
    for part in [p for p in dotted.split(".") if p]:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def set_path(obj: dict[str, Any], dotted: str, value: Any) -> None:
    parts = [p for p in dotted.split(".") if p]
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


def spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    """Everything but metadata and status: what bumps `metadata.generation`."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def scale_of(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The `/scale` subresource of a workload or custom resource."""
    if rtype.scale_paths is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    spec_path, status_path, selector_path = rtype.scale_paths
    meta = obj["metadata"]
    selector = get_path(obj, selector_path) if selector_path else None
    if rtype.group == "apps":
        sel = (obj.get("spec") or {}).get("selector") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items()))
    status: dict[str, Any] = {"replicas": int(get_path(obj, status_path) or 0)}
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(get_path(obj, spec_path) or 0)},
        "status": status,
    }
