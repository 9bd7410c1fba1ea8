"""Fault scenarios for the real `foresize operator` process (`foresize bench chaos`, and
the fault tests).

Each scenario starts the strict API server (`foresize.testing.apiserver`) with a small
cluster (a node, a Deployment, its ReplicaSet, an in-place autonomous AIScaleTarget with
a suggestion, its pods), puts a `FaultProxy` in front of it (one per replica, so the log
tells replicas apart), and runs `foresize operator` as a subprocess against the proxy,
with short intervals through the operator's own flags.
The proxy injects the fault (outage, 410 Gone, 429/500 storms, 401 after a token
rotation, failing Lease renewals) and logs every request with its arrival time; each
scenario's invariant is checked from that log and from the process's exit.

Times are scaled down for a quick run: the 90 s outage at start is `outage` seconds
(default 8), the Lease is 3 s with a 2 s renew deadline and a 0.5 s retry period.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foresize.testing.ports import free_port

NAMESPACE = "foresize"
LEASE_DURATION = 3.0
RENEW_DEADLINE = 2.0
LEASE_RETRY = 0.5
# Beyond one retry period, what a standby's takeover may take on a loaded 2-core machine
# (its GET and PATCH of the Lease, through a proxy, with its own pass running).
TAKEOVER_SLACK = 0.5
INTERVAL = 0.5


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


# ------------------------------------------------------------------ the cluster
IMAGE = "registry.example/app:1"
SUGGESTION = {
    "uid": "sugg-1",
    "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": "256Mi"}}],
}


def _pod(name: str, rs_uid: str) -> dict[str, Any]:
    resources = {"requests": {"cpu": "200m", "memory": "256Mi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": "web"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc",
                    "uid": rs_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "app", "image": IMAGE, "resources": resources}],
        },
        "status": {
            "phase": "Running",
            "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "app",
                    "image": IMAGE,
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "allocatedResources": dict(resources["requests"]),
                    "resources": resources,
                }
            ],
        },
    }


def _workload(kind: str, name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": "web"}
    resources = {"requests": {"cpu": "200m", "memory": "256Mi"}}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "shop", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": IMAGE, "resources": resources}]},
            },
        },
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def populate(server: Any, pods: int, target: bool = True) -> None:
    """The operator's namespace and the small cluster, seeded into the strict server."""
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    server.seed(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    dep = server.seed(_workload("Deployment", "web", pods))
    rs = _workload("ReplicaSet", "web-abc", pods)
    rs["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": dep["metadata"]["uid"],
            "controller": True,
        }
    ]
    rs_uid = server.seed(rs)["metadata"]["uid"]
    for i in range(pods):
        server.seed(_pod(f"web-{i}", rs_uid))
    if not target:
        return
    server.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "autonomous",
                    "containers": [
                        {
                            "name": "app",
                            "cpu": {"lowerbound": "50m"},
                            "memory": {"lowerbound": "64Mi"},
                        }
                    ],
                    "update_policy": {"update_mode": "in_place"},
                    "disruption": {"max_disrupted": "100%", "interval": "1s"},
                },
            },
            "status": {"hasEnoughDataToScale": True, "vertical_suggestion": SUGGESTION},
        }
    )


def lease_holder(server: Any) -> str | None:
    lease = server.get("Lease", NAMESPACE, "foresize-shard-0")
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


# ------------------------------------------------------------------ the process
class OperatorProcess:
    """`foresize operator` as a subprocess (stderr to a file)."""

    def __init__(
        self,
        workdir: Path,
        identity: str,
        *,
        server: str | None,
        args: list[str],
        webhook: bool = False,
    ):
        self.webhook = webhook
        self.webhook_port = free_port()
        self.workdir = workdir
        self.identity = identity
        self.server = server
        self.args = args
        self.metrics_port = free_port()
        self.log_path = workdir / f"{identity}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.exited_at: float | None = None

    async def start(self) -> None:
        cmd = [sys.executable, "-m", "foresize", "operator"]
        if self.server:
            cmd += ["--server", self.server]
        cmd += [
            "--namespace",
            NAMESPACE,
            "--identity",
            self.identity,
            "--interval",
            str(INTERVAL),
            "--metrics-port",
            str(self.metrics_port),
            *(["--webhook-port", str(self.webhook_port)] if self.webhook else ["--no-webhook"]),
            "--log-format",
            "text",
            "--lease-duration",
            str(LEASE_DURATION),
            "--lease-renew-deadline",
            str(RENEW_DEADLINE),
            "--lease-retry",
            str(LEASE_RETRY),
            "--suggest-interval",
            "3600",
            *self.args,
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("KUBECONFIG", None)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=self._log, stderr=self._log, env=env
        )

    def send(self, sig: signal.Signals) -> float:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return time.monotonic()

    async def wait(self, timeout: float) -> int | None:
        """The exit code, or None if still running after `timeout` (then killed)."""
        assert self.proc is not None
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
            self.exited_at = time.monotonic()
            return code
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            return None
        finally:
            if self.proc.returncode is not None:
                self._log.close()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def probe(self, path: str) -> int:
        import aiohttp

        try:
            async with aiohttp.ClientSession() as s:
                url = f"http://127.0.0.1:{self.metrics_port}{path}"
                async with s.get(url, timeout=aiohttp.ClientTimeout(total=2)) as r:
                    return r.status
        except Exception:
            return 0

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


async def wait_until(
    check: Callable[[], bool | Awaitable[bool]], timeout: float, step: float = 0.05
) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return True
        await asyncio.sleep(step)
    return False


@dataclass(slots=True)
class ScenarioResult:
    name: str
    seconds: float  # the scenario's measured time (see each scenario)
    ok: bool
    detail: str = ""
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            "detail": self.detail,
            "problems": self.problems,
        }


class Cluster:
    """The strict API server + a FaultProxy + operator processes, torn down on exit."""

    def __init__(self, pods: int = 20, seed: int = 0, target: bool = True) -> None:
        self.pods = pods
        self.target = target
        self.seed = seed
        self.processes: list[OperatorProcess] = []
        self.proxies: list[FaultProxy] = []
        self._stack = contextlib.AsyncExitStack()
        self.workdir = Path(tempfile.mkdtemp(prefix="foresize-chaos-"))

    async def __aenter__(self) -> Cluster:
        from foresize.testing.apiserver import StrictApiServer

        self.k = StrictApiServer(seed=self.seed, bookmark_interval=1.0)
        await self.k.start()
        self._stack.push_async_callback(self.k.stop)
        populate(self.k, self.pods, self.target)
        self.proxy = await self.new_proxy()
        return self

    async def new_proxy(self) -> FaultProxy:
        proxy = FaultProxy(self.k.url, seed=self.seed + len(self.proxies))
        await proxy.start()
        self.proxies.append(proxy)
        return proxy

    def operator(
        self,
        identity: str = "a",
        proxy: FaultProxy | None = None,
        args: list[str] | None = None,
        webhook: bool = False,
    ) -> OperatorProcess:
        server = (proxy or self.proxy).url
        process = OperatorProcess(
            self.workdir, identity, server=server, args=args or [], webhook=webhook
        )
        self.processes.append(process)
        return process

    async def __aexit__(self, *exc: object) -> None:
        for process in self.processes:
            if process.running:
                process.proc.kill()  # type: ignore[union-attr]
                await process.wait(5)
        for proxy in self.proxies:
            await proxy.close()
        await self._stack.aclose()


# ------------------------------------------------------------------ scenarios
async def scenario_signal(sig: signal.Signals = signal.SIGTERM) -> ScenarioResult:
    """SIGTERM/SIGINT mid-pass: no action after the signal (one in flight at most),
    Lease released, exit 0 within 10 s, and the standby takes over within one retry
    period of the release (plus `TAKEOVER_SLACK`). seconds = signal to exit."""
    name = f"{sig.name.lower()} mid-pass"
    async with Cluster(pods=40) as c:
        # A slow client rate limit makes the pass long enough to be interrupted mid-way.
        slow = ["--kube-api-qps", "10", "--kube-api-burst", "2"]
        op = c.operator(args=slow)
        await op.start()
        acting = await wait_until(lambda: len(c.proxy.actions()) >= 3, 30)
        if not acting:
            return ScenarioResult(name, 0.0, False, problems=["never acted", op.output()[-2000:]])
        proxy_b = await c.new_proxy()
        standby = c.operator("b", proxy=proxy_b, args=slow)
        await standby.start()
        # The standby is up once it watches the Lease (twice: it has seen it stay held).
        await wait_until(lambda: sum("/leases" in e.path for e in proxy_b.log) >= 2, 30)
        problems = []
        if proxy_b.actions():
            problems.append("the standby acted while the leader held the Lease")
        sent = op.send(sig)
        code = await op.wait(15)
        took = (op.exited_at or time.monotonic()) - sent
        late = c.proxy.actions(since=sent + 0.1)
        released = next(
            (
                e.at
                for e in c.proxy.log
                if e.at > sent and e.method == "PATCH" and "/leases" in e.path
            ),
            None,
        )
        taken = await wait_until(lambda: lease_holder(c.k) == "b", 10)
        # When the standby's Lease write landed (its proxy's log), not when this check
        # noticed: the check runs after the leader's exit, which takes longer.
        won = next(
            (
                e.at
                for e in proxy_b.log
                if e.at > (released or sent)
                and e.method == "PATCH"
                and "/leases" in e.path
                and e.status == 200
            ),
            time.monotonic(),
        )
        took_over = won - (released or sent)
        if not taken:
            problems.append("the standby never took over")
        elif released is not None and took_over >= LEASE_RETRY + TAKEOVER_SLACK:
            # The standby's next round after the release wins: one retry period, plus
            # a GET and a PATCH on a loaded machine.
            problems.append(f"the standby took {took_over:.1f}s after the release")
        if code != 0:
            problems.append(f"exit code {code}")
        if took > 10:
            problems.append(f"exit took {took:.1f}s")
        if late:
            problems.append(
                f"{len(late)} action(s) after the signal: {late[0].method} {late[0].path}"
            )
        if released is None:
            problems.append("the Lease was not released")
        detail = (
            f"{len(c.proxy.actions(until=sent))} actions before the signal; standby leads "
            f"{took_over:.2f}s after the release"
        )
        return ScenarioResult(name, took, not problems, detail, problems)


async def scenario_outage_at_start(outage: float = 8.0) -> ScenarioResult:
    """The API unreachable for `outage` s at start (90 s in production, scaled): not
    ready meanwhile, alive, and acting within 30 s of the API's return.
    seconds = API back to first action."""
    name = f"API unreachable {outage:g}s at start"
    async with Cluster(pods=4) as c:
        await c.proxy.go_down()
        op = c.operator()
        await op.start()
        await asyncio.sleep(outage)
        problems = []
        ready = await op.probe("/readyz")
        if ready == 200:
            problems.append("ready while the API was unreachable")
        if not op.running:
            problems.append(f"exited during the outage: {op.output()[-1500:]}")
            return ScenarioResult(name, 0.0, False, problems=problems)
        await c.proxy.come_up()
        back = time.monotonic()
        acted = await wait_until(lambda: bool(c.proxy.actions(since=back)), 40)
        took = c.proxy.actions(since=back)[0].at - back if acted else 40.0
        if not acted or took > 30:
            problems.append(f"no action within 30 s of the API's return ({op.output()[-1500:]})")
        if not await wait_until(lambda: _probe_is(op, "/readyz", 200), 10):
            problems.append("never ready after the API came back")
        lists = [
            e for e in c.proxy.log if e.method == "GET" and e.at >= back and "watch" not in e.query
        ]
        first_action = c.proxy.actions(since=back)[0].at if acted else float("inf")
        listed = {e.path for e in lists if e.at < first_action}
        for path in (
            "/api/v1/pods",
            "/apis/apps/v1/deployments",
            "/apis/foresize.io/v1/aiscaletargets",
        ):
            if path not in listed:
                problems.append(f"acted before listing {path}")
        return ScenarioResult(
            name, took, not problems, f"ready={ready} during the outage", problems
        )


async def _probe_is(op: OperatorProcess, path: str, code: int) -> bool:
    return await op.probe(path) == code


async def scenario_watch_gone() -> ScenarioResult:
    """Watches dropped, an object deleted meanwhile, the re-watch answered 410 Gone: the
    relist prunes it, and no call is made for it afterwards. seconds = drop to relist."""
    name = "watches dropped + 410 Gone"
    async with Cluster(pods=3) as c:
        op = c.operator()
        await op.start()
        if not await wait_until(lambda: len(c.proxy.actions()) >= 1, 30):
            return ScenarioResult(name, 0.0, False, problems=["never acted", op.output()[-2000:]])
        # Watches drop and stay away while the pod is deleted and the server forgets the
        # versions (a control-plane restart): the resumed watch is answered 410 Gone.
        c.proxy.hold_watches = True
        dropped = time.monotonic()
        c.proxy.drop_watches()
        c.k.drop_watches()
        await asyncio.sleep(0.2)
        c.k.delete("Pod", "shop", "web-2")
        c.k.expire_resource_versions(notify=False)
        c.proxy.hold_watches = False
        relisted = await wait_until(
            lambda: any(
                e.path == "/api/v1/pods" and "watch" not in e.query and e.at > dropped
                for e in c.proxy.log
            ),
            20,
        )
        took = time.monotonic() - dropped
        await asyncio.sleep(3 * INTERVAL)
        problems = []
        if not relisted:
            problems.append("no relist after 410")
        if "left the cache" not in op.output():
            problems.append("the deleted pod stayed in the cache")
        # Writes only: a pass planned before the relist may still look the pod up (GET,
        # 404) but must not resize or evict it.
        ghost = [e for e in c.proxy.actions(since=dropped + took) if "/pods/web-2" in e.path]
        if ghost:
            problems.append(
                f"{len(ghost)} call(s) for the deleted pod: {ghost[0].method} {ghost[0].path}"
            )
        if not op.running:
            problems.append("the process exited")
        return ScenarioResult(name, took, not problems, "", problems)


async def scenario_storm(duration: float = 6.0) -> ScenarioResult:
    """Half of all calls answered 429 (Retry-After: 1) or 500 for `duration` s: the
    operator stays up, keeps under its client rate limit, and its writes land after the
    storm. seconds = storm end to the first successful action."""
    name = f"429/500 storm ({duration:g}s, half of all calls)"
    qps, burst = 10.0, 5
    async with Cluster(pods=10) as c:
        c.proxy.error_rate = 0.5
        started = time.monotonic()
        op = c.operator(args=["--kube-api-qps", str(qps), "--kube-api-burst", str(burst)])
        await op.start()
        await asyncio.sleep(duration)
        c.proxy.error_rate = 0.0
        ended = time.monotonic()
        acted = await wait_until(lambda: bool(c.proxy.actions(since=ended)), 20)
        took = c.proxy.actions(since=ended)[0].at - ended if acted else 20.0
        problems = []
        if not op.running:
            problems.append("the process exited")
        storm = [e for e in c.proxy.log if started <= e.at <= ended and "watch" not in e.query]
        # The client-side limit covers Foresize's own client; Kopf has its own, and the
        # Lease calls are exempt (they must not queue behind a pass).
        limited = [e for e in storm if "kopf" not in e.agent and "/leases" not in e.path]
        peak = max(
            (sum(1 for e in limited if t <= e.at < t + 1.0) for t in (e.at for e in limited)),
            default=0,
        )
        if peak > qps + burst:
            problems.append(f"{peak} requests in one second (limit {qps:g}/s, burst {burst})")
        failed = sum(1 for e in storm if e.status >= 429)
        if not acted and not c.proxy.actions(since=started):
            problems.append("no write landed")
        created = sum(1 for e in c.proxy.log if e.method == "POST" and e.path.endswith("/events"))
        bumped = sum(1 for e in c.proxy.log if e.method == "PATCH" and "/events/" in e.path)
        detail = (
            f"{len(storm)} requests in the storm, {failed} refused, peak {peak}/s; "
            f"Events: {created} created, {bumped} count bumps"
        )
        return ScenarioResult(name, took, not problems, detail, problems)


async def scenario_token_rotation() -> ScenarioResult:
    """The token file changes and the old token gets 401: the operator's own calls and
    Kopf's both carry on with the new one. seconds = rotation to the first successful
    call with the new token from each (the later of the two)."""
    name = "token rotation"
    async with Cluster(pods=3) as c:
        token = c.workdir / "token"
        token.write_text("token-1")
        c.proxy.token = "token-1"
        kubeconfig = c.workdir / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": c.proxy.url}}],
                    "users": [{"name": "u", "user": {"tokenFile": str(token)}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        op = OperatorProcess(c.workdir, "a", server=None, args=["--kubeconfig", str(kubeconfig)])
        c.processes.append(op)
        await op.start()
        problems = []
        kopf_seen = await wait_until(
            lambda: any("kopf" in e.agent and e.status == 200 for e in c.proxy.log), 30
        )
        if not kopf_seen or not await wait_until(lambda: bool(c.proxy.actions()), 30):
            return ScenarioResult(name, 0.0, False, problems=["never started", op.output()[-2000:]])
        token.write_text("token-2")
        c.proxy.token = "token-2"
        rotated = time.monotonic()
        c.proxy.drop_watches()  # e.g. an API server restart: everyone reconnects

        def first_ok(kopf: bool) -> float | None:
            for e in c.proxy.log:
                new = e.at > rotated and e.status < 400 and e.auth == "Bearer token-2"
                if new and ("kopf" in e.agent) == kopf:
                    return e.at
            return None

        both = await wait_until(lambda: bool(first_ok(True) and first_ok(False)), 30)
        took = max(first_ok(True) or 0.0, first_ok(False) or 0.0) - rotated
        if not both:
            problems.append(
                f"new token used by kopf={first_ok(True) is not None} "
                f"lightkube={first_ok(False) is not None}"
            )
        if not op.running:
            problems.append(f"the process exited: {op.output()[-1500:]}")
        if "Ran out of valid credentials" in op.output():
            problems.append("Kopf ran out of credentials")
        return ScenarioResult(name, took if both else 30.0, not problems, "", problems)


async def scenario_leader_loss() -> ScenarioResult:
    """Two replicas; the leader's Lease renewals start failing: it stops acting within its
    renew deadline, the standby takes over, and the two never act at the same time.
    seconds = first failed renewal to the old leader's last action."""
    name = "Lease renewals fail (two replicas)"
    async with Cluster(pods=6) as c:
        proxy_b = await c.new_proxy()
        a = c.operator("a")
        await a.start()
        if not await wait_until(lambda: lease_holder(c.k) == "a" and bool(c.proxy.actions()), 30):
            return ScenarioResult(name, 0.0, False, problems=["a never led", a.output()[-2000:]])
        b = c.operator("b", proxy=proxy_b)
        await b.start()
        await asyncio.sleep(2.0)
        problems = []
        if proxy_b.actions():
            problems.append("the standby acted while the leader held the Lease")
        c.proxy.fail = lambda method, path, body: 500 if "/leases" in path else None
        failing = time.monotonic()
        took_over = await wait_until(lambda: lease_holder(c.k) == "b", 20)
        await asyncio.sleep(1.0)
        a_actions = c.proxy.actions()
        last_a = max((e.at for e in a_actions), default=failing)
        first_b = min((e.at for e in proxy_b.actions()), default=float("inf"))
        took = max(0.0, last_a - failing)
        if not took_over:
            problems.append("the standby never took the Lease over")
        if took > RENEW_DEADLINE + 0.5:
            problems.append(f"the old leader acted {took:.1f}s after its renewals failed")
        if first_b < last_a:
            problems.append("both replicas acted at once")
        detail = f"standby's first action {first_b - failing:.1f}s after the failure"
        return ScenarioResult(name, took, not problems, detail, problems)


async def scenario_kopf_dies() -> ScenarioResult:
    """Kopf's watch gets a fatal error (a non-410 ERROR event): Kopf stops, and the
    process must exit non-zero so Kubernetes restarts it (before, the replica kept its
    Lease with a dead Kopf and said healthy). seconds = fault to exit."""
    name = "Kopf dies"
    async with Cluster(pods=2) as c:
        op = c.operator()
        await op.start()
        if not await wait_until(lambda: bool(c.proxy.actions()), 30):
            return ScenarioResult(name, 0.0, False, problems=["never acted", op.output()[-2000:]])
        c.proxy.fatal_watch_agent = "kopf"
        broke = time.monotonic()
        c.proxy.drop_watches()
        code = await op.wait(30)
        took = (op.exited_at or time.monotonic()) - broke
        problems = []
        if code is None:
            problems.append("still running 30 s after Kopf died")
        elif code == 0:
            problems.append("exit code 0 after a failure")
        if problems:  # the process's own account, for a failure seen once under load
            problems.append(op.output()[-3000:])
        return ScenarioResult(name, took, not problems, f"exit code {code}", problems)


async def scenario_templates_before_workloads(hold: float = 4.0) -> ScenarioResult:
    """A ClusterAIScaleTemplate and the AIScaleTarget it made are listed, the Deployments
    only `hold` s later: nothing is written (above all, the target is not deleted and its
    pods are not reverted) until every cache has synced. seconds = Deployments listed to
    the first write."""
    from foresize.api.types import ClusterAIScaleTemplate

    name = "templates listed before workloads"
    async with Cluster(pods=2, target=False) as c:
        template = {
            "apiVersion": "foresize.io/v1",
            "kind": "ClusterAIScaleTemplate",
            "metadata": {"name": "fleet"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "spec": {
                        "vertical": {
                            "mode": "recommendation",
                            "containers": [{"name": "*", "cpu": {"lowerbound": "10m"}}],
                        }
                    }
                },
            },
        }
        c.k.seed(template)
        made = ClusterAIScaleTemplate.model_validate(template).spec.build_target(
            "Deployment", "web", "shop", "fleet"
        )
        body = made.model_dump(by_alias=True, exclude_none=True, mode="json")
        c.k.seed(body)
        listed_at = time.monotonic() + hold
        c.proxy.hold_lists["/apis/apps/v1/deployments"] = listed_at
        op = c.operator()
        await op.start()
        await wait_until(lambda: time.monotonic() > listed_at + 3.0, hold + 30)
        problems = []
        early = c.proxy.actions(until=listed_at)
        if early:
            problems.append(f"{len(early)} write(s) before the Deployments were listed")
        deletes = [e for e in c.proxy.log if e.method == "DELETE" and "aiscaletargets" in e.path]
        if deletes:
            problems.append(f"deleted {deletes[0].path}")
        if c.k.get("AIScaleTarget", "shop", body["metadata"]["name"]) is None:
            problems.append("the template-made target is gone")
        if not op.running:
            problems.append(f"the process exited: {op.output()[-1500:]}")
        later = c.proxy.actions(since=listed_at)
        took = later[0].at - listed_at if later else 0.0
        return ScenarioResult(name, took, not problems, f"{len(later)} writes after sync", problems)


async def served_certificate(port: int) -> bytes | None:
    """The certificate (DER) a fresh TLS handshake with the webhook port gets."""
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ctx), 2.0)
    except (OSError, TimeoutError):
        return None
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return bytes(der) if der else None


def _tls_secret(server: Any, age_days: float, days: int = 365) -> bytes:
    """Put a certificate issued `age_days` ago into the webhook Secret; returns its DER."""
    import datetime as dt
    import ssl

    from foresize.webhook.certs import generate_self_signed, service_dns_names, tls_secret

    issued = dt.datetime.now(dt.UTC) - dt.timedelta(days=age_days)
    b = generate_self_signed(
        service_dns_names("foresize-webhook", NAMESPACE), now=issued, days=days
    )
    data = b.secret_data()
    if server.get("Secret", NAMESPACE, "foresize-webhook-tls") is None:
        server.seed(tls_secret(b, "foresize-webhook-tls", NAMESPACE))
    else:

        def put(secret: dict[str, Any]) -> None:
            secret["data"] = data

        server.update("Secret", NAMESPACE, "foresize-webhook-tls", put)
    return ssl.PEM_cert_to_DER_cert(b.cert_pem.decode())


async def scenario_certificate(cert_manager: bool = False) -> ScenarioResult:
    """Self-managed: the Secret's certificate gets near expiry while the operator serves;
    it is renewed and the new one served on the same port, no restart.
    cert-manager: cert-manager renews the Secret; the new certificate is served.
    seconds = Secret change to the new certificate served."""
    from foresize.webhook.certs import webhook_configurations

    name = "certificate renewed by cert-manager" if cert_manager else "certificate near expiry"
    async with Cluster(pods=1) as c:
        for config in webhook_configurations(service="foresize-webhook", namespace=NAMESPACE):
            c.k.seed(config)
        first = _tls_secret(c.k, age_days=1)
        args = ["--tls-secret", "foresize-webhook-tls", "--cert-check-interval", "0.5"]
        if cert_manager:
            args.append("--cert-manager")
        op = c.operator(args=args, webhook=True)
        await op.start()
        problems: list[str] = []

        async def serving(der: bytes) -> bool:
            return await served_certificate(op.webhook_port) == der

        if not await wait_until(lambda: serving(first), 30, step=0.2):
            return ScenarioResult(name, 0.0, False, problems=["never served", op.output()[-2000:]])
        pid = op.proc.pid if op.proc else None
        # Time passes (the Secret now holds a certificate issued 300 of 365 days ago), or
        # cert-manager writes a fresh one.
        changed_to = _tls_secret(c.k, age_days=0 if cert_manager else 300)
        changed = time.monotonic()

        async def renewed() -> bool:
            der = await served_certificate(op.webhook_port)
            if cert_manager:
                return der == changed_to
            return der is not None and der not in (first, changed_to)

        ok = await wait_until(renewed, 20, step=0.2)
        took = time.monotonic() - changed
        if not ok:
            problems.append(f"the new certificate was not served ({op.output()[-1500:]})")
        if not op.running or (op.proc and op.proc.pid != pid):
            problems.append("the process restarted")
        writes = [e for e in c.proxy.log if e.method == "PATCH" and "/secrets/" in e.path]
        if cert_manager and writes:
            problems.append("wrote cert-manager's Secret")
        if not cert_manager and not writes:
            problems.append("the renewed certificate was not written to the Secret")
        return ScenarioResult(name, took, not problems, "", problems)


async def scenario_certificate_expired() -> ScenarioResult:
    """cert-manager failed to renew: the Secret's certificate is expired. It is not served
    silently: the expiry metric goes negative and a Warning Event is posted.
    seconds = start to the Event."""
    name = "certificate expired"
    async with Cluster(pods=1) as c:
        _tls_secret(c.k, age_days=400)
        args = ["--tls-secret", "foresize-webhook-tls", "--cert-check-interval", "0.5"]
        op = c.operator(args=[*args, "--cert-manager"], webhook=True)
        started = time.monotonic()
        await op.start()
        problems: list[str] = []

        def event_posted() -> bool:
            return any(
                e["reason"] == "WebhookCertificateExpired" for e in c.k.list("Event", NAMESPACE)
            )

        posted = await wait_until(event_posted, 30, step=0.2)
        took = time.monotonic() - started
        if not posted:
            problems.append("no WebhookCertificateExpired Event")
        metrics = ""
        try:
            import aiohttp

            async with aiohttp.ClientSession() as session:
                url = f"http://127.0.0.1:{op.metrics_port}/metrics"
                async with session.get(url) as r:
                    metrics = await r.text()
        except Exception as exc:
            problems.append(f"no /metrics: {exc}")
        line = next(
            (
                x
                for x in metrics.splitlines()
                if x.startswith("foresize_webhook_certificate_expiry_seconds ")
            ),
            "",
        )
        if not line or float(line.split()[1]) >= 0:
            problems.append(f"expiry metric not negative: {line!r}")
        if "expired" not in op.output():
            problems.append("no error logged")
        return ScenarioResult(name, took, not problems, line, problems)


SCENARIOS: dict[str, Callable[[], Awaitable[ScenarioResult]]] = {
    "sigterm": lambda: scenario_signal(signal.SIGTERM),
    "sigint": lambda: scenario_signal(signal.SIGINT),
    "outage": scenario_outage_at_start,
    "watch-gone": scenario_watch_gone,
    "storm": scenario_storm,
    "token": scenario_token_rotation,
    "leader": scenario_leader_loss,
    "kopf-dies": scenario_kopf_dies,
    "templates": scenario_templates_before_workloads,
    "certificate": scenario_certificate,
    "certificate-cert-manager": lambda: scenario_certificate(cert_manager=True),
    "certificate-expired": scenario_certificate_expired,
}


async def run_scenarios(names: list[str] | None = None) -> dict[str, Any]:
    results = []
    for name in names or list(SCENARIOS):
        started = time.monotonic()
        try:
            result = await SCENARIOS[name]()
        except Exception as exc:  # a broken scenario is a violation, not a crash
            result = ScenarioResult(name, time.monotonic() - started, False, problems=[repr(exc)])
        results.append(result)
    return {
        "scenarios": len(results),
        "violations": sum(1 for r in results if not r.ok),
        "results": [r.to_json() for r in results],
    }
