"""The pod rules of the strict API server: what a pod update may change, `pods/resize`
(`ValidatePodResize`: only cpu/memory resources and resizePolicy, no QoS change, no
removal; per-version rules), the 1.36 node-capacity admission check, and the QoS class."""

from __future__ import annotations

import copy
from typing import Any

from foresize.testing.apiserver.errors import ApiError, invalid
from foresize.testing.apiserver.resources import ResourceType
from foresize.testing.validation import FieldError, quantity_value

POD_MUTABLE = (
    "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to "
    "be set to 1 if it was previously negative)"
)


def check_pod_update(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    def masked(pod: dict[str, Any]) -> dict[str, Any]:
        spec = copy.deepcopy(pod.get("spec") or {})
        for field_name in ("containers", "initContainers"):
            for c in spec.get(field_name) or []:
                c.pop("image", None)
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        spec.pop("schedulingGates", None)
        return spec

    if masked(old) != masked(new):
        raise invalid(
            rtype,
            old["metadata"]["name"],
            [FieldError("spec", "FieldValueForbidden", POD_MUTABLE.removeprefix("spec: "))],
        )


def resize_strategy(
    rtype: ResourceType,
    old: dict[str, Any],
    patched: dict[str, Any],
    kube_version: tuple[int, int],
    node: dict[str, Any] | None,
) -> dict[str, Any]:
    """pods/resize: only container resources and resizePolicy are taken from the
    request; then the resize rules of `ValidatePodResize` (`node`: the pod's node, for the
    1.36 capacity check)."""
    name = old["metadata"]["name"]
    new = copy.deepcopy(old)
    spec, wanted = new.get("spec") or {}, patched.get("spec") or {}
    for field_name in ("containers", "initContainers"):
        by_name = {c.get("name"): c for c in wanted.get(field_name) or []}
        for c in spec.get(field_name) or []:
            if field_name == "initContainers" and c.get("restartPolicy") != "Always":
                continue
            w = by_name.get(c.get("name"))
            if w is None:
                continue
            for part in ("resources", "resizePolicy"):
                if part in w:
                    c[part] = copy.deepcopy(w[part])
                else:
                    c.pop(part, None)
    errors = resize_errors(old, new, kube_version)
    if errors:
        raise invalid(rtype, name, errors)
    if kube_version >= (1, 36) and node is not None:
        node_capacity_check(new, node)
    return new


def node_capacity_check(pod: dict[str, Any], node: dict[str, Any]) -> None:
    """1.36+: a resize that can never fit the node's allocatable is refused at
    admission with 403 and a `NodeCapacity` cause."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    spec = pod.get("spec") or {}
    containers = [
        *(spec.get("containers") or []),
        *(c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"),
    ]
    for resource in ("cpu", "memory"):
        cap = quantity_value(allocatable.get(resource))
        if cap is None:
            continue
        wanted = sum(
            quantity_value(((c.get("resources") or {}).get("requests") or {}).get(resource, 0)) or 0
            for c in containers
        )
        if wanted > cap:
            scale = 1000 if resource == "cpu" else 1
            why = (
                f"Node didn't have enough capacity: {resource}, requested: "
                f"{int(wanted * scale)}, capacity: {int(cap * scale)}"
            )
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{pod["metadata"]["name"]}" is forbidden: {why}',
                details={
                    "name": pod["metadata"]["name"],
                    "kind": "pods",
                    "causes": [{"reason": "NodeCapacity", "message": why}],
                },
            )


def resize_errors(
    old: dict[str, Any], new: dict[str, Any], kube_version: tuple[int, int]
) -> list[FieldError]:
    errors: list[FieldError] = []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if (old_spec.get("os") or {}).get("name") == "windows":
        errors.append(
            FieldError("spec", "FieldValueForbidden", "Forbidden: windows pods cannot be resized")
        )
    if old_spec.get("resources") and kube_version < (1, 35):
        errors.append(
            FieldError(
                "spec.resources",
                "FieldValueForbidden",
                "Forbidden: pods with pod-level resources cannot be resized",
            )
        )
    for field_name in ("containers", "initContainers"):
        for i, (a, b) in enumerate(
            zip(old_spec.get(field_name) or [], new_spec.get(field_name) or [], strict=True)
        ):
            where = f"spec.{field_name}[{i}]"
            ra, rb = a.get("resources") or {}, b.get("resources") or {}
            for section in ("requests", "limits"):
                sa, sb = ra.get(section) or {}, rb.get(section) or {}
                for res in set(sa) | set(sb):
                    if res not in ("cpu", "memory") and sa.get(res) != sb.get(res):
                        errors.append(
                            FieldError(
                                f"{where}.resources.{section}[{res}]",
                                "FieldValueForbidden",
                                "Forbidden: only cpu and memory resources are mutable",
                            )
                        )
                    elif res in sa and res not in sb:
                        errors.append(
                            FieldError(
                                f"{where}.resources.{section}[{res}]",
                                "FieldValueForbidden",
                                f"Forbidden: resource {section} cannot be removed",
                            )
                        )
            if (a.get("resizePolicy") or []) != (b.get("resizePolicy") or []):
                errors.append(
                    FieldError(
                        f"{where}.resizePolicy",
                        "FieldValueForbidden",
                        "Forbidden: resizePolicy cannot be changed on a running pod",
                    )
                )
            if kube_version < (1, 34) and memory_limit_lowered(ra, rb):
                policy = {
                    p.get("resourceName"): p.get("restartPolicy")
                    for p in a.get("resizePolicy") or []
                }
                if policy.get("memory") != "RestartContainer":
                    errors.append(
                        FieldError(
                            f"{where}.resources.limits[memory]",
                            "FieldValueForbidden",
                            "Forbidden: memory limits cannot be decreased unless resizePolicy "
                            "is RestartContainer",
                        )
                    )
    if not errors and pod_qos(old) != pod_qos(new):
        errors.append(
            FieldError(
                "metadata",
                "FieldValueInvalid",
                f"Invalid value: {pod_qos(new)!r}: Pod QOS Class may not change as a "
                "result of resizing",
            )
        )
    return errors


def memory_limit_lowered(old: dict[str, Any], new: dict[str, Any]) -> bool:
    a = (old.get("limits") or {}).get("memory")
    b = (new.get("limits") or {}).get("memory")
    if b is None:
        return False
    if a is None:
        return True
    qa, qb = quantity_value(a), quantity_value(b)
    return qa is not None and qb is not None and qb < qa


def pod_qos(pod: dict[str, Any]) -> str:
    """QoS class of a pod as `pkg/apis/core/helper/qos/qos.go` computes it (an independent
    copy: the server must not share the code it checks)."""
    spec = pod.get("spec") or {}
    if spec.get("resources"):
        containers = [{"resources": spec["resources"]}]
    else:
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req = {
            k: quantity_value(v)
            for k, v in (res.get("requests") or {}).items()
            if k in ("cpu", "memory")
        }
        lim = {
            k: quantity_value(v)
            for k, v in (res.get("limits") or {}).items()
            if k in ("cpu", "memory")
        }
        req = {k: v for k, v in req.items() if v}
        lim = {k: v for k, v in lim.items() if v}
        for k, v in req.items():
            requests[k] = v
        for k, v in lim.items():
            limits[k] = v
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for k in ("cpu", "memory"):
            if k in req and k in lim and req[k] != lim[k]:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
