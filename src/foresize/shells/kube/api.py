"""A thin, explicit HTTP layer over lightkube's async client.

lightkube supplies the connection: kubeconfig or in-cluster service account, TLS, bearer
token refresh, the httpx transport. Foresize sends its own JSON bodies on exact paths and
reads the raw answer (status code, Kubernetes `Status` body, `Retry-After`), because the
planners need the API server's reason and causes verbatim (429 with `DisruptionBudget`,
403 `NodeCapacity`, 422 validation) rather than a decoded model.

What client-go does for every controller and lightkube does not, this layer does:
- a client-side request rate limit (token bucket, `qps`/`burst`), so a pass with thousands
  of actions cannot flood the API server;
- retries with exponential backoff and full jitter on 429 (API priority and fairness) and
  5xx answers and on connection errors, honouring `Retry-After`. An eviction's 429 and
  500 are answers the planner must see (a disruption budget, several budgets), so they
  are never retried here; a create (POST) is retried only when it surely was not served
  (429, or no connection made), never after a 5xx or a read timeout (`retryable`);
- watch streams (`stream`), one JSON event per line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from foresize.core.errors import ForesizeError
from foresize.shells.kube import send_check
from foresize.shells.kube.send_check import NotSent as NotSent  # its home for the callers

log = logging.getLogger(__name__)

# VPA's components run with --kube-api-qps 50 / --kube-api-burst 100 (client-go's own
# defaults of 5/10 are sized for kubectl, not for a controller acting on a cluster).
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
# Retries of one request: 4 tries in all, delays 0.25 s, 0.5 s, 1 s (full jitter), each at
# most 10 s; a Retry-After above 30 s is not waited for (the answer goes to the caller).
RETRY_ATTEMPTS = 4
RETRY_BASE = 0.25
RETRY_CAP = 10.0
RETRY_AFTER_MAX = 30.0


class RateLimiter:
    """A token bucket: `burst` requests at once, then `qps` per second (client-go's
    flowcontrol.NewTokenBucketRateLimiter)."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self._tokens = float(self.burst)
        self._at = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
        self._at = now

    async def acquire(self) -> float:
        """Wait for a token; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        waited = 0.0
        async with self._lock:
            self._refill()
            while self._tokens < 1.0:
                delay = (1.0 - self._tokens) / self.qps
                await asyncio.sleep(delay)
                waited += delay
                self._refill()
            self._tokens -= 1.0
        return waited


def _retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after") if headers is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def retryable(method: str, path: str, code: int) -> bool:
    """Whether an answer is a transient API-server condition worth retrying here.

    A create (POST) is not idempotent: sent twice it makes two Events (`generateName`) or
    meets its own first copy as 409 AlreadyExists. So a POST is retried only on 429, which
    API priority and fairness answers before the request is served; a 5xx may come after
    the object was stored (kube.md N7). Every other call sets values (PUT, a patch, a
    delete) and may be sent again."""
    if path.endswith("/eviction"):
        return False  # 429 = a disruption budget, 500 = several: the planner decides
    if code == 429:
        return True
    return method != "POST" and code in (500, 502, 503, 504)


def retryable_failure(method: str, exc: BaseException) -> bool:
    """Whether a call that got no answer may be sent again: any idempotent call after a
    transport error; a POST only when it surely never reached the server (no connection
    was made: refused, connect timeout, no free connection), not after a read timeout or a
    dropped connection, when the server may have stored it."""
    if not _transport_error(exc):
        return False
    if method != "POST":
        return True
    httpx = _httpx()
    return isinstance(
        exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | ConnectionRefusedError
    )


JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(slots=True)
class ApiResponse:
    code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


class KubeApi:
    """Send requests through a `lightkube.AsyncClient`'s configured transport."""

    def __init__(
        self,
        client: Any,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        attempts: int = RETRY_ATTEMPTS,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client  # lightkube.AsyncClient
        # The veto is asked once more as each write's bytes go to the socket (send_check).
        generic = getattr(client, "_client", None)
        self.checks_at_socket = send_check.install(getattr(generic, "_client", None))
        self.limiter = RateLimiter(qps, burst)
        self.attempts = max(1, attempts)
        self._rng = rng or random.Random()
        self.retries = 0  # requests sent again after a 429/5xx/connection error
        # Asked right before each send (after the rate-limit wait and between retries) and
        # again at the socket: a reason not to send, e.g. "stopping" once SIGTERM arrived.
        self.veto: Callable[[str, str], str | None] | None = None
        self.throttled_seconds = 0.0  # time spent waiting for the client-side rate limit

    def configure(self, *, qps: float | None = None, burst: int | None = None) -> None:
        """Set the client-side rate limit (`--kube-api-qps`, `--kube-api-burst`)."""
        self.limiter = RateLimiter(
            self.limiter.qps if qps is None else qps,
            self.limiter.burst if burst is None else burst,
        )

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Delay before try `attempt + 1`: Retry-After when given, else full jitter."""
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_MAX)
        return self._rng.uniform(0.0, min(RETRY_CAP, RETRY_BASE * (2**attempt)))

    @classmethod
    def from_url(cls, url: str, namespace: str = "default", token: str | None = None) -> KubeApi:
        """A client for an API server at `url`, without auth (`kubectl proxy`) or with a
        bearer `token` (tests)."""
        from urllib.parse import urlparse

        from lightkube import AsyncClient, KubeConfig
        from lightkube.config.models import Cluster, User

        parts = urlparse(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ForesizeError(f"--server: {url!r} is not an http:// or https:// URL")
        user = User(token=token) if token else User()
        config = KubeConfig.from_one(cluster=Cluster(server=url), user=user, namespace=namespace)
        return cls(AsyncClient(config, trust_env=False))

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeApi:
        """In-cluster service account when running in a pod, else the kubeconfig."""
        from lightkube import AsyncClient, KubeConfig

        if kubeconfig:
            try:
                config = KubeConfig.from_file(kubeconfig).get(context_name=context)
            except (AttributeError, TypeError, KeyError, ValueError) as exc:
                # A YAML file that is not a kubeconfig (a list, a string, missing keys).
                raise ForesizeError(
                    f"--kubeconfig: {kubeconfig}: not a kubeconfig ({type(exc).__name__}: {exc})"
                ) from None
        else:
            config = KubeConfig.from_env().get(context_name=context)
        return cls(AsyncClient(config))

    @property
    def _generic(self) -> Any:
        return self.client._client  # lightkube GenericAsyncClient

    @property
    def base_url(self) -> str:
        return str(self._generic.config.cluster.server)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = JSON,
        params: dict[str, str] | None = None,
        *,
        unthrottled: bool = False,
        raw: bool = False,
    ) -> ApiResponse:
        """One API call: rate-limited (unless `unthrottled`: leader election, which must
        not wait behind a pass's bulk of writes, as kube-controller-manager gives it a
        client of its own), retried on transient answers (see module doc). `raw`: a 2xx
        answer's body is left as bytes, for the caller to decode off the event loop (a
        LIST page of 500 pods is ~1 MB of JSON); other answers are decoded as usual."""
        for attempt in range(self.attempts):
            last = attempt == self.attempts - 1
            try:
                answer = await self._send_once(
                    method, path, body, content_type, params, unthrottled=unthrottled, raw=raw
                )
            except Exception as exc:
                # Connection refused/reset, timeouts: the request may not have arrived.
                if last or not retryable_failure(method, exc):
                    raise
                delay = self.backoff(attempt, None)
                log.debug("%s %s failed (%s); retrying in %.2fs", method, path, exc, delay)
            else:
                if last or not retryable(method, path, answer.code):
                    return answer
                retry_after = _retry_after(answer.headers)
                if retry_after is not None and retry_after > RETRY_AFTER_MAX:
                    return answer
                delay = self.backoff(attempt, retry_after)
                log.debug("%s %s answered %d; retrying in %.2fs", method, path, answer.code, delay)
            self.retries += 1
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _send_once(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        params: dict[str, str] | None,
        *,
        unthrottled: bool = False,
        raw: bool = False,
    ) -> ApiResponse:
        if not unthrottled:
            self.throttled_seconds += await self.limiter.acquire()
        veto = self.veto
        why = veto(method, path) if veto is not None else None
        if why is not None:
            raise NotSent(f"{method} {path} not sent: {why}")
        http = self._generic._client  # the configured httpx client (auth, TLS, base URL)
        content = None if body is None else json.dumps(body).encode()
        headers = {"Accept": JSON}
        if content is not None:
            headers["Content-Type"] = content_type
        req = http.build_request(
            method, path, params=params or None, content=content, headers=headers
        )
        # The same question where no await is left before the bytes leave (send_check).
        asking = send_check.sending(None if veto is None else (lambda: veto(method, path)))
        try:
            resp = await self._generic.send(req)
        except NotSent as exc:
            raise NotSent(f"{method} {path} {exc}") from None
        finally:
            send_check.done(asking)
        if raw and 200 <= resp.status_code < 300:
            return ApiResponse(code=resp.status_code, body=resp.content, headers=dict(resp.headers))
        try:
            data = resp.json() if resp.content else None
        except ValueError:
            data = {"message": resp.text}
        return ApiResponse(code=resp.status_code, body=data, headers=dict(resp.headers))

    async def stream(
        self, path: str, params: dict[str, str], read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch: yields each JSON line; an HTTP error answer is yielded as a synthetic
        `ERROR` event carrying the Status (as the server does for an in-stream error)."""
        httpx = _httpx()
        self.throttled_seconds += await self.limiter.acquire()
        http = self._generic._client
        req = http.build_request(
            "GET",
            path,
            params=params,
            headers={"Accept": JSON},
            timeout=httpx.Timeout(10.0, read=read_timeout),
        )
        resp = await self._generic.send(req, stream=True)
        try:
            if resp.status_code != 200:
                raw = await resp.aread()
                try:
                    status = json.loads(raw) if raw else {}
                except ValueError:
                    status = {"message": raw.decode(errors="replace")}
                if not isinstance(status, dict):
                    status = {}
                status.setdefault("code", resp.status_code)
                yield {"type": "ERROR", "object": status}
                return
            async for line in resp.aiter_lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            await resp.aclose()

    async def server_version(self) -> dict[str, Any]:
        resp = await self.request("GET", "/version")
        if not resp.ok or not isinstance(resp.body, dict):
            raise RuntimeError(f"GET /version answered {resp.code}: {resp.body}")
        return resp.body

    async def close(self) -> None:
        await self.client.close()


def _httpx() -> Any:
    """The HTTP library lightkube is built on: `httpx2` (lightkube 1.x) or `httpx` (0.x).
    Its Timeout and error classes must be the client's own: an `httpx.Timeout` handed to
    an httpx2 client fails every new connection (TypeError in the connect timeout)."""
    try:
        import httpx2

        return httpx2
    except ImportError:  # pragma: no cover - lightkube 0.x
        import httpx

        return httpx


def _transport_error(exc: BaseException) -> bool:
    httpx = _httpx()
    return isinstance(exc, httpx.TransportError | ConnectionError | TimeoutError)
