"""`foresize bench webhook`: the real HTTPS webhook server on loopback under an open-loop
load generator (architecture §3.7).

The server runs in its own process (so the client's work does not share its GIL) with a
synthetic index of many targets; the client (aiohttp, keep-alive connections, as the API
server keeps them) fires pod AdmissionReviews on a fixed schedule. Latency is measured
from each request's *scheduled* start, so a client or server that falls behind shows up
as latency instead of silently lowering the rate (no coordinated omission).

`p50_ms`/`p99_ms` count from the scheduled start; `service_p99_ms` from the moment the
request was actually sent (the difference is the load generator falling behind).

Measured, in one run: p50/p99 at the reference rate (200 req/s), median over repeats;
the same for the server's no-op endpoint (the floor: TLS, HTTP and JSON only); and the
highest rate in a doubling-then-bisecting ramp whose p99 stays under 10 ms with no
errors and the rate actually achieved. Every phase is bounded in time and count.

Under abuse (`abuse` in the JSON): the answer time of a pod with a 10 KB malicious cpu
quantity; p50/p99 at the reference rate again while `slow_connections` slow-loris clients
(TLS up, a request head dripped one byte a second, replaced as soon as the server cuts
them) are held open, with the ratio to the quiet p99; the server's RSS at baseline and
with them; and `idle_connections` TLS connections that send nothing: RSS while they are
open and after the server's request-head timeout closed them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import multiprocessing as mp
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

P99_LIMIT_MS = 10.0


@dataclass
class PhaseResult:
    rate: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
    achieved_rate: float
    patched: int = 0
    service_p99_ms: float = 0.0  # from the moment the request was actually sent


@dataclass
class BenchResult:
    rate: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
    max_rate_p99_under_10ms: float
    noop: dict[str, float]
    targets: int
    ramp: list[dict[str, float]] = field(default_factory=list)
    patched_share: float = 0.0
    handler_us: dict[str, float] = field(default_factory=dict)
    service_p99_ms: float = 0.0
    abuse: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "requests": self.requests,
            "errors": self.errors,
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "max_rate_p99_under_10ms": self.max_rate_p99_under_10ms,
            "noop": {k: round(v, 3) for k, v in self.noop.items()},
            "targets": self.targets,
            "patched_share": round(self.patched_share, 3),
            "ramp": self.ramp,
            "handler_us": {k: round(v, 1) for k, v in self.handler_us.items()},
            "service_p99_ms": round(self.service_p99_ms, 3),
            "abuse": self.abuse,
        }


def synthetic_index(n_targets: int, seed: int = 7):
    """`n_targets` autonomous Deployments (with suggestions) in 20 namespaces, plus as
    many recommendation-mode ones: a realistic lookup load for the pod decision."""
    from foresize.core.admission.index import AdmissionIndex
    from foresize.core.cluster.model import ContainerSuggestion, Suggestion
    from foresize.core.cluster.target import ContainerPolicy, ResourcePolicy, TargetView

    rng = random.Random(seed)
    views = []
    for i in range(2 * n_targets):
        ns = f"ns-{i % 20}"
        sug = Suggestion(
            uid=f"s{i}",
            created_at=0.0,
            containers={
                "app": ContainerSuggestion(
                    "app", {"cpu": rng.randint(50, 2000), "memory": rng.randint(64, 4096) << 20}
                ),
                "sidecar": ContainerSuggestion("sidecar", {"cpu": 20, "memory": 32 << 20}),
            },
        )
        views.append(
            TargetView(
                kind="AIScaleTarget",
                namespace=ns,
                name=f"wl-{i}",
                ref_kind="Deployment",
                ref_name=f"wl-{i}",
                vertical_mode="autonomous" if i < n_targets else "recommendation",
                containers=(
                    ContainerPolicy("*", ResourcePolicy(lower=10), ResourcePolicy(lower=16 << 20)),
                    ContainerPolicy(
                        "app",
                        ResourcePolicy(lower=10, limit_ratio=2.0),
                        ResourcePolicy(lower=16 << 20, limit_ratio=1.5),
                    ),
                ),
                suggestion=sug,
            )
        )
    return AdmissionIndex.build(views)


def review_bodies(n_targets: int, count: int, seed: int = 11) -> list[bytes]:
    """Pre-serialised pod CREATE reviews: 80% for autonomous targets (patched), 20% for
    recommendation-mode ones (no patch), with realistic pod bodies."""
    rng = random.Random(seed)
    bodies = []
    for k in range(count):
        i = rng.randrange(n_targets) if rng.random() < 0.8 else n_targets + rng.randrange(n_targets)
        h = f"{rng.getrandbits(32):08x}"[:9]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"wl-{i}-{h}-",
                "namespace": f"ns-{i % 20}",
                "labels": {"app": f"wl-{i}", "pod-template-hash": h},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": f"wl-{i}-{h}",
                        "uid": f"uid-{k}",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.example.com/app:1.2.3",
                        "env": [{"name": f"VAR_{j}", "value": "x" * 20} for j in range(10)],
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                            "limits": {"cpu": "200m", "memory": "256Mi"},
                        },
                    },
                    {
                        "name": "sidecar",
                        "image": "registry.example.com/proxy:2",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    },
                ],
                "serviceAccountName": "default",
            },
        }
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"req-{k}",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": f"ns-{i % 20}",
                "operation": "CREATE",
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                "object": pod,
                "dryRun": False,
            },
        }
        bodies.append(json.dumps(review).encode())
    return bodies


def handler_cost(n_targets: int, count: int = 2000) -> dict[str, float]:
    """Median microseconds per review of the pure handlers (JSON decode, decision, JSON
    encode; no HTTP, no TLS), median of 5 passes: what the server spends of its own."""
    from foresize.core.admission.review import review_noop, review_pod

    index = synthetic_index(n_targets)
    bodies = review_bodies(n_targets, count)
    out = {}
    for name, fn in (("pod", review_pod), ("noop", review_noop)):
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            for b in bodies:
                json.dumps(fn(json.loads(b), index, 0.0))
            runs.append((time.perf_counter() - t0) / len(bodies) * 1e6)
        out[name] = statistics.median(runs)
    return out


def _serve(cert: str, key: str, n_targets: int, ready: Any, stop: Any) -> None:
    """Child process: the real server (create_app + WebhookServer) on an ephemeral port."""
    from foresize.shells.webhook.certs import server_ssl_context
    from foresize.shells.webhook.server import AdmissionState, WebhookServer, create_app

    state = AdmissionState(synthetic_index(n_targets))

    async def main() -> None:
        server = WebhookServer(
            create_app(state, noop_endpoint=True),
            host="127.0.0.1",
            port=0,
            ssl_context=server_ssl_context(cert, key),
        )
        port = await server.start()
        gc.collect()
        gc.freeze()  # the index is long-lived: keep it out of every collection
        ready.send(port)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, stop.wait)
        await server.stop()

    asyncio.run(main())


async def _phase(
    session: Any, url: str, bodies: list[bytes], rate: float, duration: float
) -> PhaseResult:
    count = max(1, int(rate * duration))
    latencies = np.full(count, np.nan)
    service = np.full(count, np.nan)
    errors = 0
    patched = 0
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05

    async def one(i: int) -> None:
        nonlocal errors, patched
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        sent = loop.time()
        try:
            async with session.post(
                url,
                data=bodies[i % len(bodies)],
                headers={"Content-Type": "application/json"},
                timeout=_timeout(),
            ) as resp:
                data = await resp.read()
                if resp.status != 200:
                    errors += 1
                    return
        except Exception:
            errors += 1
            return
        done = loop.time()
        latencies[i] = (done - scheduled) * 1000.0
        service[i] = (done - sent) * 1000.0
        if b'"patch"' in data:
            patched += 1

    t0 = loop.time()
    await asyncio.gather(*(one(i) for i in range(count)))
    elapsed = max(loop.time() - t0, 1e-9)
    ok = latencies[~np.isnan(latencies)]
    return PhaseResult(
        rate=rate,
        requests=count,
        errors=int(np.isnan(latencies).sum()),  # failed or non-200
        p50_ms=float(np.percentile(ok, 50)) if ok.size else float("inf"),
        p99_ms=float(np.percentile(ok, 99)) if ok.size else float("inf"),
        achieved_rate=count / elapsed,
        patched=patched,
        service_p99_ms=float(np.nanpercentile(service, 99)) if ok.size else float("inf"),
    )


def _timeout() -> Any:
    import aiohttp

    return aiohttp.ClientTimeout(total=3.0)  # the webhook configuration's timeoutSeconds


def _passes(r: PhaseResult) -> bool:
    return r.errors == 0 and r.p99_ms < P99_LIMIT_MS and r.achieved_rate >= 0.9 * r.rate


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB (Linux /proc), NaN elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return float("nan")


class SlowLoris:
    """`count` TLS connections that send a request head one byte a second and never
    finish it; each one the server cuts off is replaced at once, so `count` stay open."""

    def __init__(self, port: int, ssl_context: Any, count: int) -> None:
        self.port = port
        self.ssl = ssl_context
        self.count = count
        self.cut = 0  # connections the server closed
        self.open = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def _one(self) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.ssl)
            except OSError:
                await asyncio.sleep(0.5)
                continue
            self.open += 1
            try:
                writer.write(b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                while True:
                    try:
                        data = await asyncio.wait_for(reader.read(1024), 1.0)
                    except TimeoutError:
                        writer.write(b"a")  # one more byte of a header that never ends
                        continue
                    if not data:
                        break  # the server closed it
            except (OSError, ConnectionError):
                pass
            finally:
                self.open -= 1
                self.cut += 1
                writer.close()

    async def __aenter__(self) -> SlowLoris:
        self._tasks = [asyncio.create_task(self._one()) for _ in range(self.count)]
        for _ in range(200):  # until all are connected (or 10 s)
            if self.open >= self.count:
                break
            await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _idle_connections(port: int, ssl_context: Any, count: int, pid: int) -> dict[str, Any]:
    """Open `count` TLS connections that send nothing; RSS before, while open, and once
    the server has closed them all (its request-head timeout)."""
    gc.collect()
    before = rss_mib(pid)
    conns = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            conns.append(await asyncio.open_connection("127.0.0.1", port, ssl=ssl_context))
    held = rss_mib(pid)
    opened = time.monotonic()

    async def closed(reader: asyncio.StreamReader) -> bool:
        try:
            return await asyncio.wait_for(reader.read(1), 60.0) == b""
        except TimeoutError:
            return False
        except (OSError, ConnectionError):
            return True

    results = await asyncio.gather(*(closed(r) for r, _ in conns))
    took = time.monotonic() - opened
    for _, writer in conns:
        writer.close()
    await asyncio.sleep(1.0)
    return {
        "connections": len(conns),
        "closed_by_server": sum(results),
        "seconds_until_all_closed": round(took, 1),
        "rss_mib_before": before,
        "rss_mib_while_open": held,
        "rss_mib_after": rss_mib(pid),
    }


async def _malicious_quantity_ms(session: Any, url: str, repeats: int = 5) -> float:
    """Median answer time of a pod whose cpu request is 10 KB of digits (the old ReDoS)."""
    pod = {
        "metadata": {"namespace": "shop"},
        "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1" * 10_000 + "x"}}}]
        },
    }
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "namespace": "shop",
                "object": pod,
            },
        }
    ).encode()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        async with session.post(url, data=body, timeout=_timeout()) as resp:
            await resp.read()
        times.append((time.perf_counter() - start) * 1000.0)
    return round(statistics.median(times), 3)


async def _client(
    port: int,
    ca_pem: bytes,
    *,
    rate: float,
    duration: float,
    repeats: int,
    max_rate: float,
    ramp_duration: float,
    n_targets: int,
    budget: float,
    server_pid: int = 0,
    slow_connections: int = 200,
    idle_connections: int = 1000,
) -> BenchResult:
    import aiohttp

    from foresize.shells.webhook.certs import client_ssl_context

    bodies = review_bodies(n_targets, 2000)
    base = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + budget
    # The load generator's own GC pauses would show up as server latency.
    gc.collect()
    gc.freeze()
    gc.disable()
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(ca_pem), limit=256)
    async with aiohttp.ClientSession(connector=connector) as session:
        # Warm up: TLS handshakes, connection pool, server caches.
        await _phase(session, base + "/mutate-pods", bodies, rate, min(1.0, duration))
        noop_runs, pod_runs = [], []
        for _ in range(repeats):
            noop_runs.append(await _phase(session, base + "/noop", bodies, rate, duration))
            pod_runs.append(await _phase(session, base + "/mutate-pods", bodies, rate, duration))
        abuse: dict[str, Any] = {"rss_mib_baseline": rss_mib(server_pid)}
        abuse["malicious_quantity_ms"] = await _malicious_quantity_ms(
            session, base + "/mutate-pods"
        )
        if slow_connections:
            slow_runs = []
            ssl_context = client_ssl_context(ca_pem)
            async with SlowLoris(port, ssl_context, slow_connections) as loris:
                held = loris.open
                for _ in range(repeats):
                    slow_runs.append(
                        await _phase(session, base + "/mutate-pods", bodies, rate, duration)
                    )
                abuse["rss_mib_with_slow_connections"] = rss_mib(server_pid)
            p50 = statistics.median(p.p50_ms for p in slow_runs)
            p99 = statistics.median(p.p99_ms for p in slow_runs)
            quiet_p99 = statistics.median(p.p99_ms for p in pod_runs)
            abuse["slow_loris"] = {
                "connections": slow_connections,
                "held_at_start": held,
                "cut_by_server": loris.cut,
                "requests": sum(p.requests for p in slow_runs),
                "errors": sum(p.errors for p in slow_runs),
                "p50_ms": round(p50, 3),
                "p99_ms": round(p99, 3),
                "p99_ratio_to_quiet": round(p99 / quiet_p99, 2) if quiet_p99 else None,
            }
        ramp: list[PhaseResult] = []
        best = rate if all(_passes(r) for r in pod_runs) else 0.0
        lo, hi = best, None
        r = max(rate * 2, 1.0)
        # Double until a step fails, then bisect between the last pass and the failure.
        while r <= max_rate and time.monotonic() + ramp_duration < deadline:
            res = await _phase(session, base + "/mutate-pods", bodies, r, ramp_duration)
            ramp.append(res)
            if _passes(res):
                lo = best = max(best, r)
                r *= 2
            else:
                hi = r
                break
        while (
            hi is not None
            and hi - lo > max(50.0, 0.1 * lo)
            and time.monotonic() + ramp_duration < deadline
        ):
            mid = round((lo + hi) / 2, -1)
            res = await _phase(session, base + "/mutate-pods", bodies, mid, ramp_duration)
            ramp.append(res)
            if _passes(res):
                lo = best = max(best, mid)
            else:
                hi = mid
        if idle_connections:
            abuse["idle"] = await _idle_connections(
                port, client_ssl_context(ca_pem), idle_connections, server_pid
            )
    gc.enable()
    gc.unfreeze()
    total_patched = sum(p.patched for p in pod_runs)
    total_ok = sum(p.requests - p.errors for p in pod_runs)
    return BenchResult(
        rate=rate,
        requests=sum(p.requests for p in pod_runs),
        errors=sum(p.errors for p in pod_runs),
        p50_ms=statistics.median(p.p50_ms for p in pod_runs),
        p99_ms=statistics.median(p.p99_ms for p in pod_runs),
        max_rate_p99_under_10ms=best,
        noop={
            "p50_ms": statistics.median(p.p50_ms for p in noop_runs),
            "p99_ms": statistics.median(p.p99_ms for p in noop_runs),
        },
        targets=n_targets,
        ramp=[
            {
                "rate": x.rate,
                "achieved_rate": round(x.achieved_rate, 1),
                "p50_ms": round(x.p50_ms, 3),
                "p99_ms": round(x.p99_ms, 3),
                "errors": x.errors,
            }
            for x in ramp
        ],
        patched_share=total_patched / total_ok if total_ok else 0.0,
        service_p99_ms=statistics.median(p.service_p99_ms for p in pod_runs),
        abuse=abuse,
    )


def run_bench(
    *,
    rate: float = 200.0,
    duration: float = 3.0,
    repeats: int = 3,
    max_rate: float = 6400.0,
    ramp_duration: float = 2.0,
    n_targets: int = 1000,
    budget: float = 60.0,
    slow_connections: int = 200,
    idle_connections: int = 1000,
) -> BenchResult:
    """Start the server process, run all phases, stop the server (always)."""
    from foresize.shells.webhook.certs import generate_self_signed

    bundle = generate_self_signed(["127.0.0.1", "localhost"])
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="foresize-bench-") as tmp:
        _, cert, key = bundle.write(Path(tmp))
        parent, child = ctx.Pipe()
        stop = ctx.Event()
        proc = ctx.Process(
            target=_serve, args=(str(cert), str(key), n_targets, child, stop), daemon=True
        )
        proc.start()
        try:
            if not parent.poll(30):
                raise RuntimeError("benchmark server did not start")
            port = parent.recv()
            result = asyncio.run(
                _client(
                    port,
                    bundle.ca_pem,
                    rate=rate,
                    duration=duration,
                    repeats=repeats,
                    max_rate=max_rate,
                    ramp_duration=ramp_duration,
                    n_targets=n_targets,
                    budget=budget,
                    server_pid=proc.pid or 0,
                    slow_connections=slow_connections,
                    idle_connections=idle_connections,
                )
            )
            samples = max(200, min(2000, int(rate * duration * repeats)))
            result.handler_us = handler_cost(n_targets, samples)
            return result
        finally:
            stop.set()
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
