"""`foresize bench sim`: simulator speed on a 50-node, 2,000-pod cluster (architecture §3.7)."""

from __future__ import annotations

import json

import typer

from foresize.core.errors import ForesizeError


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("sim")
    def bench_sim_cmd(
        duration: str = typer.Option(
            "7d",
            "--duration",
            "-d",
            help="Simulated time per run (the goal: a week in under 30 s of wall time).",
        ),
        runs: int = typer.Option(3, "--repeats", help="Number of runs; the median is reported."),
        runs_alias: int = typer.Option(None, "--runs", hidden=True),
        nodes: int = typer.Option(50, "--nodes", help="Nodes in the benchmark cluster."),
        pods: int = typer.Option(2000, "--pods", help="Pods in the benchmark cluster."),
        step: str = typer.Option("60s", "--step", help="Usage step of the simulation."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Time the simulated cluster: simulated hours per wall second (median of runs)."""
        from foresize.bench.sim import run_bench
        from foresize.front.cli.options import duration as parse_duration_option

        runs = runs_alias if runs_alias is not None else runs
        hours = parse_duration_option(duration, "--duration") / 3600.0
        step_s = parse_duration_option(step, "--step")
        if runs < 1:
            raise ForesizeError(f"--repeats: must be at least 1, got {runs}")
        if nodes < 1:
            raise ForesizeError(f"--nodes: must be at least 1, got {nodes}")
        if pods < nodes:
            raise ForesizeError(f"--pods: must be at least --nodes ({nodes}), got {pods}")
        result = run_bench(hours=hours, runs=runs, nodes=nodes, pods=pods, step=step_s)
        if as_json:
            print(json.dumps(result, indent=2))
            return
        print(
            f"sim bench: {result['nodes']} nodes, {result['pods']} pods, step {step_s:g}s, "
            f"{hours:g} simulated h x {runs} runs\n"
            f"  wall seconds (median): {result['wall_seconds_median']}  "
            f"(runs: {', '.join(str(w) for w in result['wall_seconds'])})\n"
            f"  simulated hours per wall second: {result['simulated_hours_per_wall_second']}\n"
            f"  CPU seconds (median): {result['cpu_seconds_median']}\n"
            f"  a simulated week takes ~{result['projected_week_wall_seconds']} s"
        )
