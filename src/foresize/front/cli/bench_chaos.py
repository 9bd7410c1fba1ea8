"""`foresize bench chaos`: the fault scenarios against the real operator process."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("chaos")
    def bench_chaos(
        scenario: list[str] = typer.Option(
            None, "--scenario", metavar="NAME", help="Run only these (repeatable); default: all."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON only."),
        keep_logs: Path = typer.Option(
            None,
            "--keep-logs",
            help="Keep every scenario's logs in DIR/<scenario> (default: only a failed "
            "scenario's, in a temporary folder named in its problems).",
        ),
    ) -> None:
        """Start `foresize operator` against an emulated API server behind a fault proxy:
        SIGTERM/SIGINT mid-pass, API unreachable at start, watches dropped + 410 Gone,
        429/500 storm, token rotation, Lease renewals failing with two replicas. Prints
        {"scenarios", "violations", "results": [{"name", "seconds", "ok"}]}; exits 1 on
        any violation."""
        import asyncio
        import json

        from foresize.bench.chaos import SCENARIOS, run_scenarios
        from foresize.core.errors import ForesizeError

        unknown = [s for s in scenario or [] if s not in SCENARIOS]
        if unknown:
            raise ForesizeError(
                f"--scenario: unknown {', '.join(unknown)} (known: {', '.join(SCENARIOS)})"
            )
        if keep_logs is not None:
            try:
                keep_logs.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ForesizeError(f"--keep-logs {keep_logs}: {exc.strerror}") from None
        report = asyncio.run(run_scenarios(list(scenario) if scenario else None, keep_logs))
        if as_json:
            typer.echo(json.dumps(report))
        else:
            from rich.console import Console
            from rich.table import Table

            table = Table(title="foresize operator under faults")
            for col in ("scenario", "seconds", "ok", "detail"):
                table.add_column(col)
            for r in report["results"]:
                detail = r["detail"] or "; ".join(p[:200] for p in r["problems"])
                table.add_row(r["name"], f"{r['seconds']:.2f}", "yes" if r["ok"] else "NO", detail)
            Console().print(table)
        if report["violations"]:
            raise typer.Exit(1)
