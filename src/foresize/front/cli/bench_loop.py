"""`foresize bench loop`: the real operator process on a large synthetic cluster in the
strict test API server: webhook latency and Lease renewals while it lists, runs a pass that
resizes `--resizes` pods and relists every kind; the pass's API writes per resize; its
resident memory (`foresize.bench.loop`)."""

from __future__ import annotations

import typer

from foresize.core.errors import ForesizeError


def check_sizes(pods: int, targets: int, nodes: int, resizes: int, rate: float) -> None:
    """Refuse sizes the bench cannot build, naming the option."""
    for label, value in (("pods", pods), ("targets", targets), ("nodes", nodes)):
        if value < 1:
            raise ForesizeError(f"--{label} must be at least 1, got {value}")
    if targets > pods:
        raise ForesizeError(f"--targets ({targets}) must not exceed --pods ({pods})")
    if not 1 <= resizes <= pods:
        raise ForesizeError(f"--resizes must be in [1, --pods ({pods})], got {resizes}")
    # The pods per node the synthetic nodes take (their `pods` allocatable).
    if pods > 250 * nodes:
        raise ForesizeError(f"--nodes ({nodes}) is too few for {pods} pods (at most 250 a node)")
    if not 0 < rate <= 1000:
        raise ForesizeError(f"--rate must be in (0, 1000] reviews per second, got {rate}")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("loop")
    def bench_loop(
        pods: int = typer.Option(10_000, help="Pods in the synthetic cluster."),
        targets: int = typer.Option(1_000, help="AIScaleTargets (one Deployment each)."),
        nodes: int = typer.Option(500, help="Nodes (at most 250 pods each)."),
        resizes: int = typer.Option(1_000, help="Pods the pass resizes."),
        rate: float = typer.Option(50.0, help="Pod AdmissionReviews per second."),
        baseline: bool = typer.Option(
            True, help="Also run an operator on an empty cluster (memory baseline)."
        ),
        keep_logs: str = typer.Option(
            "", "--keep-logs", help="Keep the operator's log and temp files in this folder."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON only."),
    ) -> None:
        """The real `foresize operator` on a synthetic cluster (strict test API server):
        webhook p99, Lease-renewal lateness, API writes per resize and resident memory
        through its first list, a pass and a relist."""
        import asyncio
        import json

        from foresize.bench.loop import measure

        check_sizes(pods, targets, nodes, resizes, rate)
        from pathlib import Path

        workdir = None
        if keep_logs:
            workdir = Path(keep_logs)
            try:
                workdir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ForesizeError(f"--keep-logs: cannot create {keep_logs}: {exc}") from None
        doc = asyncio.run(
            measure(
                pods, targets, nodes, resizes=resizes, rate=rate, baseline=baseline, workdir=workdir
            )
        )
        if as_json:
            print(json.dumps(doc))
            return
        print(f"{pods} pods, {targets} targets, {nodes} nodes; {rate:g} reviews/s")
        print(
            f"  webhook p50 {doc['webhook_p50_ms']} ms, p99 {doc['webhook_p99_ms']} ms, max "
            f"{doc['webhook_max_ms']} ms ({doc['webhook_requests']} reviews, "
            f"{doc['webhook_failed']} failed)"
        )
        print(
            f"  Lease renewal late by at most {doc['renew_late_max_ms']} ms "
            f"({doc['renewals']} renewals)"
        )
        print(
            f"  {doc['resizes']} resizes in {doc['pass_resize_seconds']} s; "
            f"{doc['api_writes_per_resize']} API writes per resize {doc['writes']}"
        )
        print(
            f"  resident memory {doc['rss_mib']} MiB (baseline {doc['baseline_rss_mib']} MiB, "
            f"{doc['rss_per_pod_kib']} KiB a pod); relist {doc['relist_seconds']} s"
        )
        for problem in doc["problems"]:
            print(f"  problem: {problem}")
