"""A strict Kubernetes API server for tests and `foresize bench chaos` (HTTP on loopback).

It enforces what kube-apiserver enforces for every call the operator (and Kopf) makes, so
a request a real cluster refuses is refused here too:

- server-set `uid`, `creationTimestamp`, `resourceVersion` (one increasing counter over
  all objects) and `generation` (bumped when anything outside metadata and status
  changes; for pods also by every resize);
- optimistic concurrency: a stale `metadata.resourceVersion` in a PUT or patch body is
  409 Conflict; a failed JSON-patch `test` is 422; PUT of a custom resource must carry a
  resourceVersion; a resourceVersion on create is refused;
- POST 201 and 409 AlreadyExists, `generateName`, namespaces that must exist;
- JSON patch, merge patch and strategic merge patch (built-in kinds only, containers
  merged by name; 415 for custom resources, as on a real server);
- status subresources (writes to the object ignore `status`, writes to `/status` ignore
  everything else), `/scale`, `pods/resize` (only container resources and resizePolicy
  change, the rest of the body is dropped; cpu/memory only, no QoS change, no removal),
  `pods/eviction` (PodDisruptionBudgets computed as the disruption controller does:
  429 with a `DisruptionBudget` cause, 500 for more than one PDB; UID and
  resourceVersion preconditions are 409);
- deletion with finalizers (`deletionTimestamp`, no new finalizers while deleting);
- list and watch with label and field selectors, `limit`/`continue`, watch from a
  resourceVersion with BOOKMARKs (`allowWatchBookmarks`), `sendInitialEvents`, and
  410 Gone (an ERROR event) when the resourceVersion is older than the kept history;
- every write validated (`foresize.testing.validation`): custom resources against their
  CRD's openAPIV3Schema (types, formats, CEL rules), built-in kinds against the
  Kubernetes 1.34 schema; undeclared fields are refused;
- Status bodies shaped like the real server's (`reason`, `message`, `details.causes`,
  `retryAfterSeconds`), bearer-token authentication (401 with a wrong token).

Not modelled: controllers (no ReplicaSet makes pods, no kubelet runs them — tests and
benchmarks play those parts through `seed`/`update`), graceful pod deletion (a deleted
pod is gone at once, as if its kubelet had confirmed), server-side apply, admission
webhooks, RBAC (the request log records each call's verb and resource instead, so a test
can compare them with the ClusterRole).

Fault injection for the operator's fault tests: `go_down()`/`come_back()` (the port stops
accepting connections), `drop_watches()`, `expire_resource_versions()` (410 on resume),
`fail(rate, codes, retry_after)` (429/500 on a fraction of calls, with Retry-After),
`rotate_token(new)` (the old token gets 401), `delay`.

    server = StrictApiServer()
    await server.start()          # server.url -> http://127.0.0.1:PORT
    server.seed(pod)               # preload (validated; status kept, namespace created)
    ... run the operator against server.url ...
    server.calls("PATCH", r"/resize$")   # the request log
    await server.stop()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime as dt
import json
import math
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from foresize.testing import patching
from foresize.testing.selectors import SelectorError, field_matcher, label_matcher
from foresize.testing.validation import (
    CustomResourceValidator,
    FieldError,
    ValidationFailed,
    validate_builtin,
)

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


# ------------------------------------------------------------------ resource types
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
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
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


# ------------------------------------------------------------------------ errors
class ApiError(Exception):
    """An answer with a Kubernetes Status body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            out["details"] = self.details
        return out


def _details(rtype: ResourceType | None, name: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if rtype is not None:
        if rtype.group:
            out["group"] = rtype.group
        out["kind"] = rtype.plural
    out.update(extra)
    return out


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{rtype.group_resource} "{name}" not found', details=_details(rtype, name)
    )


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rtype.group_resource} "{name}": {why}',
        details=_details(rtype, name),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(rtype: ResourceType, name: str, errors: list[FieldError]) -> ApiError:
    texts = [e.text() for e in errors]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    kind = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    details = _details(rtype, name)
    details["kind"] = rtype.kind
    details["causes"] = [
        {"reason": e.reason, "message": e.message, "field": e.field} for e in errors
    ]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {listed}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


# ------------------------------------------------------------------- request log
@dataclass(slots=True)
class RecordedRequest:
    """One request as the server saw and answered it."""

    seq: int
    time: float
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    code: int = 0
    token: str | None = None
    # Kubernetes attributes (what RBAC would check); empty for non-resource paths.
    verb: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    injected: bool = False  # answered by fault injection
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Watcher:
    rtype: ResourceType
    namespace: str | None
    labels: Callable[[dict[str, Any]], bool]
    fields: Callable[[dict[str, Any]], bool]
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        ns = (obj.get("metadata") or {}).get("namespace")
        if self.namespace is not None and ns != self.namespace:
            return False
        return self.labels(obj) and self.fields(obj)


_CLOSE = object()


def _now_iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _get_path(obj: Any, dotted: str) -> Any:
    for part in [p for p in dotted.split(".") if p]:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _set_path(obj: dict[str, Any], dotted: str, value: Any) -> None:
    parts = [p for p in dotted.split(".") if p]
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


# --------------------------------------------------------------------- the server
class StrictApiServer:
    """See the module docstring."""

    def __init__(
        self,
        *,
        crds: Iterable[dict[str, Any]] | None = None,
        kube_version: tuple[int, int] = (1, 34),
        token: str | None = None,
        clock: Callable[[], float] = time.time,
        seed: int = 0,
        history_limit: int = 10_000,
        bookmark_interval: float = 5.0,
        max_watch_seconds: float = 1800.0,
        validate: bool = True,
    ) -> None:
        from foresize.api.crd import all_crds

        self.kube_version = kube_version
        self.clock = clock
        self.validate = validate
        self.history_limit = history_limit
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self.tokens: set[str] = {token} if token else set()
        self._rng = random.Random(seed)
        self._fault_rng = random.Random(seed + 1)
        self.types: dict[str, ResourceType] = {}
        self._validators: dict[str, CustomResourceValidator | None] = {}
        for rtype in BUILTIN_TYPES:
            self.types[rtype.key] = rtype
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = 0
        self._history: list[tuple[int, str, str, dict[str, Any], dict[str, Any] | None]] = []
        self.compacted_rv = 0
        self._watchers: list[_Watcher] = []
        self.requests: list[RecordedRequest] = []
        self.internal_errors: list[str] = []  # tracebacks of this server's own failures
        # fault injection
        self.error_rate = 0.0
        self.error_codes: tuple[int, ...] = (429, 500)
        self.error_retry_after: int | None = 1
        self.error_filter: Callable[[RecordedRequest], bool] | None = None
        self.delay = 0.0
        self.down = False
        self.host = "127.0.0.1"
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._streams: set[web.StreamResponse] = set()
        for crd in all_crds() if crds is None else crds:
            self.add_crd(crd)

    # ------------------------------------------------------------- types & lookup
    def add_crd(self, crd: dict[str, Any]) -> None:
        """Serve a CustomResourceDefinition's kinds (and store the CRD object)."""
        for rtype, validator in crd_types(crd):
            self.types[rtype.key] = rtype
            self._validators[rtype.key] = validator
        crd_type = self.types["apiextensions.k8s.io/v1/customresourcedefinitions"]
        if (crd_type.key, "", crd["metadata"]["name"]) not in self.objects:
            self._store_new(crd_type, copy.deepcopy(crd), keep_status=True)

    def type_of(self, kind_or_plural: str, api_version: str | None = None) -> ResourceType:
        found = [
            t
            for t in self.types.values()
            if kind_or_plural in (t.kind, t.plural)
            and (api_version is None or t.api_version == api_version)
        ]
        if not found:
            raise KeyError(f"no resource type {kind_or_plural!r} ({api_version})")
        if len(found) > 1:
            preferred = [t for t in found if t.group != "metrics.k8s.io"]
            found = preferred or found
        return found[0]

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object (a copy), or None."""
        rtype = self.type_of(kind)
        obj = self.objects.get((rtype.key, namespace or "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        rtype = self.type_of(kind)
        return [
            copy.deepcopy(o)
            for (k, ns, _), o in sorted(self.objects.items())
            if k == rtype.key and (namespace is None or ns == namespace)
        ]

    def calls(
        self,
        method: str | None = None,
        path: str | None = None,
        *,
        code: int | None = None,
    ) -> list[RecordedRequest]:
        """Logged requests by method and a regular expression searched in the path."""
        pattern = re.compile(path) if path else None
        return [
            r
            for r in self.requests
            if (method is None or r.method == method)
            and (pattern is None or pattern.search(r.path))
            and (code is None or r.code == code)
        ]

    # ------------------------------------------------------------------ seeding
    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Preload an object as if it already existed: validated like a create, but its
        status is kept and its namespace is created when missing."""
        rtype = self.type_of(obj["kind"], obj.get("apiVersion"))
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        if rtype.namespaced and ns:
            self._ensure_namespace(ns)
        if rtype.kind == "CustomResourceDefinition":
            self.add_crd(obj)
            return self.get("CustomResourceDefinition", None, obj["metadata"]["name"]) or {}
        return copy.deepcopy(self._create(rtype, ns, copy.deepcopy(obj), keep_status=True))

    def _ensure_namespace(self, ns: str) -> None:
        nstype = self.types["/v1/namespaces"]
        if (nstype.key, "", ns) not in self.objects:
            self._create(
                nstype,
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                keep_status=False,
            )

    def update(
        self, kind: str, namespace: str | None, name: str, change: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """A controller's write (e.g. the kubelet setting pod status): `change` edits a copy
        of the object in place; the result is validated and stored, status included."""
        rtype = self.type_of(kind)
        key = (rtype.key, namespace or "", name)
        if key not in self.objects:
            raise not_found(rtype, name)
        old = self.objects[key]
        new = copy.deepcopy(old)
        change(new)
        return copy.deepcopy(self._commit(rtype, old, new, subresource="*"))

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        """A controller's delete (finalizers honoured)."""
        rtype = self.type_of(kind)
        self._delete(rtype, namespace or "", name, {})

    # ------------------------------------------------------------------ faults
    def fail(
        self,
        rate: float,
        codes: tuple[int, ...] = (429, 500),
        retry_after: int | None = 1,
        when: Callable[[RecordedRequest], bool] | None = None,
    ) -> None:
        """Answer a seeded fraction `rate` of matching requests with one of `codes`."""
        self.error_rate = rate
        self.error_codes = codes
        self.error_retry_after = retry_after
        self.error_filter = when

    def stop_failing(self) -> None:
        self.error_rate = 0.0

    def rotate_token(self, new: str) -> None:
        """From now on only `new` is accepted; the previous token gets 401."""
        self.tokens = {new}

    def drop_watches(self) -> None:
        """End every open watch stream (clients see the connection close)."""
        for watcher in self._watchers:
            watcher.queue.put_nowait(_CLOSE)

    def expire_resource_versions(self, *, notify: bool = True) -> None:
        """Forget the event history: a watch resumed from any earlier resourceVersion gets
        410 Gone. With `notify`, open watches also get the 410 ERROR event now."""
        self._history.clear()
        self.compacted_rv = self.rv
        if notify:
            for watcher in self._watchers:
                watcher.queue.put_nowait(("ERROR", self._expired_status(self.rv), None))

    async def go_down(self) -> None:
        """Stop accepting connections and close the open ones (the API is unreachable)."""
        self.down = True
        self.drop_watches()
        await self._stop_site()

    async def come_back(self) -> None:
        self.down = False
        await self._start_site()

    # ------------------------------------------------------------------ serving
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self.host, self.port = host, port
        await self._start_site()
        return self.url

    async def _start_site(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.2
        )
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await self._site.start()
        if not self.port:
            server = self._site._server
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop_site(self) -> None:
        if self._runner is not None:
            for stream in list(self._streams):
                with contextlib.suppress(Exception):
                    stream.force_close()
            await self._runner.cleanup()
        self._runner = self._site = None

    async def stop(self) -> None:
        self.drop_watches()
        await asyncio.sleep(0)
        await self._stop_site()

    async def __aenter__(self) -> StrictApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---------------------------------------------------------------- dispatch
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        body: Any = None
        parse_error = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                parse_error = exc
        auth = request.headers.get("Authorization", "")
        record = RecordedRequest(
            seq=len(self.requests),
            time=self.clock(),
            method=request.method,
            path=request.path,
            query=dict(request.query),
            content_type=content_type,
            body=body if parse_error is None else raw.decode(errors="replace"),
            token=auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None,
        )
        self.requests.append(record)
        try:
            route = self._route(request.method, request.path, request.query)
            if route is not None:
                record.verb, record.group, record.resource = (
                    route[0],
                    route[1].group,
                    route[1].plural,
                )
                record.subresource, record.namespace, record.name = route[4], route[2], route[3]
            if self.tokens and record.token not in self.tokens:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if self.delay:
                await asyncio.sleep(self.delay)
            injected = self._injected(record)
            if injected is not None:
                record.injected = True
                raise injected
            if parse_error is not None:
                raise bad_request(f"error decoding the request body: {parse_error}")
            if route is None:
                result = self._non_resource(request.method, request.path)
                record.code = 200
                return web.json_response(result)
            return await self._resource(request, record, route, body)
        except ApiError as err:
            return self._answer_error(record, err)
        except Exception as exc:  # a bug in this server: answer 500 and keep the trace
            import traceback

            self.internal_errors.append(traceback.format_exc())
            return self._answer_error(
                record, ApiError(500, "InternalError", f"test API server error: {exc!r}")
            )

    def _answer_error(self, record: RecordedRequest, err: ApiError) -> web.Response:
        record.code = err.code
        headers = dict(err.headers)
        if record.warnings:
            headers["Warning"] = ", ".join(f'299 - "{w}"' for w in record.warnings)
        return web.json_response(err.body(), status=err.code, headers=headers)

    def _injected(self, record: RecordedRequest) -> ApiError | None:
        if not self.error_rate or (self.error_filter and not self.error_filter(record)):
            return None
        if self._fault_rng.random() >= self.error_rate:
            return None
        code = self._fault_rng.choice(self.error_codes)
        headers = {}
        details: dict[str, Any] | None = None
        if self.error_retry_after is not None:
            headers["Retry-After"] = str(self.error_retry_after)
            details = {"retryAfterSeconds": self.error_retry_after}
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}.get(
            code, "InternalError"
        )
        message = {
            429: "Too many requests, please try again later.",
            503: "the server is currently unable to handle the request",
        }.get(code, 'an error on the server ("injected") has prevented the request from succeeding')
        return ApiError(code, reason, message, details=details, headers=headers)

    def _non_resource(self, method: str, path: str) -> Any:
        if method != "GET":
            raise ApiError(
                405, "MethodNotAllowed", f"the server does not allow this method on {path}"
            )
        major, minor = self.kube_version
        if path == "/version":
            return {
                "major": str(major),
                "minor": str(minor),
                "gitVersion": f"v{major}.{minor}.0",
                "platform": "linux/amd64",
            }
        if path in ("/healthz", "/livez", "/readyz"):
            return "ok"
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for t in self.types.values():
                if t.group and t.version not in groups.setdefault(t.group, []):
                    groups[t.group].append(t.version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in sorted(groups.items())
                ],
            }
        m = re.fullmatch(r"/api/(v1)|/apis/([^/]+)/([^/]+)", path)
        if m:
            group, version = ("", "v1") if m.group(1) else (m.group(2), m.group(3))
            served = [t for t in self.types.values() if (t.group, t.version) == (group, version)]
            if served:
                resources = []
                for t in served:
                    resources.append(
                        {
                            "name": t.plural,
                            "singularName": t.kind.lower(),
                            "namespaced": t.namespaced,
                            "kind": t.kind,
                            "verbs": list(t.verbs),
                        }
                    )
                    for sub in t.subresources:
                        resources.append(
                            {
                                "name": f"{t.plural}/{sub}",
                                "singularName": "",
                                "namespaced": t.namespaced,
                                "kind": {"scale": "Scale", "eviction": "Eviction"}.get(sub, t.kind),
                                "verbs": ["create"]
                                if sub == "eviction"
                                else ["get", "patch", "update"],
                            }
                        )
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": resources,
                }
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _route(
        self, method: str, path: str, query: Any
    ) -> tuple[str, ResourceType, str, str, str] | None:
        """(verb, type, namespace, name, subresource) of a resource path, else None."""
        m = re.fullmatch(r"/api/v1/(.+)|/apis/([^/]+)/([^/]+)/(.+)", path)
        if not m:
            return None
        if m.group(1) is not None:
            group, version, rest = "", "v1", m.group(1)
        else:
            group, version, rest = m.group(2), m.group(3), m.group(4)
        parts = rest.split("/")
        namespace = ""
        if (
            parts[0] == "namespaces"
            and len(parts) >= 3
            and f"{group}/{version}/{parts[2]}" in self.types
            and self.types[f"{group}/{version}/{parts[2]}"].namespaced
        ):
            namespace, parts = parts[1], parts[2:]
        key = f"{group}/{version}/{parts[0]}"
        rtype = self.types.get(key)
        if rtype is None or len(parts) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = parts[1] if len(parts) > 1 else ""
        sub = parts[2] if len(parts) > 2 else ""
        if sub and sub not in rtype.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        watch = str(query.get("watch", "")).lower() in ("true", "1")
        verb = {
            "GET": ("watch" if watch else "list") if not name else "get",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, method.lower())
        return verb, rtype, namespace, name, sub

    async def _resource(
        self,
        request: web.Request,
        record: RecordedRequest,
        route: tuple[str, ResourceType, str, str, str],
        body: Any,
    ) -> web.StreamResponse:
        verb, rtype, namespace, name, sub = route
        if rtype.namespaced and name and not namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rtype.namespaced and namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        base_verb = "get" if verb == "watch" else verb
        if sub == "eviction":
            allowed = verb == "create"
        elif sub:
            allowed = verb in ("get", "update", "patch")
        else:
            allowed = (verb if verb != "watch" else "watch") in rtype.verbs or base_verb in (
                "deletecollection",
            )
        if not allowed or verb == "deletecollection":
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        dry_run = request.query.get("dryRun") == "All"
        if verb == "watch":
            return await self._watch(request, record, rtype, namespace or None)
        if verb == "list":
            result = self._list(rtype, namespace or None, request.query)
            record.code = 200
            return web.json_response(result)
        if verb == "get":
            obj = self._require(rtype, namespace, name)
            record.code = 200
            if sub == "scale":
                return web.json_response(self._scale_of(rtype, obj))
            return web.json_response(self._out(rtype, obj))
        if verb == "create" and sub == "eviction":
            result = self._evict(rtype, namespace, name, body, dry_run)
            record.code = 201
            return web.json_response(result, status=201)
        if verb == "create":
            if not isinstance(body, dict):
                raise bad_request("the request body must be a JSON object")
            stored = self._create_request(rtype, namespace, body, dry_run)
            record.code = 201
            return web.json_response(self._out(rtype, stored), status=201)
        if verb == "delete":
            options = body if isinstance(body, dict) else {}
            result = self._delete(rtype, namespace, name, options, dry_run=dry_run)
            record.code = 200
            return web.json_response(result)
        # update / patch
        old = self._require(rtype, namespace, name)
        if sub == "scale":
            current = self._scale_of(rtype, old)
            wanted = self._patched(rtype, current, verb, record.content_type, body, scale=True)
            stored = self._apply_scale(rtype, old, current, wanted, dry_run)
            record.code = 200
            return web.json_response(self._scale_of(rtype, stored))
        wanted = self._patched(rtype, self._out(rtype, old), verb, record.content_type, body)
        if verb == "update":
            self._check_put(rtype, old, wanted, name)
        stored = self._commit(rtype, old, wanted, subresource=sub or None, dry_run=dry_run)
        record.code = 200
        return web.json_response(self._out(rtype, stored))

    # ------------------------------------------------------------- read paths
    def _require(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((rtype.key, namespace, name))
        if obj is None:
            raise not_found(rtype, name)
        return obj

    def _out(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        out["apiVersion"] = rtype.api_version
        out["kind"] = rtype.kind
        return out

    def _list(self, rtype: ResourceType, namespace: str | None, query: Any) -> dict[str, Any]:
        try:
            labels = label_matcher(query.get("labelSelector"))
            fields = field_matcher(query.get("fieldSelector"), rtype.kind)
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        items = [
            (key, obj)
            for key, obj in sorted(self.objects.items())
            if key[0] == rtype.key
            and (namespace is None or key[1] == namespace)
            and labels(obj)
            and fields(obj)
        ]
        start = 0
        token = query.get("continue")
        list_rv = self.rv
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                list_rv, after = int(state["rv"]), tuple(state["after"])
            except (ValueError, KeyError, TypeError):
                raise bad_request("invalid continue token") from None
            if list_rv < self.compacted_rv:
                raise ApiError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
            start = next((i for i, (k, _) in enumerate(items) if k > after), len(items))
        limit = int(query.get("limit") or 0)
        page = items[start : start + limit] if limit > 0 else items[start:]
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if limit > 0 and start + limit < len(items):
            last = list(page[-1][0])
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": list_rv, "after": last}).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        out_items = []
        for _, obj in page:
            item = copy.deepcopy(obj)
            if rtype.custom:  # unstructured lists carry each item's kind; typed lists do not
                item["apiVersion"], item["kind"] = rtype.api_version, rtype.kind
            out_items.append(item)
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": meta,
            "items": out_items,
        }

    def _expired_status(self, rv: int) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {rv} ({self.compacted_rv})",
            "reason": "Expired",
            "code": 410,
        }

    async def _watch(
        self, request: web.Request, record: RecordedRequest, rtype: ResourceType, ns: str | None
    ) -> web.StreamResponse:
        query = request.query
        try:
            watcher = _Watcher(
                rtype,
                ns,
                label_matcher(query.get("labelSelector")),
                field_matcher(query.get("fieldSelector"), rtype.kind),
            )
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        bookmarks = str(query.get("allowWatchBookmarks", "")).lower() in ("true", "1")
        timeout = min(
            float(query.get("timeoutSeconds") or self.max_watch_seconds), self.max_watch_seconds
        )
        since = query.get("resourceVersion")
        initial = str(query.get("sendInitialEvents", "")).lower() in ("true", "1")
        if initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise invalid(
                rtype,
                "",
                [
                    FieldError(
                        "resourceVersionMatch",
                        "FieldValueForbidden",
                        "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
                    )
                ],
            )
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        await response.prepare(request)
        record.code = 200
        self._streams.add(response)
        self._watchers.append(watcher)
        try:
            backlog: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
            last_rv = self.rv
            if since in (None, "", "0") or initial:
                for key, obj in sorted(self.objects.items()):
                    if key[0] == rtype.key and watcher.matches(obj):
                        backlog.append(("ADDED", obj, None))
            else:
                try:
                    since_rv = int(since)
                except ValueError:
                    raise bad_request(f"invalid resource version {since!r}") from None
                if since_rv < self.compacted_rv:
                    await self._send(response, "ERROR", self._expired_status(since_rv))
                    return response
                for rv, key, kind, obj, old in self._history:
                    if rv > since_rv and key == rtype.key:
                        backlog.append((kind, obj, old))
            for kind, obj, old in backlog:
                event = self._event_for(watcher, kind, obj, old)
                if event:
                    await self._send(response, event[0], self._out(rtype, event[1]))
            if initial and bookmarks:
                await self._send(
                    response,
                    "BOOKMARK",
                    {
                        "kind": rtype.kind,
                        "apiVersion": rtype.api_version,
                        "metadata": {
                            "resourceVersion": str(last_rv),
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    },
                )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(
                        watcher.queue.get(), min(left, self.bookmark_interval)
                    )
                except TimeoutError:
                    if bookmarks and loop.time() < deadline:
                        await self._send(
                            response,
                            "BOOKMARK",
                            {
                                "kind": rtype.kind,
                                "apiVersion": rtype.api_version,
                                "metadata": {"resourceVersion": str(self.rv)},
                            },
                        )
                    continue
                if item is _CLOSE:
                    break
                kind, obj, old = item
                if kind == "ERROR":
                    await self._send(response, "ERROR", obj)
                    break
                rv = int(obj["metadata"]["resourceVersion"])
                if rv <= last_rv and backlog:
                    continue  # already sent from the backlog
                event = self._event_for(watcher, kind, obj, old)
                if event:
                    await self._send(response, event[0], self._out(rtype, event[1]))
        except (ConnectionResetError, asyncio.CancelledError, RuntimeError):
            pass
        finally:
            with contextlib.suppress(ValueError):
                self._watchers.remove(watcher)
            self._streams.discard(response)
        with contextlib.suppress(Exception):
            await response.write_eof()
        return response

    @staticmethod
    def _event_for(
        watcher: _Watcher, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any]] | None:
        now, before = watcher.matches(obj), watcher.matches(old)
        if kind == "DELETED":
            return ("DELETED", obj) if (now or before) else None
        if kind == "ADDED":
            return ("ADDED", obj) if now else None
        if now and before:
            return ("MODIFIED", obj)
        if now:
            return ("ADDED", obj)
        if before:
            return ("DELETED", obj)
        return None

    @staticmethod
    async def _send(response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
        await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    # ------------------------------------------------------------- write paths
    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _record_event(
        self, rtype: ResourceType, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        snapshot = copy.deepcopy(obj)
        self._history.append((rv, rtype.key, kind, snapshot, old))
        if len(self._history) > self.history_limit:
            dropped = self._history.pop(0)
            self.compacted_rv = dropped[0]
        for watcher in self._watchers:
            if watcher.rtype.key == rtype.key:
                watcher.queue.put_nowait((kind, snapshot, old))

    def _validate(
        self, rtype: ResourceType, obj: dict[str, Any], *, creating: bool
    ) -> dict[str, Any]:
        if not self.validate:
            return obj
        name = (obj.get("metadata") or {}).get("name") or ""
        try:
            if rtype.custom:
                validator = self._validators.get(rtype.key)
                if validator is not None:
                    return validator.validate(obj, creating=creating)
            elif rtype.group != "metrics.k8s.io":
                validate_builtin(obj, creating=creating)
        except ValidationFailed as exc:
            if exc.unknown:
                raise bad_request(
                    "strict decoding error: " + ", ".join(e.message for e in exc.errors)
                ) from None
            raise invalid(rtype, name, exc.errors) from None
        return obj

    def _create_request(
        self, rtype: ResourceType, namespace: str, body: dict[str, Any], dry_run: bool
    ) -> dict[str, Any]:
        if body.get("kind") not in (None, rtype.kind) or body.get("apiVersion") not in (
            None,
            rtype.api_version,
        ):
            raise bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({rtype.api_version})"
            )
        meta = body.get("metadata") or {}
        if meta.get("resourceVersion"):
            raise ApiError(
                500,
                "InternalError",
                "resourceVersion should not be set on objects to be created",
            )
        if rtype.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            nstype = self.types["/v1/namespaces"]
            if (nstype.key, "", namespace) not in self.objects:
                raise not_found(nstype, namespace)
        return self._create(
            rtype, namespace, copy.deepcopy(body), keep_status=False, dry_run=dry_run
        )

    def _create(
        self,
        rtype: ResourceType,
        namespace: str,
        obj: dict[str, Any],
        *,
        keep_status: bool,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
        meta = obj.setdefault("metadata", {})
        if rtype.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            meta["name"] = meta["generateName"] + suffix
        for server_set in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ):
            meta.pop(server_set, None)
        if "status" in rtype.subresources and not keep_status:
            obj.pop("status", None)
        obj = self._validate(rtype, obj, creating=True)
        meta = obj["metadata"]
        key = (rtype.key, namespace if rtype.namespaced else "", meta.get("name") or "")
        if key in self.objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{rtype.group_resource} "{meta["name"]}" already exists',
                details=_details(rtype, meta["name"]),
            )
        if rtype.kind == "Pod" and not keep_status:
            obj["status"] = {"phase": "Pending", "qosClass": pod_qos(obj)}
        if rtype.kind == "Namespace":
            obj.setdefault("status", {})["phase"] = "Active"
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        if dry_run:
            return obj
        return self._store_new(rtype, obj, keep_status=True)

    def _store_new(
        self, rtype: ResourceType, obj: dict[str, Any], *, keep_status: bool
    ) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = _now_iso(self.clock())
        meta["resourceVersion"] = self._next_rv()
        if rtype.generation:
            meta["generation"] = 1
        key = (rtype.key, meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
        self.objects[key] = obj
        self._record_event(rtype, "ADDED", obj, None)
        return obj

    def _patched(
        self,
        rtype: ResourceType,
        current: dict[str, Any],
        verb: str,
        content_type: str,
        body: Any,
        *,
        scale: bool = False,
    ) -> dict[str, Any]:
        if verb == "update":
            if not isinstance(body, dict):
                raise bad_request("the request body must be a JSON object")
            return copy.deepcopy(body)
        try:
            if content_type == JSON_PATCH:
                result = patching.apply_json_patch(current, body)
            elif content_type == MERGE_PATCH:
                result = patching.apply_merge_patch(current, body)
            elif content_type == STRATEGIC_PATCH and not rtype.custom:
                result = patching.apply_strategic_merge_patch(current, body)
            else:
                accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
                if not rtype.custom:
                    accepted.insert(2, STRATEGIC_PATCH)
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}",
                )
        except patching.PatchFormatError as exc:
            raise bad_request(str(exc)) from None
        except patching.PatchError as exc:
            raise ApiError(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
                details={"causes": [{"message": str(exc)}]},
            ) from None
        if not isinstance(result, dict):
            raise bad_request("the patched object is not a JSON object")
        return result

    def _check_put(
        self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any], name: str
    ) -> None:
        meta = new.get("metadata") or {}
        if meta.get("name") != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        if not meta.get("resourceVersion") and not rtype.unconditional_update:
            raise invalid(
                rtype,
                name,
                [
                    FieldError(
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )

    def _commit(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply an update (`subresource` None = the object, "status", "resize", or "*" for
        a controller's write of everything) with the API server's rules."""
        old_meta = old["metadata"]
        name = old_meta["name"]
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise invalid(
                rtype, name, [FieldError("metadata", "FieldValueRequired", "Required value")]
            )
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and str(wanted_rv) != old_meta["resourceVersion"]:
            raise conflict(rtype, name, STALE)
        if meta.get("name") != name:
            raise invalid(
                rtype,
                name,
                [FieldError("metadata.name", "FieldValueInvalid", "field is immutable")],
            )
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise invalid(
                rtype, name, [FieldError("metadata.uid", "FieldValueInvalid", "field is immutable")]
            )
        if new.get("kind") not in (None, rtype.kind) or new.get("apiVersion") not in (
            None,
            rtype.api_version,
        ):
            raise bad_request("the kind or apiVersion of the object does not match the URL")
        new = copy.deepcopy(new)
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        elif subresource == "resize":
            new = self._resize_strategy(rtype, old, new)
        elif subresource != "*" and "status" in rtype.subresources:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta = new["metadata"]
        # server-owned metadata
        for owned in (
            "uid",
            "creationTimestamp",
            "namespace",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if owned in old_meta:
                meta[owned] = old_meta[owned]
            else:
                meta.pop(owned, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta.pop("managedFields", None)
        if old_meta.get("deletionTimestamp"):
            added = [
                f
                for f in meta.get("finalizers") or []
                if f not in (old_meta.get("finalizers") or [])
            ]
            if added:
                raise invalid(
                    rtype,
                    name,
                    [
                        FieldError(
                            "metadata.finalizers",
                            "FieldValueForbidden",
                            f"Forbidden: no new finalizers can be added if the object is being "
                            f"deleted, found new finalizers {added!r}",
                        )
                    ],
                )
        if rtype.kind == "Pod" and subresource is None:
            self._check_pod_update(rtype, old, new)
        workload = rtype.kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet")
        if workload and (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get(
            "selector"
        ):
            raise invalid(
                rtype,
                name,
                [FieldError("spec.selector", "FieldValueInvalid", "field is immutable")],
            )
        new = self._validate(rtype, new, creating=False)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no watch event
        if rtype.generation and _spec_part(new) != _spec_part(old):
            new["metadata"]["generation"] = int(old_meta.get("generation") or 0) + 1
        if dry_run:
            return new
        new["metadata"]["resourceVersion"] = self._next_rv()
        key = (rtype.key, old_meta.get("namespace", "") if rtype.namespaced else "", name)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[key]
            self._record_event(rtype, "DELETED", new, old)
            return new
        self.objects[key] = new
        self._record_event(rtype, "MODIFIED", new, old)
        if rtype.kind == "CustomResourceDefinition":
            self.add_crd(new)
        return new

    def _delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        options: dict[str, Any],
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        key = (rtype.key, namespace if rtype.namespaced else "", name)
        obj = self.objects.get(key)
        if obj is None:
            raise not_found(rtype, name)
        self._check_preconditions(rtype, obj, options)
        if dry_run:
            return self._out(rtype, obj)
        if obj["metadata"].get("finalizers"):
            if obj["metadata"].get("deletionTimestamp"):
                return self._out(rtype, obj)
            new = copy.deepcopy(obj)
            new["metadata"]["deletionTimestamp"] = _now_iso(self.clock())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["resourceVersion"] = self._next_rv()
            self.objects[key] = new
            self._record_event(rtype, "MODIFIED", new, obj)
            return self._out(rtype, new)
        del self.objects[key]
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._record_event(rtype, "DELETED", gone, obj)
        return self._out(rtype, gone)

    def _check_preconditions(
        self, rtype: ResourceType, obj: dict[str, Any], options: dict[str, Any]
    ) -> None:
        pre = options.get("preconditions") or {}
        meta = obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise conflict(
                rtype,
                meta["name"],
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise conflict(
                rtype,
                meta["name"],
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )

    # ------------------------------------------------------------------ pods
    _POD_MUTABLE = (
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to "
        "be set to 1 if it was previously negative)"
    )

    def _check_pod_update(
        self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]
    ) -> None:
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
                [
                    FieldError(
                        "spec", "FieldValueForbidden", self._POD_MUTABLE.removeprefix("spec: ")
                    )
                ],
            )

    def _resize_strategy(
        self, rtype: ResourceType, old: dict[str, Any], patched: dict[str, Any]
    ) -> dict[str, Any]:
        """pods/resize: only container resources and resizePolicy are taken from the
        request; then the resize rules of `ValidatePodResize`."""
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
        errors = self._resize_errors(old, new)
        if errors:
            raise invalid(rtype, name, errors)
        if self.kube_version >= (1, 36):
            self._node_capacity_check(new)
        return new

    def _node_capacity_check(self, pod: dict[str, Any]) -> None:
        """1.36+: a resize that can never fit the node's allocatable is refused at
        admission with 403 and a `NodeCapacity` cause."""
        from foresize.testing.validation import quantity_value

        node = self.objects.get(("/v1/nodes", "", (pod.get("spec") or {}).get("nodeName") or ""))
        if node is None:
            return
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
                quantity_value(((c.get("resources") or {}).get("requests") or {}).get(resource, 0))
                or 0
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

    def _resize_errors(self, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
        errors: list[FieldError] = []
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if (old_spec.get("os") or {}).get("name") == "windows":
            errors.append(
                FieldError(
                    "spec", "FieldValueForbidden", "Forbidden: windows pods cannot be resized"
                )
            )
        if old_spec.get("resources") and self.kube_version < (1, 35):
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
                if self.kube_version < (1, 34) and _memory_limit_lowered(ra, rb):
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

    # ----------------------------------------------------------------- scale
    def _scale_of(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rtype.scale_paths is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        spec_path, status_path, selector_path = rtype.scale_paths
        meta = obj["metadata"]
        selector = _get_path(obj, selector_path) if selector_path else None
        if rtype.group == "apps":
            sel = (obj.get("spec") or {}).get("selector") or {}
            selector = ",".join(
                f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())
            )
        status: dict[str, Any] = {"replicas": int(_get_path(obj, status_path) or 0)}
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
            "spec": {"replicas": int(_get_path(obj, spec_path) or 0)},
            "status": status,
        }

    def _apply_scale(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        current: dict[str, Any],
        wanted: dict[str, Any],
        dry_run: bool,
    ) -> dict[str, Any]:
        name = old["metadata"]["name"]
        rv = (wanted.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rtype, name, STALE)
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(
                422,
                "Invalid",
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas!r}: must be greater than or equal to 0",
                details={
                    "name": name,
                    "group": "autoscaling",
                    "kind": "Scale",
                    "causes": [
                        {
                            "reason": "FieldValueInvalid",
                            "message": f"Invalid value: {replicas!r}: must be greater than "
                            "or equal to 0",
                            "field": "spec.replicas",
                        }
                    ],
                },
            )
        new = copy.deepcopy(old)
        _set_path(new, rtype.scale_paths[0], replicas)  # type: ignore[index]
        new["metadata"].pop("resourceVersion", None)
        return self._commit(rtype, old, new, subresource="*", dry_run=dry_run)

    # --------------------------------------------------------------- eviction
    def _evict(
        self, rtype: ResourceType, namespace: str, name: str, body: Any, dry_run: bool
    ) -> dict[str, Any]:
        if (
            not isinstance(body, dict)
            or body.get("kind") != "Eviction"
            or body.get("apiVersion") not in ("policy/v1", "policy/v1beta1")
        ):
            raise bad_request("the body must be a policy/v1 Eviction")
        if (body.get("metadata") or {}).get("name") != name:
            raise bad_request("name in URL does not match name in Eviction object")
        pod = self._require(rtype, namespace, name)
        options = body.get("deleteOptions") or {}
        self._check_preconditions(rtype, pod, options)
        success = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            if not dry_run:
                self._delete(rtype, namespace, name, options)
            return success
        pdbtype = self.types["policy/v1/poddisruptionbudgets"]
        labels = pod["metadata"].get("labels") or {}
        pdbs = [
            o
            for (k, ns, _), o in sorted(self.objects.items())
            if k == pdbtype.key
            and ns == namespace
            and _selector_matches((o.get("spec") or {}).get("selector"), labels)
        ]
        if len(pdbs) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                "does not support.",
            )
        if pdbs:
            pdb = pdbs[0]
            healthy, desired, expected = self._pdb_numbers(pdb, namespace)
            allowed = max(0, healthy - desired)
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            unhealthy_ok = not _pod_ready(pod) and (policy == "AlwaysAllow" or healthy >= desired)
            if allowed <= 0 and not unhealthy_ok:
                pdb_name = pdb["metadata"]["name"]
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
            if not dry_run and _pod_ready(pod):

                def account(p: dict[str, Any]) -> None:
                    p["status"] = {
                        **(p.get("status") or {}),
                        "currentHealthy": healthy,
                        "desiredHealthy": desired,
                        "expectedPods": expected,
                        "disruptionsAllowed": max(0, allowed - 1),
                        "observedGeneration": p["metadata"].get("generation", 1),
                    }

                self.update("PodDisruptionBudget", namespace, pdb["metadata"]["name"], account)
        if not dry_run:
            self._delete(rtype, namespace, name, options)
        return success

    def _pdb_numbers(self, pdb: dict[str, Any], namespace: str) -> tuple[int, int, int]:
        """(currentHealthy, desiredHealthy, expectedPods) as the disruption controller
        computes them (`pkg/controller/disruption`)."""
        spec = pdb.get("spec") or {}
        podtype = self.types["/v1/pods"]
        pods = [
            o
            for (k, ns, _), o in sorted(self.objects.items())
            if k == podtype.key
            and ns == namespace
            and _selector_matches(spec.get("selector"), (o["metadata"].get("labels") or {}))
            and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not o["metadata"].get("deletionTimestamp")
        ]
        healthy = sum(1 for p in pods if _pod_ready(p))
        if "minAvailable" in spec and isinstance(spec["minAvailable"], int):
            return healthy, spec["minAvailable"], len(pods)
        expected = self._expected_pods(pods, namespace)
        if "minAvailable" in spec:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        else:
            desired = max(
                0, expected - _scaled(spec.get("maxUnavailable", 0), expected, round_up=True)
            )
        return healthy, desired, expected

    def _expected_pods(self, pods: list[dict[str, Any]], namespace: str) -> int:
        seen: dict[tuple[str, str], int] = {}
        bare = 0
        for pod in pods:
            owner = _controller_of(pod)
            if owner is None:
                bare += 1
                continue
            kind, name = owner
            if kind == "ReplicaSet":
                rs = self.objects.get(("apps/v1/replicasets", namespace, name))
                up = _controller_of(rs) if rs else None
                if up and up[0] == "Deployment":
                    kind, name = up
            plural = {
                "ReplicaSet": "replicasets",
                "Deployment": "deployments",
                "StatefulSet": "statefulsets",
            }.get(kind)
            workload = self.objects.get((f"apps/v1/{plural}", namespace, name)) if plural else None
            replicas = int(((workload or {}).get("spec") or {}).get("replicas", 1))
            seen[(kind, name)] = replicas
        return sum(seen.values()) + bare


# ------------------------------------------------------------------------ helpers
def _selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    if not isinstance(selector, dict):
        return False  # policy/v1: a null selector selects nothing
    from foresize.testing.validation import _selector_matches as match

    return match(selector, labels)


def _pod_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _controller_of(obj: dict[str, Any] | None) -> tuple[str, str] | None:
    for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind", ""), ref.get("name", "")
    return None


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def _memory_limit_lowered(old: dict[str, Any], new: dict[str, Any]) -> bool:
    from foresize.testing.validation import quantity_value

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
    from foresize.testing.validation import quantity_value

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
