"""`foresize bench windows`: the demo for a week under foresize and under foresize with a
nightly maintenance window, side by side (`foresize.bench.windows`)."""

from __future__ import annotations

import json
import sys

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("windows")
    def bench_windows_cmd(
        duration: str = typer.Option(
            "7d", "--duration", "-d", help="Simulated time per policy (the issue: a week)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    ) -> None:
        """Disruptive actions outside a nightly maintenance window (01:00-05:00 UTC) and
        the week's savings against static, with and without the window."""
        from foresize.bench.windows import run_bench
        from foresize.core.errors import ForesizeError
        from foresize.front.cli.options import duration as parse_duration

        seconds = parse_duration(duration, "--duration")
        if not 0 < seconds <= 14 * 86400:
            raise ForesizeError(f"--duration: must be more than 0 and at most 14d, got {duration}")
        result = run_bench(seconds / 86400, progress=lambda msg: print(msg, file=sys.stderr))
        if as_json:
            print(json.dumps(result, indent=2))
            return
        for policy, values in result["policies"].items():
            print(policy)
            for key, value in values.items():
                print(f"  {key}: {value}")
        for key in ("cpu_savings_change", "memory_savings_change", "savings_within_10_percent"):
            print(f"{key}: {result[key]}")
