"""`foresize simulate --report DIR` and `--compare P1,P2,...`: run the scenario once per
policy (same scenario, seed and step), print the summaries as `foresize simulate` does, and
write the HTML report.

Single-policy runs (`--report` without `--compare`) also run the references `static` and
`vpa` (when not the policy itself) so the headline can say what was saved against them;
the printed summary is the policy's own, exactly as without `--report`.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foresize.core.errors import ForesizeError
from foresize.front.report.run import BASELINES, PolicyRun, run_policy
from foresize.shells.sim.scenario import Scenario

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar() -> Progress:
    """The progress bar `foresize simulate` draws on stderr, in simulated hours (a task per
    run; it disappears when done)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]simulating[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} h"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def table_console(wide: bool = False) -> Console:
    """A console for the summary tables: the terminal's width (`COLUMNS` first; 120 when
    piped), or unlimited for `--wide` (every column at its natural width)."""
    from rich.console import Console

    from foresize.front.report.terminal import terminal_width

    return Console(width=1000 if wide else terminal_width(), highlight=False)


def print_savings(summary: dict[str, Any]) -> None:
    """The line under a summary table with its savings against static, if it has them."""
    if "savings_vs_static" not in summary:
        return
    sv = summary["savings_vs_static"]
    print(
        f"vs static: CPU requests {-100 * sv['cpu_requested_saved']:+.1f}%, "
        f"memory requests {-100 * sv['memory_requested_saved']:+.1f}%; "
        f"OOM kills {sv['oom_kills']['policy']} (static "
        f"{sv['oom_kills']['baseline']}), throttled "
        f"{sv['throttled_seconds']['policy']:.0f} s (static "
        f"{sv['throttled_seconds']['baseline']:.0f} s)"
    )
    note = learning_note(summary)
    if note:
        print(note)


def learning_note(summary: dict[str, Any]) -> str | None:
    """What a short run of a Foresize policy shows (ux.md R18): nothing is resized before a
    workload has `min_lookback_to_scale` of history (API default 24 h), so a 1-day run
    printed `-0.0%` with no word why."""
    from foresize.shells.sim.operator import DEFAULT_MIN_LOOKBACK

    if not str(summary.get("policy", "")).startswith("foresize"):
        return None
    hours = float(summary.get("duration_hours", 0.0))
    learning = DEFAULT_MIN_LOOKBACK / 3600.0
    if hours > 2 * learning:
        return None
    if hours <= learning:
        return (
            f"(Foresize resizes nothing before a workload has min_lookback_to_scale, "
            f"{learning:g} h, of history: this {hours:g} h run is its learning period, so "
            f"requests stay as written. Run -d 3d or more to see what it saves.)"
        )
    return (
        f"(Foresize resizes nothing before a workload has min_lookback_to_scale, "
        f"{learning:g} h, of history: the savings come from the last {hours - learning:g} h "
        f"of this {hours:g} h run. Run -d 3d or more for a fuller picture.)"
    )


def parse_compare(value: str) -> list[str]:
    """`static,vpa,foresize` -> the policy names, checked against the registry."""
    from foresize.shells.sim.policies import available_policies

    names = [p.strip() for p in value.split(",")]
    if not value.strip() or any(not p for p in names):
        raise ForesizeError(f"--compare: expected policy names separated by commas, got {value!r}")
    known = available_policies()
    for p in names:
        if p not in known:
            raise ForesizeError(f"--compare: unknown policy {p!r} (available: {', '.join(known)})")
    dupes = sorted({p for p in names if names.count(p) > 1})
    if dupes:
        raise ForesizeError(f"--compare: policy listed twice: {', '.join(dupes)}")
    return names


def check_options(
    policy: str | None, compare: str | None, report: str | None, gap_every: str
) -> tuple[list[str] | None, Path | None, float]:
    """Validate `--compare`, `--report` and `--gap-every` before anything runs (a bad
    report directory must not cost a whole simulation). Returns (policies or None, the
    report directory or None, the gap sampling interval in seconds). `policy` is None when
    `--policy` was not given."""
    from foresize.front.report.html import check_output_dir
    from foresize.shells.sim.scenario import parse_duration

    policies = None
    if compare is not None:
        if policy is not None:
            raise ForesizeError("--compare: give the policies there, not also --policy")
        policies = parse_compare(compare)
    try:
        gap_s = parse_duration(gap_every)
    except ValueError as exc:
        raise ForesizeError(f"--gap-every: {exc}") from None
    if gap_s <= 0:
        raise ForesizeError("--gap-every: must be positive")
    report_dir = check_output_dir(report) if report is not None else None
    return policies, report_dir, gap_s


def references_for(policies: list[str]) -> list[str]:
    """The reference policies (static, vpa) to run besides `policies`, when registered."""
    from foresize.shells.sim.policies import available_policies

    known = available_policies()
    return [b for b in BASELINES if b in known and b not in policies]


def run_all(
    scenario: Scenario,
    policies: list[str],
    references: list[str],
    *,
    duration: float,
    seed: int | None,
    step: float,
    gap_every: float,
    show_progress: bool,
) -> list[PolicyRun]:
    """Run every policy, then every reference, with a progress bar on stderr if asked."""
    plan = [(p, False) for p in policies] + [(p, True) for p in references]

    def go(progress: Callable[[str], Callable[[float], None] | None]) -> list[PolicyRun]:
        out = []
        for name, ref in plan:
            run = run_policy(
                scenario,
                name,
                duration=duration,
                seed=seed,
                step=step,
                gap_every=gap_every,
                progress=progress(name),
            )
            run.baseline_only = ref
            out.append(run)
        return out

    if not show_progress:
        return go(lambda _name: None)
    with progress_bar() as bar:

        def progress(name: str) -> Callable[[float], None]:
            task = bar.add_task(f"{scenario.name} · {name}", total=duration / 3600.0)
            return lambda now: bar.update(task, completed=now / 3600.0)

        return go(progress)


def write_events(path: str, logs: list[tuple[str | None, Iterable[Any]]]) -> None:
    """`--events`: the event logs as JSON lines, each (policy, events) in turn; an event
    carries a `policy` key when its log has a policy (a `--compare` run) and none else."""
    try:
        with open(path, "w") as fh:
            for policy, events in logs:
                for ev in events:
                    d = ev.as_dict()
                    if policy is not None:
                        d = {"policy": policy, **d}
                    fh.write(json.dumps(d, default=str) + "\n")
    except OSError as exc:
        raise ForesizeError(f"--events: cannot write {path}: {exc}") from None


def _print_comparison(runs: list[PolicyRun], wide: bool = False) -> None:
    """Totals per policy: requests (and the change against static), then risk; one table
    with every column under `--wide`."""
    from rich import box
    from rich.table import Table

    static = next((r for r in runs if r.policy == "static"), None)
    requests = ["cpu req\ncore·h", "vs\nstatic", "mem req\nGiB·h", "vs\nstatic "]
    risk = [
        "OOM\nkills",
        "resize\nrestarts",
        "resizes\n/day",
        "throttled\ns",
        "evic-\ntions",
        "stalls",
    ]
    extra = ["breaker\nopened", "preemp-\ntions"]
    groups = (
        [("side by side (totals)", requests + risk + extra)]
        if wide
        else [("side by side (totals): requests", requests), ("side by side (totals): risk", risk)]
    )
    cells_by_run = []
    for r in runs:
        t = r.summary["totals"]
        days = max(r.summary.get("duration_hours", 24.0), 1e-9) / 24.0

        def vs(key: str, t: dict[str, Any] = t, r: PolicyRun = r) -> str:
            if static is None or static is r or not static.summary["totals"].get(key):
                return "–"
            b = static.summary["totals"][key]
            return f"{-100 * (b - t.get(key, 0.0)) / b:+.1f}%"

        values = [
            f"{t.get('cpu_requested_core_hours', 0):.1f}",
            vs("cpu_requested_core_hours"),
            f"{t.get('memory_requested_gib_hours', 0):.1f}",
            vs("memory_requested_gib_hours"),
            str(t.get("oom_kills", 0)),
            str(t.get("resize_restarts", 0)),
            f"{t.get('resizes', 0) / days:.1f}",
            f"{t.get('throttled_seconds', 0):.0f}",
            str(t.get("evictions", 0)),
            str(t.get("stalls", 0)),
            str(t.get("breaker_openings", 0)),
            str(t.get("preemptions", 0)),
        ]
        cells_by_run.append((r.policy, dict(zip(requests + risk + extra, values, strict=True))))
    console = table_console(wide)
    for title, heads in groups:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("policy", justify="left", overflow="fold")
        for head in heads:
            table.add_column(head.strip(), justify="right", no_wrap=True)
        for policy, cells in cells_by_run:
            table.add_row(policy, *(cells[h] for h in heads))
        console.print(table)


def workload_score(series: Any, step: float) -> dict[str, dict[str, float]]:
    """THE score (`foresize.core.recommend.score`, the one `bench recommend` and the
    operator's shadow policies use) of a run: each workload's summed usage against its
    summed requests in force at every simulation step, per resource (a change is a move
    of the workload's total request, replica changes included)."""
    import numpy as np

    from foresize.core.recommend.score import score_resource

    out = {}
    for resource, used, req, unit in (
        ("cpu", series.cpu_used, series.cpu_req, 1000.0),
        ("memory", series.mem_used, series.mem_req, 1.0),
    ):
        usage = np.asarray(used, dtype=np.float64).T * unit
        requests = np.asarray(req, dtype=np.float64).T * unit
        if usage.size == 0:
            continue
        zero = np.zeros(usage.shape[0], dtype=np.int64)
        out[resource] = score_resource(resource, usage, requests, zero, step).as_dict()
    return out


def simulate_and_report(
    scenario: Scenario,
    *,
    policy: str,
    compare: list[str] | None,
    report_dir: Path | None,
    duration: float,
    seed: int | None,
    step: float,
    gap_every: float,
    as_json: bool,
    show_progress: bool,
    events_path: str | None,
    render: Callable[[dict[str, Any]], None],
    wide: bool = False,
    prices: Any = None,
) -> list[PolicyRun]:
    """The `--report` / `--compare` path of `foresize simulate`."""
    from foresize.shells.sim.policies import savings_vs

    policies = compare if compare is not None else [policy]
    # References only matter for the report's headline.
    references = references_for(policies) if report_dir is not None else []
    if compare is None and policy != "static" and "static" not in references:
        references = ["static", *references]  # the savings_vs_static line needs it
    runs = run_all(
        scenario,
        policies,
        references,
        duration=duration,
        seed=seed,
        step=step,
        gap_every=gap_every,
        show_progress=show_progress,
    )
    static = next((r for r in runs if r.policy == "static"), None)
    subjects = [r for r in runs if not r.baseline_only]
    if compare is not None:
        for r in subjects:
            r.summary["score"] = workload_score(r.series, step)
    for r in subjects:
        if r.policy != "static" and static is not None:
            r.summary["savings_vs_static"] = savings_vs(r.summary, static.summary)
    if events_path is not None:
        tagged = compare is not None
        write_events(events_path, [(r.policy if tagged else None, r.events) for r in subjects])
    if as_json:
        if compare is None:
            print(json.dumps(subjects[0].summary, indent=2, sort_keys=False))
        else:
            print(
                json.dumps(
                    {
                        "policies": [r.policy for r in subjects],
                        "runs": [r.summary for r in subjects],
                    },
                    indent=2,
                    sort_keys=False,
                )
            )
    else:
        for r in subjects:
            render(r.summary)
        if compare is not None:
            _print_comparison(subjects, wide)
        else:
            print_savings(subjects[0].summary)
    if report_dir is not None:
        from foresize.front.report.html import write_report

        # The command line, when this process is the `foresize` command (not a test runner).
        command = ""
        if Path(sys.argv[0]).name in ("foresize", "__main__.py") and "simulate" in sys.argv:
            command = "foresize " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        try:
            hpa_cpu = {
                f"{h.target_kind}/{h.namespace}/{h.target_name}"
                for h in scenario.hpas
                if any(m.resource == "cpu" for m in h.metrics)
            }
            index = write_report(
                report_dir,
                runs,
                duration=duration,
                gap_every=gap_every,
                command=command,
                hpa_cpu=hpa_cpu,
                prices=prices,
            )
        except OSError as exc:
            raise ForesizeError(
                f"--report: cannot write the report in {report_dir}: {exc}"
            ) from None
        print(f"report: {index}", file=sys.stderr)
    return runs
