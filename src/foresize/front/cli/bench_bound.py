"""`foresize bench cpu-bound`: how little CPU slack a few changes a day allow at all.

Replays vpa (CPU) for its shortfall and slack, then computes, for each change budget, the
least slack any CPU request schedule can have at vpa's shortfall with at most that many
changes per series-day, knowing the future (`foresize.bench.bound`), on the replay's
own grid and scoring. Reported as ratios to vpa's slack, the matched ratio's scale: a
lower bound above a target proves no policy within the budget can reach it.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from foresize.core.errors import ForesizeError

DEFAULT_BUDGETS = "1,2,4,8,unlimited"


def parse_budgets(text: str) -> list[float | None]:
    """`--changes`: comma-separated changes per series-day, 'unlimited' for none."""
    out: list[float | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part == "unlimited":
            out.append(None)
            continue
        try:
            value = float(part)
        except ValueError:
            raise ForesizeError(f"--changes: not a number or 'unlimited': {part!r}") from None
        if not value > 0:
            raise ForesizeError(f"--changes: a budget must be above 0, got {part}")
        out.append(value)
    if not out:
        raise ForesizeError("--changes: give at least one budget")
    return out


def run_bound(
    traces: str,
    fmt: str,
    budgets: list[float | None],
    *,
    every: int = 1,
    offset: int = 0,
    limit: int | None = None,
    resolution: float | None = None,
) -> dict:
    """The JSON document: vpa's CPU slack and shortfall, and per budget the lower bound
    and the achieved schedule (slack, its ratio to vpa's, shortfall, changes)."""
    from foresize.bench.bound import CELL_RESOLUTION, Blocks, cpu_bound
    from foresize.bench.replay import VPAPolicy, prepare, replay
    from foresize.front.cli.bench_recommend import check_options, load_selected_series

    check_options([], every=every, offset=offset, limit=limit, sweep=None)
    resolution = CELL_RESOLUTION if resolution is None else resolution
    if not 0.0 < resolution <= 0.5:
        raise ForesizeError(f"--resolution must be in (0, 0.5], got {resolution}")
    series, _ = load_selected_series(traces, fmt, every=every, offset=offset, limit=limit)
    data = prepare(series)
    vpa_policy = VPAPolicy()
    vpa_policy.resources = ("cpu",)
    vpa = replay(data, vpa_policy)["cpu"]
    blocks = Blocks.from_grid(data.cpu, data.first)
    rows = cpu_bound(blocks, vpa.shortfall, budgets, resolution=resolution)

    def ratio(slack: float) -> float | None:
        return slack / vpa.slack if vpa.slack > 0 else None

    return {
        "traces": str(traces),
        "format": fmt,
        "series": len(series),
        "series_days": blocks.series_days,
        "resolution": resolution,
        "vpa": {
            "slack": vpa.slack,
            "shortfall": vpa.shortfall,
            "changes_per_series_day": vpa.changes_per_series_day,
        },
        "bound": [
            {
                "budget": r.budget,
                "lower_slack": r.lower,
                "lower_ratio": ratio(r.lower),
                "achieved_slack": r.achieved,
                "achieved_ratio": ratio(r.achieved),
                "achieved_shortfall": r.achieved_shortfall,
                "achieved_changes_per_series_day": r.achieved_changes,
            }
            for r in rows
        ],
        "solves": rows[-1].solves if rows else 0,
    }


def format_bound(doc: dict) -> str:
    v = doc["vpa"]
    lines = [
        f"traces: {doc['traces']}  series: {doc['series']}  series-days: "
        f"{doc['series_days']:.1f}  cell resolution: {doc['resolution']:g}",
        f"vpa cpu: slack {v['slack']:.4f} at shortfall {v['shortfall']:.4f}, "
        f"{v['changes_per_series_day']:.2f} changes a series-day",
        "",
        "least slack of any request schedule at vpa's shortfall, knowing the future",
        f"{'changes/day':>11s} {'lower bound':>12s} {'ratio':>6s} {'achieved':>9s} "
        f"{'ratio':>6s} {'shortfall':>9s} {'changes':>8s}",
    ]
    for r in doc["bound"]:
        budget = "unlimited" if r["budget"] is None else f"{r['budget']:g}"
        lr = r["lower_ratio"]
        ar = r["achieved_ratio"]
        lines.append(
            f"{budget:>11s} {r['lower_slack']:12.4f} {'-' if lr is None else f'{lr:.3f}':>6s} "
            f"{r['achieved_slack']:9.4f} {'-' if ar is None else f'{ar:.3f}':>6s} "
            f"{r['achieved_shortfall']:9.4f} {r['achieved_changes_per_series_day']:8.2f}"
        )
    lines.append(
        "(ratio: over vpa's slack; no schedule within a budget has less slack than its "
        "lower bound; the achieved schedule is one found, at most vpa's shortfall)"
    )
    return "\n".join(lines)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("cpu-bound")
    def bench_cpu_bound(
        traces: Annotated[str, typer.Option("--traces", help="Folder (or file) of traces.")],
        fmt: Annotated[
            str,
            typer.Option("--trace-format", help="bitbrains, crane, google2011 or canonical."),
        ],
        budgets: Annotated[
            str,
            typer.Option(
                "--changes",
                help="Change budgets, changes per series-day, comma-separated; 'unlimited'.",
            ),
        ] = DEFAULT_BUDGETS,
        resolution: Annotated[
            float | None,
            typer.Option(
                "--resolution",
                help="Level cells this far apart (relative; default 0.02): finer is "
                "tighter and slower.",
            ),
        ] = None,
        every: Annotated[int, typer.Option("--every", help="Use every N-th series.")] = 1,
        offset: Annotated[
            int, typer.Option("--offset", help="With --every N: start at series K.")
        ] = 0,
        limit: Annotated[
            int | None, typer.Option("--limit", help="At most this many series.")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """The least CPU slack any request schedule with a few changes a day can have at
        vpa's shortfall (a clairvoyant bound on the replay's grid and scoring)."""
        doc = run_bound(
            traces,
            fmt,
            parse_budgets(budgets),
            every=every,
            offset=offset,
            limit=limit,
            resolution=resolution,
        )
        typer.echo(json.dumps(doc, indent=2) if json_out else format_bound(doc))
