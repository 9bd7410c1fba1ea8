"""The HTML report: one self-contained `index.html` (inline CSS, no scripts, no external
assets) next to the PNG figures it references, with every number in a table as well as
in a picture.

Sections: headline (requested CPU and memory per policy, savings against static and vpa,
OOM kills, throttled seconds, evictions, stalls, breaker openings, preemptions); per
workload (a table for all workloads, CPU and memory figures for the largest); risk events
(timeline figure and table per policy); the per-node gap between the scheduler's charge
and the sum of spec requests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from foresize.core.errors import ForesizeError
from foresize.front.report import figures
from foresize.front.report.cells import (
    GIB,
    MIB,
    NOT_RISK,
    clock,
    esc,
    num_cell,
    slug,
    workload_order,
    workload_row,
)
from foresize.front.report.headline import headline_section
from foresize.front.report.run import PolicyRun

WORKLOAD_COLUMNS = (
    ("cpu_requested_core_hours", "CPU req<br>core·h", "{:.2f}"),
    ("cpu_used_core_hours", "CPU used<br>core·h", "{:.2f}"),
    ("memory_requested_gib_hours", "mem req<br>GiB·h", "{:.2f}"),
    ("memory_used_gib_hours", "mem used<br>GiB·h", "{:.2f}"),
    ("oom_kills", "OOM", "{:d}"),
    ("throttled_seconds", "throttled<br>s", "{:.0f}"),
    ("evictions", "evic&shy;tions", "{:d}"),
    ("stalls", "stalls", "{:d}"),
    ("preemptions", "preemp&shy;tions", "{:d}"),
    ("breaker_openings", "breaker", "{:d}"),
    ("resizes", "resizes", "{:d}"),
    ("resize_restarts", "restarts<br>from resizes", "{:d}"),
)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d1d1f;
 max-width:1240px;margin:0 auto;padding:24px 28px 60px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:36px 0 8px;
 border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:22px 0 6px}
.meta{color:#555;margin:0 0 12px}.lead{font-size:16px;margin:10px 0 14px}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f3f3;
 padding:1px 4px;border-radius:3px}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px}
th,td{padding:4px 7px;border-bottom:1px solid #e6e6e6;text-align:right;vertical-align:top}
th{background:#f6f7f9;font-weight:600;border-bottom:2px solid #d5d8dd}
th:first-child,td:first-child,td.l,th.l{text-align:left}
tr.baseline td{color:#666;font-style:italic}
td.nw{white-space:nowrap}td.good{color:#1a7f37;font-weight:600}td.bad{color:#c62828;font-weight:600}
td.risk{color:#c62828;font-weight:600}
.scroll{overflow-x:auto}img{max-width:100%;height:auto;display:block;margin:6px 0 4px}
nav{background:#f6f7f9;padding:8px 12px;border-radius:6px;margin:12px 0}
nav a{margin-right:14px}.note{color:#666;font-size:12.5px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px}
"""


def check_output_dir(path: str | os.PathLike[str], *, option: str = "--report") -> Path:
    """Make sure `path` is (or can become) a writable directory; a clear error otherwise."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ForesizeError(f"{option}: {p} exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ForesizeError(
            f"{option}: cannot create directory {p}: {exc.strerror or exc}"
        ) from None
    probe = p / ".foresize-write-test"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ForesizeError(
            f"{option}: directory {p} is not writable: {exc.strerror or exc}"
        ) from None
    return p


def write_report(
    out_dir: Path,
    runs: list[PolicyRun],
    *,
    duration: float,
    gap_every: float,
    command: str = "",
    max_workload_figures: int = 20,
    max_event_rows: int = 300,
    hpa_cpu: set[str] | None = None,
    prices: Any = None,
) -> Path:
    """Write `out_dir/index.html` and its figures for `runs` (same scenario, seed, step;
    the first non-baseline run is the primary one). `hpa_cpu`: the workloads
    (`Kind/namespace/name`) whose CPU an HPA scales on; `prices`
    (`foresize.front.report.recommendations.Prices`) adds the cost of the requests. Returns the
    index path."""
    if not runs:
        raise ValueError("no runs to report")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    subjects = [r for r in runs if not r.baseline_only] or runs
    ordered = subjects + [r for r in runs if r.baseline_only]
    colours = figures.policy_colours([r.policy for r in ordered])
    page = [
        _page_head(runs, subjects, command),
        headline_section(ordered, subjects, out_dir, colours, hpa_cpu or set(), prices),
        _workloads_section(ordered, out_dir, duration, colours, max_workload_figures),
        _risks_section(ordered, out_dir, duration, max_event_rows),
        _gap_section(ordered, out_dir, duration, gap_every),
        _method_section(ordered, subjects),
    ]
    index = out_dir / "index.html"
    index.write_text("".join(page), encoding="utf-8")
    return index


def _page_head(runs: list[PolicyRun], subjects: list[PolicyRun], command: str) -> str:
    """The document head and style, the title, what was run, and the section links."""
    first = subjects[0].summary
    title = f"Foresize simulation report — {first['scenario']}"
    parts = [
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p class='meta'>scenario <b>{esc(first['scenario'])}</b> · "
        f"{first['duration_hours']:.1f} simulated hours · seed {first['seed']} · "
        f"usage step {first['step_seconds']:g} s · {first['nodes']} nodes at the end · "
        f"policies {', '.join(esc(r.policy) for r in subjects)}"
        + (
            f" (references: {', '.join(esc(r.policy) for r in runs if r.baseline_only)})"
            if any(r.baseline_only for r in runs)
            else ""
        )
        + "</p>",
    ]
    if command:
        parts.append(f"<p class='meta'>made by <code>{esc(command)}</code></p>")
    parts.append(
        "<nav><a href='#headline'>Headline</a><a href='#workloads'>Workloads</a>"
        "<a href='#risks'>Risk events</a><a href='#gap'>Scheduler charge gap</a>"
        "<a href='#method'>How to read this</a></nav>"
    )
    return "".join(parts)


def _workloads_section(
    ordered: list[PolicyRun],
    out_dir: Path,
    duration: float,
    colours: dict[str, str],
    max_workload_figures: int,
) -> str:
    """Workloads: the table of every workload under every policy, then CPU and memory
    figures and risk events for the largest `max_workload_figures`."""
    names = workload_order(ordered)
    parts = ["<h2 id='workloads'>Workloads</h2>", _workload_table(ordered, names)]
    shown = names[:max_workload_figures]
    if len(names) > len(shown):
        parts.append(
            f"<p class='note'>Figures for the {len(shown)} largest workloads by requested "
            f"CPU and memory ({len(names) - len(shown)} more are in the table only).</p>"
        )
    for name in shown:
        parts.append(f"<h3 id='wl-{slug(name)}'>{esc(name)}</h3>")
        for resource in ("cpu", "memory"):
            png = f"wl-{slug(name)}-{resource}.png"
            figures.workload_figure(
                ordered, name, resource, out_dir / png, duration=duration, colours=colours
            )
            parts.append(
                f"<img src='{png}' alt='{esc(name)} {resource}: requested vs used over time'>"
            )
        parts.append(_workload_risks(ordered, name))
    return "".join(parts)


def _workload_table(ordered: list[PolicyRun], names: list[str]) -> str:
    """A row per workload and policy (`WORKLOAD_COLUMNS`, then peak used / requested)."""
    parts = [
        "<div class='scroll'><table class='workloads'>",
        "<tr><th class='l'>workload</th><th class='l'>policy</th>",
    ]
    parts += [f"<th>{head}</th>" for _, head, _ in WORKLOAD_COLUMNS]
    parts.append("<th>peak CPU used / req<br>cores</th><th>peak mem used / req<br>GiB</th></tr>")
    for name in names:
        for i, r in enumerate(ordered):
            row = workload_row(r, name)
            if row is None:
                continue
            cls = " class='baseline'" if r.baseline_only else ""
            link = f"<a href='#wl-{slug(name)}'>{esc(name)}</a>"
            first_cell = f"<td class='l' rowspan='{len(ordered)}'>{link}</td>" if i == 0 else ""
            parts.append(f"<tr{cls}>{first_cell}<td class='l'>{esc(r.policy)}</td>")
            for key, _, fmt in WORKLOAD_COLUMNS:
                parts.append(
                    num_cell(fmt, row.get(key, 0), key, r.policy, risk=key not in NOT_RISK)
                )
            pk = _peaks(r, name)
            parts.append(f"<td class='nw'>{pk[0]:.2f} / {pk[1]:.2f}</td>")
            parts.append(f"<td class='nw'>{pk[2]:.2f} / {pk[3]:.2f}</td></tr>")
    parts.append("</table></div>")
    return "".join(parts)


def _risks_section(
    ordered: list[PolicyRun], out_dir: Path, duration: float, max_event_rows: int
) -> str:
    """Risk events: per policy, a timeline figure, counts per workload and the first
    `max_event_rows` events."""
    parts = [
        "<h2 id='risks'>Risk events</h2>",
        "<p class='note'>From the simulator's event log: OOM kills, container restarts that "
        "applied a resize (resizePolicy RestartContainer), evictions (Eviction API "
        "and node pressure), stalls (a resize Deferred, Infeasible or failing in the kubelet, "
        "once per generation), preemptions and circuit-breaker openings.</p>",
    ]
    for r in ordered:
        parts.append(f"<h3>{esc(r.policy)}{' (reference)' if r.baseline_only else ''}</h3>")
        if not r.risks:
            parts.append(f"<p data-policy='{esc(r.policy)}'>No risk events.</p>")
            continue
        parts.append(_policy_risks(r, out_dir, duration, max_event_rows))
    return "".join(parts)


def _policy_risks(r: PolicyRun, out_dir: Path, duration: float, max_event_rows: int) -> str:
    """One policy's risk events (there are some): figure, counts table, timeline table."""
    counts: dict[str, dict[str, int]] = {}
    for ev in r.risks:
        row = counts.setdefault(ev.workload or "(unattributed)", {})
        row[ev.label] = row.get(ev.label, 0) + 1
    wls = sorted(counts)
    png = f"risks-{slug(r.policy)}.png"
    figures.risk_figure(r, wls, out_dir / png, duration=duration)
    parts = [
        f"<img src='{png}' alt='risk events over time, {esc(r.policy)}'>",
        "<table class='risk-counts'><tr><th class='l'>workload</th>",
    ]
    parts += [f"<th>{esc(label)}</th>" for label in figures.RISK_LABELS]
    parts.append("</tr>")
    for name in wls:
        parts.append(f"<tr><td class='l'>{esc(name)}</td>")
        for label in figures.RISK_LABELS:
            n = counts[name].get(label, 0)
            parts.append(f"<td class='{'risk' if n else ''}'>{n}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    parts.append(
        f"<table class='timeline' data-policy='{esc(r.policy)}'><tr><th class='l'>time</th>"
        "<th class='l'>event</th><th class='l'>workload</th><th class='l'>object</th>"
        "<th class='l'>message</th></tr>"
    )
    for ev in r.risks[:max_event_rows]:
        parts.append(
            f"<tr><td class='l'>{clock(ev.time)}</td><td class='l'>{esc(ev.label)}</td>"
            f"<td class='l'>{esc(ev.workload)}</td><td class='l'>{esc(ev.object)}</td>"
            f"<td class='l'>{esc(ev.message)}</td></tr>"
        )
    parts.append("</table>")
    if len(r.risks) > max_event_rows:
        parts.append(
            f"<p class='note'>{len(r.risks) - max_event_rows} more events not listed "
            "(write them all with <code>--events FILE</code>).</p>"
        )
    return "".join(parts)


def _gap_section(ordered: list[PolicyRun], out_dir: Path, duration: float, gap_every: float) -> str:
    """Scheduler charge vs spec requests: per policy, a figure and the largest gap of each
    node that had one (or why there is nothing to show)."""
    parts = [
        "<h2 id='gap'>Scheduler charge vs spec requests, per node</h2>",
        "<p class='note'>The scheduler charges each pod max(spec request, allocated, actual) "
        "per container (<code>foresize.core.cluster.qos.pod_charge</code>); while a resize is "
        "pending or in progress that can exceed the spec requests "
        "(<code>spec_requests</code>), so a node can look fuller to the scheduler than its "
        f"pods ask for. Sampled every {gap_every / 60:g} min.</p>",
    ]
    for r in ordered:
        g = r.gaps
        parts.append(f"<h3>{esc(r.policy)}{' (reference)' if r.baseline_only else ''}</h3>")
        if not g.times.size:
            parts.append("<p>No samples.</p>")
        elif not (g.cpu.any() or g.memory.any()):
            parts.append(
                f"<p data-policy='{esc(r.policy)}'>No gap: the scheduler's charge equalled the "
                f"spec requests on every node at all {g.times.size} samples.</p>"
            )
        else:
            parts.append(_policy_gaps(r, out_dir, duration))
    return "".join(parts)


def _policy_gaps(r: PolicyRun, out_dir: Path, duration: float) -> str:
    """One policy's gaps (there are some): figure, then a row per node that had a gap."""
    g = r.gaps
    png = f"gap-{slug(r.policy)}.png"
    figures.gap_figure(r, out_dir / png, duration=duration)
    parts = [
        f"<img src='{png}' alt='scheduler charge minus spec requests per node, {esc(r.policy)}'>",
        f"<table class='gap' data-policy='{esc(r.policy)}'><tr><th class='l'>node</th>"
        "<th>largest CPU gap<br>m</th><th>% of<br>allocatable</th><th>at</th>"
        "<th>largest memory gap<br>MiB</th><th>% of<br>allocatable</th><th>at</th>"
        "<th>samples<br>with a gap</th></tr>",
    ]
    for i, node in enumerate(g.nodes):
        c, m = g.cpu[:, i], g.memory[:, i]
        if not (c.any() or m.any()):
            continue
        # Largest in size: negative while an Infeasible resize's spec is left out.
        ic, im = int(np.argmax(np.abs(c))), int(np.argmax(np.abs(m)))
        n_gap = int(np.count_nonzero((c != 0) | (m != 0)))
        ac, am = g.allocatable_cpu[i], g.allocatable_memory[i]
        parts.append(
            f"<tr><td class='l'>{esc(node)}</td><td>{c[ic]:+.0f}</td>"
            f"<td>{100 * c[ic] / ac if ac else 0:.1f}%</td><td>{clock(g.times[ic])}</td>"
            f"<td>{m[im] / MIB:+.0f}</td><td>{100 * m[im] / am if am else 0:.1f}%</td>"
            f"<td>{clock(g.times[im])}</td><td>{n_gap} of {g.times.size}</td></tr>"
        )
    parts.append("</table>")
    quiet = sum(1 for i in range(len(g.nodes)) if not (g.cpu[:, i].any() or g.memory[:, i].any()))
    if quiet:
        parts.append(f"<p class='note'>{quiet} other node(s) never had a gap.</p>")
    return "".join(parts)


def _method_section(ordered: list[PolicyRun], subjects: list[PolicyRun]) -> str:
    """How to read the report, then every run's summary as JSON for tools, and the end."""
    data = {r.policy: _strip(r.summary) for r in ordered}
    return (
        "<h2 id='method'>How to read this</h2><ul>"
        "<li>Every policy ran the same scenario with the same seed and usage step, so demand "
        "is the same; what differs is what each policy requested and what that cost in "
        "OOM kills, throttling and disruption.</li>"
        "<li><b>static</b> keeps the requests the scenario wrote; <b>vpa</b> is the "
        "VPA-style reference (a percentile of past usage, applied through the same "
        "disruption worker); <b>foresize</b> sizes from forecasts of the coming window.</li>"
        "<li>Workload figures: shaded = used (summed over the workload's running "
        f"containers, from <b>{esc(subjects[0].policy)}</b>); lines = each policy's requests in "
        "force; dashed lines are references; ✕ marks an OOM kill.</li>"
        "<li>Times are simulated; day 0 starts on a Monday at 00:00.</li>"
        "</ul>"
        "<script type='application/json' id='foresize-summaries'>"
        + json.dumps(data, sort_keys=False).replace("</", "<\\/")
        + "</script>"
        "</body></html>\n"
    )


def _strip(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "event_log_sha256"}


def _workload_risks(runs: list[PolicyRun], name: str) -> str:
    """A line per policy with the workload's risk events: counts, first and last time."""
    rows = []
    for r in runs:
        evs = [ev for ev in r.risks if ev.workload == name]
        if not evs:
            continue
        counts = ", ".join(
            f"{n} × {label}"
            for label in figures.RISK_LABELS
            if (n := sum(1 for ev in evs if ev.label == label))
        )
        rows.append(
            f"<tr><td class='l'>{esc(r.policy)}</td><td class='l risk'>{esc(counts)}</td>"
            f"<td>{clock(evs[0].time)}</td><td>{clock(evs[-1].time)}</td></tr>"
        )
    if not rows:
        return "<p class='note'>No risk events for this workload under any policy.</p>"
    return (
        "<table class='wl-risks'><tr><th class='l'>policy</th><th class='l'>risk events</th>"
        "<th>first</th><th>last</th></tr>" + "".join(rows) + "</table>"
    )


def _peaks(r: PolicyRun, name: str) -> tuple[float, float, float, float]:
    s = r.series
    if name not in s.names or not s.times.size:
        return 0.0, 0.0, 0.0, 0.0
    c = s.column(name)
    return (
        float(s.cpu_used[:, c].max()),
        float(s.cpu_req[:, c].max()),
        float(s.mem_used[:, c].max()) / GIB,
        float(s.mem_req[:, c].max()) / GIB,
    )
