"""`foresize bench deferred`: the release settings of a Deferred in-place grow
(`disruption.release_deferred_after`, `release_deferred`) side by side on simulator
scenarios with full nodes (`foresize.bench.deferred`)."""

from __future__ import annotations

import json
import sys

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("deferred")
    def bench_deferred_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
        hours: float = typer.Option(24.0, "--hours", min=1.0, help="Simulated hours per run."),
    ) -> None:
        """Held capacity, stalls, evictions and time to land of a Deferred grow under
        never / allocated@1m,5m,15m / fit@1m,5m,15m, in_place and in_place_or_recreate."""
        from foresize.bench.deferred import run_bench

        result = run_bench(hours=hours, progress=lambda msg: print(msg, file=sys.stderr))
        if as_json:
            print(json.dumps(result, indent=2))
            return
        for name, row in result["settings"].items():
            print(f"{name:15s} " + "  ".join(f"{k}={v}" for k, v in row.items()))
