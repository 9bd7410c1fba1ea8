"""The fault-injecting proxy in front of the strict API server: one per operator replica;
it logs every request with its arrival time and injects outages, dropped watches, error
storms and token refusals."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Logged:
    """One request as the proxy saw it."""

    at: float  # time.monotonic() on arrival
    method: str
    path: str
    query: str
    status: int
    auth: str
    agent: str

    @property
    def is_action(self) -> bool:
        """A write by the control loop (not Lease traffic, not Kopf's bookkeeping)."""
        return (
            self.method in ("PATCH", "POST", "DELETE", "PUT")
            and "/leases" not in self.path
            and "kopf" not in self.agent
        )


class FaultProxy:
    """An HTTP proxy in front of the API emulator that injects faults and logs requests."""

    def __init__(self, upstream: str, *, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.log: list[Logged] = []
        self.rng = random.Random(seed)
        self.error_rate = 0.0  # share of non-watch requests answered with an error
        self.token: str | None = None  # required bearer token (None: no auth)
        self.hold_watches = False  # new watch requests wait until this is False again
        # LISTs (not watches) of these paths are held until this monotonic time.
        self.hold_lists: dict[str, float] = {}
        # Watches from clients whose User-Agent contains this get a fatal ERROR event.
        self.fatal_watch_agent: str | None = None
        self.gone: set[str] = set()  # watch paths answered once with ERROR 410
        self.fail: Callable[[str, str, bytes], int | None] | None = None
        self.port = 0
        self._runner: Any = None
        self._session: Any = None
        self._streams: set[asyncio.Task] = set()

    async def start(self, port: int = 0) -> int:
        import aiohttp
        from aiohttp import web

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port or self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def go_down(self) -> None:
        """Stop listening: connections are refused until `come_up`."""
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def come_up(self) -> None:
        await self.start(self.port)

    def drop_watches(self) -> None:
        for task in list(self._streams):
            task.cancel()

    async def close(self) -> None:
        await self.go_down()
        if self._session is not None:
            await self._session.close()

    def _record(self, request: Any, status: int) -> None:
        self.log.append(
            Logged(
                time.monotonic(),
                request.method,
                request.path,
                request.query_string,
                status,
                request.headers.get("Authorization", ""),
                request.headers.get("User-Agent", ""),
            )
        )

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        try:
            body = await request.read()
        except ConnectionError:  # the client went away (a process killed at teardown)
            return web.Response(status=499)
        watch = request.query.get("watch") in ("true", "1")
        if self.token is not None and request.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            self._record(request, 401)
            return _status(401, "Unauthorized", "invalid bearer token")
        if self.fail is not None:
            code = self.fail(request.method, request.path, body)
            if code is not None:
                self._record(request, code)
                return _status(code, "InternalError", "injected")
        if not watch and self.error_rate and self.rng.random() < self.error_rate:
            code = self.rng.choice((429, 500))
            self._record(request, code)
            headers = {"Retry-After": "1"} if code == 429 else {}
            return _status(
                code, "TooManyRequests" if code == 429 else "InternalError", "storm", headers
            )
        while watch and self.hold_watches:
            await asyncio.sleep(0.02)
        while not watch and time.monotonic() < self.hold_lists.get(request.path, 0.0):
            await asyncio.sleep(0.02)
        agent = request.headers.get("User-Agent", "")
        if watch and self.fatal_watch_agent and self.fatal_watch_agent in agent:
            self._record(request, 200)
            fatal = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "x"}}
            return web.Response(text=json.dumps(fatal) + "\n", content_type="application/json")
        if watch and request.path in self.gone:
            self.gone.discard(request.path)
            self._record(request, 200)
            gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
            return web.Response(text=json.dumps(gone) + "\n", content_type="application/json")
        url = self.upstream + request.path_qs
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("content-type", "accept", "user-agent")
        }
        if watch:
            return await self._stream(request, url, headers)
        async with self._session.request(request.method, url, data=body, headers=headers) as up:
            payload = await up.read()
            self._record(request, up.status)
            return web.Response(body=payload, status=up.status, content_type="application/json")

    async def _stream(self, request: Any, url: str, headers: dict[str, str]) -> Any:
        from aiohttp import web

        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        self._record(request, 200)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        try:
            async with self._session.get(url, headers=headers) as up:
                await response.prepare(request)
                async for chunk in up.content.iter_any():
                    await response.write(chunk)
        except (asyncio.CancelledError, ConnectionError):
            pass  # dropped: the client sees the stream end
        finally:
            self._streams.discard(task)
        return response

    def actions(self, since: float = 0.0, until: float = float("inf")) -> list[Logged]:
        return [e for e in self.log if e.is_action and since <= e.at <= until and e.status < 400]


def _status(code: int, reason: str, message: str, headers: dict | None = None) -> Any:
    from aiohttp import web

    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body |= {"reason": reason, "message": message}
    return web.json_response(body, status=code, headers=headers or {})
