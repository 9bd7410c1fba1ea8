"""`foresize bench loop`: webhook latency and Lease-renewal lateness during planning passes."""

from __future__ import annotations

import typer


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

        from foresize.errors import ForesizeError
        from foresize.kube.loopbench import run_bench

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
