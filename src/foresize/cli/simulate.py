"""`foresize simulate`: run a scenario on the simulated cluster and summarise it."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from foresize.errors import ForesizeError

_COLUMNS = (
    ("workload", "name", "{}"),
    ("cpu req\ncore·h", "cpu_requested_core_hours", "{:.1f}"),
    ("cpu used\ncore·h", "cpu_used_core_hours", "{:.1f}"),
    ("cpu\nslack", "cpu_slack_pct", "{:.0f}%"),
    ("mem req\nGiB·h", "memory_requested_gib_hours", "{:.1f}"),
    ("mem used\nGiB·h", "memory_used_gib_hours", "{:.1f}"),
    ("mem\nslack", "memory_slack_pct", "{:.0f}%"),
    ("OOM\nkills", "oom_kills", "{}"),
    ("throttled\ns", "throttled_seconds", "{:.0f}"),
    ("evic-\ntions", "evictions", "{}"),
    ("re-\nsizes", "resizes", "{}"),
    ("stalls", "stalls", "{}"),
    ("preemp-\ntions", "preemptions", "{}"),
    ("breaker\nopened", "breaker_openings", "{}"),
    ("pending\npod·h", "pending_pod_hours", "{:.2f}"),
)


_SHORT_KINDS = {"Deployment": "deploy", "StatefulSet": "sts", "DaemonSet": "ds", "Job": "job"}


def _short_name(name: str) -> str:
    """`Deployment/shop/web` -> `shop/web (deploy)` for the table (JSON keeps the full key)."""
    kind, _, rest = name.partition("/")
    return f"{rest} ({_SHORT_KINDS[kind]})" if kind in _SHORT_KINDS and rest else name


def _slack(req: float, used: float) -> float:
    return 100.0 * (req - used) / req if req > 0 else 0.0


def render_summary(summary: dict[str, Any]) -> None:
    """Print the per-workload summary table (rich) to stdout."""
    from rich.table import Table

    from foresize.report.flow import table_console

    table = Table(
        title=(
            f"scenario {summary['scenario']} · policy {summary['policy']} · "
            f"{summary['duration_hours']:.1f} simulated hours · seed {summary['seed']}"
        ),
        title_justify="left",
    )
    for header, _, _ in _COLUMNS:
        table.add_column(header, justify="left" if header == "workload" else "right")
    rows = [*summary["workloads"], {"name": "TOTAL", **summary["totals"]}]
    for i, row in enumerate(rows):
        row = dict(row)
        row["cpu_slack_pct"] = _slack(row["cpu_requested_core_hours"], row["cpu_used_core_hours"])
        row["memory_slack_pct"] = _slack(
            row["memory_requested_gib_hours"], row["memory_used_gib_hours"]
        )
        row["name"] = _short_name(row["name"])
        table.add_row(
            *(fmt.format(row.get(key, 0)) for _, key, fmt in _COLUMNS),
            end_section=i == len(rows) - 2,
        )
    table_console().print(table)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        scenario: str = typer.Option(
            "demo",
            "--scenario",
            "-s",
            help="Built-in scenario name (demo, sidecars) or path to a scenario YAML file.",
        ),
        duration: str = typer.Option(
            "7d", "--duration", "-d", help="Simulated time to run, e.g. 90m, 12h, 7d."
        ),
        seed: int | None = typer.Option(
            None, "--seed", help="Random seed (default: the scenario's seed, else 0)."
        ),
        step: str = typer.Option(
            "60s", "--step", help="Usage sampling step of the simulation, e.g. 30s, 60s, 5m."
        ),
        policy: str | None = typer.Option(
            None,
            "--policy",
            "-p",
            help="Who sizes the pods: foresize (forecasts + in-place worker + webhook), "
            "foresize:MODE (another recommendation mode, e.g. foresize:cost_optimized), "
            "vpa (the VPA-style reference from architecture §3.7, through the same worker) or "
            "static (requests as written). Non-static runs also report savings against static. "
            "[default: foresize]",
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print the summary as JSON on stdout instead of a table."
        ),
        no_progress: bool = typer.Option(
            False, "--no-progress", help="Do not draw the progress bar on stderr."
        ),
        events_path: str | None = typer.Option(
            None,
            "--events",
            help="Also write the full event log as JSON lines to this file.",
        ),
        report: str | None = typer.Option(
            None,
            "--report",
            help="Also write an HTML report (index.html and PNG figures) into this "
            "directory: savings and risks against static and vpa, per-workload requested vs "
            "used, risk events, scheduler charge gap per node. See docs/report.md.",
        ),
        compare: str | None = typer.Option(
            None,
            "--compare",
            help="Run the same scenario and seed once per policy, e.g. static,vpa,foresize, "
            "and show them side by side (instead of --policy).",
        ),
        gap_every: str = typer.Option(
            "15m",
            "--gap-every",
            help="With --report: how often to sample the per-node scheduler charge gap.",
        ),
    ) -> None:
        """Run a scenario on the simulated cluster and summarise requested vs used CPU and
        memory, slack, OOM kills, throttling, evictions, resizes, stalls, preemptions and
        pending pods per workload."""
        from foresize.report.flow import (
            check_options,
            print_savings,
            progress_bar,
            simulate_and_report,
            write_events,
        )
        from foresize.sim.policies import get_policy
        from foresize.sim.runner import simulate
        from foresize.sim.scenario import load_scenario, parse_duration

        try:
            total = parse_duration(duration)
        except ValueError as exc:
            raise ForesizeError(f"--duration: {exc}") from None
        try:
            step_s = parse_duration(step)
        except ValueError as exc:
            raise ForesizeError(f"--step: {exc}") from None
        if total <= 0:
            raise ForesizeError("--duration: must be positive")
        if step_s <= 0:
            raise ForesizeError("--step: must be positive")
        if seed is not None and seed < 0:
            raise ForesizeError(f"--seed: must be a non-negative integer, got {seed}")
        policy_given = policy is not None
        policy = policy or "foresize"
        get_policy(policy)  # fail early on an unknown policy
        sc = load_scenario(scenario)
        if report is not None or compare is not None:
            policies, report_dir, gap_s = check_options(
                policy if policy_given else None, compare, report, gap_every
            )
            simulate_and_report(
                sc,
                policy=policy,
                compare=policies,
                report_dir=report_dir,
                duration=total,
                seed=seed,
                step=step_s,
                gap_every=gap_s,
                as_json=as_json,
                show_progress=not no_progress and sys.stderr.isatty(),
                events_path=events_path,
                render=render_summary,
            )
            return

        if no_progress or not sys.stderr.isatty():
            sim, summary = simulate(sc, duration=total, policy=policy, seed=seed, step=step_s)
        else:
            with progress_bar() as progress:
                task = progress.add_task(sc.name, total=total / 3600.0)
                sim, summary = simulate(
                    sc,
                    duration=total,
                    policy=policy,
                    seed=seed,
                    step=step_s,
                    progress=lambda now: progress.update(task, completed=now / 3600.0),
                )
        if events_path is not None:
            write_events(events_path, [(None, sim.events)])
        if policy != "static":
            # Savings against the same scenario, seed and step with static requests.
            from foresize.sim.operator import savings_vs

            _, baseline = simulate(sc, duration=total, policy="static", seed=seed, step=step_s)
            summary["savings_vs_static"] = savings_vs(summary, baseline)
        if as_json:
            print(json.dumps(summary, indent=2, sort_keys=False))
        else:
            render_summary(summary)
            print_savings(summary)
