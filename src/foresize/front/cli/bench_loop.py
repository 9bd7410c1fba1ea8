"""`foresize bench loop`: what a large planning pass does to the operator's event loop.

The operator's event loop also serves the admission webhooks and renews the shard Leases.
This bench builds the synthetic cluster of `foresize bench plan` into the kube shell's
cache, serves the real webhook application on loopback from the same loop, and runs
`KubeShell.run_pass` back to back while
- a load generator in its own process sends pod AdmissionReviews at a fixed rate
  (open loop: a request's latency counts from when it was due, not when it was sent);
- a timer on the loop, due every `tick` seconds as the Lease renewal is, records how late
  it wakes (the renewal is exactly that late).
It does so twice: with the pass on the loop (how the operator ran before) and in the
worker thread (how it runs now). The executor answers every action at once (no API
server): the pass's own time is what is measured.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import statistics
import time
from typing import Any

import typer

from foresize.core.cluster.actions import ActionResult


class _NullExecutor:
    """Answers every call as done, after one turn of the loop."""

    server_version = (1, 35)

    async def apply(self, action: Any) -> ActionResult:
        await asyncio.sleep(0)
        return ActionResult(ok=True, code=200)

    apply_guarded = apply

    async def add_finalizer(self, kind: str, ns: str, name: str, finalizer: str) -> ActionResult:
        return await self.apply(None)

    remove_finalizer = add_finalizer


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _load(port: int, rate: float, bodies: list[bytes], stop: Any, out: Any) -> None:
    """The load generator (own process): reviews at `rate`/s until `stop` is set; sends
    back (due time, latency) pairs (perf_counter is the system's monotonic clock, the same
    in both processes), the latency counted from when the request was due."""
    import aiohttp

    async def main() -> list[tuple[float, float]]:
        results: list[tuple[float, float]] = []
        url = f"http://127.0.0.1:{port}/mutate-pods"
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession() as session:

            async def one(i: int, due: float) -> None:
                async with session.post(url, data=bodies[i % len(bodies)], headers=headers) as r:
                    await r.read()
                results.append((due, time.perf_counter() - due))

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


async def _measure(
    pods: int, targets: int, nodes: int, passes: int, rate: float, tick: float, off_loop: bool
) -> dict[str, Any]:
    from aiohttp import web

    from foresize.bench.webhook_load import review_bodies
    from foresize.core.reconcile import ReconcileState
    from foresize.front.cli.bench_plan import build_snapshot
    from foresize.shells.kube.shell import KubeShell
    from foresize.shells.kube.state import ClusterState
    from foresize.shells.webhook.server import AdmissionState, create_app

    snap, suggestions = build_snapshot(pods, targets, nodes)
    state = ClusterState()
    state.nodes = dict(snap.nodes)
    state.pods = {(p.namespace, p.name): p for p in snap.pods}
    state.workloads = dict(snap.workloads)
    state.hpas = {(h.namespace, h.name): h for h in snap.hpas}
    state.foresize["AIScaleTarget"] = {
        (t.metadata.namespace, t.metadata.name): t for t in snap.targets
    }
    shell = KubeShell(state, _NullExecutor())  # type: ignore[arg-type]
    shell.plan_off_loop = off_loop
    admission = AdmissionState()
    admission.update_from_snapshot(state.snapshot(0.0))
    runner = web.AppRunner(create_app(admission), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    lateness: list[float] = []
    latencies: list[float] = []
    running = True

    async def renew_timer() -> None:
        due = time.perf_counter() + tick
        while running:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            woke = time.perf_counter()
            lateness.append(woke - due)
            due = woke + tick

    pass_seconds: list[float] = []
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    try:
        # One untimed pass first (parsing, imports), then the timed ones under load.
        shell.pass_state = ReconcileState()
        shell.pass_state.suggestions.latest.update(suggestions)
        await shell.run_pass()
        timer = asyncio.create_task(renew_timer())
        bodies = review_bodies(targets, 500)
        stop_load = ctx.Event()
        proc = ctx.Process(target=_load, args=(port, rate, bodies, stop_load, send), daemon=True)
        proc.start()
        await asyncio.sleep(1.0)  # the generator's start-up
        first = time.perf_counter()
        for _ in range(passes):
            shell.pass_state = ReconcileState()  # the same work every pass
            shell.pass_state.suggestions.latest.update(suggestions)
            start = time.perf_counter()
            await shell.run_pass()
            pass_seconds.append(time.perf_counter() - start)
        last = time.perf_counter()
        running = False
        await timer
        stop_load.set()
        results = await asyncio.to_thread(receive.recv)
        await asyncio.to_thread(proc.join, 30.0)
        # Only the requests due while the passes ran.
        latencies = [lat for due, lat in results if first <= due <= last]
    finally:
        running = False
        await runner.cleanup()
    return {
        "pass": "worker thread" if off_loop else "event loop",
        "passes": passes,
        "pass_seconds_median": round(statistics.median(pass_seconds), 3),
        "webhook_requests": len(latencies),
        "webhook_p50_ms": round(_percentile(latencies, 0.50) * 1000, 1),
        "webhook_p99_ms": round(_percentile(latencies, 0.99) * 1000, 1),
        "webhook_max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "renew_late_p50_ms": round(_percentile(lateness, 0.50) * 1000, 1),
        "renew_late_p99_ms": round(_percentile(lateness, 0.99) * 1000, 1),
        "renew_late_max_ms": round(max(lateness) * 1000, 1) if lateness else None,
    }


def run_bench(
    pods: int, targets: int, nodes: int, passes: int, rate: float, tick: float
) -> list[dict[str, Any]]:
    """Both ways, the event-loop baseline first."""
    return [
        asyncio.run(_measure(pods, targets, nodes, passes, rate, tick, off_loop))
        for off_loop in (False, True)
    ]


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("loop")
    def bench_loop(
        pods: int = typer.Option(10_000, help="Pods in the synthetic cluster."),
        targets: int = typer.Option(500, help="AIScaleTargets (one Deployment each)."),
        nodes: int = typer.Option(200, help="Nodes."),
        passes: int = typer.Option(3, help="Timed passes, back to back."),
        rate: float = typer.Option(50.0, help="Pod AdmissionReviews per second."),
        tick: float = typer.Option(0.1, help="The renew timer's period (seconds)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON only."),
    ) -> None:
        """Webhook p50/p99 and a Lease-renew timer's lateness while the kube shell runs
        passes over a synthetic cluster: the pass on the event loop, then in the worker
        thread."""
        import json

        from foresize.core.errors import ForesizeError

        for label, value in (("pods", pods), ("targets", targets), ("nodes", nodes)):
            if value < 1:
                raise ForesizeError(f"--{label} must be at least 1, got {value}")
        if targets > pods:
            raise ForesizeError(f"--targets ({targets}) must not exceed --pods ({pods})")
        if passes < 1:
            raise ForesizeError(f"--passes must be at least 1, got {passes}")
        if not 0 < rate <= 2000:
            raise ForesizeError(f"--rate must be in (0, 2000], got {rate}")
        if not 0.001 <= tick <= 10:
            raise ForesizeError(f"--tick must be in [0.001, 10] seconds, got {tick}")
        results = run_bench(pods, targets, nodes, passes, rate, tick)
        if as_json:
            print(json.dumps(results))
            return
        print(f"{pods} pods, {targets} targets, {nodes} nodes; {rate:g} reviews/s")
        for r in results:
            print(
                f"  pass on the {r['pass']}: {r['pass_seconds_median']:.3f} s/pass; webhook "
                f"p50 {r['webhook_p50_ms']} ms, p99 {r['webhook_p99_ms']} ms, max "
                f"{r['webhook_max_ms']} ms ({r['webhook_requests']} reviews); renew timer "
                f"late p50 {r['renew_late_p50_ms']} ms, p99 {r['renew_late_p99_ms']} ms, "
                f"max {r['renew_late_max_ms']} ms"
            )
