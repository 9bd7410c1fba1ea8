"""`foresize bench runtimes`: managed-runtime heaps, the start-up boost and a nightly
CronJob on simulator scenarios, static, vpa and foresize side by side
(`foresize.bench.runtimes`)."""

from __future__ import annotations

import json
import sys

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("runtimes")
    def bench_runtimes_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
        seed: int = typer.Option(7, "--seed", help="Seed of the CronJob's nights (peaks)."),
        cron_seeds: str = typer.Option(
            "",
            "--cron-seeds",
            help="Also run the CronJob under foresize at these seeds (comma-separated, "
            "e.g. 1,2,3): the share within the band per seed.",
        ),
    ) -> None:
        """A JVM with a fixed heap and falling non-heap, a service starting at 4x its
        steady CPU, and a nightly CronJob over 14 runs, under static, vpa and foresize
        (with and without the boost)."""
        from foresize.bench.runtimes import run_bench

        try:
            seeds = [int(s) for s in cron_seeds.split(",") if s.strip()]
        except ValueError:
            raise typer.BadParameter(
                f"must be integers separated by commas, got {cron_seeds!r}",
                param_hint="--cron-seeds",
            ) from None
        result = run_bench(
            progress=lambda msg: print(msg, file=sys.stderr), seed=seed, cron_seeds=seeds
        )
        if as_json:
            print(json.dumps(result, indent=2))
            return
        for section, values in result.items():
            print(section)
            for key, value in values.items():
                if key != "policies":
                    print(f"  {key}: {value}")
