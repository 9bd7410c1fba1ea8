"""The headline of the HTML report: a sentence per policy, the cost table (with prices), the
totals with savings against static and vpa, the risk per workload, the workloads no policy
changed, and the headline figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foresize.front.report import figures
from foresize.front.report.cells import (
    NOT_RISK,
    esc,
    num_cell,
    pct_cell,
    per_day,
    policy_cell,
    saved_pct,
    workload_order,
    workload_row,
)
from foresize.front.report.run import PolicyRun

# Headline columns: (summary totals key, header, format).
HEADLINE = (
    ("cpu_requested_core_hours", "CPU requested<br>core·h", "{:.2f}"),
    ("cpu_used_core_hours", "CPU used<br>core·h", "{:.2f}"),
    ("memory_requested_gib_hours", "memory requested<br>GiB·h", "{:.2f}"),
    ("memory_used_gib_hours", "memory used<br>GiB·h", "{:.2f}"),
    ("resize_restarts", "restarts<br>from resizes", "{:d}"),
    ("resizes_per_day", "resizes<br>per day", "{:.1f}"),
    ("oom_kills", "OOM<br>kills", "{:d}"),
    ("throttled_seconds", "throttled<br>s", "{:.0f}"),
    ("evictions", "evic&shy;tions", "{:d}"),
    ("stalls", "stalls", "{:d}"),
    ("breaker_openings", "breaker<br>openings", "{:d}"),
    ("preemptions", "preemp&shy;tions", "{:d}"),
    ("resizes", "in-place<br>resizes", "{:d}"),
    ("pending_pod_hours", "pending<br>pod·h", "{:.2f}"),
)


# The risk per workload in the headline: what each policy's resizing cost each workload.
HEADLINE_WORKLOAD_RISK = (
    ("resize_restarts", "restarts from resizes", "{:d}"),
    ("resizes_per_day", "resizes per day", "{:.1f}"),
    ("oom_kills", "OOM kills", "{:d}"),
    ("throttled_seconds", "throttled s", "{:.0f}"),
    ("stalls", "stalls", "{:d}"),
)


def headline_section(
    ordered: list[PolicyRun],
    subjects: list[PolicyRun],
    out_dir: Path,
    colours: dict[str, str],
    hpa_cpu: set[str],
    prices: Any,
) -> str:
    """Headline: a sentence per policy, the cost table (with prices), the totals table
    with savings against static and vpa, the risk per workload and the headline figure."""
    by_policy = {r.policy: r for r in ordered}
    static, vpa = by_policy.get("static"), by_policy.get("vpa")
    parts = ["<h2 id='headline'>Headline</h2>"]
    parts += [f"<p class='lead'>{_lead(r, static, vpa)}</p>" for r in subjects]
    if prices is not None:
        parts.append(_cost_table(ordered, static, prices))
    headline_png = "headline.png"
    figures.headline_figure(ordered, out_dir / headline_png, colours=colours)
    parts.append(_headline_table(ordered, [x for x in (static, vpa) if x is not None], colours))
    parts.append(_headline_workload_risk(ordered))
    parts.append(_unchanged_note(ordered, hpa_cpu))
    parts.append(f"<img src='{headline_png}' alt='requested CPU and memory per policy'>")
    parts.append(
        "<p class='note'>Requested = the requests in force (what the kubelet applied) integrated "
        "over time, summed over all containers; used = what cgroups reported (CPU capped at "
        "the limit). Savings are the share of the reference's requested amount not "
        "requested. Risk columns are counts over the whole run; throttled seconds are "
        "container-seconds whose CPU demand exceeded the limit.</p>"
    )
    return "".join(parts)


HEADLINE_REQUESTS = 4
"""The first HEADLINE columns (requested and used) go in the first headline table with the
savings; the rest (the risk counts) in the second. One table of all of them (up to 18
columns) was wider than the page at any window size, and a scroll box hid its right end
from a screenshot, a PDF or a print (ux.md N6); two tables of at most 9 and 11 columns
fit the page from 1280 px up."""


def _headline_table(
    ordered: list[PolicyRun], refs: list[PolicyRun], colours: dict[str, str]
) -> str:
    """Two tables with a row per policy: the requested and used totals with the CPU and
    memory saved against each reference in `refs`; then the risk counts (`HEADLINE`)."""
    parts = ["<div class='scroll'><table class='headline'><tr><th class='l'>policy</th>"]
    parts += [f"<th>{head}</th>" for _, head, _ in HEADLINE[:HEADLINE_REQUESTS]]
    for ref in refs:
        parts.append(
            f"<th>CPU saved<br>vs {esc(ref.policy)}</th>"
            f"<th>memory saved<br>vs {esc(ref.policy)}</th>"
        )
    parts.append("</tr>")
    for r in ordered:
        t = r.summary["totals"]
        parts.append(policy_cell(r, colours))
        parts += [
            num_cell(fmt, t.get(key, 0), key, r.policy)
            for key, _, fmt in HEADLINE[:HEADLINE_REQUESTS]
        ]
        for ref in refs:
            rt = ref.summary["totals"]
            for key in ("cpu_requested_core_hours", "memory_requested_gib_hours"):
                if ref is r:
                    parts.append("<td class='note'>–</td>")
                else:
                    saved = saved_pct(t.get(key, 0.0), rt.get(key, 0.0))
                    parts.append(pct_cell(saved, key, r.policy, ref.policy))
        parts.append("</tr>")
    parts.append("</table></div>")
    parts.append("<div class='scroll'><table class='headline-counts'><tr><th class='l'>policy</th>")
    parts += [f"<th>{head}</th>" for _, head, _ in HEADLINE[HEADLINE_REQUESTS:]]
    parts.append("</tr>")
    for r in ordered:
        t = r.summary["totals"]
        parts.append(policy_cell(r, colours))
        for key, _, fmt in HEADLINE[HEADLINE_REQUESTS:]:
            value = per_day(r.summary, t) if key == "resizes_per_day" else t.get(key, 0)
            parts.append(num_cell(fmt, value, key, r.policy, risk=key not in NOT_RISK))
        parts.append("</tr>")
    parts.append("</table></div>")
    return "".join(parts)


def _lead(r: PolicyRun, static: PolicyRun | None, vpa: PolicyRun | None) -> str:
    t = r.summary["totals"]
    bits = [
        f"<b>{esc(r.policy)}</b> requested {t['cpu_requested_core_hours']:.1f} core·h of CPU "
        f"and {t['memory_requested_gib_hours']:.1f} GiB·h of memory"
    ]
    for ref in (static, vpa):
        if ref is None or ref is r:
            continue
        rt = ref.summary["totals"]
        c = saved_pct(t["cpu_requested_core_hours"], rt["cpu_requested_core_hours"])
        m = saved_pct(t["memory_requested_gib_hours"], rt["memory_requested_gib_hours"])
        if c is not None and m is not None:
            bits.append(f"{_word(c)} CPU and {_word(m)} memory than {esc(ref.policy)}")
    risks = (
        f"{t.get('resize_restarts', 0)} container restarts caused by resizes, "
        f"{per_day(r.summary, t):.1f} resizes a day, "
        f"{t.get('oom_kills', 0)} OOM kills, {t.get('throttled_seconds', 0):.0f} throttled s, "
        f"{t.get('evictions', 0)} evictions, {t.get('stalls', 0)} stalls, "
        f"{t.get('preemptions', 0)} preemptions, {t.get('breaker_openings', 0)} breaker openings"
    )
    return "; ".join(bits) + f" — with {risks}."


def _word(p: float) -> str:
    if abs(p) < 0.05:
        return "the same"
    return f"{abs(p):.1f}% {'less' if p > 0 else 'more'}"


def _cost(t: dict[str, Any], prices: Any) -> float:
    return float(
        t.get("cpu_requested_core_hours", 0.0) * prices.core_hour
        + t.get("memory_requested_gib_hours", 0.0) * prices.gib_hour
    )


def _cost_table(runs: list[PolicyRun], static: PolicyRun | None, prices: Any) -> str:
    """What each policy's requests cost over the run and per 30 days, and the saving
    against static, at the given prices per core-hour and GiB-hour."""
    from foresize.front.report.recommendations import HOURS_PER_MONTH

    rows = []
    base = _cost(static.summary["totals"], prices) if static is not None else None
    for r in runs:
        cost = _cost(r.summary["totals"], prices)
        hours = max(float(r.summary.get("duration_hours", 1.0)), 1e-9)
        saved = "–" if base is None or r is static else f"{base - cost:.2f}"
        rows.append(
            f"<tr data-policy='{esc(r.policy)}'><td class='l'>{esc(r.policy)}</td>"
            f"<td data-key='cost'>{cost:.2f}</td><td>{cost / hours * HOURS_PER_MONTH:.2f}</td>"
            f"<td data-key='saved'>{saved}</td></tr>"
        )
    return (
        f"<p class='note'>At {prices.core_hour:g} per core-hour and {prices.gib_hour:g} per "
        "GiB-hour of requests (a month is 730 hours):</p>"
        "<table class='cost'><tr><th class='l'>policy</th><th>cost of the run</th>"
        "<th>per month</th><th>saved vs static</th></tr>" + "".join(rows) + "</table>"
    )


def _headline_workload_risk(runs: list[PolicyRun]) -> str:
    """Per workload and policy: the restarts its resizes caused, resizes a day, kills,
    throttling and stalls (rows where every policy has none are left out)."""
    names = workload_order(runs)
    rows = []
    for name in names:
        cells = []
        for r in runs:
            row = workload_row(r, name) or {}
            values = [
                per_day(r.summary, row) if key == "resizes_per_day" else row.get(key, 0)
                for key, _, _ in HEADLINE_WORKLOAD_RISK
            ]
            cells.append((r, values))
        if not any(float(v) for _, values in cells for v in values):
            continue
        for i, (r, values) in enumerate(cells):
            first = f"<td class='l' rowspan='{len(cells)}'>{esc(name)}</td>" if i == 0 else ""
            tds = "".join(
                num_cell(fmt, v, key, r.policy, risk=key != "resizes_per_day")
                for (key, _, fmt), v in zip(HEADLINE_WORKLOAD_RISK, values, strict=True)
            )
            rows.append(f"<tr>{first}<td class='l'>{esc(r.policy)}</td>{tds}</tr>")
    if not rows:
        return (
            "<p class='note'>No workload had a resize restart, OOM kill, throttling or stall.</p>"
        )
    head = "".join(f"<th>{h}</th>" for _, h, _ in HEADLINE_WORKLOAD_RISK)
    return (
        "<h3 id='risk-per-workload'>Risk per workload</h3><div class='scroll'>"
        "<table class='headline-risk'><tr><th class='l'>workload</th><th class='l'>policy</th>"
        f"{head}</tr>{''.join(rows)}</table></div>"
        "<p class='note'>Restarts from resizes: containers restarted to apply a resize "
        "(resizePolicy RestartContainer), each one a lost process (a cache loses its data).</p>"
    )


def _unchanged_note(runs: list[PolicyRun], hpa_cpu: set[str]) -> str:
    """A line naming the workloads whose requests no policy changed, and why if known."""
    if len(runs) < 2:
        return ""
    same: list[str] = []
    cpu_only: list[str] = []
    for name in workload_order(runs):
        rows = [workload_row(r, name) for r in runs]
        if any(row is None for row in rows):
            continue
        cpu = {round(row["cpu_requested_core_hours"], 6) for row in rows if row}
        mem = {round(row["memory_requested_gib_hours"], 6) for row in rows if row}
        kind = name.split("/", 1)[0]
        if len(cpu) == 1 and len(mem) == 1:
            why = {
                "Job": "a Job: its pods run once and keep their template's requests",
                "DaemonSet": "a DaemonSet left at its written requests in this scenario",
            }.get(kind, "no policy resized it in this run")
            same.append(f"{esc(name)} ({why})")
        elif len(cpu) == 1 and name in hpa_cpu:
            cpu_only.append(f"{esc(name)} (its HPA scales on CPU, so CPU requests are left alone)")
    if not same and not cpu_only:
        return ""
    parts = []
    if same:
        parts.append("Identical under every policy: " + "; ".join(same) + ".")
    if cpu_only:
        parts.append("CPU identical under every policy: " + "; ".join(cpu_only) + ".")
    return f"<p class='note unchanged'>{' '.join(parts)}</p>"
