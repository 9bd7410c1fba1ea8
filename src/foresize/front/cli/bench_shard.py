"""`foresize bench shard`: sharding by Lease across real operator replicas on `bench loop`'s
synthetic cluster, one SIGTERMed and another killed: owners per target, unowned stretches,
targets acted on by two replicas, handover seconds (`foresize.bench.shard`)."""

from __future__ import annotations

import typer

from foresize.core.errors import ForesizeError


def check_options(replicas: int, shards: int) -> None:
    """Refuse a run that cannot prove anything, naming the option."""
    if replicas < 3:
        raise ForesizeError(
            f"--replicas must be at least 3 (one SIGTERMed, one killed), got {replicas}"
        )
    if shards < 0:
        raise ForesizeError(f"--shards must be 0 (one a replica) or more, got {shards}")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("shard")
    def bench_shard(
        pods: int = typer.Option(50_000, help="Pods in the synthetic cluster."),
        targets: int = typer.Option(5_000, help="AIScaleTargets (one Deployment each)."),
        nodes: int = typer.Option(250, help="Nodes (at most 250 pods each)."),
        replicas: int = typer.Option(3, help="Operator processes."),
        shards: int = typer.Option(0, help="--shards of every replica (0: one a replica)."),
        interval: str = typer.Option("10s", help="A replica's --interval between passes."),
        dwell: str = typer.Option(
            "60s", help="How long the run goes on before and after each handover."
        ),
        keep_logs: str = typer.Option(
            "", "--keep-logs", help="Keep the replicas' logs and the request log here."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON only."),
    ) -> None:
        """Real `foresize operator` replicas sharding a synthetic cluster (strict test API
        server); one SIGTERMed, then another killed: most owners of one target at once,
        unowned stretches, targets acted on by two replicas, handover seconds."""
        import asyncio
        import json
        from pathlib import Path

        from foresize.bench.shard import measure
        from foresize.front.cli.bench_loop import check_sizes

        check_sizes(pods, targets, nodes, 1, 1.0)
        from foresize.front.cli.options import duration

        check_options(replicas, shards)
        interval_s, dwell_s = duration(interval, "--interval"), duration(dwell, "--dwell")
        workdir = None
        if keep_logs:
            workdir = Path(keep_logs)
            try:
                workdir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ForesizeError(f"--keep-logs: cannot create {keep_logs}: {exc}") from None
        doc = asyncio.run(
            measure(
                pods,
                targets,
                nodes,
                replicas=replicas,
                shards=shards or None,
                interval=interval_s,
                dwell=dwell_s,
                workdir=workdir,
            )
        )
        if as_json:
            print(json.dumps(doc))
            return
        print(f"{pods} pods, {targets} targets, {replicas} replicas, {doc['shards']} shards")
        print(f"  shards at start: {doc['shards_held_at_start']}")
        print(
            f"  most owners of one target at once: {doc['max_owners_per_target']}; longest "
            f"unowned {doc['longest_unowned_seconds']} s "
            f"({doc['targets_unowned_longer_than_lease']} targets past the lease)"
        )
        print(
            f"  {doc['acts']} acts {doc['acts_by_replica']}; outside ownership "
            f"{doc['acts_outside_ownership']}; targets acted on by two "
            f"{doc['targets_acted_on_by_two']}"
        )
        print(
            f"  handover after SIGTERM {doc['handover_seconds_after_sigterm']} s, after kill "
            f"{doc['handover_seconds_after_kill']} s"
        )
        for problem in doc["problems"]:
            print(f"  problem: {problem}")
