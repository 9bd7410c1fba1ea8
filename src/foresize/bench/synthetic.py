"""The synthetic cluster of `foresize bench loop`, as objects for the strict test API server:
`pods` pods in `targets` Deployments (one ReplicaSet and one in-place autonomous
AIScaleTarget each) on `nodes` nodes, in the steady state a running operator leaves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from foresize.core.api.fields import format_timestamp
from foresize.core.cluster.actions import WriteTargetStatus
from foresize.core.recommend.rounds import last_slot
from foresize.shells.kube.handlers import accepted_condition
from foresize.shells.kube.options import OperatorOptions
from foresize.shells.kube.status_writes import merge_patched

NAMESPACES = 20  # the targets' namespaces, as `bench.webhook_load.review_bodies` names them
REVISION = "1a2b3c4d5e"  # the pod-template-hash of every ReplicaSet
BASE_CPU, BASE_MEM = "100m", "128Mi"
RESIZED_CPU = "150m"  # the suggestion of a resized target: +50% CPU, same memory
# The operator's default --suggest-interval. Each target's suggestion was made at its
# last round slot of that cadence before the start, so none is due at the start ("a
# minute before" was not enough: a 15-minute cadence has three slots on the model grid,
# so for a fifth of the start times a slot fell in that minute, and the first pass
# rewrote each such target from an empty history).
SUGGEST_INTERVAL = OperatorOptions().suggest_interval
STEADY_NAME = "wl-0"  # the one target of `steady_status`'s cluster


def _container(cpu: str, mem: str) -> dict[str, Any]:
    return {
        "name": "app",
        "image": "registry.example.com/app:1.2.3",
        "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": "256Mi"}},
    }


def replicas_of(pods: int, targets: int) -> list[int]:
    """The pods of each target: spread as evenly as possible."""
    return [pods // targets + (1 if t < pods % targets else 0) for t in range(targets)]


def resized_targets(pods: int, targets: int, resizes: int) -> list[tuple[str, str, int]]:
    """(namespace, name, pods) of the first targets whose pods add up to `resizes`."""
    out = []
    left = resizes
    for t, replicas in enumerate(replicas_of(pods, targets)):
        if left <= 0:
            break
        out.append((f"ns-{t % NAMESPACES}", f"wl-{t}", replicas))
        left -= replicas
    return out


def synthetic_objects(
    pods: int, targets: int, nodes: int, *, now: float | None = None
) -> Iterator[dict]:
    """The cluster's objects in seeding order (owners before what they own). Pods are
    spread over the targets as evenly as possible and over the nodes round-robin. Every
    target's suggestion is what its pods already request: nothing to do until the bench
    changes the suggestions of `resized_targets`. With `now`, each target's status is the
    one an operator leaves (`steady_status`, its suggestion made a minute before `now`),
    so a process started on it has nothing to write."""
    steady: dict[int, dict[str, Any]] = {}
    yield {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foresize"}}
    for i in range(nodes):
        yield {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"node-{i:05d}"},
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"},
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    n = 0
    for t, replicas in enumerate(replicas_of(pods, targets)):
        name, ns = f"wl-{t}", f"ns-{t % NAMESPACES}"
        labels = {"app": name}
        template = {
            "metadata": {"labels": labels},
            "spec": {"containers": [_container(BASE_CPU, BASE_MEM)]},
        }
        dep = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": template,
            },
            "status": {"replicas": replicas, "readyReplicas": replicas},
        }
        yield dep
        rs_name = f"{name}-{REVISION}"
        yield {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": rs_name,
                "namespace": ns,
                "labels": {**labels, "pod-template-hash": REVISION},
                "ownerReferences": [_owner("apps/v1", "Deployment", name, f"dep-{t}")],
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": template,
            },
            "status": {"replicas": replicas, "readyReplicas": replicas},
        }
        for r in range(replicas):
            yield _pod(
                ns, f"{rs_name}-{r:05d}", labels, rs_name, f"rs-{t}", f"node-{n % nodes:05d}"
            )
            n += 1
        target = _target(ns, name, BASE_CPU)
        if now is not None:
            if replicas not in steady:
                steady[replicas] = steady_status(replicas, now)
            # The one name in it: the suggestion the breaker tracks.
            mine = json.dumps(steady[replicas]).replace(
                suggestion(STEADY_NAME, BASE_CPU)["uid"], suggestion(name, BASE_CPU)["uid"]
            )
            target["status"].update(json.loads(mine))
            target["status"]["vertical_suggestion"] = suggestion(
                name, BASE_CPU, _last_round(f"{ns}/{name}", now)
            )
        yield target


def _last_round(key: str, now: float) -> float:
    """When a process keeping the shipped cadence last recommended `key`: a little after
    its last slot (a time exactly on the slot could read back a microsecond before it),
    never after `now`."""
    slot = last_slot(key, now, SUGGEST_INTERVAL)
    return slot + min(1.0, (now - slot) / 2)


def steady_status(replicas: int, now: float) -> dict[str, Any]:
    """The status parts a pass writes for a synthetic target of `replicas` pods that has
    nothing to do (the lifecycle's record, the worker's counts and persisted state): the
    core's own pass over a one-target cluster of that shape, so it stays what the operator
    writes as the planners change. The same for every target of that many pods (no name
    in it but the suggestion's uid, of the target `STEADY_NAME`)."""
    from foresize.core.reconcile import ReconcileState, plan_pass
    from foresize.shells.kube.handlers import parse_foresize
    from foresize.shells.kube.state import ClusterState

    state = ClusterState(target_parser=parse_foresize)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in synthetic_objects(replicas, 1, 1):
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, objects in by_kind.items():
        state.replace(kind, objects)
    status: dict[str, Any] = {}
    for action in plan_pass(state.snapshot(now), now, ReconcileState(), None).actions:
        if isinstance(action, WriteTargetStatus) and action.kind == "AIScaleTarget":
            status = merge_patched(status, action.status)  # as the API server keeps it
    return status


def _owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}


def _pod(ns: str, name: str, labels: dict, rs: str, rs_uid: str, node: str) -> dict[str, Any]:
    requests = {"cpu": BASE_CPU, "memory": BASE_MEM}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {**labels, "pod-template-hash": REVISION},
            "ownerReferences": [_owner("apps/v1", "ReplicaSet", rs, rs_uid)],
        },
        "spec": {"nodeName": node, "containers": [_container(BASE_CPU, BASE_MEM)]},
        "status": {
            "phase": "Running",
            "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "app",
                    "image": "registry.example.com/app:1.2.3",
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "allocatedResources": dict(requests),
                    "resources": {"requests": dict(requests), "limits": {"memory": "256Mi"}},
                }
            ],
        },
    }


def suggestion(name: str, cpu: str, created_at: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uid": f"sugg-{name}-{cpu}",
        "containers": [{"name": "app", "requests": {"cpu": cpu, "memory": BASE_MEM}}],
    }
    if created_at is not None:
        out["created_at"] = format_timestamp(created_at)
    return out


def _target(ns: str, name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        # The revert finalizer the operator puts on every target is there already: the
        # cluster is in its steady state, not at the operator's first install.
        "metadata": {"name": name, "namespace": ns, "finalizers": ["foresize.io/revert"]},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "vertical": {
                "mode": "autonomous",
                "update_policy": {"update_mode": "in_place"},
                "disruption": {"max_disrupted": "100%", "interval": "1s"},
            },
        },
        "status": {
            "hasEnoughDataToScale": True,
            "conditions": [accepted_condition(None)],
            "vertical_suggestion": suggestion(name, cpu),
        },
    }


def seed(server: Any, objects: Iterator[dict]) -> None:
    """Seed the objects: every AIScaleTarget validated as a create would be (which gives
    it the CRD's defaults, as the real server's reads do), and of the other kinds the
    first validated and the copies of the same shape after it as they are (validating
    100k identical pods takes a quarter of an hour on this machine). Validation is on
    again for everything the operator writes."""
    from foresize.shells.kube.handlers import handled

    seen: set[str] = set()
    validating = server.validate
    try:
        for obj in objects:
            kind = obj["kind"]
            server.validate = validating and kind not in seen
            seen.add(kind)
            if kind == "AIScaleTarget":
                # As the CRD handlers left it: the spec they handled noted on the object
                # (of the object as served, defaults included), stored in one write. It
                # was validated just now; the annotation is the only change since.
                server.validate = validating
                served = server.defaulted(obj) if validating else obj
                meta = served["metadata"]
                meta["annotations"] = handled(served)["metadata"]["annotations"]
                server.validate = False
                server.seed(served)
                continue
            server.seed(obj)
    finally:
        server.validate = validating
