"""`foresize bench history-store`: `foresize recommend --prometheus` over N containers x D
days against a real Prometheus and a real VictoriaMetrics (`foresize.bench.history_store`)."""

from __future__ import annotations

import json
import sys

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("history-store")
    def bench_history_store_cmd(
        containers: int = typer.Option(1000, "--containers", min=1),
        days: float = typer.Option(14.0, "--days", min=1.0),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    ) -> None:
        """Seconds, queries against the budget, each store's peak memory, and whether both
        stores give identical recommendations."""
        from foresize.bench.history_store import run_bench

        result = run_bench(containers, days, progress=lambda m: print(m, file=sys.stderr))
        if as_json:
            print(json.dumps(result, indent=2))
            return
        for kind, row in result.get("stores", {}).items():
            print(f"{kind:17s} " + "  ".join(f"{k}={v}" for k, v in row.items()))
        print(f"identical: {result.get('identical')}  {result.get('error', '')}")
