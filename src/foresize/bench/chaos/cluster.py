"""The cluster of a fault scenario: the strict API server seeded with a node, a Deployment,
its ReplicaSet and pods and an in-place autonomous AIScaleTarget; the `foresize operator`
subprocess; waiting on a condition; the scenario's result."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foresize.bench.chaos.proxy import FaultProxy
from foresize.testing.ports import free_port

NAMESPACE = "foresize"
LEASE_DURATION = 3.0
RENEW_DEADLINE = 2.0
LEASE_RETRY = 0.5
# Beyond one retry period, what a standby's takeover may take on a loaded 2-core machine
# (its GET and PATCH of the Lease, through a proxy, with its own pass running).
TAKEOVER_SLACK = 0.5
INTERVAL = 0.5


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
# What a shutdown that did not end cleanly leaves in the log: the operator's line naming the
# tasks still running after it, or the header of the forced exit's dump ("Timeout (0:00:15)!",
# faulthandler's).
HUNG_SHUTDOWN = re.compile(r"still running after the shutdown|Timeout \(\d+:\d\d:\d\d(\.\d+)?\)!")


class OperatorProcess:
    """`foresize operator` as a subprocess (stderr to a file), with a temp directory of
    its own (`tmpdir`, its TMPDIR): what the process leaves there is what it would leave
    in a pod's /tmp (`leftovers`)."""

    def __init__(
        self,
        workdir: Path,
        identity: str,
        *,
        server: str | None,
        args: list[str],
        webhook: bool = False,
        shipped: bool = False,
    ):
        self.webhook = webhook
        # The shipped timings (pass interval, Lease, suggestions) instead of the scenarios'
        # short ones (`foresize bench loop` measures the configuration users run).
        self.shipped = shipped
        self.webhook_port = free_port()
        self.workdir = workdir
        self.identity = identity
        self.server = server
        self.args = args
        self.metrics_port = free_port()
        self.log_path = workdir / f"{identity}.log"
        self.tmpdir = workdir / f"{identity}.tmp"
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
            "--metrics-port",
            str(self.metrics_port),
            *(["--webhook-port", str(self.webhook_port)] if self.webhook else ["--no-webhook"]),
            "--log-format",
            "text",
        ]
        if not self.shipped:
            cmd += [
                "--interval",
                str(INTERVAL),
                "--lease-duration",
                str(LEASE_DURATION),
                "--lease-renew-deadline",
                str(RENEW_DEADLINE),
                "--lease-retry",
                str(LEASE_RETRY),
                "--suggest-interval",
                "3600",
            ]
        cmd += self.args
        self.tmpdir.mkdir(exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(self.tmpdir))
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

    def hung_shutdown(self) -> str | None:
        """What the process said about a shutdown that did not end cleanly: the tasks still
        running after it (the operator's log), or the forced exit's thread dump."""
        text = self.output()
        found = HUNG_SHUTDOWN.search(text)
        if found is None:
            return None
        return text[text.rfind("\n", 0, found.start()) + 1 :][:3000]

    def leftovers(self) -> list[str]:
        """What the process has in its temp directory (relative paths, sorted)."""
        return sorted(str(p.relative_to(self.tmpdir)) for p in self.tmpdir.rglob("*"))

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
    """The strict API server + a FaultProxy + operator processes, torn down on exit.

    The processes' logs, temp directories and files (a kubeconfig, a token) go to
    `workdir`: the caller's folder, left as it is (pytest's tmp_path; `run_scenarios` keeps
    a failed scenario's as its evidence), or else a temporary folder removed on exit."""

    def __init__(
        self, pods: int = 20, seed: int = 0, target: bool = True, workdir: Path | None = None
    ) -> None:
        self.pods = pods
        self.target = target
        self.seed = seed
        self.processes: list[OperatorProcess] = []
        self.proxies: list[FaultProxy] = []
        self._stack = contextlib.AsyncExitStack()
        self._workdir = workdir

    async def __aenter__(self) -> Cluster:
        from foresize.testing.apiserver import StrictApiServer

        if self._workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="foresize-chaos-"))
            self._stack.callback(shutil.rmtree, self.workdir, ignore_errors=True)
        else:
            self.workdir = self._workdir
        try:
            self.k = StrictApiServer(seed=self.seed, bookmark_interval=1.0)
            await self.k.start()
            self._stack.push_async_callback(self.k.stop)
            populate(self.k, self.pods, self.target)
            self.proxy = await self.new_proxy()
        except BaseException:
            await self.__aexit__()
            raise
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
