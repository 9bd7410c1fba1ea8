"""`foresize bench recommend`: recommendation quality on real traces (architecture §3.7).

Replays every series of a trace folder for manual (where the trace records capacities),
vpa, krr, clairvoyant and foresize (default mode plus `--modes`), all in one run, and
prints slack, shortfall, under, events and changes per resource and policy.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from foresize.errors import ForesizeError

KEYS = ("slack", "shortfall", "under", "events_per_series_day", "changes_per_series_day")


def run_bench(
    traces: str,
    fmt: str,
    modes: list[str],
    *,
    every: int = 1,
    limit: int | None = None,
) -> dict:
    """Run the replay and return the JSON document (see issue 3 for the keys)."""
    from foresize.history.traces import load_traces
    from foresize.recommend.core import MODE_CPU_QUANTILES
    from foresize.recommend.replay import (
        ClairvoyantPolicy,
        ForesizePolicy,
        KRRPolicy,
        ManualPolicy,
        VPAPolicy,
        prepare,
        replay,
    )

    for m in modes:
        if m not in MODE_CPU_QUANTILES:
            raise ForesizeError(
                f"--modes: unknown mode {m!r} (one of {', '.join(MODE_CPU_QUANTILES)})"
            )
    if every < 1:
        raise ForesizeError("--every must be at least 1")
    if limit is not None and limit < 1:
        raise ForesizeError(f"--limit must be at least 1, got {limit}")
    series, report = load_traces(traces, fmt)
    if not series:
        raise ForesizeError(f"{traces}: no usable series ({report.summary()})")
    series = series[::every]
    if limit is not None:
        series = series[:limit]
    data = prepare(series)
    policies = []
    if data.cpu_capacity is not None or data.memory_capacity is not None:
        policies.append(ManualPolicy())
    policies += [VPAPolicy(), KRRPolicy(), ClairvoyantPolicy(), ForesizePolicy()]
    policies += [ForesizePolicy(m) for m in dict.fromkeys(modes) if m != "balanced"]
    out: dict = {
        "traces": str(traces),
        "format": fmt,
        "series": len(series),
        "read": {
            "files": report.files,
            "rows": report.rows,
            "skipped_rows": report.skipped,
            "problems": report.problems,
            "counters": report.counters,
        },
        "policies": {},
    }
    for p in policies:
        scores = replay(data, p)
        out["policies"][p.name] = {r: s.as_dict() for r, s in scores.items()}
    headline = {}
    vpa = out["policies"].get("vpa", {})
    for name, res in out["policies"].items():
        if not name.startswith("foresize"):
            continue
        for r, s in res.items():
            if r in vpa and vpa[r]["slack"] > 0:
                headline.setdefault(name, {})[f"{r}_slack_ratio_vs_vpa"] = (
                    s["slack"] / vpa[r]["slack"]
                )
    out["slack_ratio_vs_vpa"] = headline
    return out


def format_table(doc: dict) -> str:
    lines = [
        f"traces: {doc['traces']}  format: {doc['format']}  series: {doc['series']}",
        f"read: {doc['read']['files']} files, {doc['read']['rows']} rows, "
        f"{doc['read']['skipped_rows']} skipped"
        + "".join(f"; {k}: {v}" for k, v in sorted(doc["read"]["counters"].items())),
    ]
    for p in doc["read"]["problems"][:10]:
        lines.append(f"  skipped {p}")
    head = f"{'policy':28s} {'res':6s} {'slack':>7s} {'shortfall':>9s} {'under':>7s} "
    head += f"{'events/d':>9s} {'changes/d':>9s}"
    lines += ["", head, "-" * len(head)]
    for name, res in doc["policies"].items():
        for r, s in res.items():
            lines.append(
                f"{name:28s} {r:6s} {s['slack']:7.4f} {s['shortfall']:9.4f} {s['under']:7.4f} "
                f"{s['events_per_series_day']:9.4f} {s['changes_per_series_day']:9.3f}"
            )
    if doc.get("slack_ratio_vs_vpa"):
        lines.append("")
        for name, ratios in doc["slack_ratio_vs_vpa"].items():
            parts = ", ".join(f"{k.split('_')[0]} {v:.3f}" for k, v in ratios.items())
            lines.append(f"slack {name} / vpa: {parts}")
    lines.append(
        "(memory events are OOM kills; every policy's requests are rounded up to 1m / 1Mi)"
    )
    return "\n".join(lines)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("recommend")
    def bench_recommend(
        traces: Annotated[str, typer.Option("--traces", help="Folder (or file) of traces.")],
        fmt: Annotated[
            str | None,
            typer.Option("--trace-format", help="bitbrains, crane, google2011 or canonical."),
        ] = None,
        fmt_alias: Annotated[str | None, typer.Option("--format", hidden=True)] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        modes: Annotated[
            list[str] | None,
            typer.Option(
                "--modes",
                help="Extra foresize modes (repeat or comma-separate), e.g. cost_optimized.",
            ),
        ] = None,
        every: Annotated[
            int, typer.Option("--every", help="Use every N-th series (quick runs).")
        ] = 1,
        limit: Annotated[
            int | None, typer.Option("--limit", help="At most this many series.")
        ] = None,
    ) -> None:
        """Recommendation quality: manual, vpa, krr, clairvoyant and foresize on real traces."""
        fmt = fmt if fmt is not None else fmt_alias
        if fmt is None:
            from foresize.errors import ForesizeError

            raise ForesizeError(
                "--trace-format is required (bitbrains, crane, google2011 or canonical)"
            )
        names = [m.strip() for item in (modes or []) for m in item.split(",") if m.strip()]
        doc = run_bench(traces, fmt, names, every=every, limit=limit)
        if json_out:
            typer.echo(json.dumps(doc, indent=2))
        else:
            typer.echo(format_table(doc))
