"""The kube shell's executor: every core `Action` as the exact API call it stands for.

- `ResizePod`: PATCH `pods/{name}/resize` with a JSON patch of container resources. The
  patch tests the pod's uid (a StatefulSet pod recreated under the same name is another
  pod) and each container's name at its index first, so a pod that is not the one planned
  for is refused (422) rather than resized. Such a failed precondition is answered to the
  core as 409 Conflict (the plan is stale: plan again), not as the 422 of a resize the
  API server refuses (which may lead to an eviction). The resize subresource drops every
  other field, so labels/annotations go in a separate `PatchPodMetadata`.
- `PatchPodMetadata`: merge patch on the pod.
- `EvictPod`: POST `pods/{name}/eviction` with a `policy/v1` Eviction (PDBs apply) and
  `deleteOptions.preconditions.uid`: 409 when the pod under that name is another one.
- `PatchScale`: merge patch on `{kind}/{name}/scale`.
- `RestartWorkload`: the template annotation `kubectl.kubernetes.io/restartedAt` (what
  `kubectl rollout restart` writes); Argo Rollouts use their own `spec.restartAt`.
- `WriteTargetStatus`: merge patch on the Foresize object's status subresource.
- `EmitEvent`: a core/v1 Event, queued and sent on the Events' own budget (answered 202
  at once); a repeat (same object, type, reason) within 10 minutes patches the count of
  the existing one (`kube/events.py`).
- `EnsureHeadroom`, `ReleaseHeadroom`: the headroom PriorityClass, placeholder Deployment
  and pod deletions (`kube/headroom.py`).

Answers are mapped to `ActionResult` with the API server's code, reason, causes and
`retryAfterSeconds`, so the core reacts the same way in both shells. The executor also
enforces what the server version requires (no in-place resize before 1.33; memory-limit
decreases on 1.33 only with RestartContainer) by answering as that API server would,
without sending a patch it would refuse.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from foresize.core.api.fields import format_timestamp
from foresize.core.api.quantity import format_quantity
from foresize.core.cluster import server_version as kver
from foresize.core.cluster.actions import (
    Action,
    ActionResult,
    EmitEvent,
    EnsureHeadroom,
    EvictPod,
    PatchPodMetadata,
    PatchScale,
    ReleaseHeadroom,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.core.cluster.kubejson import pod_from
from foresize.core.cluster.model import Pod
from foresize.shells.kube.api import JSON, JSON_PATCH, MERGE_PATCH, ApiResponse, KubeApi
from foresize.shells.kube.headroom import ensure_headroom, release_headroom

log = logging.getLogger(__name__)

GROUP = "foresize.io"
VERSION = "v1"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
COMPONENT = "foresize"

# Foresize kind -> (plural, namespaced)
FORESIZE_RESOURCES = {
    "AIScaleTarget": ("aiscaletargets", True),
    "DaemonSetAutoscaler": ("daemonsetautoscalers", True),
    "ClusterAIScaleTemplate": ("clusteraiscaletemplates", False),
}
# Workload kind -> API path prefix and plural.
WORKLOAD_PATHS = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "ReplicaSet": ("/apis/apps/v1", "replicasets"),
    "Rollout": ("/apis/argoproj.io/v1alpha1", "rollouts"),
}
INVOLVED_API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    **{k: "apps/v1" for k in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")},
    "Rollout": "argoproj.io/v1alpha1",
    "CronJob": "batch/v1",
    "Job": "batch/v1",
    **{k: f"{GROUP}/{VERSION}" for k in FORESIZE_RESOURCES},
}


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/pods/{name}"
    return f"{base}/{sub}" if sub else base


def workload_path(namespace: str, kind: str, name: str, sub: str = "") -> str:
    if kind not in WORKLOAD_PATHS:
        raise ValueError(f"unsupported workload kind {kind!r}")
    prefix, plural = WORKLOAD_PATHS[kind]
    base = f"{prefix}/namespaces/{namespace}/{plural}/{name}"
    return f"{base}/{sub}" if sub else base


def foresize_path(kind: str, namespace: str, name: str, sub: str = "") -> str:
    plural, namespaced = FORESIZE_RESOURCES[kind]
    ns = f"/namespaces/{namespace}" if namespaced else ""
    base = f"/apis/{GROUP}/{VERSION}{ns}/{plural}/{name}"
    return f"{base}/{sub}" if sub else base


def resize_patch(pod: Pod, action: ResizePod) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) for `action` against the pod's current container order.

    Each container is pinned with a `test` of its name; each amount is `add` (which in JSON
    patch also replaces an existing member), creating a missing requests/limits map first.
    """
    ops: list[dict[str, Any]] = []
    if action.uid:
        ops.append({"op": "test", "path": "/metadata/uid", "value": action.uid})
    for change in action.containers:
        index, field, container = _locate(pod, change.name)
        base = f"/spec/{field}/{index}"
        ops.append({"op": "test", "path": f"{base}/name", "value": change.name})
        current = container.resources
        for section, amounts, existing in (
            ("requests", change.requests, current.requests),
            ("limits", change.limits, current.limits),
        ):
            if not amounts:
                continue
            if not existing:
                ops.append(
                    {
                        "op": "add",
                        "path": f"{base}/resources/{section}",
                        "value": {r: format_quantity(r, v) for r, v in sorted(amounts.items())},
                    }
                )
                continue
            for resource, amount in sorted(amounts.items()):
                ops.append(
                    {
                        "op": "add",
                        "path": f"{base}/resources/{section}/{resource}",
                        "value": format_quantity(resource, amount),
                    }
                )
    return ops


def _locate(pod: Pod, name: str) -> tuple[int, str, Any]:
    for i, c in enumerate(pod.containers):
        if c.name == name:
            return i, "containers", c
    for i, c in enumerate(pod.init_containers):
        if c.name == name and c.is_sidecar:
            return i, "initContainers", c
    raise LookupError(f"pod {pod.key} has no container {name!r} that can be resized")


def result_from(resp: ApiResponse) -> ActionResult:
    """An API answer -> `ActionResult` (Status reason, message, causes, retryAfterSeconds)."""
    if resp.ok:
        return ActionResult(ok=True, code=resp.code)
    body = resp.body if isinstance(resp.body, dict) else {}
    details = body.get("details") or {}
    # StatusCause's Go field `Type` is serialised as "reason" in JSON; the core names it "type".
    causes = tuple(
        {
            "type": str(c.get("reason") or c.get("type") or ""),
            "message": str(c.get("message") or ""),
            "field": str(c.get("field") or ""),
        }
        for c in details.get("causes") or []
        if isinstance(c, dict)
    )
    retry = details.get("retryAfterSeconds")
    if retry is None:
        header = resp.headers.get("retry-after") or resp.headers.get("Retry-After")
        if header and header.isdigit():
            retry = int(header)
    return ActionResult(
        ok=False,
        code=resp.code,
        reason=str(body.get("reason") or ""),
        message=str(body.get("message") or ""),
        causes=causes,
        retry_after_seconds=float(retry) if retry is not None else None,
    )


class KubeExecutor:
    """Applies core actions to a real API server (implements AsyncClusterPort.apply)."""

    def __init__(
        self,
        api: KubeApi,
        *,
        server_version: tuple[int, int] = (1, 35),
        pod_lookup: Callable[[str, str], Pod | None] | None = None,
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
    ) -> None:
        self.api = api
        self.server_version = server_version
        self._pod_lookup = pod_lookup
        self._clock = clock
        self.instance = instance or os.environ.get("POD_NAME") or os.uname().nodename
        # target key -> clock time before which no eviction is sent (after a 429).
        self.evictions_deferred_until: dict[str, float] = {}
        # Events are queued and sent on their own budget; repeated ones become one Event
        # with a count (kube/events.py).
        from foresize.shells.kube.events import EventAggregator, EventSink

        self.events = EventSink(EventAggregator(api, clock=clock))

    async def detect_server_version(self) -> tuple[int, int]:
        from foresize.core.cluster.kubejson import parse_server_version

        self.server_version = parse_server_version(await self.api.server_version())
        return self.server_version

    async def apply(self, action: Action) -> ActionResult:
        try:
            match action:
                case ResizePod():
                    return await self._resize(action)
                case PatchPodMetadata():
                    return await self._metadata(action)
                case EvictPod():
                    return await self._evict(action)
                case PatchScale():
                    return await self._scale(action)
                case RestartWorkload():
                    return await self._restart(action)
                case WriteTargetStatus():
                    return await self._status(action)
                case EmitEvent():
                    return await self._event(action)
                case EnsureHeadroom():
                    return await ensure_headroom(self.api, action)
                case ReleaseHeadroom():
                    return await release_headroom(self.api, action)
        except (LookupError, ValueError) as exc:
            return ActionResult(ok=False, code=0, reason="Unsupported", message=str(exc))
        except Exception as exc:  # network errors: the core retries on its next pass
            log.warning("API call for %s failed: %s", type(action).__name__, exc)
            return ActionResult(ok=False, code=0, reason="ConnectionError", message=str(exc))
        return ActionResult(ok=False, code=0, reason="Unsupported", message=repr(action))

    async def apply_all(self, actions: list[Action]) -> list[tuple[Action, ActionResult]]:
        """Apply in order. After a 429 on an eviction, later evictions of the same target are
        not sent until its `retryAfterSeconds` (default 10 s) has passed: they are answered
        as deferred, and the planner picks those pods up again on a later pass."""
        return [(a, await self.apply_guarded(a)) for a in actions]

    async def apply_guarded(self, action: Action) -> ActionResult:
        if isinstance(action, EvictPod):
            key = action.target or f"{action.namespace}/{action.name}"
            until = self.evictions_deferred_until.get(key)
            now = self._clock()
            if until is not None and now < until:
                return ActionResult(
                    ok=False,
                    code=429,
                    reason="TooManyRequests",
                    message=f"eviction deferred: target {key} was refused by a disruption "
                    f"budget; retrying after {until - now:.0f}s",
                    retry_after_seconds=until - now,
                )
            result = await self.apply(action)
            if result.code == 429:
                wait = result.retry_after_seconds if result.retry_after_seconds else 10.0
                self.evictions_deferred_until[key] = now + wait
            elif result.ok:
                self.evictions_deferred_until.pop(key, None)
            return result
        return await self.apply(action)

    # ------------------------------------------------------------------ actions
    async def _current_pod(self, namespace: str, name: str) -> Pod | None:
        pod = self._pod_lookup(namespace, name) if self._pod_lookup else None
        if pod is not None:
            return pod
        resp = await self.api.request("GET", pod_path(namespace, name))
        if not (resp.ok and isinstance(resp.body, dict)):
            return None
        dropped: list[str] = []
        pod = pod_from(resp.body, dropped=dropped)
        for problem in dropped:
            log.warning("%s", problem)
        return pod

    async def _resize(self, action: ResizePod) -> ActionResult:
        refusal = kver.in_place_refusal(self.server_version)
        if refusal:
            return ActionResult(ok=False, code=404, reason="NotFound", message=refusal)
        pod = await self._current_pod(action.namespace, action.name)
        if pod is None:
            return ActionResult(
                ok=False,
                code=404,
                reason="NotFound",
                message=f"pod {action.namespace}/{action.name}",
            )
        for change in action.containers:
            why = kver.memory_limit_change_refused(self.server_version, pod, change)
            if why:
                return ActionResult(
                    ok=False,
                    code=422,
                    reason="Invalid",
                    message=f"Pod {action.name!r} is invalid: {why}",
                    causes=({"type": "FieldValueForbidden", "message": why},),
                )
        patch = resize_patch(pod, action)
        resp = await self.api.request(
            "PATCH", pod_path(action.namespace, action.name, "resize"), patch, JSON_PATCH
        )
        if resp.code == 422:
            stale = await self._stale_plan(action, patch)
            if stale is not None:
                return stale
        return result_from(resp)

    async def _stale_plan(
        self, action: ResizePod, patch: list[dict[str, Any]]
    ) -> ActionResult | None:
        """After a 422: whether the pod now under that name fails the patch's `test`s (it is
        not the pod that was planned for, or its containers moved). That is a stale plan
        (409 Conflict for the core), not a resize the API server refuses."""
        resp = await self.api.request("GET", pod_path(action.namespace, action.name))
        if resp.code == 404:
            return ActionResult(
                ok=False,
                code=404,
                reason="NotFound",
                message=f"pod {action.namespace}/{action.name}",
            )
        if not resp.ok or not isinstance(resp.body, dict):
            return None
        for op in patch:
            if op["op"] != "test":
                continue
            node: Any = resp.body
            for token in op["path"].lstrip("/").split("/"):
                if isinstance(node, list) and token.isdigit() and int(token) < len(node):
                    node = node[int(token)]
                elif isinstance(node, dict):
                    node = node.get(token)
                else:
                    node = None
            if node != op["value"]:
                return ActionResult(
                    ok=False,
                    code=409,
                    reason="Conflict",
                    message=f"pod {action.namespace}/{action.name} changed since the resize was "
                    f"planned ({op['path']} is {node!r}, expected {op['value']!r}); not resized",
                )
        return None

    async def _metadata(self, action: PatchPodMetadata) -> ActionResult:
        meta: dict[str, Any] = {}
        if action.annotations:
            meta["annotations"] = dict(action.annotations)
        if action.labels:
            meta["labels"] = dict(action.labels)
        if not meta:
            return ActionResult(ok=True, code=200, message="nothing to patch")
        resp = await self.api.request(
            "PATCH", pod_path(action.namespace, action.name), {"metadata": meta}, MERGE_PATCH
        )
        return result_from(resp)

    async def _evict(self, action: EvictPod) -> ActionResult:
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": action.name, "namespace": action.namespace},
        }
        options: dict[str, Any] = {}
        if action.grace_period_seconds is not None:
            options["gracePeriodSeconds"] = action.grace_period_seconds
        if action.uid:
            options["preconditions"] = {"uid": action.uid}
        if options:
            body["deleteOptions"] = options
        resp = await self.api.request(
            "POST", pod_path(action.namespace, action.name, "eviction"), body, JSON
        )
        return result_from(resp)

    async def _scale(self, action: PatchScale) -> ActionResult:
        resp = await self.api.request(
            "PATCH",
            workload_path(action.namespace, action.kind, action.name, "scale"),
            {"spec": {"replicas": int(action.replicas)}},
            MERGE_PATCH,
        )
        return result_from(resp)

    async def _restart(self, action: RestartWorkload) -> ActionResult:
        stamp = format_timestamp(action.restarted_at, whole_seconds=True)
        if action.kind == "Rollout":
            body: dict[str, Any] = {"spec": {"restartAt": stamp}}
        else:
            body = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
        resp = await self.api.request(
            "PATCH", workload_path(action.namespace, action.kind, action.name), body, MERGE_PATCH
        )
        return result_from(resp)

    async def _status(self, action: WriteTargetStatus) -> ActionResult:
        if action.kind not in FORESIZE_RESOURCES:
            raise ValueError(f"status of kind {action.kind!r} is not Foresize's to write")
        resp = await self.api.request(
            "PATCH",
            foresize_path(action.kind, action.namespace, action.name, "status"),
            {"status": action.status},
            MERGE_PATCH,
        )
        return result_from(resp)

    async def _event(self, action: EmitEvent) -> ActionResult:
        now = format_timestamp(self._clock(), whole_seconds=True)
        namespace = action.namespace or "default"
        involved: dict[str, Any] = {
            "apiVersion": INVOLVED_API_VERSIONS.get(action.kind, "v1"),
            "kind": action.kind,
            "name": action.name,
        }
        if action.namespace:
            involved["namespace"] = action.namespace
        if action.uid:
            involved["uid"] = action.uid
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{action.name}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": action.reason,
            "message": action.message[:1024],
            "type": action.type,
            "source": {"component": COMPONENT},
            "reportingComponent": f"{GROUP}/operator",
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        if not self.events.submit(namespace, body):
            return ActionResult(
                ok=False, code=0, reason="Dropped", message="Event queue full; not sent"
            )
        # Accepted for delivery (202): sent by the Events' own task, never waited for.
        return ActionResult(ok=True, code=202, message="queued")

    # ------------------------------------------------- Foresize objects themselves
    # Not core actions: the lifecycle and template planners hand the shell objects and
    # finalizer decisions, and these calls carry them out.
    async def add_finalizer(
        self, kind: str, namespace: str, name: str, finalizer: str
    ) -> ActionResult:
        """Append `finalizer` (JSON patch pinned to the resourceVersion read)."""
        path = foresize_path(kind, namespace, name)
        resp = await self.api.request("GET", path)
        if not resp.ok or not isinstance(resp.body, dict):
            return result_from(resp)
        meta = resp.body.get("metadata") or {}
        current = list(meta.get("finalizers") or [])
        if finalizer in current:
            return ActionResult(ok=True, code=200, message="already present")
        ops: list[dict[str, Any]] = []
        if meta.get("resourceVersion"):
            ops.append(
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": meta["resourceVersion"],
                }
            )
        if current:
            ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer})
        else:
            ops.append({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]})
        return result_from(await self.api.request("PATCH", path, ops, JSON_PATCH))

    async def remove_finalizer(
        self, kind: str, namespace: str, name: str, finalizer: str
    ) -> ActionResult:
        """Remove `finalizer` by index, with a `test` so a concurrent change is not clobbered."""
        path = foresize_path(kind, namespace, name)
        resp = await self.api.request("GET", path)
        if resp.code == 404:
            return ActionResult(ok=True, code=404, message="already gone")
        if not resp.ok or not isinstance(resp.body, dict):
            return result_from(resp)
        current = list((resp.body.get("metadata") or {}).get("finalizers") or [])
        if finalizer not in current:
            return ActionResult(ok=True, code=200, message="not present")
        i = current.index(finalizer)
        ops = [
            {"op": "test", "path": f"/metadata/finalizers/{i}", "value": finalizer},
            {"op": "remove", "path": f"/metadata/finalizers/{i}"},
        ]
        return result_from(await self.api.request("PATCH", path, ops, JSON_PATCH))

    async def create_object(self, kind: str, obj: dict[str, Any]) -> ActionResult:
        plural, namespaced = FORESIZE_RESOURCES[kind]
        ns = (obj.get("metadata") or {}).get("namespace", "")
        base = f"/apis/{GROUP}/{VERSION}" + (f"/namespaces/{ns}" if namespaced else "")
        return result_from(await self.api.request("POST", f"{base}/{plural}", obj, JSON))

    async def update_object(self, kind: str, obj: dict[str, Any]) -> ActionResult:
        """Replace the spec and set the given labels/annotations of an existing object by
        JSON patch (a PUT would need the whole object, and a merge patch would keep
        spec fields the new spec no longer has)."""
        meta = obj.get("metadata") or {}
        path = foresize_path(kind, meta.get("namespace", ""), meta.get("name", ""))
        resp = await self.api.request("GET", path)
        if not resp.ok or not isinstance(resp.body, dict):
            return result_from(resp)
        live = resp.body.get("metadata") or {}
        ops: list[dict[str, Any]] = []
        if live.get("resourceVersion"):
            ops.append(
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": live["resourceVersion"],
                }
            )
        ops.append({"op": "add", "path": "/spec", "value": obj.get("spec") or {}})
        for field in ("labels", "annotations"):
            wanted = meta.get(field) or {}
            if not wanted:
                continue
            if not live.get(field):
                ops.append({"op": "add", "path": f"/metadata/{field}", "value": dict(wanted)})
                continue
            for k, v in sorted(wanted.items()):
                if live[field].get(k) != v:
                    escaped = k.replace("~", "~0").replace("/", "~1")
                    ops.append({"op": "add", "path": f"/metadata/{field}/{escaped}", "value": v})
        return result_from(await self.api.request("PATCH", path, ops, JSON_PATCH))

    async def delete_object(self, kind: str, namespace: str, name: str) -> ActionResult:
        resp = await self.api.request("DELETE", foresize_path(kind, namespace, name))
        if resp.code == 404:
            return ActionResult(ok=True, code=404, message="already gone")
        return result_from(resp)
