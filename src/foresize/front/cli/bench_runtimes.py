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
    ) -> None:
        """A JVM with a fixed heap and falling non-heap, a service starting at 4x its
        steady CPU, and a nightly CronJob over 14 runs, under static, vpa and foresize
        (with and without the boost)."""
        from foresize.bench.runtimes import run_bench

        result = run_bench(progress=lambda msg: print(msg, file=sys.stderr))
        if as_json:
            print(json.dumps(result, indent=2))
            return
        for section, values in result.items():
            print(section)
            for key, value in values.items():
                if key != "policies":
                    print(f"  {key}: {value}")
