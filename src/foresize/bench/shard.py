"""`foresize bench shard`: sharding by Lease across real operator replicas, proven from the
strict test API server's request log.

The server is seeded with `bench loop`'s synthetic cluster (`foresize.bench.synthetic`) and
`replicas` `foresize operator` processes run against it with `--shards`, each with a token
of its own (so the log names the sender of every request). While they run, the bench
keeps giving a rotating slice of the targets new suggestions (their CPU flips between two
sizes), so every pass of a shard's holder resizes pods. The slice is sized to the client's
budget (`churn_for`): what it asks for, a resize per pod and a status write per target,
is half of one replica's 50 QPS, so the last replica, holding every shard after the kill,
keeps up. (It was a tenth of the targets each interval: at 50k pods that asked for 5,500
writes every 10 s, 550/s against 50/s a replica, so every replica's queue only grew, its
passes ran into each other and its loop stalled.) After `dwell` seconds it SIGTERMs
the replica holding the most shards; when those are taken over and `dwell` more seconds
passed, it SIGKILLs the next holder; `dwell` seconds after the takeover, it stops the last.
The log then gives, by `foresize.bench.shard_check`: the most replicas that claimed one
target's shard at one moment (must be 1), the targets whose shard had no live Lease for
longer than the lease duration, the acts sent by a replica that was not the Lease's holder,
the targets two replicas acted on in overlapping spans (must be 0), and the handover
seconds after the SIGTERM and after the kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from foresize.bench.chaos.cluster import NAMESPACE, OperatorProcess, wait_until
from foresize.bench.shard_check import check, handover_seconds, pod_target, read_log
from foresize.bench.synthetic import BASE_CPU, RESIZED_CPU, seed, suggestion, synthetic_objects
from foresize.shells.kube.api import DEFAULT_QPS
from foresize.shells.kube.leader import LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD

START_TIMEOUT = 1800.0  # three processes listing 50k pods each on 2 busy cores
# A takeover after a kill needs the lease duration and a retry period; a loaded box more.
TAKEOVER_TIMEOUT = 300.0
# The part of one replica's client budget (--kube-api-qps) the churn asks for.
CHURN_SHARE = 0.5


def churn_for(pods: int, targets: int, interval: float, qps: float = DEFAULT_QPS) -> int:
    """Targets given a new suggestion each `interval`: their writes (a resize per pod, a
    status write per target) `CHURN_SHARE` of one replica's `qps`, at least one."""
    writes_per_target = pods / max(1, targets) + 1
    return max(1, int(CHURN_SHARE * qps * interval / writes_per_target))


def _kubeconfig(path: Path, server: str, token: str) -> None:
    """A kubeconfig (JSON is YAML) for one replica: the server and the replica's token."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bench", "cluster": {"server": server}}],
                "users": [{"name": "replica", "user": {"token": token}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "replica"}}],
                "current-context": "bench",
            }
        )
    )


def _current_holders(server: Any, shards: int) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for i in range(shards):
        lease = server.get("Lease", NAMESPACE, f"foresize-shard-{i}") or {}
        out[i] = (lease.get("spec") or {}).get("holderIdentity") or None
    return out


async def _churn(server: Any, targets: list[tuple[str, str]], slice_size: int, period: float):
    """Every `period` s, flip the suggested CPU of the next `slice_size` targets."""
    flipped: dict[str, bool] = {}
    i = 0
    while True:
        for k in range(slice_size):
            ns, name = targets[(i + k) % len(targets)]
            up = not flipped.get(name, False)
            flipped[name] = up
            cpu = RESIZED_CPU if up else BASE_CPU
            server.update(
                "AIScaleTarget",
                ns,
                name,
                lambda o, n=name, c=cpu: o["status"].__setitem__(
                    "vertical_suggestion", suggestion(n, c, time.time())
                ),
            )
        i = (i + slice_size) % len(targets)
        await asyncio.sleep(period)


async def measure(
    pods: int,
    targets: int,
    nodes: int,
    *,
    replicas: int = 3,
    shards: int | None = None,
    interval: float = 10.0,
    dwell: float = 60.0,
    churn: int = 0,
    lease: tuple[float, float, float] = (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
    workdir: Path | None = None,
) -> dict[str, Any]:
    """One run; see the module docstring. `lease`: duration, renew deadline, retry (the
    shipped ones by default). `churn`: targets given a new suggestion each `interval`
    (default: `churn_for`, half of one replica's client budget)."""
    from foresize.testing.apiserver import StrictApiServer

    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="foresize-bench-shard-")) if own else workdir
    assert work is not None
    shards = shards or replicas
    server = StrictApiServer(seed=0, history_limit=2 * pods + 50 * targets + 10_000)
    await server.start()
    try:
        return await _run(
            server,
            work,
            (pods, targets, nodes, replicas, shards),
            interval,
            dwell,
            churn or churn_for(pods, targets, interval),
            lease,
        )
    finally:
        await server.stop()
        if not own:
            with open(work / "requests.tsv", "w") as out:
                for r in server.requests:
                    body = "" if r.method == "GET" else json.dumps(r.body)[:300]
                    out.write(f"{r.time:.3f}\t{r.token}\t{r.method}\t{r.path}\t{r.code}\t{body}\n")
        if own:
            shutil.rmtree(work, ignore_errors=True)


async def _run(
    server: Any,
    work: Path,
    sizes: tuple[int, int, int, int, int],
    interval: float,
    dwell: float,
    churn: int,
    lease: tuple[float, float, float],
) -> dict[str, Any]:
    pods, targets, nodes, replicas, shards = sizes
    duration, deadline, retry = lease
    t0 = time.perf_counter()
    objects = list(synthetic_objects(pods, targets, nodes, now=time.time()))
    target_keys = [
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "AIScaleTarget"
    ]
    seed(server, iter(objects))
    del objects
    seeded_seconds = time.perf_counter() - t0
    names = [f"replica-{i}" for i in range(replicas)]
    senders = {f"token-{n}": n for n in names}
    server.tokens = set(senders)
    procs: dict[str, OperatorProcess] = {}
    for name in names:
        config = work / f"{name}.kubeconfig"
        _kubeconfig(config, server.url, f"token-{name}")
        args = ["--kubeconfig", str(config), "--shards", str(shards), "--interval", str(interval)]
        args += ["--lease-duration", str(duration), "--lease-renew-deadline", str(deadline)]
        args += ["--lease-retry", str(retry)]
        procs[name] = OperatorProcess(work, name, server=None, args=args, shipped=True)
    problems: list[str] = []
    deaths: dict[str, float] = {}
    signals: dict[str, tuple[str, float]] = {}
    churner: asyncio.Task | None = None
    started = server.clock()
    try:
        for proc in procs.values():
            await proc.start()

        async def all_ready() -> bool:
            return all([await p.probe("/readyz") == 200 for p in procs.values()])

        if not await wait_until(all_ready, START_TIMEOUT, 1.0):
            raise RuntimeError("the replicas never all got ready")
        ready_at = server.clock()
        # Balanced by default: each replica at most ceil(shards / replicas) of them (the
        # first one ready took them all, and gave them up as the others joined).
        share = -(-shards // replicas)

        def balanced() -> bool:
            held = list(_current_holders(server, shards).values())
            return None not in held and all(held.count(n) <= share for n in names)

        if not await wait_until(balanced, TAKEOVER_TIMEOUT, 0.2):
            problems.append(f"the shards were never balanced: {_current_holders(server, shards)}")
        balanced_at = server.clock()
        churner = asyncio.create_task(_churn(server, target_keys, churn, interval))
        at_start = _current_holders(server, shards)
        await asyncio.sleep(dwell)
        for how in ("sigterm", "sigkill"):
            alive = [n for n in names if n not in deaths]
            held = _current_holders(server, shards)
            victim = max(alive, key=lambda n: sum(1 for h in held.values() if h == n))
            at = server.clock()
            procs[victim].send(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
            signals[how] = (victim, at)
            code = await procs[victim].wait(60)
            deaths[victim] = at if how == "sigkill" else server.clock()
            if how == "sigterm" and code != 0:
                problems.append(f"{victim} exited {code} after SIGTERM")
            rest = [n for n in names if n not in deaths]

            def taken_over(rest: list[str] = rest) -> bool:
                return all(h in rest for h in _current_holders(server, shards).values())

            if not await wait_until(taken_over, TAKEOVER_TIMEOUT, 0.2):
                problems.append(f"after the {how} of {victim}, not every shard was taken over")
            await asyncio.sleep(dwell)
    finally:
        if churner is not None:
            churner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await churner
        ended = server.clock()
        for name, proc in procs.items():
            if proc.running:
                proc.send(signal.SIGTERM)
                if await proc.wait(60) != 0:
                    problems.append(f"{name} did not exit 0 at the end")
    # The replicas are this process' children, every one waited for: their CPU time.
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    writes, acts = read_log(server.requests, senders, pod_target)
    # Acts and Leases up to the end of the run (the last replica's own stop aside).
    writes = [w for w in writes if w.time <= ended]
    acts = [a for a in acts if a.time <= ended]
    result = check(
        writes,
        acts,
        [f"{ns}/{name}" for ns, name in target_keys],
        shards,
        lease_duration=duration,
        renew_deadline=deadline,
        deaths=deaths,
        start=ready_at,
        end=ended,
    )
    term, kill = signals.get("sigterm"), signals.get("sigkill")
    after_term = handover_seconds(writes, *term) if term else None
    after_kill = handover_seconds(writes, *kill) if kill else None
    return {
        "pods": pods,
        "targets": targets,
        "nodes": nodes,
        "replicas": replicas,
        "shards": shards,
        "interval": interval,
        "churn_targets_per_interval": churn,
        "churn_writes_per_second": round(churn * (pods / max(1, targets) + 1) / interval, 1),
        "lease": {"duration": duration, "renew_deadline": deadline, "retry": retry},
        "seed_seconds": round(seeded_seconds, 1),
        "ready_seconds": round(ready_at - started, 1),
        "balanced_seconds_after_ready": round(balanced_at - ready_at, 1),
        "shards_held_at_start": {str(k): v for k, v in at_start.items()},
        "sigterm": {"replica": term[0], "at": round(term[1] - ready_at, 2)} if term else None,
        "sigkill": {"replica": kill[0], "at": round(kill[1] - ready_at, 2)} if kill else None,
        "replicas_cpu_seconds": round(children.ru_utime + children.ru_stime, 1),
        "lease_writes": len(writes),
        "problems": problems,
        **result,
        "handover_seconds_after_sigterm": _round(after_term),
        "handover_seconds_after_kill": _round(after_kill),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
