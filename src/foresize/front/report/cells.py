"""The cells and rows every section of the HTML report is made of: escaped text, numbers
with their `data-` keys for tools, savings, simulated clock times, anchors, and the
per-workload rows of a run's summary."""

from __future__ import annotations

import html
from typing import Any

from foresize.front.report.run import PolicyRun

GIB = float(2**30)


MIB = float(2**20)


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def formatted(fmt: str, v: Any) -> str:
    if fmt == "{:d}":
        return f"{int(v):d}"
    return fmt.format(float(v))


def saved_pct(value: float, base: float) -> float | None:
    """Percentage of `base` saved by `value` (positive = less requested), or None."""
    if not base:
        return None
    return 100.0 * (base - value) / base


def pct_cell(p: float | None, key: str, policy: str, ref: str) -> str:
    if p is None:
        return '<td class="note">–</td>'
    cls = "good" if p > 0.05 else ("bad" if p < -0.05 else "")
    return (
        f"<td class='{cls}' data-policy='{esc(policy)}' data-key='{key}_saved_vs_{ref}'>"
        f"{p:+.1f}%</td>"
    )


def num_cell(fmt: str, v: Any, key: str, policy: str, *, risk: bool = False) -> str:
    cls = "risk" if risk and float(v) > 0 else ""
    return (
        f"<td class='{cls}' data-policy='{esc(policy)}' data-key='{key}' "
        f"data-value='{esc(v)}'>{formatted(fmt, v)}</td>"
    )


NOT_RISK = {
    "cpu_requested_core_hours",
    "cpu_used_core_hours",
    "memory_requested_gib_hours",
    "memory_used_gib_hours",
    "resizes",
    "resizes_per_day",
}


def clock(t: float) -> str:
    """Simulated time as `d2 13:05` (day 0 is Monday 00:00)."""
    d, rem = divmod(int(round(t)), 86400)
    return f"d{d} {rem // 3600:02d}:{rem % 3600 // 60:02d}"


def slug(s: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in s.lower())
    return "-".join(x for x in out.split("-") if x)


def policy_cell(r: PolicyRun, colours: dict[str, str]) -> str:
    cls = " class='baseline'" if r.baseline_only else ""
    return (
        f"<tr{cls} data-policy='{esc(r.policy)}'><td class='l nw'>"
        f"<span class='swatch' style='background:{colours[r.policy]}'></span>"
        f"{esc(r.policy)}{' (reference)' if r.baseline_only else ''}</td>"
    )


def workload_row(r: PolicyRun, name: str) -> dict[str, Any] | None:
    for row in r.summary["workloads"]:
        if row["name"] == name:
            return row
    return None


def per_day(summary: dict[str, Any], row: dict[str, Any]) -> float:
    days = max(float(summary.get("duration_hours", 24.0)), 1e-9) / 24.0
    return float(row.get("resizes", 0)) / days


def workload_order(runs: list[PolicyRun]) -> list[str]:
    """Workloads by their share of the requested CPU and memory (largest first), in the
    first run that has them."""
    seen: dict[str, float] = {}
    for r in runs:
        t = r.summary["totals"]
        tc = t.get("cpu_requested_core_hours", 0.0) or 1.0
        tm = t.get("memory_requested_gib_hours", 0.0) or 1.0
        for row in r.summary["workloads"]:
            if row["name"] not in seen:
                seen[row["name"]] = (
                    row["cpu_requested_core_hours"] / tc + row["memory_requested_gib_hours"] / tm
                )
    return sorted(seen, key=lambda n: (-seen[n], n))
