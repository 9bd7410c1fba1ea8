"""`foresize simulate`: run a scenario on the simulated cluster and summarise it."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from foresize.core.errors import ForesizeError

# (header, summary key, format). The narrow default splits them into two tables that fit
# 80 columns: what is requested, and what it cost in risk; `--wide` prints one table.
_REQUEST_COLUMNS = (
    ("cpu req\ncore·h", "cpu_requested_core_hours", "{:.1f}"),
    ("cpu used\ncore·h", "cpu_used_core_hours", "{:.1f}"),
    ("cpu\nslack", "cpu_slack_pct", "{:.0f}%"),
    ("mem req\nGiB·h", "memory_requested_gib_hours", "{:.1f}"),
    ("mem used\nGiB·h", "memory_used_gib_hours", "{:.1f}"),
    ("mem\nslack", "memory_slack_pct", "{:.0f}%"),
)
_RISK_COLUMNS = (
    ("OOM\nkills", "oom_kills", "{}"),
    ("resize\nrestarts", "resize_restarts", "{}"),
    ("resizes\n/day", "resizes_per_day", "{:.1f}"),
    ("throttled\ns", "throttled_seconds", "{:.0f}"),
    ("evic-\ntions", "evictions", "{}"),
    ("stalls", "stalls", "{}"),
)
_WIDE_ONLY = (
    ("re-\nsizes", "resizes", "{}"),
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


def summary_tables(summary: dict[str, Any], wide: bool = False) -> list[Any]:
    """The per-workload summary as rich tables: requests and risk (narrow), or one table
    with every column (`wide`)."""
    from rich import box
    from rich.table import Table

    title = (
        f"scenario {summary['scenario']} · policy {summary['policy']} · "
        f"{summary['duration_hours']:.1f} simulated hours · seed {summary['seed']}"
    )
    days = max(summary["duration_hours"], 1e-9) / 24.0
    rows = []
    for row in [*summary["workloads"], {"name": "TOTAL", **summary["totals"]}]:
        row = dict(row)
        row["cpu_slack_pct"] = _slack(row["cpu_requested_core_hours"], row["cpu_used_core_hours"])
        row["memory_slack_pct"] = _slack(
            row["memory_requested_gib_hours"], row["memory_used_gib_hours"]
        )
        row["resizes_per_day"] = row.get("resizes", 0) / days
        row["name"] = _short_name(row["name"])
        rows.append(row)
    groups = (
        [(title, (*_REQUEST_COLUMNS, *_RISK_COLUMNS, *_WIDE_ONLY))]
        if wide
        else [(title + " · requests", _REQUEST_COLUMNS), ("risk", _RISK_COLUMNS)]
    )
    tables = []
    for heading, columns in groups:
        table = Table(title=heading, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("workload", justify="left", overflow="fold")
        for header, _, _ in columns:
            table.add_column(header, justify="right", no_wrap=True)
        for i, row in enumerate(rows):
            table.add_row(
                row["name"],
                *(fmt.format(row.get(key, 0)) for _, key, fmt in columns),
                end_section=i == len(rows) - 2,
            )
        tables.append(table)
    return tables


def render_summary(summary: dict[str, Any], wide: bool = False) -> None:
    """Print the per-workload summary tables (rich) to stdout."""
    from foresize.front.report.flow import table_console

    console = table_console(wide)
    nodes = summary.get("node_autoscaler")
    if nodes is not None:
        causes = ", ".join(f"{k} {v}" for k, v in nodes["evictions_by_cause"].items())
        console.print(
            f"nodes ({nodes['flavour']}): {nodes['node_hours']:.1f} node-hours, "
            f"cost {nodes['cost']:.2f}; {nodes['nodes_launched']} launched, "
            f"{nodes['nodes_removed']} removed; evictions by cause: {causes}; "
            f"do-not-disrupt pods evicted: {nodes['do_not_disrupt_evictions']}"
        )
    for table in summary_tables(summary, wide):
        console.print(table)


def prometheus_scenario(
    url: str,
    *,
    lookback: str,
    end: str,
    step: float,
    namespaces: list[str],
    cluster: str | None,
    token: str | None,
    folder: Any,
) -> tuple[Any, float]:
    """The scenario of the cluster behind `url` (`shells.sim.from_prometheus`), read by the
    reader and within the budgets of `foresize recommend`; (scenario, seconds of history
    read = the run's default duration). What was left out is said on stderr."""
    import asyncio
    import time
    from pathlib import Path

    from foresize.adapters.history.prometheus import PrometheusReader
    from foresize.adapters.history.prometheus_series import Scope
    from foresize.front.cli.recommend import history_window, read_prometheus
    from foresize.shells.sim.from_prometheus import build_scenario
    from foresize.shells.sim.scenario import load_scenario

    if not url.startswith(("http://", "https://")):
        raise ForesizeError(f"--prometheus: {url!r} is not an http:// or https:// URL")
    start, stop = history_window(None, end, lookback, step, now=time.time())
    scope = Scope(tuple(namespaces), "cluster", cluster, None)
    reader = PrometheusReader(url, bearer_token=token)

    async def read() -> tuple[Any, Any, Any]:
        history = await read_prometheus(reader, start, stop, step, scope, None)
        window = stop - start + step
        nodes = await reader.nodes(stop, window, scope)
        hpas = await reader.hpas(stop, window, scope)
        return history, nodes, hpas

    print(f"reading {url} for the scenario", file=sys.stderr)
    history, nodes, hpas = asyncio.run(read())
    from foresize.adapters.history.prometheus_series import align

    grid_start, grid_end = align(start, stop, step)
    built = build_scenario(history, nodes, hpas, step, f"--prometheus {url}", grid_start, grid_end)
    for item in built.left_out:
        print(f"not simulated: {item}", file=sys.stderr)
    path = built.write(Path(folder))
    return load_scenario(path), grid_end - grid_start + step


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        scenario: str = typer.Option(
            "demo",
            "--scenario",
            "-s",
            metavar="NAME|FILE",
            help=(
                "Built-in scenario name (demo, sidecars, hpa-collision) or path to a "
                "scenario YAML file."
            ),
        ),
        duration: str | None = typer.Option(
            None,
            "--duration",
            "-d",
            help="Simulated time to run, e.g. 90m, 12h, 7d. [default: 7d; with --prometheus "
            "the span of history read]",
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
        output: str = typer.Option(
            "table", "--output", "-o", help="table or json (the summary on stdout)."
        ),
        as_json: bool = typer.Option(False, "--json", hidden=True),
        wide: bool = typer.Option(False, "--wide", help="One table with every column."),
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
        cpu_price: float = typer.Option(
            None, "--cpu-price", help="Price per core-hour of requests: costs in the report."
        ),
        memory_price: float = typer.Option(
            None, "--memory-price", help="Price per GiB-hour of requests."
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
        prometheus: str | None = typer.Option(
            None,
            "--prometheus",
            metavar="URL",
            help="Build the scenario from this Prometheus (cAdvisor + kube-state-metrics, as "
            "`foresize recommend` reads it): the Deployments and StatefulSets with their "
            "replicas, requests, limits and usage, the nodes and the HPAs, replayed under "
            "the policies (instead of --scenario). See docs/simulator.md.",
        ),
        lookback: str = typer.Option(
            "7d", "--lookback", help="With --prometheus: history to read back from --end (≤ 14d)."
        ),
        end: str = typer.Option(
            "now", "--end", help="With --prometheus: end of the history (RFC 3339, Unix or now)."
        ),
        prom_step: str = typer.Option(
            "5m", "--prometheus-step", help="With --prometheus: query resolution and trace step."
        ),
        namespaces: list[str] | None = typer.Option(
            None,
            "--namespace",
            "-n",
            help="A filter: with --prometheus, read only these namespaces (repeat or comma).",
        ),
        cluster: str | None = typer.Option(
            None, "--cluster", help="With --prometheus: the `cluster` label's value to read."
        ),
        token: str | None = typer.Option(None, "--token", help="With --prometheus: bearer token."),
        policies_file: str | None = typer.Option(
            None,
            "--policies",
            help="A YAML file of ClusterAIScalePolicies to run under (with the scenario's "
            "own `policies`; the one named `default` is the cluster's). See docs/policies.md.",
        ),
    ) -> None:
        """Run a scenario on the simulated cluster and summarise requested vs used CPU and
        memory, slack, OOM kills, throttling, evictions, resizes, stalls, preemptions and
        pending pods per workload."""
        from foresize.front.cli.options import choice
        from foresize.front.cli.options import duration as parse_duration_option
        from foresize.front.report.flow import (
            check_options,
            print_savings,
            progress_bar,
            simulate_and_report,
            write_events,
        )
        from foresize.shells.sim.policies import get_policy
        from foresize.shells.sim.runner import simulate
        from foresize.shells.sim.scenario import load_scenario

        as_json = as_json or choice(output, "--output", ("table", "json")) == "json"
        prices = None
        if cpu_price is not None or memory_price is not None:
            from foresize.front.report.recommendations import Prices

            for name, value in (("--cpu-price", cpu_price), ("--memory-price", memory_price)):
                if value is not None and not value >= 0:
                    raise ForesizeError(f"{name}: must be 0 or more, got {value:g}")
            if report is None:
                raise ForesizeError("--cpu-price and --memory-price go with --report")
            prices = Prices(cpu_price or 0.0, memory_price or 0.0)

        step_s = parse_duration_option(step, "--step")
        if seed is not None and seed < 0:
            raise ForesizeError(f"--seed: must be a non-negative integer, got {seed}")
        policy_given = policy is not None
        policy = policy or "foresize"
        get_policy(policy)  # fail early on an unknown policy
        if prometheus is not None:
            import tempfile

            from foresize.front.cli.options import split_list

            if scenario != "demo":
                raise ForesizeError("--prometheus builds the scenario: drop --scenario")
            with tempfile.TemporaryDirectory(prefix="foresize-whatif-") as folder:
                sc, span = prometheus_scenario(
                    prometheus,
                    lookback=lookback,
                    end=end,
                    step=parse_duration_option(prom_step, "--prometheus-step"),
                    namespaces=split_list(namespaces),
                    cluster=cluster,
                    token=token,
                    folder=folder,
                )
            total = parse_duration_option(duration, "--duration") if duration else span
        else:
            total = parse_duration_option(duration or "7d", "--duration")
            sc = load_scenario(scenario)
        if policies_file is not None:
            from foresize.shells.sim.scenario_policies import policies_from_file

            added = policies_from_file(policies_file)
            names = {p.metadata.name for p in added}
            sc.policies = [p for p in sc.policies if p.metadata.name not in names] + added
        from foresize.shells.sim.scenario_policies import check_workload_policies

        check_workload_policies(sc, sc.source)
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
                render=lambda summary: render_summary(summary, wide),
                wide=wide,
                prices=prices,
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
            from foresize.shells.sim.policies import savings_vs

            _, baseline = simulate(sc, duration=total, policy="static", seed=seed, step=step_s)
            summary["savings_vs_static"] = savings_vs(summary, baseline)
        if as_json:
            print(json.dumps(summary, indent=2, sort_keys=False))
        else:
            render_summary(summary, wide)
            print_savings(summary)
