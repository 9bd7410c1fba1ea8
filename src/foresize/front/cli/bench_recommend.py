"""`foresize bench recommend`: recommendation quality on real traces (architecture §3.7).

Replays every series of a trace folder for manual (where the trace records capacities),
vpa, krr, clairvoyant and foresize (default mode plus `--modes`), all in one run, and
prints slack, shortfall, under, events and changes per resource and policy.

Then compares at equal risk: foresize is replayed at every named mode and at the
`--sweep` percentiles, giving its curve of (risk, slack) per resource (risk: CPU
shortfall, memory OOM kills per series-day); `matched` is its slack on that curve at
vpa's risk over vpa's slack (`foresize.bench.replay.matched_slack`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from foresize.core.errors import ForesizeError

if TYPE_CHECKING:  # imported where used, so `foresize --help` stays quick
    from foresize.adapters.history.traces import ReadReport
    from foresize.bench.replay import Policy, ReplayData, ResourceScore
    from foresize.core.history import TraceSeries

Scored = dict[str, dict[str, "ResourceScore"]]
"""Each replayed policy's scores per resource, by policy name."""

KEYS = ("slack", "shortfall", "under", "events_per_series_day", "changes_per_series_day")

SWEEP_PERCENTILES: tuple[float, ...] = (
    10,
    30,
    50,
    70,
    80,
    90,
    95,
    98,
    99,
    99.5,
    99.8,
    99.9,
    99.95,
    99.98,
    99.99,
    99.995,
    99.999,
)
"""The `percentile` values swept besides the named modes. Wide on purpose: references sit
at very different risks from one fleet to the next (CPU shortfall from 0.2% to 4% on the
development sets, OOM kills from 0.01 to 0.1 a series-day), and a matched ratio is only
reported where the curve brackets the reference. Roughly a factor of two in miss
probability between neighbours keeps the log-linear interpolation short."""

CPU_SWEEP_MAX = 99.0
MEMORY_SWEEP_MIN = 90.0
"""Swept percentiles up to 99 size CPU, from 90 up memory (both in between): a CPU
request at p99.5 or more is short far less often than any reference, and memory below
p90 is killed far more often than any (half the replay time saved)."""

RISK = {"cpu": "shortfall", "memory": "events_per_series_day"}
"""The risk axis per resource: CPU demand not covered, memory OOM kills per series-day."""


def run_bench(
    traces: str,
    fmt: str,
    modes: list[str],
    *,
    every: int = 1,
    offset: int = 0,
    limit: int | None = None,
    sweep: tuple[float, ...] | None = SWEEP_PERCENTILES,
) -> dict:
    """Run the replay and return the JSON document: `policies` (scores per policy and
    resource; memory also the worst series' kills and the share of series killed more
    often than under vpa), `slack_ratio_vs_vpa` (default and `modes`), `sweep` (foresize's
    (risk, slack) points per resource) and `matched` (the comparison at vpa's risk)."""
    from foresize.bench.replay import prepare, replay

    check_options(modes, every=every, offset=offset, limit=limit, sweep=sweep)
    series, report = load_selected_series(traces, fmt, every=every, offset=offset, limit=limit)
    data = prepare(series)
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
    scored: Scored = {}
    for p in compared_policies(data, modes):
        scores = replay(data, p)
        scored[p.name] = scores
        out["policies"][p.name] = {r: s.as_dict() for r, s in scores.items()}
    add_memory_kills_vs_vpa(out["policies"], scored)
    out["slack_ratio_vs_vpa"] = slack_ratios_vs_vpa(out["policies"])
    if sweep is not None:
        out["sweep"] = foresize_curve(data, scored, sweep)
        out["matched"] = matched_at_vpa_risk(scored["vpa"], out["sweep"])
    return out


def check_options(
    modes: list[str], *, every: int, offset: int, limit: int | None, sweep: tuple[float, ...] | None
) -> None:
    """Refuse bad options with a one-line error naming the option, before any trace is read."""
    from foresize.core.recommend.core import MODE_CPU_QUANTILES

    for m in modes:
        if m not in MODE_CPU_QUANTILES:
            raise ForesizeError(
                f"--modes: unknown mode {m!r} (one of {', '.join(MODE_CPU_QUANTILES)})"
            )
    if every < 1:
        raise ForesizeError("--every must be at least 1")
    if not 0 <= offset < every:
        raise ForesizeError(f"--offset must be in [0, --every), got {offset}")
    for v in sweep or ():
        if not 0.0 < v < 100.0:
            raise ForesizeError(f"--sweep: percentile must be in (0, 100), got {v}")
    if limit is not None and limit < 1:
        raise ForesizeError(f"--limit must be at least 1, got {limit}")


def load_selected_series(
    traces: str, fmt: str, *, every: int, offset: int, limit: int | None
) -> tuple[list[TraceSeries], ReadReport]:
    """The trace's series picked by `--every`/`--offset`/`--limit`, and the read report;
    an error if the trace has no usable series at all."""
    from foresize.adapters.history.traces import load_traces

    series, report = load_traces(traces, fmt)
    if not series:
        raise ForesizeError(f"{traces}: no usable series ({report.summary()})")
    series = series[offset::every]
    if limit is not None:
        series = series[:limit]
    return series, report


def compared_policies(data: ReplayData, modes: list[str]) -> list[Policy]:
    """The policies replayed and reported: manual where the trace records capacities, the
    references, foresize's default mode and each extra mode in `modes` once."""
    from foresize.bench.replay import (
        ClairvoyantPolicy,
        ForesizePolicy,
        KRRPolicy,
        ManualPolicy,
        VPAPolicy,
    )

    policies: list[Policy] = []
    if data.cpu_capacity is not None or data.memory_capacity is not None:
        policies.append(ManualPolicy())
    policies += [VPAPolicy(), KRRPolicy(), ClairvoyantPolicy(), ForesizePolicy()]
    policies += [ForesizePolicy(m) for m in dict.fromkeys(modes) if m != "balanced"]
    return policies


def add_memory_kills_vs_vpa(policies_doc: dict, scored: Scored) -> None:
    """Add to each policy's memory scores its worst series' OOM kills and the share of
    series killed more often than under vpa (nothing when the trace has no memory)."""
    vpa_scores = scored["vpa"]
    if "memory" not in vpa_scores:
        return
    vpa_kills = vpa_scores["memory"].series_events
    for name, scores in scored.items():
        kills = scores["memory"].series_events
        policies_doc[name]["memory"]["worst_series_kills"] = int(kills.max(initial=0))
        policies_doc[name]["memory"]["share_series_more_kills_than_vpa"] = float(
            (kills > vpa_kills).mean()
        )


def slack_ratios_vs_vpa(policies_doc: dict) -> dict[str, dict[str, float]]:
    """Each foresize policy's slack over vpa's, per resource where vpa has slack."""
    headline: dict[str, dict[str, float]] = {}
    vpa = policies_doc.get("vpa", {})
    for name, res in policies_doc.items():
        if not name.startswith("foresize"):
            continue
        for r, s in res.items():
            if r in vpa and vpa[r]["slack"] > 0:
                headline.setdefault(name, {})[f"{r}_slack_ratio_vs_vpa"] = (
                    s["slack"] / vpa[r]["slack"]
                )
    return headline


def foresize_curve(
    data: ReplayData, scored: Scored, sweep: tuple[float, ...]
) -> dict[str, list[dict]]:
    """Foresize's (risk, slack) points per resource: every named mode (reusing the runs
    already scored) and the swept percentiles, each sizing only the resources its range
    covers (`CPU_SWEEP_MAX`, `MEMORY_SWEEP_MIN`)."""
    from foresize.bench.replay import ForesizePolicy, replay
    from foresize.core.api.quantity import CPU, MEMORY
    from foresize.core.recommend.core import MODE_CPU_QUANTILES

    vpa_scores = scored["vpa"]
    points: dict[str, list[dict]] = {r: [] for r in vpa_scores}
    runs = [(m, None) for m in MODE_CPU_QUANTILES] + [("percentile", v) for v in sweep]
    for mode, value in runs:
        name = "foresize" if mode == "balanced" else f"foresize:{mode}"
        if value is not None:
            name = f"foresize:percentile={value:g}"
            sized = tuple(
                r
                for r, ok in (
                    (CPU, value <= CPU_SWEEP_MAX),
                    (MEMORY, value >= MEMORY_SWEEP_MIN),
                )
                if ok and r in vpa_scores
            )
            if not sized:
                continue
            pol = ForesizePolicy(mode, percentile_value=value, resources=sized)
            scores = replay(data, pol)
        elif name in scored:
            scores = scored[name]
        else:
            scores = replay(data, ForesizePolicy(mode))
        for r, sc in scores.items():
            points[r].append({"policy": name, "risk": getattr(sc, RISK[r]), "slack": sc.slack})
    return points


def matched_at_vpa_risk(
    vpa_scores: dict[str, ResourceScore], points: dict[str, list[dict]]
) -> dict:
    """Per resource: vpa's risk and slack, foresize's slack on its curve at that risk
    (None outside the curve) and the ratio of the two slacks."""
    from foresize.bench.replay import matched_slack

    matched = {}
    for r, vs in vpa_scores.items():
        risk = getattr(vs, RISK[r])
        slack = matched_slack([(p["risk"], p["slack"]) for p in points[r]], risk)
        matched[r] = {
            "vpa_risk": risk,
            "foresize_slack": slack,
            "vpa_slack": vs.slack,
            "ratio": slack / vs.slack if slack is not None and vs.slack > 0 else None,
        }
    return matched


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
    mem = {
        n: r["memory"]
        for n, r in doc["policies"].items()
        if "worst_series_kills" in r.get("memory", {})
    }
    if mem:
        lines += [
            "",
            "memory OOM kills per series: worst series, share of series killed more than under vpa",
        ]
        for name, m in mem.items():
            lines.append(
                f"  {name:26s} {m['worst_series_kills']:5d} "
                f"{m['share_series_more_kills_than_vpa']:7.3f}"
            )
    if doc.get("sweep"):
        lines += ["", "foresize's curve (risk: cpu shortfall, memory OOM kills per series-day):"]
        for r, pts in doc["sweep"].items():
            for p in sorted(pts, key=lambda p: p["risk"]):
                lines.append(
                    f"  {r:6s} {p['policy']:32s} risk {p['risk']:8.4f} slack {p['slack']:7.4f}"
                )
    if doc.get("matched"):
        lines.append("")
        for r, m in doc["matched"].items():
            fs = "n/a" if m["foresize_slack"] is None else f"{m['foresize_slack']:.4f}"
            ratio = (
                "null (vpa's risk is outside foresize's curve)"
                if m["ratio"] is None
                else f"{m['ratio']:.3f}"
            )
            lines.append(
                f"matched {r}: at vpa's risk {m['vpa_risk']:.4f} foresize slack {fs} vs vpa "
                f"{m['vpa_slack']:.4f}: ratio {ratio}"
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


def parse_sweep(text: str | None) -> tuple[float, ...] | None:
    """`--sweep`: None = the default grid, 'none' = no sweep, else comma-separated values."""
    if text is None:
        return SWEEP_PERCENTILES
    if text.strip().lower() == "none":
        return None
    out = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            out.append(float(part))
        except ValueError:
            raise ForesizeError(f"--sweep: not a number: {part.strip()!r}") from None
    return tuple(out)


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
        offset: Annotated[
            int,
            typer.Option(
                "--offset", help="With --every N: start at series K (split halves: 0 and 1)."
            ),
        ] = 0,
        sweep: Annotated[
            str | None,
            typer.Option(
                "--sweep",
                help="Percentiles swept for the equal-risk comparison (comma-separated), "
                "or 'none'. Default: 10,30,...,99.999.",
            ),
        ] = None,
        limit: Annotated[
            int | None, typer.Option("--limit", help="At most this many series.")
        ] = None,
    ) -> None:
        """Recommendation quality: manual, vpa, krr, clairvoyant and foresize on real traces."""
        fmt = fmt if fmt is not None else fmt_alias
        if fmt is None:
            from foresize.core.errors import ForesizeError

            raise ForesizeError(
                "--trace-format is required (bitbrains, crane, google2011 or canonical)"
            )
        names = [m.strip() for item in (modes or []) for m in item.split(",") if m.strip()]
        doc = run_bench(
            traces, fmt, names, every=every, offset=offset, limit=limit, sweep=parse_sweep(sweep)
        )
        if json_out:
            typer.echo(json.dumps(doc, indent=2))
        else:
            typer.echo(format_table(doc))
