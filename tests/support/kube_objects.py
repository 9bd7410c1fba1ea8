"""Valid Kubernetes objects for the kube-shell tests (the strict API server refuses
anything a real one would: images, templates matching selectors, no server-set fields),
and the seeding and waiting the operator tests share."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

IMAGE = "registry.example/app:1"


def container(name: str = "app", requests: dict | None = None, limits: dict | None = None) -> dict:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    return {"name": name, "image": IMAGE, "resources": resources}


def node(name: str = "n1", cpu: str = "4", memory: str = "8Gi") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def template(labels: dict[str, str], containers: list[dict] | None = None) -> dict:
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": containers or [container(requests={"cpu": "200m"})]},
    }


def deployment(
    name: str = "web",
    namespace: str = "shop",
    replicas: int = 2,
    labels: dict[str, str] | None = None,
    containers: list[dict] | None = None,
) -> dict:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": template(labels, containers),
        },
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def workload(kind: str, name: str, namespace: str = "shop", replicas: int = 2, **kw: Any) -> dict:
    obj = deployment(name, namespace, replicas, **kw)
    obj["kind"] = kind
    if kind == "DaemonSet":
        obj["spec"].pop("replicas")
        obj.pop("status")
    return obj


def replicaset(
    name: str = "web-abc",
    deployment_name: str = "web",
    deployment_uid: str = "d-uid",
    namespace: str = "shop",
    replicas: int = 2,
    labels: dict[str, str] | None = None,
) -> dict:
    labels = labels or {"app": deployment_name}
    obj = deployment(name, namespace, replicas, labels=labels)
    obj["kind"] = "ReplicaSet"
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": deployment_name,
            "uid": deployment_uid,
            "controller": True,
        }
    ]
    return obj


def pod(
    name: str,
    namespace: str = "shop",
    *,
    owner: tuple[str, str, str] | None = ("ReplicaSet", "web-abc", "rs-uid"),
    labels: dict[str, str] | None = None,
    node_name: str = "n1",
    containers: list[dict] | None = None,
    ready: bool = True,
) -> dict:
    """A running pod whose status agrees with its spec (allocated = actual = spec)."""
    containers = copy.deepcopy(
        containers or [container(requests={"cpu": "200m", "memory": "256Mi"})]
    )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {"app": "web"}),
    }
    if owner:
        kind, owner_name, uid = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": owner_name,
                "uid": uid,
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node_name, "containers": containers},
        "status": {
            "phase": "Running",
            "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "allocatedResources": dict((c.get("resources") or {}).get("requests") or {}),
                    "resources": copy.deepcopy(c.get("resources") or {}),
                }
                for c in containers
            ],
        },
    }


def target(
    name: str = "web",
    namespace: str = "shop",
    *,
    mode: str = "autonomous",
    update_mode: str = "in_place",
    containers: list[dict] | None = None,
    suggestion: dict | None = None,
    workload_kind: str = "Deployment",
    **vertical: Any,
) -> dict:
    obj: dict[str, Any] = {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": workload_kind, "name": name},
            "vertical": {
                "mode": mode,
                "containers": containers
                or [
                    {"name": "app", "cpu": {"lowerbound": "50m"}, "memory": {"lowerbound": "64Mi"}}
                ],
                "update_policy": {"update_mode": update_mode},
                "disruption": {"max_disrupted": "100%", "interval": "1s"},
                **vertical,
            },
        },
    }
    if suggestion is not None:
        obj["status"] = {"hasEnoughDataToScale": True, "vertical_suggestion": suggestion}
    return obj


def hpa(
    name: str = "web",
    namespace: str = "shop",
    *,
    min_replicas: int = 2,
    max_replicas: int = 10,
    cpu_utilization: int = 70,
) -> dict:
    """An autoscaling/v2 HPA of Deployment `name` on CPU utilization."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": cpu_utilization},
                    },
                }
            ],
        },
    }


def pod_creation_review(obj: dict, uid: str = "r-1") -> dict:
    """The AdmissionReview the API server sends the pod webhook for creating `obj`."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "kind": {"kind": "Pod"}, "object": obj},
    }


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


SUGGESTION = {
    "uid": "sugg-1",
    "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": "256Mi"}}],
}
# A vertical suggestion for `target()`'s container: 600m CPU (the pods have 200m).


def seed_workload(server) -> None:
    """Node n1, Deployment shop/web and its ReplicaSet web-abc (uids linked)."""
    server.seed(node())
    dep = server.seed(deployment())
    server.seed(replicaset(deployment_uid=dep["metadata"]["uid"]))


def web_pod(server, name: str) -> dict:
    """A pod of shop/web owned by the ReplicaSet `seed_workload` put on `server`."""
    rs = server.get("ReplicaSet", "shop", "web-abc")
    return pod(name, owner=("ReplicaSet", "web-abc", rs["metadata"]["uid"]))


async def wait_for_resizes(server, count: int = 2, seconds: float = 60.0) -> list:
    """The successful pods/{name}/resize calls `server` recorded, once there are `count`
    of them or `seconds` have passed (the caller asserts how many it needs). The deadline
    is generous: an operator's start (lists, Lease, first pass) on a loaded machine takes
    far longer than on an idle one, and the wait ends as soon as the calls are there."""
    resized: list = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        resized = server.calls("PATCH", r"/resize$", code=200)
        if len(resized) >= count:
            break
    return resized


WATCHED_KINDS = (
    "Node",
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "AIScaleTarget",
    "DaemonSetAutoscaler",
    "ClusterAIScaleTemplate",
    "ClusterAIScalePolicy",
    "Namespace",
)


def load_state(server, state) -> None:
    """What the informers would list: every watched object of the server replaces the
    kind in `state` (objects gone from the server leave it)."""
    for kind in WATCHED_KINDS:
        state.replace(kind, server.list(kind))


def crd(group: str, version: str, kind: str, plural: str) -> dict:
    """A namespaced CustomResourceDefinition that keeps unknown fields (another project's
    kind the operator only reads: Argo Rollouts, VPA, ...)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


VPA_CRD = crd("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler", "verticalpodautoscalers")
MPA_CRD = crd("autoscaling.gke.io", "v1beta1", "MultidimPodAutoscaler", "multidimpodautoscalers")


def vpa(
    name: str = "web-vpa",
    namespace: str = "shop",
    *,
    target_kind: str = "Deployment",
    target_name: str = "web",
    mode: str | None = "Auto",
) -> dict:
    """An autoscaling.k8s.io/v1 VerticalPodAutoscaler (mode None: updatePolicy unset)."""
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": target_name}
    }
    if mode is not None:
        spec["updatePolicy"] = {"updateMode": mode}
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
