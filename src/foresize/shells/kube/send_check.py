"""The last word on a request, asked as its bytes are handed to the socket.

`KubeApi` asks its veto before each request (after the rate limit's wait, before every
retry), but on one event loop a check is only as fresh as the loop is live: httpx and its
connection pool still await (a free connection, the pool's lock, the connection's own)
between that check and the socket, and any stall there (a long synchronous step of another
task, a starved process) is spent from the margin between the renew deadline and the
Lease's expiry. `bench shard` at 50k pods saw it: a replica's loop stalled 19.5 s and ten
status writes arrived 0.07-0.4 s after its Lease had expired (docs/scale.md).

So the question is asked again where no await is left before the bytes leave: in the
connection's network stream, wrapped around the pool's own. Its `write` asks the check of
the request in progress (a contextvar: the connection pool runs a request's I/O in the
task that sent it) and raises `NotSent` instead of writing. From there to the socket,
anyio's stream calls the transport's `write` without yielding (unless the socket's buffer
is full, which the small bodies of these writes never make it), so what the check saw is
what holds when the bytes go: a replica that stopped holding its Lease (by its own
monotonic clock, within the renew deadline) sends nothing more.

A request refused here has sent nothing (its first write is the request line and the
headers); the connection is left half-used, so httpcore closes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)

Check = Callable[[], str | None]

# The check of the request the current task is sending (None: nothing to ask).
_SENDING: ContextVar[Check | None] = ContextVar("foresize_send_check", default=None)


class NotSent(RuntimeError):
    """The veto refused a request (never retried)."""


def sending(check: Check | None) -> Any:
    """Make `check` the last word on the request this task sends next; returns the token
    to `done` with."""
    return _SENDING.set(check)


def done(token: Any) -> None:
    _SENDING.reset(token)


def last_word() -> None:
    """Raise NotSent if the request in progress may no longer go out."""
    check = _SENDING.get()
    why = check() if check is not None else None
    if why is not None:
        raise NotSent(f"not sent: {why}")


class CheckedStream:
    """A network stream whose every write is preceded by the request's last word."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        last_word()  # synchronous: nothing runs between this and the inner write's send
        await self._inner.write(buffer, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = await self._inner.read(max_bytes, timeout)
        return data

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> CheckedStream:
        return CheckedStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class CheckedBackend:
    """The connection pool's network backend, its streams wrapped in `CheckedStream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> CheckedStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return CheckedStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> CheckedStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return CheckedStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def install(http: Any) -> bool:
    """Wrap the network backend of an httpx client's connection pool (before its first
    connection). False, logged, when the client is not built that way (a mocked transport,
    a proxy): the veto before each request is then the last word."""
    pool = getattr(getattr(http, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:
        if http is not None:
            log.warning("the API client's transport has no network backend to check writes at")
        return False
    if not isinstance(backend, CheckedBackend):
        pool._network_backend = CheckedBackend(backend)  # type: ignore[union-attr]
    return True
