"""`foresize bench windows`: the demo for a week under foresize and under foresize with a
nightly maintenance window, side by side (`foresize.bench.windows`)."""

from __future__ import annotations

import json
import sys

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("windows")
    def bench_windows_cmd(
        days: float = typer.Option(7.0, "--days", help="Simulated days (the issue: a week)."),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    ) -> None:
        """Disruptive actions outside a nightly maintenance window (01:00-05:00 UTC) and
        the week's savings against static, with and without the window."""
        from foresize.bench.windows import run_bench
        from foresize.core.errors import ForesizeError

        if not 0 < days <= 14:
            raise ForesizeError(f"--days: must be in (0, 14], got {days:g}")
        result = run_bench(days, progress=lambda msg: print(msg, file=sys.stderr))
        if as_json:
            print(json.dumps(result, indent=2))
            return
        for policy, values in result["policies"].items():
            print(policy)
            for key, value in values.items():
                print(f"  {key}: {value}")
        for key in ("cpu_savings_change", "memory_savings_change", "savings_within_10_percent"):
            print(f"{key}: {result[key]}")
