"""The headroom actions as API calls (`core.cluster.headroom`; the executor dispatches here).

- `EnsureHeadroom`: the PriorityClass first (GET by name; 404 -> create it with the
  action's value, `preemptionPolicy: Never`, `globalDefault: false`; an existing one of
  another value or policy is refused with a message naming the field, since both are
  immutable and Foresize does not delete what it did not make); then the pool's pause
  Deployment: created when missing, else a merge patch of its replicas and pod template
  (the whole containers list: a merge patch replaces lists).
- `ReleaseHeadroom`: DELETE the placeholder pod with `gracePeriodSeconds: 0` and the uid
  as a precondition (another pod under that name is left alone: 409).

The namespace must exist (`foresize manifests rbac` ships it with the Role that grants
these calls in it); a 404 on it is answered with what to do.
"""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import format_resource_map
from foresize.core.cluster.actions import ActionResult, EnsureHeadroom, ReleaseHeadroom
from foresize.core.cluster.headroom import HEADROOM_LABEL, PAUSE_IMAGE
from foresize.shells.kube.api import JSON, MERGE_PATCH, KubeApi

SCHEDULING = "/apis/scheduling.k8s.io/v1/priorityclasses"
DEMAND_ANNOTATION = "foresize.io/headroom-demand"
"""The forecast upsize demand the Deployment was sized for, for humans and dashboards."""
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def priority_class(action: EnsureHeadroom) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": action.priority_class,
            "labels": {"app.kubernetes.io/managed-by": "foresize"},
        },
        "value": action.priority,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "Foresize headroom placeholders: any real pod preempts them.",
    }


def pod_template(action: EnsureHeadroom) -> dict[str, Any]:
    labels = {HEADROOM_LABEL: action.pool}
    resources = format_resource_map(dict(action.requests))
    spec: dict[str, Any] = {
        "priorityClassName": action.priority_class,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": resources, "limits": dict(resources)},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                    "runAsUser": 65535,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if action.pool and action.pool_label:
        spec["nodeSelector"] = {action.pool_label: action.pool}
    # Cluster Autoscaler may remove a node that holds placeholders (its scale-down moves
    # them like any replicated pod; said outright so no local-storage rule holds a node).
    return {"metadata": {"labels": labels, "annotations": {SAFE_TO_EVICT: "true"}}, "spec": spec}


def deployment(action: EnsureHeadroom) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": action.name,
            "namespace": action.namespace,
            "labels": {HEADROOM_LABEL: action.pool, "app.kubernetes.io/managed-by": "foresize"},
            "annotations": {DEMAND_ANNOTATION: demand_text(action.demand)},
        },
        "spec": {
            "replicas": action.replicas,
            "selector": {"matchLabels": {HEADROOM_LABEL: action.pool}},
            "template": pod_template(action),
        },
    }


def demand_text(demand: dict[str, int]) -> str:
    """ "cpu=750m,memory=1Gi" ("none" for no demand)."""
    text = format_resource_map(dict(demand))
    return ",".join(f"{k}={v}" for k, v in sorted(text.items())) or "none"


def _result(resp: Any) -> ActionResult:
    from foresize.shells.kube.executor import result_from

    return result_from(resp)


async def ensure_headroom(api: KubeApi, action: EnsureHeadroom) -> ActionResult:
    got = await api.request("GET", f"{SCHEDULING}/{action.priority_class}")
    if got.code == 404:
        made = await api.request("POST", SCHEDULING, priority_class(action), JSON)
        if not made.ok and made.code != 409:  # 409: another replica made it meanwhile
            return _result(made)
    elif not got.ok:
        return _result(got)
    elif isinstance(got.body, dict):
        wrong = _mismatch(got.body, action)
        if wrong is not None:
            return ActionResult(False, 409, "Conflict", wrong)
    path = f"/apis/apps/v1/namespaces/{action.namespace}/deployments"
    body = deployment(action)
    current = await api.request("GET", f"{path}/{action.name}")
    if current.code == 404:
        made = await api.request("POST", path, body, JSON)
        if made.code == 404:
            return ActionResult(
                False,
                404,
                "NotFound",
                f"headroom: namespace {action.namespace!r} not found: apply `foresize "
                f"manifests rbac` (it ships the namespace and its Role) or set "
                f"--headroom-namespace",
            )
        return _result(made)
    if not current.ok:
        return _result(current)
    patch = {
        "metadata": {"annotations": body["metadata"]["annotations"]},
        "spec": {"replicas": action.replicas, "template": body["spec"]["template"]},
    }
    return _result(await api.request("PATCH", f"{path}/{action.name}", patch, MERGE_PATCH))


def _mismatch(existing: dict[str, Any], action: EnsureHeadroom) -> str | None:
    """Why an existing PriorityClass of that name cannot serve (both fields immutable)."""
    name = action.priority_class
    if existing.get("value") != action.priority:
        return (
            f"PriorityClass {name}: value is {existing.get('value')!r}, headroom needs "
            f"{action.priority} (immutable: delete the class or pick another name)"
        )
    if existing.get("preemptionPolicy", "PreemptLowerPriority") != "Never":
        return (
            f"PriorityClass {name}: preemptionPolicy is "
            f"{existing.get('preemptionPolicy', 'PreemptLowerPriority')!r}, headroom needs "
            f"'Never' (immutable: delete the class or pick another name)"
        )
    return None


async def release_headroom(api: KubeApi, action: ReleaseHeadroom) -> ActionResult:
    options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    if action.uid:
        options["preconditions"] = {"uid": action.uid}
    path = f"/api/v1/namespaces/{action.namespace}/pods/{action.name}"
    return _result(await api.request("DELETE", path, options, JSON))


__all__ = ["deployment", "ensure_headroom", "priority_class", "release_headroom"]
