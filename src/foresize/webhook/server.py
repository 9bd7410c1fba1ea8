"""The webhook shell: an aiohttp HTTPS server around the pure review functions.

Endpoints: POST /mutate-pods, /mutate-scale, /validate-targets (AdmissionReview v1),
GET /healthz (the process is up) and /readyz (an index is loaded). Every admission
endpoint answers HTTP 200 with an AdmissionReview, whatever happens: an unreadable body
or an internal error is `allowed: true` plus a warning, never an HTTP error that the API
server could turn into a blocked pod.

Embedding (the operator): `create_app(state_provider)` gives the aiohttp application;
`WebhookServer` starts and stops it on a running loop; `run_server(...)` runs it until
SIGTERM/SIGINT with graceful shutdown. `state_provider()` returns the current
`AdmissionIndex` (cheap: the operator rebuilds the index when its snapshot changes and
the provider just hands out the latest one).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import signal
import ssl
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from foresize.admission.index import AdmissionIndex
from foresize.admission.review import (
    allow_with_warning,
    review_noop,
    review_pod,
    review_scale,
    review_target,
)
from foresize.cluster.snapshot import ClusterSnapshot

log = logging.getLogger("foresize.webhook")

StateProvider = Callable[[], AdmissionIndex | None]
Clock = Callable[[], float]

MAX_BODY = 4 * 1024 * 1024  # pods with huge env blocks still fit; the API server caps at 3 MiB


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


def _json(data: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def create_app(
    state_provider: StateProvider,
    *,
    clock: Clock = time.time,
    noop_endpoint: bool = False,
) -> web.Application:
    """The webhook application. `noop_endpoint` adds POST /noop (benchmark floor)."""
    app = web.Application(client_max_size=MAX_BODY)

    def handler(review: Callable[..., dict[str, Any]], needs_index: bool = True):
        async def handle(request: web.Request) -> web.Response:
            try:
                raw = await request.read()
                body = json.loads(raw)
            except Exception as exc:  # not JSON at all: still answer, never block
                return _json(allow_with_warning(None, f"malformed AdmissionReview ({exc})"))
            if not needs_index:
                return _json(review(body))
            try:
                index = state_provider()
                if index is None:
                    return _json(
                        allow_with_warning(body, "webhook not ready (no cluster state yet)")
                    )
                now = clock()
            except Exception as exc:
                log.exception("state provider failed")
                return _json(
                    allow_with_warning(body, f"internal error ({type(exc).__name__}: {exc})")
                )
            response = review(body, index, now)
            return _json(response)

        return handle

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        try:
            ready = state_provider() is not None
        except Exception:
            ready = False
        return web.Response(
            text="ok" if ready else "no cluster state yet", status=200 if ready else 503
        )

    app.router.add_post("/mutate-pods", handler(review_pod))
    app.router.add_post("/mutate-scale", handler(review_scale))
    app.router.add_post("/validate-targets", handler(review_target))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if noop_endpoint:
        app.router.add_post("/noop", handler(review_noop, needs_index=False))
    return app


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

    async def start(self) -> int:
        """Start serving; returns the bound port (useful with port=0)."""
        self._runner = web.AppRunner(
            self.app, access_log=None, shutdown_timeout=self.shutdown_timeout
        )
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.host, self.port, ssl_context=self.ssl_context, backlog=1024
        )
        await site.start()
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[attr-defined]
        if sockets:
            self.port = sockets[0].getsockname()[1]
        return self.port

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
