"""The eviction subresource's budget check, computed as the disruption controller
computes PodDisruptionBudget status (`pkg/controller/disruption`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from foresize.testing.apiserver.errors import ApiError

ObjectKey = tuple[str, str, str]  # (resource type key, namespace, name)
PDB_KEY = "policy/v1/poddisruptionbudgets"


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    if not isinstance(selector, dict):
        return False  # policy/v1: a null selector selects nothing
    from foresize.testing.validation import label_selector_matches as match

    return match(selector, labels)


def pod_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def controller_of(obj: dict[str, Any] | None) -> tuple[str, str] | None:
    for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind", ""), ref.get("name", "")
    return None


def scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def pdb_numbers(
    pdb: dict[str, Any], namespace: str, objects: Mapping[ObjectKey, dict[str, Any]]
) -> tuple[int, int, int]:
    """(currentHealthy, desiredHealthy, expectedPods) as the disruption controller
    computes them (`pkg/controller/disruption`)."""
    spec = pdb.get("spec") or {}
    pods = [
        o
        for (k, ns, _), o in sorted(objects.items())
        if k == "/v1/pods"
        and ns == namespace
        and selector_matches(spec.get("selector"), (o["metadata"].get("labels") or {}))
        and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not o["metadata"].get("deletionTimestamp")
    ]
    healthy = sum(1 for p in pods if pod_ready(p))
    if "minAvailable" in spec and isinstance(spec["minAvailable"], int):
        return healthy, spec["minAvailable"], len(pods)
    expected = expected_pods(pods, namespace, objects)
    if "minAvailable" in spec:
        desired = scaled(spec["minAvailable"], expected, round_up=True)
    else:
        desired = max(0, expected - scaled(spec.get("maxUnavailable", 0), expected, round_up=True))
    return healthy, desired, expected


def expected_pods(
    pods: list[dict[str, Any]], namespace: str, objects: Mapping[ObjectKey, dict[str, Any]]
) -> int:
    """expectedPods: the replicas of each controller of `pods` (Deployment through its
    ReplicaSet), plus one per bare pod."""
    seen: dict[tuple[str, str], int] = {}
    bare = 0
    for pod in pods:
        owner = controller_of(pod)
        if owner is None:
            bare += 1
            continue
        kind, name = owner
        if kind == "ReplicaSet":
            rs = objects.get(("apps/v1/replicasets", namespace, name))
            up = controller_of(rs) if rs else None
            if up and up[0] == "Deployment":
                kind, name = up
        plural = {
            "ReplicaSet": "replicasets",
            "Deployment": "deployments",
            "StatefulSet": "statefulsets",
        }.get(kind)
        workload = objects.get((f"apps/v1/{plural}", namespace, name)) if plural else None
        replicas = int(((workload or {}).get("spec") or {}).get("replicas", 1))
        seen[(kind, name)] = replicas
    return sum(seen.values()) + bare


@dataclass(slots=True)
class Budget:
    """The PodDisruptionBudget an eviction goes through, and its numbers before it."""

    name: str
    healthy: int
    desired: int
    expected: int
    allowed: int

    def account(self, pdb: dict[str, Any]) -> None:
        """The PDB's status once the eviction of a ready pod is granted."""
        pdb["status"] = {
            **(pdb.get("status") or {}),
            "currentHealthy": self.healthy,
            "desiredHealthy": self.desired,
            "expectedPods": self.expected,
            "disruptionsAllowed": max(0, self.allowed - 1),
            "observedGeneration": pdb["metadata"].get("generation", 1),
        }


def eviction_budget(
    pod: dict[str, Any], namespace: str, objects: Mapping[ObjectKey, dict[str, Any]]
) -> Budget | None:
    """The budget evicting a running `pod` goes through (None: no PDB selects it); 429 with a
    `DisruptionBudget` cause when it would violate it, 500 for more than one PDB."""
    labels = pod["metadata"].get("labels") or {}
    pdbs = [
        o
        for (k, ns, _), o in sorted(objects.items())
        if k == PDB_KEY
        and ns == namespace
        and selector_matches((o.get("spec") or {}).get("selector"), labels)
    ]
    if len(pdbs) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    if not pdbs:
        return None
    pdb = pdbs[0]
    healthy, desired, expected = pdb_numbers(pdb, namespace, objects)
    allowed = max(0, healthy - desired)
    policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
    unhealthy_ok = not pod_ready(pod) and (policy == "AlwaysAllow" or healthy >= desired)
    pdb_name = pdb["metadata"]["name"]
    if allowed <= 0 and not unhealthy_ok:
        raise ApiError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details={
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {pdb_name} needs {desired} "
                        f"healthy pods and has {healthy} currently",
                    }
                ]
            },
        )
    return Budget(pdb_name, healthy, desired, expected, allowed)
