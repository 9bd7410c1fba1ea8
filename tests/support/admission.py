"""Builders shared by the tests (moved out of test_admission_decisions.py)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.types import parse_target

SUG = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}


def idx(*targets, **kw) -> AdmissionIndex:
    return AdmissionIndex.build([parse_target(t) for t in targets], **kw)


# Builders shared by the admission, webhook, lifecycle and DSA tests (no tests here).
#
# Targets are written as the manifests a user (and the API server) would send, so the
# tests exercise the same reading path as `foresize webhook --state FILE`.


API = "admission.k8s.io/v1"


def target_manifest(
    name: str = "web",
    namespace: str = "shop",
    *,
    kind: str = "Deployment",
    ref: str | None = "web",
    selector: dict[str, str] | None = None,
    vmode: str | None = "autonomous",
    hmode: str | None = None,
    update_mode: str = "in_place_or_recreate",
    containers: list[dict[str, Any]] | None = None,
    suggestion: dict[str, dict[str, dict[str, str]]] | None = None,
    predicted: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    multiple_of: int | None = None,
    oom_floor: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if ref is not None:
        spec["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": kind, "name": ref}
    if selector is not None:
        spec["selector"] = {"matchLabels": selector}
    if vmode is not None:
        spec["vertical"] = {
            "mode": vmode,
            "containers": containers
            if containers is not None
            else [{"name": "*", "cpu": {"lowerbound": "10m"}, "memory": {"lowerbound": "16Mi"}}],
            "update_policy": {"update_mode": update_mode},
        }
    if hmode is not None:
        h: dict[str, Any] = {"mode": hmode}
        if min_replicas is not None:
            h["minReplicas"] = min_replicas
        if max_replicas is not None:
            h["maxReplicas"] = max_replicas
        if multiple_of is not None:
            h["multipleOf"] = multiple_of
        spec["horizontal"] = h
    status: dict[str, Any] = {}
    if suggestion is not None:
        status["vertical_suggestion"] = {
            "uid": f"{name}-s1",
            "containers": [{"name": c, **v} for c, v in suggestion.items()],
        }
    if predicted is not None:
        status["horizontal_suggestion"] = {"replicas": predicted}
    if oom_floor is not None:
        status["oom_floors"] = [{"container": c, "memory": m} for c, m in oom_floor.items()]
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": spec,
        "status": status,
    }


def pod_json(
    namespace: str = "shop",
    *,
    owner: tuple[str, str] | None = ("ReplicaSet", "web-5d9f8"),
    labels: dict[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "generateName": "web-5d9f8-",
        "namespace": namespace,
        "labels": labels if labels is not None else {"app": "web", "pod-template-hash": "5d9f8"},
    }
    if annotations is not None:
        meta["annotations"] = annotations
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": "x",
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": containers
            if containers is not None
            else [
                {
                    "name": "app",
                    "image": "nginx",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "1Gi"},
                        "limits": {"memory": "512Mi"},
                    },
                }
            ]
        },
    }


def review(
    obj: dict[str, Any],
    *,
    uid: str = "11111111-2222-3333-4444-555555555555",
    operation: str = "CREATE",
    kind: str = "Pod",
    group: str = "",
    resource: str = "pods",
    sub_resource: str | None = None,
    name: str | None = None,
    namespace: str = "shop",
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    req: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "requestKind": {"group": group, "version": "v1", "kind": kind},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    if sub_resource:
        req["subResource"] = sub_resource
    if name:
        req["name"] = name
    return {"apiVersion": API, "kind": "AdmissionReview", "request": req}


def scale_review(
    name: str, replicas: int, *, namespace: str = "shop", resource: str = "deployments"
):
    obj = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas},
        "status": {"replicas": 2},
    }
    return review(
        obj,
        operation="UPDATE",
        kind="Scale",
        group="autoscaling",
        resource=resource,
        sub_resource="scale",
        name=name,
        namespace=namespace,
    )


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]] | None:
    patch = response["response"].get("patch")
    if patch is None:
        return None
    assert response["response"]["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(patch))


def apply_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add/replace (all the webhook emits), enough to check the result."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node: Any = doc
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node[p]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = op["value"]
        else:
            if op["op"] == "replace":
                assert last in node, op
            node[last] = op["value"]
    return doc
