"""API-server validation of an in-place resize (`PATCH pods/{name}/resize`), as a pure function.

Reproduces the rules of `ValidatePodResize` (`pkg/apis/core/validation/validation.go`,
Kubernetes 1.34/1.35) and the generic container-resource checks that run with it:

- only `cpu` and `memory` of regular containers and sidecar init containers may change
  (`spec: Forbidden: only cpu and memory resources are mutable`);
- non-sidecar init containers are immutable
  (`resources for non-sidecar init containers are immutable`);
- requests and limits cannot be removed (`resource requests cannot be removed`,
  `resource limits cannot be removed`);
- the pod's QoS class may not change
  (`spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing`);
- a request may not exceed its limit
  (`must be less than or equal to cpu limit of 300m`);
- static (mirror) pods and Windows pods cannot be resized;
- pods with pod-level resources (`spec.resources`) cannot be resized
  (`pods with pod-level resources cannot be resized`: 1.33-1.34, and 1.35 while the alpha
  gate InPlacePodLevelResourcesVerticalScaling is off, as it is by default);
- on 1.33 only, a memory limit of a container or sidecar may not go down (or be added)
  unless its memory `resizePolicy` is RestartContainer
  (`memory limits cannot be decreased unless resizePolicy is RestartContainer`; 1.34+
  accept it and the kubelet may then report PodResizeInProgress/Error);
- containers may not be added, removed or renamed, and `resizePolicy` may not change
  (both caught by the "only cpu and memory" spec comparison in the API server).

A refusal is HTTP 422 `Invalid` with one cause per field error, and the message the API
server writes: `Pod "name" is invalid: <error>` (several errors in brackets).

Patch semantics of `ResizePod`: each `ContainerResize` is a merge patch of that container's
`resources` — keys present are set, keys absent are left as they are, and a value of `None`
removes the key (which the API server then refuses).
"""

from __future__ import annotations

from dataclasses import dataclass

from foresize.core.api.quantity import MEMORY, format_quantity
from foresize.core.cluster.actions import ActionResult, ResizePod
from foresize.core.cluster.model import (
    COMPUTE_RESOURCES,
    RESTART_CONTAINER,
    Container,
    Pod,
    ResourceRequirements,
)
from foresize.core.cluster.qos import has_pod_level_resources, pod_qos_class, qos_class_of

FORBIDDEN = "FieldValueForbidden"
INVALID = "FieldValueInvalid"

MSG_ONLY_CPU_MEMORY = "only cpu and memory resources are mutable"
MSG_QOS = "Pod QOS Class may not change as a result of resizing"
MSG_REQUESTS_REMOVED = "resource requests cannot be removed"
MSG_LIMITS_REMOVED = "resource limits cannot be removed"
MSG_INIT_IMMUTABLE = "resources for non-sidecar init containers are immutable"
MSG_STATIC = "static pods cannot be resized"
MSG_WINDOWS = "windows pods cannot be resized"
MSG_ADDED_REMOVED = "containers may not be added or removed on resize"
MSG_POD_LEVEL = "pods with pod-level resources cannot be resized"
MSG_MEMORY_LIMIT_DECREASE = (
    "memory limits cannot be decreased unless resizePolicy is RestartContainer"
)
# The last API server version refusing a memory-limit decrease without RestartContainer
# (KEP-1287: 1.34 lets it through and leaves the kubelet to report usage above the limit).
MEMORY_LIMIT_DECREASE_REFUSED_UNTIL = (1, 33)
# The server version `check_resize` assumes when the caller does not say (the sim's default).
DEFAULT_SERVER_VERSION = (1, 35)


def memory_limit_decrease_refused(
    server_version: tuple[int, int], old: Container, new_limit: int | None
) -> bool:
    """1.33's rule: a container's (or sidecar's) memory limit may not go down, nor be added,
    in place unless its memory resizePolicy is RestartContainer."""
    if tuple(server_version) > MEMORY_LIMIT_DECREASE_REFUSED_UNTIL or new_limit is None:
        return False
    current = old.resources.limits.get(MEMORY)
    if current is not None and new_limit >= current:
        return False
    return old.resize_policy.get(MEMORY) != RESTART_CONTAINER


@dataclass(frozen=True, slots=True)
class FieldError:
    """One `field.Error` of the API server's validation."""

    type: str  # FieldValueForbidden | FieldValueInvalid
    field: str
    message: str
    value: str | None = None

    def __str__(self) -> str:
        if self.type == INVALID:
            return f'{self.field}: Invalid value: "{self.value}": {self.message}'
        return f"{self.field}: Forbidden: {self.message}"

    def as_cause(self) -> dict[str, str]:
        return {"type": self.type, "message": str(self).split(": ", 1)[1], "field": self.field}


def _copy_container(c: Container) -> Container:
    return c.copy()


def apply_resize_patch(pod: Pod, resize: ResizePod) -> tuple[list[Container], list[Container]]:
    """The pod's (containers, init_containers) after merging the resize patch.

    Names that match no container are returned as extra containers at the end (the API
    server would see them as added containers and refuse them).
    """
    containers = [_copy_container(c) for c in pod.containers]
    inits = [_copy_container(c) for c in pod.init_containers]
    by_name = {c.name: c for c in containers}
    by_name.update({c.name: c for c in inits})
    for patch in resize.containers:
        target = by_name.get(patch.name)
        if target is None:
            target = Container(patch.name)
            containers.append(target)
            by_name[patch.name] = target
        for src, dst in (
            (patch.requests, target.resources.requests),
            (patch.limits, target.resources.limits),
        ):
            for name, qty in src.items():
                if qty is None:
                    dst.pop(name, None)
                else:
                    dst[name] = int(qty)
    return containers, inits


def _non_compute(resources: ResourceRequirements) -> tuple[dict[str, int], dict[str, int]]:
    return (
        {k: v for k, v in resources.requests.items() if k not in COMPUTE_RESOURCES},
        {k: v for k, v in resources.limits.items() if k not in COMPUTE_RESOURCES},
    )


def _removed(old: dict[str, int], new: dict[str, int]) -> bool:
    return any(name in COMPUTE_RESOURCES and name not in new for name in old)


def validate_resize_spec(
    pod: Pod,
    new_containers: list[Container],
    new_init_containers: list[Container],
    server_version: tuple[int, int] = DEFAULT_SERVER_VERSION,
) -> list[FieldError]:
    """Field errors the API server returns for changing `pod`'s containers to the new ones,
    in the API server's order: the pod, its QoS class, the container list, each container."""
    refused = _pod_refuses_resize(pod)
    if refused is not None:
        return [refused]
    errors: list[FieldError] = []
    old_qos = pod_qos_class(pod)
    if qos_class_of([*new_containers, *new_init_containers]) != old_qos:
        errors.append(FieldError(INVALID, "spec", MSG_QOS, old_qos))

    if len(new_containers) != len(pod.containers) or len(new_init_containers) != len(
        pod.init_containers
    ):
        errors.append(FieldError(FORBIDDEN, "spec.containers", MSG_ADDED_REMOVED))
        return errors

    spec_changed = False
    for kind, olds, news in (
        ("containers", pod.containers, new_containers),
        ("initContainers", pod.init_containers, new_init_containers),
    ):
        for ix, (old, new) in enumerate(zip(olds, news, strict=True)):
            changed = _container_errors(
                f"spec.{kind}[{ix}]", kind, old, new, server_version, errors
            )
            spec_changed = spec_changed or changed
    if spec_changed:
        errors.append(FieldError(FORBIDDEN, "spec", MSG_ONLY_CPU_MEMORY))
    return errors


def _pod_refuses_resize(pod: Pod) -> FieldError | None:
    """A pod no resize may touch: static, Windows, or with pod-level resources."""
    if pod.static:
        return FieldError(FORBIDDEN, "metadata", MSG_STATIC)
    if pod.os == "windows":
        return FieldError(FORBIDDEN, "spec", MSG_WINDOWS)
    if has_pod_level_resources(pod):
        return FieldError(FORBIDDEN, "spec", MSG_POD_LEVEL)
    return None


def _container_errors(
    path: str,
    kind: str,
    old: Container,
    new: Container,
    server_version: tuple[int, int],
    errors: list[FieldError],
) -> bool:
    """Append the field errors of one container's change to `errors`; True when the change
    touches more of its spec than CPU and memory (MSG_ONLY_CPU_MEMORY)."""
    if old.name != new.name or old.restart_policy != new.restart_policy:
        return True
    spec_changed = dict(old.resize_policy) != dict(new.resize_policy) or (
        _non_compute(old.resources) != _non_compute(new.resources)
    )
    resources_changed = (
        old.resources.requests != new.resources.requests
        or old.resources.limits != new.resources.limits
    )
    if kind == "initContainers" and not old.is_sidecar and resources_changed:
        errors.append(FieldError(FORBIDDEN, f"{path}.resources", MSG_INIT_IMMUTABLE))
        return spec_changed
    if _removed(old.resources.requests, new.resources.requests):
        errors.append(FieldError(FORBIDDEN, f"{path}.resources.requests", MSG_REQUESTS_REMOVED))
    if _removed(old.resources.limits, new.resources.limits):
        errors.append(FieldError(FORBIDDEN, f"{path}.resources.limits", MSG_LIMITS_REMOVED))
    new_mem_limit = new.resources.limits.get(MEMORY)
    if new_mem_limit != old.resources.limits.get(MEMORY) and (
        memory_limit_decrease_refused(server_version, old, new_mem_limit)
    ):
        errors.append(
            FieldError(FORBIDDEN, f"{path}.resources.limits[memory]", MSG_MEMORY_LIMIT_DECREASE)
        )
    errors.extend(_request_over_limit(path, new))
    return spec_changed


def _request_over_limit(path: str, new: Container) -> list[FieldError]:
    """A request above its limit, per compute resource."""
    errors = []
    for name in COMPUTE_RESOURCES:
        req = new.resources.requests.get(name)
        lim = new.resources.limits.get(name)
        if req is not None and lim is not None and req > lim:
            errors.append(
                FieldError(
                    INVALID,
                    f"{path}.resources.requests",
                    f"must be less than or equal to {name} limit of {format_quantity(name, lim)}",
                    format_quantity(name, req),
                )
            )
    return errors


def validate_resize(
    pod: Pod, resize: ResizePod, server_version: tuple[int, int] = DEFAULT_SERVER_VERSION
) -> list[FieldError]:
    """Field errors for applying `resize` to `pod` (empty when the API server accepts it)."""
    containers, inits = apply_resize_patch(pod, resize)
    return validate_resize_spec(pod, containers, inits, server_version)


def invalid_result(pod_name: str, errors: list[FieldError]) -> ActionResult:
    """The 422 `Invalid` answer for `errors`, with the API server's message and causes."""
    joined = ", ".join(str(e) for e in errors)
    detail = joined if len(errors) == 1 else f"[{joined}]"
    return ActionResult(
        ok=False,
        code=422,
        reason="Invalid",
        message=f'Pod "{pod_name}" is invalid: {detail}',
        causes=tuple(e.as_cause() for e in errors),
    )


def check_resize(
    pod: Pod, resize: ResizePod, server_version: tuple[int, int] = DEFAULT_SERVER_VERSION
) -> ActionResult | None:
    """None when the API server of `server_version` would accept `resize`, else its 422."""
    errors = validate_resize(pod, resize, server_version)
    return invalid_result(pod.name, errors) if errors else None
