"""The webhook shell: an aiohttp HTTPS server around the pure review functions.

Endpoints: POST /mutate-pods, /mutate-scale, /validate-targets (AdmissionReview v1),
GET /healthz (the process is up) and /readyz (an index is loaded). Every admission
endpoint answers HTTP 200 with an AdmissionReview carrying the request's uid: an
unreadable body or an internal error is `allowed: true` plus a warning. The only HTTP
errors are the abuse limits' (400 undecodable body, 408 too slow, 413 too large): webhook
failures the API server ignores (`failurePolicy: Ignore`), never a blocked pod.

Embedding (the operator): `create_app(state_provider)` gives the aiohttp application;
`WebhookServer` starts and stops it on a running loop; `run_server(...)` runs it until
SIGTERM/SIGINT with graceful shutdown. `state_provider()` returns the current
`AdmissionIndex` (cheap: the operator rebuilds the index when its snapshot changes and
the provider just hands out the latest one).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import logging
import signal
import ssl
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from foresize.adapters.timezones import SYSTEM_ZONES
from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.review import (
    allow_with_warning,
    read_review,
    request_uid,
    review_noop,
    review_pod,
    review_scale,
    review_target,
)
from foresize.core.cluster.snapshot import ClusterSnapshot

log = logging.getLogger("foresize.shells.webhook")

StateProvider = Callable[[], AdmissionIndex | None]
Clock = Callable[[], float]

# --- limits under abuse ---------------------------------------------------------------
# The webhook port is reachable by anything that can route to the pod (the shipped
# NetworkPolicy narrows that to the API server), and it does not authenticate its caller.
# These bound what one client can hold; each is far above what the API server needs.

MAX_BODY = 4 * 2**20
"""Largest request body read, in bytes; above it the answer is 413. The API server never
sends more: it refuses request bodies over 3 MiB (`maxRequestBodyBytes`) and etcd objects
over 1.5 MiB (`--max-request-bytes`), and an AdmissionReview carries `object` plus
`oldObject` (UPDATE) with a little metadata: at most ~3 MiB of JSON. 4 MiB leaves room for
escaping. A 413 is a webhook failure the API server ignores (`failurePolicy: Ignore`)."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Per-connection limits of the webhook server (tests shrink the timeouts)."""

    handshake_timeout: float = 10.0
    """Seconds for the TLS handshake; the API server's own client gives up after 10 s."""
    header_timeout: float = 10.0
    """Seconds from a new connection to a complete request head. Absolute, not per byte,
    so a client dripping one header byte at a time is cut off too (slow loris)."""
    body_timeout: float = 10.0
    """Seconds to read a body once its head arrived (the API server sends it at once)."""
    idle_timeout: float = 95.0
    """Seconds a kept-alive connection may sit between requests. Longer than the API
    server's client idle timeout (Go's http.Transport IdleConnTimeout, 90 s) so that the
    client, never we, closes an idle connection: no race with a request it is sending."""
    max_connections: int = 1000
    """Open connections at once; more are closed at accept. A stalled TLS connection costs
    ~310 KB, so the cap bounds the damage to ~310 MB, inside the operator's 1 GiB limit."""
    max_body: int = MAX_BODY
    inline_body: int = 64 * 1024
    """Bodies up to this size are decoded and reviewed on the event loop (a typical pod is
    2-10 KB and takes ~0.2 ms); bigger ones go to a worker thread so that a 25,000-
    container pod (1.6 s of work) never stalls /healthz, the control loop or the Lease."""
    review_workers: int = 2


DEFAULT_LIMITS = ServerLimits()

BadRequestHook = Callable[[str], None]


# After this many connections closed since the last peak, freed memory is handed back.
TRIM_AFTER_CLOSED = 100


def _trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc's malloc_trim; a no-op elsewhere).

    Closed TLS connections free their buffers, but glibc keeps the pages for reuse: after
    1,000 idle connections were opened and closed, RSS stayed 60-120 MiB above its
    baseline for good (measured); with a trim after the burst it returns to baseline."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim  # noqa: B018 - glibc only; musl and macOS lack it
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC: Any = None


class ConnectionGuard:
    """The state the limits need: open connections and the bad-request report (one log
    line and one `on_bad_request(reason)` call per refused or cut-off request)."""

    def __init__(self, limits: ServerLimits, on_bad_request: BadRequestHook | None) -> None:
        self.limits = limits
        self.active = 0
        self.bad_requests = 0
        self.trims = 0
        self.peak = 0
        """Most connections open at once since the last heap trim."""
        self._hook = on_bad_request

    def opened(self) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)

    def closed(self) -> None:
        self.active -= 1
        if self.peak - self.active >= TRIM_AFTER_CLOSED and self.active <= self.peak // 2:
            self.peak = self.active
            self.trims += 1
            _trim_heap()

    def bad(self, reason: str, detail: str) -> None:
        self.bad_requests += 1
        log.warning("webhook: %s: %s", reason, detail)
        if self._hook is not None:
            with contextlib.suppress(Exception):
                self._hook(reason)


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split()) if exc is not None else ""
    name = type(exc).__name__ if isinstance(exc, BaseException) else "error"
    return f"{name}: {text[:200]}" if text else name


class _GuardedHandler(RequestHandler):
    """aiohttp's per-connection protocol with the connection cap, one deadline (request
    head, or idle between requests) and one-line error logging."""

    def __init__(self, manager: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = guard
        self._counted = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        if guard.active >= guard.limits.max_connections:
            guard.bad("connection cap", f"{guard.active} connections open, one refused")
            transport.abort()  # type: ignore[attr-defined]
            return
        self._counted = True
        guard.opened()
        super().connection_made(transport)
        self.arm(guard.limits.header_timeout, "request head timeout")

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._counted:
            return
        self._counted = False
        self.disarm()
        super().connection_lost(exc)
        self._guard.closed()

    def arm(self, delay: float, reason: str | None) -> None:
        """Close the connection in `delay` s unless a request starts first; `reason` is
        logged (None: an ordinary idle close, not worth a line)."""
        self.disarm()
        self._deadline = self._loop.call_later(delay, self._expire, reason)

    @property
    def idle_timeout(self) -> float:
        return self._guard.limits.idle_timeout

    def disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, reason: str | None) -> None:
        self._deadline = None
        transport = self.transport
        if transport is None:
            return
        if reason is not None:
            peer = transport.get_extra_info("peername")
            self._guard.bad(reason, f"closed the connection from {peer}")
        transport.abort()  # type: ignore[attr-defined]

    def log_exception(self, *args: Any, **kw: Any) -> None:
        # aiohttp logs a full traceback for every malformed request (bad Content-Length,
        # oversized header, undecodable gzip): any client could flood the log with them.
        message = args[0] % args[1:] if args else "error handling request"
        self._guard.bad("malformed request", f"{message}: {_one_line(kw.get('exc_info'))}")


@web.middleware
async def _request_deadlines(request: web.Request, handler: Any) -> web.StreamResponse:
    """No deadline while a request is handled (the body read has its own); after it, the
    connection may idle for `idle_timeout`."""
    protocol = request.protocol
    if not isinstance(protocol, _GuardedHandler):
        return await handler(request)  # type: ignore[no-any-return]
    protocol.disarm()
    try:
        return await handler(request)  # type: ignore[no-any-return]
    finally:
        if protocol.transport is not None:
            protocol.arm(protocol.idle_timeout, None)


GUARD: web.AppKey[ConnectionGuard] = web.AppKey("foresize_connection_guard", ConnectionGuard)


class AdmissionState:
    """A thread-safe-enough holder for the latest index (a single reference swap)."""

    def __init__(self, index: AdmissionIndex | None = None) -> None:
        self._index = index

    def set(self, index: AdmissionIndex) -> None:
        self._index = index

    def update_from_snapshot(self, snapshot: ClusterSnapshot, **overrides: Any) -> AdmissionIndex:
        index = AdmissionIndex.from_snapshot(snapshot, **overrides)
        self._index = index
        return index

    def __call__(self) -> AdmissionIndex | None:
        return self._index


def _encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _json(data: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(body=_encode(data), status=status, content_type="application/json")


def _closing(status: int, text: str) -> web.Response:
    """An HTTP error after which the connection closes (the rest of the body is not read)."""
    response = web.Response(status=status, text=text)
    response.force_close()
    return response


async def _read_body(request: web.Request, guard: ConnectionGuard) -> bytes | web.Response:
    """The body, or the HTTP answer that refuses it (413 too large, 408 too slow)."""
    limits = guard.limits
    declared = request.content_length
    if declared is not None and declared > limits.max_body:
        guard.bad("body too large", f"Content-Length {declared} > {limits.max_body}")
        return _closing(413, f"body larger than {limits.max_body} bytes")
    try:
        return await asyncio.wait_for(request.read(), limits.body_timeout)
    except TimeoutError:
        guard.bad("body timeout", f"no complete body within {limits.body_timeout:g} s")
        return _closing(408, "request body too slow")
    except web.HTTPRequestEntityTooLarge:
        guard.bad("body too large", f"more than {limits.max_body} bytes (chunked)")
        return _closing(413, f"body larger than {limits.max_body} bytes")
    except Exception as exc:
        # A body that cannot be decoded (`Content-Encoding: gzip` over bytes that are not
        # gzip): no AdmissionReview to answer. 400, as the API server answers a body it
        # cannot decode; a webhook failure it ignores (failurePolicy: Ignore), so the pod
        # is never blocked. The API server itself never compresses webhook requests.
        guard.bad("undecodable body", _one_line(exc))
        return _closing(400, "request body cannot be decoded")


@dataclass(frozen=True, slots=True)
class _ReviewEndpoint:
    """One AdmissionReview endpoint: read the body within the limits, review it (on the
    loop, or in a worker thread when big) and answer 200 with an AdmissionReview whatever
    happens: an unreadable body, no index yet or an internal error is `allowed: true`
    plus a warning. `needs_index` False: the review takes the body alone (/noop)."""

    review: Callable[..., dict[str, Any]]
    needs_index: bool
    state_provider: StateProvider
    clock: Clock
    guard: ConnectionGuard
    pool: ThreadPoolExecutor

    async def handle(self, request: web.Request) -> web.Response:
        raw = await _read_body(request, self.guard)
        if isinstance(raw, web.Response):
            return raw
        try:
            index = self.state_provider() if self.needs_index else None
            now = self.clock()
        except Exception as exc:
            self.guard.bad("internal error", f"state provider failed: {_one_line(exc)}")
            return _json(allow_with_warning(None, f"internal error ({_one_line(exc)})"))
        if len(raw) <= self.guard.limits.inline_body:
            return _json(self.answer(raw, index, now))

        def encoded() -> bytes:  # decoding, review and encoding all in the worker
            return _encode(self.answer(raw, index, now))

        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(self.pool, encoded)
        return web.Response(body=body, content_type="application/json")

    def answer(self, raw: bytes, index: AdmissionIndex | None, now: float) -> dict[str, Any]:
        """The AdmissionReview answering `raw` (internal errors in it are reported)."""
        try:
            body = read_review(raw)
        except Exception as exc:  # not JSON we can read: still answer, never block
            self.guard.bad("malformed AdmissionReview", _one_line(exc))
            return allow_with_warning(
                {"request": {"uid": request_uid(raw)}},
                f"malformed AdmissionReview ({_one_line(exc)})",
            )
        if not self.needs_index:
            return self.review(body)
        if index is None:
            return allow_with_warning(body, "webhook not ready (no cluster state yet)")
        response = self.review(body, index, now)
        for warning in response.get("response", {}).get("warnings") or ():
            if "internal error" in warning:  # a bug of ours: answered, and now seen
                self.guard.bad("internal error", warning[:300])
        return response


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def _readyz(state_provider: StateProvider) -> Callable[[web.Request], Any]:
    """GET /readyz: 200 once the provider has an index, else (or if it fails) 503."""

    async def readyz(_: web.Request) -> web.Response:
        try:
            ready = state_provider() is not None
        except Exception:
            ready = False
        return web.Response(
            text="ok" if ready else "no cluster state yet", status=200 if ready else 503
        )

    return readyz


def create_app(
    state_provider: StateProvider,
    *,
    clock: Clock = time.time,
    noop_endpoint: bool = False,
    limits: ServerLimits = DEFAULT_LIMITS,
    on_bad_request: BadRequestHook | None = None,
    on_pod_change: Callable[..., None] | None = None,
) -> web.Application:
    """The webhook application. `noop_endpoint` adds POST /noop (benchmark floor);
    `on_bad_request(reason)` is called once per refused or cut-off request (a metric);
    `on_pod_change(pod, decision)` is told about every pod the webhook resizes (the
    operator counts it and gives it an Event; called from a review worker thread)."""
    guard = ConnectionGuard(limits, on_bad_request)
    app = web.Application(client_max_size=limits.max_body, middlewares=[_request_deadlines])
    app[GUARD] = guard
    pool = ThreadPoolExecutor(limits.review_workers, thread_name_prefix="foresize-review")

    async def close_pool(_: web.Application) -> None:
        pool.shutdown(wait=False, cancel_futures=True)

    app.on_cleanup.append(close_pool)

    def endpoint(review: Callable[..., dict[str, Any]], needs_index: bool = True) -> Any:
        return _ReviewEndpoint(review, needs_index, state_provider, clock, guard, pool).handle

    def mutate_pods(body: Any, index: AdmissionIndex, now: float) -> dict[str, Any]:
        return review_pod(body, index, now, on_pod_change)

    app.router.add_post("/mutate-pods", endpoint(mutate_pods))
    app.router.add_post("/mutate-scale", endpoint(review_scale))

    def validate_targets(body: Any, index: AdmissionIndex, now: float) -> dict[str, Any]:
        # The maintenance windows' zones are checked against this machine's database.
        return review_target(body, index, now, SYSTEM_ZONES)

    app.router.add_post("/validate-targets", endpoint(validate_targets))
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz(state_provider))
    if noop_endpoint:
        app.router.add_post("/noop", endpoint(review_noop, needs_index=False))
    return app


class _GuardedSite(web.TCPSite):
    """aiohttp's TCP site, creating `_GuardedHandler` protocols, with a TLS handshake
    timeout."""

    def __init__(self, runner: web.AppRunner, guard: ConnectionGuard, *args: Any, **kw: Any):
        super().__init__(runner, *args, **kw)
        self._guard = guard

    async def start(self) -> None:
        self._runner._reg_site(self)  # what BaseSite.start does
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        guard = self._guard

        def protocol() -> _GuardedHandler:
            return _GuardedHandler(
                server,
                guard,
                loop=loop,
                # aiohttp's own idle close is only a backstop: ours fires first and logs.
                keepalive_timeout=guard.limits.idle_timeout + guard.limits.header_timeout,
                access_log=None,
                lingering_time=1.0,  # after a 413/408, drain at most 1 s of the rest
            )

        self._server = await loop.create_server(
            protocol,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
            ssl_handshake_timeout=guard.limits.handshake_timeout if self._ssl_context else None,
        )

    @property
    def sockets(self) -> tuple[Any, ...]:
        return tuple(getattr(self._server, "sockets", None) or ())


class WebhookServer:
    """Start/stop the app on the running loop (tests, the operator, the benchmark)."""

    def __init__(
        self,
        app: web.Application,
        *,
        host: str = "0.0.0.0",
        port: int = 8443,
        ssl_context: ssl.SSLContext | None = None,
        shutdown_timeout: float = 5.0,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        # An app built by create_app carries its guard; any other gets the defaults.
        self.guard = app.get(GUARD) or ConnectionGuard(DEFAULT_LIMITS, None)

    async def start(self) -> int:
        """Start serving; returns the bound port (useful with port=0)."""
        self._runner = web.AppRunner(
            self.app, access_log=None, shutdown_timeout=self.shutdown_timeout
        )
        await self._runner.setup()
        site = _GuardedSite(
            self._runner,
            self.guard,
            self.host,
            self.port,
            ssl_context=self.ssl_context,
            backlog=1024,
        )
        await site.start()
        sockets = site.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]
        return self.port

    @property
    def serving(self) -> bool:
        """Started and not stopped."""
        return self._runner is not None

    @property
    def connections(self) -> int:
        """Connections open now (the connection cap counts these)."""
        return self.guard.active

    async def stop(self) -> None:
        """Graceful: stop accepting, let in-flight requests finish (up to the timeout)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> WebhookServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def run_server(
    state_provider: StateProvider,
    *,
    host: str = "0.0.0.0",
    port: int = 8443,
    ssl_context: ssl.SSLContext | None,
    clock: Clock = time.time,
    stop: asyncio.Event | None = None,
    on_started: Callable[[int], None] | None = None,
) -> None:
    """Serve until `stop` is set or SIGTERM/SIGINT arrives, then shut down gracefully."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    server = WebhookServer(
        create_app(state_provider, clock=clock), host=host, port=port, ssl_context=ssl_context
    )
    bound = await server.start()
    # Everything built so far (the app, the first index) lives as long as the process:
    # keep it out of the collector's generations so GC pauses stay short.
    gc.collect()
    gc.freeze()
    log.info("webhook serving on %s:%d (tls=%s)", host, bound, ssl_context is not None)
    if on_started is not None:
        on_started(bound)
    try:
        await stop.wait()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await server.stop()
