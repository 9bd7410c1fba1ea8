"""`foresize bench loop`: the real `foresize operator` process on a large synthetic cluster.

The strict test API server (`foresize.testing.apiserver`) is seeded with `pods` pods in
`targets` Deployments (one ReplicaSet each, one in-place autonomous AIScaleTarget each) on
`nodes` nodes, in the steady state an operator leaves: every target carries the revert
finalizer, the CRD handlers' annotation and `Accepted` condition, and a suggestion equal to
what its pods request. The operator runs as a subprocess with the shipped configuration
(Lease 15 s / 10 s / 2 s, 50 QPS / 100 burst, a pass every 30 s); it serves its pod webhook
over plain HTTP (TLS costs the same per request whatever the cluster's size, and is
measured by `bench webhook`).

Phases: `start` (the first listing of every kind and the first pass, a recommendation
round for every target since the process remembers none); `pass` (the bench writes new
suggestions, +50% CPU, into the first targets whose pods add up to `resizes`, and the next
pass resizes them); `relist` (every watch dropped and the history compacted, so each kind
resumes into 410 Gone and is listed again). Throughout, a load generator in its own
process sends pod AdmissionReviews at `rate`/s (open loop: a request's latency counts from
when it was due). The server's request log gives the Lease renewals (how late each came
after the 2 s retry period), the writes of the pass by resource and its resizes; `/proc`
gives the operator's resident memory, sampled, and its CPU time. An operator against an
empty cluster gives the baseline the per-pod memory is counted on top of. The
recommendation round, which the run does not reach, is measured after it in the bench's
own process (`bench.rounds`: the `round_*` keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import multiprocessing as mp
import shutil
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foresize.bench.chaos.cluster import OperatorProcess, wait_until
from foresize.bench.rounds import measure_round
from foresize.bench.synthetic import (
    RESIZED_CPU,
    resized_targets,
    seed,
    suggestion,
    synthetic_objects,
)
from foresize.bench.webhook_load import review_bodies

LEASE_RETRY = 2.0  # the shipped --lease-retry: a renewal is due this long after the last
SHIPPED_INTERVAL = 30.0  # the operator's default --interval
LIST_PAGE = 500  # the informers' page size: a kind of N objects is N/500 LIST requests
# How long the pass may take before the bench gives up on it: 1,000 resizes at 50 QPS is
# 20 s; the issue's bound is 25 s; a slow box gets ten times that.
PASS_TIMEOUT = 250.0
# The issue's keys, last in the document, in this order.
ISSUE_KEYS = ("webhook_p99_ms", "renew_late_max_ms", "api_writes_per_resize", "rss_mib")
START_TIMEOUT = 600.0  # seeding aside, how long listing 100k pods may take on 2 busy cores


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)


# ------------------------------------------------------------------ the load
def _load(port: int, rate: float, bodies: list[bytes], stop: Any, out: Any) -> None:
    """The load generator (own process): reviews at `rate`/s until `stop` is set; sends
    back (due, latency, ok) triples, the latency counted from when the request was due
    (perf_counter is the system's monotonic clock, the same in every process). A request
    that fails (refused before the webhook listens, a timeout) is not a latency."""
    import aiohttp

    async def main() -> list[tuple[float, float, bool]]:
        results: list[tuple[float, float, bool]] = []
        url = f"http://127.0.0.1:{port}/mutate-pods"
        headers = {"Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=10.0)
        async with aiohttp.ClientSession(timeout=timeout) as session:

            async def one(i: int, due: float) -> None:
                try:
                    async with session.post(
                        url, data=bodies[i % len(bodies)], headers=headers
                    ) as r:
                        await r.read()
                        ok = r.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    ok = False
                results.append((due, time.perf_counter() - due, ok))

            start = time.perf_counter()
            pending = []
            i = 0
            while not stop.is_set():
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                pending.append(asyncio.create_task(one(i, due)))
                i += 1
            await asyncio.gather(*pending)
        return results

    out.send(asyncio.run(main()))
    out.close()


# ------------------------------------------------------------------ /proc
def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class _RssSampler:
    def __init__(self, pid: int, period: float = 0.25) -> None:
        self.pid, self.period = pid, period
        self.peak_kib = 0
        self.last_kib = 0
        self.cpu_seconds: float | None = None
        self.samples: list[tuple[float, int]] = []  # (perf_counter, KiB): the peak by phase
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            kib = _rss_kib(self.pid)
            cpu = _cpu_seconds(self.pid)
            if kib is None:
                return
            self.cpu_seconds = cpu if cpu is not None else self.cpu_seconds
            self.last_kib = kib
            self.peak_kib = max(self.peak_kib, kib)
            self.samples.append((time.perf_counter(), kib))
            await asyncio.sleep(self.period)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


# ------------------------------------------------------------------ the run
def _writes(requests: list[Any]) -> Counter:
    """Writes by resource (`pods/resize`, `events`, `aiscaletargets/status`...), Leases aside."""
    counts: Counter = Counter()
    for r in requests:
        if r.method in ("GET", "HEAD") or r.resource == "leases" or not r.resource:
            continue
        counts[f"{r.resource}/{r.subresource}" if r.subresource else r.resource] += 1
    return counts


def _renewals(requests: list[Any]) -> list[float]:
    """Arrival times of the successful writes of shard 0's Lease (acquisition, renewals)."""
    return [
        r.time
        for r in requests
        if r.resource == "leases"
        and r.method in ("PUT", "PATCH", "POST")
        and 200 <= r.code < 300
        and r.name in ("foresize-shard-0", "")
    ]


def _lists_of(requests: list[Any], resource: str, after: float) -> int:
    return sum(
        1
        for r in requests
        if r.method == "GET"
        and r.resource == resource
        and r.query.get("watch") != "true"
        and not r.name
        and r.time >= after
        and r.code == 200
    )


def _resized(requests: list[Any], after: float = 0.0) -> list[Any]:
    return [
        r
        for r in requests
        if r.resource == "pods" and r.subresource == "resize" and r.code == 200 and r.time >= after
    ]


async def _baseline_kib(workdir: Path) -> int:
    """The resident memory of an operator on an empty cluster, once it has run a pass."""
    from foresize.testing.apiserver import StrictApiServer

    server = StrictApiServer(seed=0)
    await server.start()
    op = OperatorProcess(
        workdir, "baseline", server=server.url, args=[], webhook=True, shipped=True
    )
    try:
        server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foresize"}})
        await op.start()
        assert op.proc is not None
        if not await wait_until(lambda: _ready(op), 120.0, step=0.5):
            raise RuntimeError(f"the baseline operator never got ready:\n{op.output()[-2000:]}")
        await asyncio.sleep(2.0)
        return _rss_kib(op.proc.pid) or 0
    finally:
        if op.running:
            op.send(signal.SIGTERM)
            await op.wait(30)
        await server.stop()


async def _ready(op: OperatorProcess) -> bool:
    return await op.probe("/readyz") == 200


async def measure(
    pods: int,
    targets: int,
    nodes: int,
    *,
    resizes: int = 1000,
    rate: float = 50.0,
    baseline: bool = True,
    workdir: Path | None = None,
    interval: float | None = None,
) -> dict[str, Any]:
    """One run; see the module docstring. Returns the JSON document of `bench loop`.
    `interval`: the pass interval instead of the shipped 30 s (the tests' short runs)."""
    from foresize.testing.apiserver import StrictApiServer

    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="foresize-bench-loop-")) if own else workdir
    assert work is not None
    try:
        base_kib = await _baseline_kib(work) if baseline else None
        # The watch history must hold the whole seeding and the pass, so that only the
        # bench's compaction sends the informers into 410.
        server = StrictApiServer(seed=0, history_limit=2 * pods + 4 * targets + 10_000)
        await server.start()
        try:
            args = ["--interval", str(interval)] if interval is not None else []
            doc = await _run(
                server,
                work,
                (pods, targets, nodes),
                resizes,
                rate,
                base_kib,
                args,
                interval if interval is not None else SHIPPED_INTERVAL,
            )
        finally:
            await server.stop()
            if not own:  # the request log beside the operator's, for whoever kept them
                with open(work / "requests.tsv", "w") as out:
                    for r in server.requests:
                        body = "" if r.method == "GET" else json.dumps(r.body)[:300]
                        out.write(f"{r.time:.3f}\t{r.method}\t{r.path}\t{r.code}\t{body}\n")
            del server
        # The recommendation round the run does not reach (`bench.rounds`), measured once
        # the server's objects are gone; before the issue's keys, which end the document.
        rounds = measure_round(pods, targets, nodes)
        last = list(doc)[-len(ISSUE_KEYS) :]
        assert last == list(ISSUE_KEYS), last
        head = {k: v for k, v in doc.items() if k not in ISSUE_KEYS}
        return {**head, **rounds, **{k: doc[k] for k in ISSUE_KEYS}}
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


@dataclass(slots=True)
class _Phases:
    """When each phase began, on both clocks: the server's (its request log) and the
    monotonic one the load generator stamps its requests with."""

    marks: list[tuple[str, float, float]] = field(default_factory=list)

    def mark(self, name: str, server_now: float) -> None:
        self.marks.append((name, server_now, time.perf_counter()))

    def of(self, at: float, monotonic: bool) -> str | None:
        name = None
        for phase, server_t, mono_t in self.marks:
            if at >= (mono_t if monotonic else server_t):
                name = phase
        return name


async def _run(
    server: Any,
    work: Path,
    sizes: tuple[int, int, int],
    resizes: int,
    rate: float,
    base_kib: int | None,
    args: list[str],
    interval: float,
) -> dict[str, Any]:
    pods, targets, nodes = sizes
    t0 = time.perf_counter()
    # In the steady state an operator leaves, status included: a restart has nothing to
    # write (what the start phase still writes is the operator's, not the seeding's).
    seed(server, synthetic_objects(pods, targets, nodes, now=time.time()))
    seeded_seconds = time.perf_counter() - t0
    changed = resized_targets(pods, targets, resizes)
    expected = sum(n for *_, n in changed)
    op = OperatorProcess(work, "loop", server=server.url, args=args, webhook=True, shipped=True)
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    stop_load = ctx.Event()
    bodies = review_bodies(targets, 500)
    phases = _Phases()
    await op.start()
    assert op.proc is not None
    sampler = _RssSampler(op.proc.pid)
    sampler.start()
    load = ctx.Process(
        target=_load, args=(op.webhook_port, rate, bodies, stop_load, send), daemon=True
    )
    phases.mark("start", server.clock())
    load.start()
    problems: list[str] = []
    pass_span: tuple[float, float] | None = None
    relist_seconds = None
    writes_pass: Counter | None = None
    try:
        # Start: the first listing and the first pass (a recommendation round for every
        # target: the process has no memory of the last one).
        if not await wait_until(lambda: _ready(op), START_TIMEOUT, 0.5):
            raise RuntimeError(f"the operator never got ready:\n{op.output()[-3000:]}")
        await asyncio.sleep(2.0)
        # The pass: new suggestions for the first targets, as their recommender would
        # write them; the next pass resizes their pods.
        phases.mark("pass", server.clock())
        changed_at = server.clock()
        for ns, name, _ in changed:
            server.update(
                "AIScaleTarget",
                ns,
                name,
                lambda o, n=name: o["status"].__setitem__(
                    "vertical_suggestion", suggestion(n, RESIZED_CPU, time.time())
                ),
            )
        done = await wait_until(
            lambda: len(_resized(server.requests, changed_at)) >= expected,
            PASS_TIMEOUT + 30.0,  # the shipped 30 s interval before the pass starts
            0.2,
        )
        resized = _resized(server.requests, changed_at)
        if resized:
            pass_span = (resized[0].time, resized[-1].time)
        if not done:
            problems.append(f"{len(resized)} of {expected} pods resized in the pass")
        # The pass's tail, and the pass after it: a write the pass left for the next
        # (a status that only then counts the resizes) is a write of this pass.
        await asyncio.sleep(interval + 5.0)
        relist_at = server.clock()
        writes_pass = _writes([r for r in server.requests if changed_at <= r.time < relist_at])
        # The relist: every watch dropped and the history compacted.
        phases.mark("relist", relist_at)
        server.drop_watches()
        server.expire_resource_versions(notify=False)
        pages = -(-pods // LIST_PAGE)
        if await wait_until(
            lambda: _lists_of(server.requests, "pods", relist_at) >= pages, START_TIMEOUT, 0.2
        ):
            relist_seconds = server.clock() - relist_at
        else:
            problems.append("the pods were not listed again after the 410")
        await asyncio.sleep(3.0)  # decoding and replacing what the relist brought
    finally:
        phases.mark("end", server.clock())
        stop_load.set()
        results = await asyncio.to_thread(receive.recv)
        await asyncio.to_thread(load.join, 30.0)
        metrics = await _scrape(op)
        await sampler.stop()
        op.send(signal.SIGTERM)
        code = await op.wait(60)
        if code != 0:
            problems.append(f"the operator exited {code}")
    return _document(
        server,
        phases,
        results,
        sampler,
        metrics,
        problems,
        sizes=(pods, targets, nodes, rate),
        seeded_seconds=seeded_seconds,
        writes_pass=writes_pass,
        pass_span=pass_span,
        relist_seconds=relist_seconds,
        base_kib=base_kib,
    )


def _document(
    server: Any,
    phases: _Phases,
    results: list[tuple[float, float, bool]],
    sampler: _RssSampler,
    metrics: dict[str, Any],
    problems: list[str],
    *,
    sizes: tuple[int, int, int, float],
    seeded_seconds: float,
    writes_pass: Counter | None,
    pass_span: tuple[float, float] | None,
    relist_seconds: float | None,
    base_kib: int | None,
) -> dict[str, Any]:
    pods, targets, nodes, rate = sizes
    # Reviews after the webhook's port opened (the first answer); a failure after that is
    # a failure, a refused connection before it is the process starting.
    answered = [due for due, _, ok in results if ok]
    opened = min(answered, default=float("inf"))
    by_phase: dict[str, list[float]] = {}
    failed = 0
    for due, latency, ok in results:
        if due < opened:
            continue
        if not ok:
            failed += 1
            continue
        by_phase.setdefault(phases.of(due, monotonic=True) or "start", []).append(latency)
    latencies = [lat for lats in by_phase.values() for lat in lats]
    renewals = _renewals(server.requests)
    late: dict[str, float] = {}
    for a, b in itertools.pairwise(renewals):
        phase = phases.of(b, monotonic=False) or "start"
        late[phase] = max(late.get(phase, 0.0), max(0.0, b - a - LEASE_RETRY))
    actions = events = 0
    if writes_pass is not None:
        events = writes_pass.get("events", 0)
        actions = sum(writes_pass.values()) - events
    resized_n = writes_pass.get("pods/resize", 0) if writes_pass else 0
    peak = sampler.peak_kib
    rss_by_phase: dict[str, int] = {}
    for at, kib in sampler.samples:
        phase = phases.of(at, monotonic=True) or "start"
        rss_by_phase[phase] = max(rss_by_phase.get(phase, 0), kib)
    return {
        "pods": pods,
        "targets": targets,
        "nodes": nodes,
        "rate": rate,
        "seed_seconds": round(seeded_seconds, 1),
        "resizes": resized_n,
        "pass_resize_seconds": round(pass_span[1] - pass_span[0], 2) if pass_span else None,
        "loop_duration": metrics.get("loop_duration"),
        "writes": dict(sorted(writes_pass.items())) if writes_pass is not None else None,
        "event_writes_per_resize": round(events / resized_n, 3) if resized_n else None,
        "webhook_requests": len(latencies),
        "webhook_failed": failed,
        "webhook_p50_ms": _ms(_percentile(latencies, 0.50)),
        "webhook_max_ms": _ms(max(latencies) if latencies else None),
        "webhook_p99_ms_by_phase": {k: _ms(_percentile(v, 0.99)) for k, v in by_phase.items()},
        "renewals": len(renewals),
        "renew_late_max_ms_by_phase": {k: _ms(v) for k, v in late.items()},
        "relist_seconds": round(relist_seconds, 2) if relist_seconds is not None else None,
        "cpu_seconds": round(sampler.cpu_seconds, 1) if sampler.cpu_seconds else None,
        "baseline_rss_mib": round(base_kib / 1024, 1) if base_kib else None,
        "rss_per_pod_kib": round((peak - base_kib) / pods, 2) if base_kib else None,
        "rss_mib_by_phase": {k: round(v / 1024, 1) for k, v in rss_by_phase.items()},
        "problems": problems,
        # The issue's keys, last. Writes per resize: those on the actions' budget (resizes,
        # status, metadata); the Events' own budget is `event_writes_per_resize`.
        "webhook_p99_ms": _ms(_percentile(latencies, 0.99)),
        "renew_late_max_ms": _ms(max(late.values()) if late else None),
        "api_writes_per_resize": round(actions / resized_n, 3) if resized_n else None,
        "rss_mib": round(peak / 1024, 1),
    }


async def _scrape(op: OperatorProcess) -> dict[str, Any]:
    """The loop's own pass duration (sum / count of foresize_loop_duration_seconds)."""
    import aiohttp

    out: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession() as s:
            url = f"http://127.0.0.1:{op.metrics_port}/metrics"
            async with s.get(url, timeout=aiohttp.ClientTimeout(total=30)) as r:
                text = await r.text()
    except (aiohttp.ClientError, TimeoutError):
        return out
    total = count = None
    for line in text.splitlines():
        if line.startswith("foresize_loop_duration_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("foresize_loop_duration_seconds_count"):
            count = float(line.split()[-1])
    if total is not None and count:
        out["loop_duration"] = {"passes": int(count), "seconds_mean": round(total / count, 2)}
    return out
