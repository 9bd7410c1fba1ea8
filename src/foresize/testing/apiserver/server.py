"""The strict API server over HTTP (aiohttp on loopback): routing, authentication, the
request log, fault injection, lists and watch streams (see the package docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from foresize.shells.kube.rbac import SERVICE_ACCOUNT, operator_rbac
from foresize.testing.apiserver.discovery import discovery
from foresize.testing.apiserver.errors import ApiError, bad_request
from foresize.testing.apiserver.rbac import ADMIN, Rbac, User, request_attributes, service_account
from foresize.testing.apiserver.resources import ResourceType, scale_of
from foresize.testing.apiserver.store import JSON, ObjectStore
from foresize.testing.apiserver.watch import (
    CLOSE,
    WatchEvent,
    WatchRequest,
    bookmark,
    event_for,
    expired_status,
    list_objects,
    read_watch_request,
    send_event,
)


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
    user: str = ""  # who RBAC saw (the operator's ServiceAccount unless the admin token)
    warnings: list[str] = field(default_factory=list)


# The namespace the operator runs in for the tests and `foresize bench chaos` (its Role and
# RoleBinding are there), and the token of a cluster admin (a test acting as a user or a
# controller over HTTP; never the operator).
OPERATOR_NAMESPACE = "foresize"
ADMIN_TOKEN = "strict-apiserver-admin"
# A quiet watch gets a BOOKMARK this often, as from kube-apiserver's watch cache
# (cacher.go defaultBookmarkFrequency, 1 minute); tests that want them sooner say so.
BOOKMARK_INTERVAL = 60.0


class StrictApiServer(ObjectStore):
    """See the package docstring."""

    def __init__(
        self,
        *,
        crds: Iterable[dict[str, Any]] | None = None,
        kube_version: tuple[int, int] = (1, 34),
        token: str | None = None,
        clock: Callable[[], float] = time.time,
        seed: int = 0,
        history_limit: int = 10_000,
        bookmark_interval: float = BOOKMARK_INTERVAL,
        max_watch_seconds: float = 1800.0,
        validate: bool = True,
        operator_namespace: str = OPERATOR_NAMESPACE,
        rbac: Rbac | Literal["shipped"] | None = "shipped",
    ) -> None:
        """`rbac`: "shipped" enforces the operator's shipped roles (`foresize.shells.kube.rbac`)
        for `operator_namespace`; an `Rbac` enforces those objects; None authorizes every
        request (a test that needs that says so)."""
        from foresize.core.api.crd import all_crds

        super().__init__(
            kube_version=kube_version,
            clock=clock,
            seed=seed,
            history_limit=history_limit,
            validate=validate,
        )
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self.tokens: set[str] = {token} if token else set()
        self.operator_user: User = service_account(operator_namespace, SERVICE_ACCOUNT)
        self.rbac: Rbac | None = (
            Rbac(operator_rbac(operator_namespace)) if rbac == "shipped" else rbac
        )
        self._fault_rng = random.Random(seed + 1)
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
            watcher.queue.put_nowait(CLOSE)

    def expire_resource_versions(self, *, notify: bool = True) -> None:
        """Forget the event history: a watch resumed from any earlier resourceVersion gets
        410 Gone. With `notify`, open watches also get the 410 ERROR event now."""
        self._history.clear()
        self.compacted_rv = self.rv
        if notify:
            for watcher in self._watchers:
                watcher.queue.put_nowait(
                    ("ERROR", expired_status(self.rv, self.compacted_rv), None)
                )

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
        attrs = request_attributes(request.method, request.path, request.query)
        if attrs.resource_request:
            record.verb, record.group, record.resource = attrs.verb, attrs.group, attrs.resource
            record.subresource, record.namespace = attrs.subresource, attrs.namespace
            record.name = attrs.name
        try:
            admin = record.token == ADMIN_TOKEN
            if self.tokens and not admin and record.token not in self.tokens:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            # Authorization comes before routing, as in kube-apiserver's filter chain.
            user = ADMIN if admin else self.operator_user
            record.user = user.name
            if self.rbac is not None:
                self.rbac.check(user, attrs)
            route = self._route(request.method, request.path, request.query)
            if self.delay:
                await asyncio.sleep(self.delay)
            injected = self._injected(record)
            if injected is not None:
                record.injected = True
                raise injected
            if parse_error is not None:
                raise bad_request(f"error decoding the request body: {parse_error}")
            if route is None:
                result = discovery(request.method, request.path, self.types, self.kube_version)
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
        _check_route(route)
        dry_run = request.query.get("dryRun") == "All"
        if verb == "watch":
            return await self._watch(request, record, rtype, namespace or None)
        if verb == "list":
            result = list_objects(
                self.objects,
                rtype,
                namespace or None,
                request.query,
                rv=self.rv,
                compacted_rv=self.compacted_rv,
                sorted_keys=self.sorted_keys(rtype.key),
            )
            record.code = 200
            return web.json_response(result)
        if verb == "get":
            obj = self._require(rtype, namespace, name)
            record.code = 200
            if sub == "scale":
                return web.json_response(scale_of(rtype, obj))
            return web.json_response(self._served(rtype, obj))
        if verb == "create" and sub == "eviction":
            result = self._evict(rtype, namespace, name, body, dry_run)
            record.code = 201
            return web.json_response(result, status=201)
        if verb == "create":
            if not isinstance(body, dict):
                raise bad_request("the request body must be a JSON object")
            stored = self._create_request(rtype, namespace, body, dry_run)
            record.code = 201
            return web.json_response(self._served(rtype, stored), status=201)
        if verb == "delete":
            options = body if isinstance(body, dict) else {}
            result = self._delete(rtype, namespace, name, options, dry_run=dry_run)
            record.code = 200
            return web.json_response(result)
        # update / patch
        old = self._require(rtype, namespace, name)
        if sub == "scale":
            current = scale_of(rtype, old)
            wanted = self._patched(rtype, current, verb, record.content_type, body, scale=True)
            stored = self._apply_scale(rtype, old, current, wanted, dry_run)
            record.code = 200
            return web.json_response(scale_of(rtype, stored))
        wanted = self._patched(rtype, self._out(rtype, old), verb, record.content_type, body)
        if verb == "update":
            self._check_put(rtype, old, wanted, name)
        stored = self._commit(rtype, old, wanted, subresource=sub or None, dry_run=dry_run)
        record.code = 200
        return web.json_response(self._served(rtype, stored))

    async def _watch(
        self, request: web.Request, record: RecordedRequest, rtype: ResourceType, ns: str | None
    ) -> web.StreamResponse:
        """Serve a watch: a bad request is refused before the stream starts; the stream
        ends at its timeout, when the server drops it, or when the client goes."""
        watch = read_watch_request(request.query, rtype, ns, self.max_watch_seconds)
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        await response.prepare(request)
        record.code = 200
        self._streams.add(response)
        self._watchers.append(watch.watcher)
        try:
            await self._stream_watch(response, rtype, watch)
        except (ConnectionResetError, asyncio.CancelledError, RuntimeError):
            pass
        finally:
            with contextlib.suppress(ValueError):
                self._watchers.remove(watch.watcher)
            self._streams.discard(response)
        with contextlib.suppress(Exception):
            await response.write_eof()
        return response

    async def _stream_watch(
        self, response: web.StreamResponse, rtype: ResourceType, watch: WatchRequest
    ) -> None:
        """Replay what the watch starts from (or send 410 Expired if that history is gone),
        then stream the changes queued to its watcher."""
        last_rv = self.rv
        if watch.since_rv is not None and watch.since_rv < self.compacted_rv:
            await send_event(response, "ERROR", expired_status(watch.since_rv, self.compacted_rv))
            return
        backlog = self._watch_backlog(rtype, watch)
        for kind, obj, old in backlog:
            event = event_for(watch.watcher, kind, obj, old)
            if event:
                await send_event(response, event[0], self._served(rtype, event[1]))
        if watch.initial_events and watch.bookmarks:
            await send_event(
                response, "BOOKMARK", bookmark(rtype, last_rv, initial_events_end=True)
            )
        await self._stream_changes(response, rtype, watch, last_rv, replayed=bool(backlog))

    def _watch_backlog(self, rtype: ResourceType, watch: WatchRequest) -> list[WatchEvent]:
        """The events a watch starts with: the current matching objects as ADDED, or the
        history of the type after the watch's resourceVersion."""
        if watch.since_rv is None:
            return [
                ("ADDED", obj, None)
                for (type_key, _, _), obj in sorted(self.objects.items())
                if type_key == rtype.key and watch.watcher.matches(obj)
            ]
        return [
            (kind, obj, old)
            for rv, type_key, kind, obj, old in self._history
            if rv > watch.since_rv and type_key == rtype.key
        ]

    async def _stream_changes(
        self,
        response: web.StreamResponse,
        rtype: ResourceType,
        watch: WatchRequest,
        last_rv: int,
        *,
        replayed: bool,
    ) -> None:
        """Send the watcher's queued changes (a BOOKMARK after each quiet
        `bookmark_interval` if asked) until the timeout, CLOSE, or an ERROR event;
        changes up to `last_rv` were already `replayed`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + watch.timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                item = await asyncio.wait_for(
                    watch.watcher.queue.get(), min(left, self.bookmark_interval)
                )
            except TimeoutError:
                if watch.bookmarks and loop.time() < deadline:
                    await send_event(response, "BOOKMARK", bookmark(rtype, self.rv))
                continue
            if item is CLOSE:
                break
            kind, obj, old = item
            if kind == "ERROR":
                await send_event(response, "ERROR", obj)
                break
            rv = int(obj["metadata"]["resourceVersion"])
            if rv <= last_rv and replayed:
                continue  # already sent from the backlog
            event = event_for(watch.watcher, kind, obj, old)
            if event:
                await send_event(response, event[0], self._served(rtype, event[1]))


def _check_route(route: tuple[str, ResourceType, str, str, str]) -> None:
    """404 for a name without the namespace its type needs (or a namespace it has not),
    405 for a verb the resource or subresource does not serve."""
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
