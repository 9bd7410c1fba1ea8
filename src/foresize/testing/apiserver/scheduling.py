"""PriorityClasses in the strict API server (scheduling.k8s.io/v1), as kube-apiserver
handles them:

- validation (`pkg/apis/scheduling/validation`): a user-defined class's value is at most
  1,000,000,000 (higher values are for `system-` classes), `preemptionPolicy` is
  `PreemptLowerPriority` or `Never`; on update `value` and `preemptionPolicy` may not
  change;
- the Priority admission plugin (`plugin/pkg/admission/priority`) on a pod's creation: a
  `priorityClassName` is resolved to `spec.priority` and `spec.preemptionPolicy` (403
  Forbidden when no such class exists, or when the pod gives another priority itself);
  without one, the global default class's value, or 0 (a pod giving another priority
  itself is refused all the same). Seeded pods stand for pods admitted before: not
  admitted again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from foresize.testing.apiserver.errors import ApiError
from foresize.testing.validation import FieldError

HIGHEST_USER_DEFINED_PRIORITY = 1_000_000_000
SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")


def priority_class_errors(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    value = obj.get("value")
    if (
        isinstance(value, int)
        and value > HIGHEST_USER_DEFINED_PRIORITY
        and not name.startswith("system-")
    ):
        errors.append(
            FieldError(
                "value",
                "FieldValueForbidden",
                f"Forbidden: maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_DEFINED_PRIORITY}",
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        errors.append(
            FieldError(
                "preemptionPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "Never", "PreemptLowerPriority"',
            )
        )
    return errors


def priority_class_update_errors(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    errors = []
    if new.get("value") != old.get("value"):
        errors.append(
            FieldError(
                "value", "FieldValueForbidden", "Forbidden: may not be changed in an update."
            )
        )
    before = old.get("preemptionPolicy", "PreemptLowerPriority")
    if new.get("preemptionPolicy", "PreemptLowerPriority") != before:
        errors.append(
            FieldError(
                "preemptionPolicy",
                "FieldValueInvalid",
                f"Invalid value: {new.get('preemptionPolicy')!r}: field is immutable",
            )
        )
    return errors


def admit_pod_priority(
    pod: dict[str, Any],
    lookup: Callable[[str], dict[str, Any] | None],
    classes: Iterable[dict[str, Any]],
) -> None:
    """Set the pod's `spec.priority` (and `preemptionPolicy`) from its class, in place."""
    spec = pod.setdefault("spec", {})
    name = str((pod.get("metadata") or {}).get("name") or "")
    wanted = spec.get("priorityClassName")
    if wanted:
        pc = {"value": SYSTEM_CLASSES[wanted]} if wanted in SYSTEM_CLASSES else lookup(str(wanted))
        if pc is None:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: no PriorityClass with name {wanted} was found',
            )
    else:
        pc = next((c for c in classes if c.get("globalDefault")), {"value": 0})
    value = int(pc.get("value", 0))
    if "priority" in spec and spec["priority"] != value:
        raise ApiError(
            403,
            "Forbidden",
            f'pods "{name}" is forbidden: the integer value of priority ({spec["priority"]}) '
            f"must not be provided in pod spec; priority admission controller computed "
            f"{value} from the given PriorityClass name",
        )
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", pc.get("preemptionPolicy", "PreemptLowerPriority"))


__all__ = ["admit_pod_priority", "priority_class_errors", "priority_class_update_errors"]
