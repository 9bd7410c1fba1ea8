"""The report's PNG figures, drawn with matplotlib's Agg canvas (no pyplot, no display,
no global state: safe to call from a CLI or a test)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from foresize.front.report.recorder import RISK_LABELS

if TYPE_CHECKING:
    from foresize.front.report.run import PolicyRun

GIB = float(2**30)
MIB = float(2**20)
DPI = 100

# Fixed colours for the usual policies, so a reader learns them once.
_COLOURS = {"static": "#6b6b6b", "vpa": "#1f77b4", "foresize": "#2ca02c"}
_CYCLE = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e")
_MARKERS = {
    "OOM kill": ("X", "#d62728"),
    "resize restart": ("o", "#e377c2"),
    "eviction": ("v", "#ff7f0e"),
    "stall": ("s", "#9467bd"),
    "preemption": ("D", "#8c564b"),
    "breaker open": ("*", "#000000"),
}


def policy_colours(policies: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    for p in policies:
        if p in _COLOURS:
            out[p] = _COLOURS[p]
        elif p.split(":")[0] in _COLOURS and _COLOURS[p.split(":")[0]] not in out.values():
            out[p] = _COLOURS[p.split(":")[0]]
        else:
            out[p] = _CYCLE[i % len(_CYCLE)]
            i += 1
    return out


def time_axis(seconds: np.ndarray, duration: float) -> tuple[np.ndarray, str]:
    """Times in days when the run is longer than two days, else in hours."""
    if duration > 2 * 86400:
        return seconds / 86400.0, "simulated time (days; day 0 is a Monday)"
    if duration <= 3 * 3600:
        return seconds / 60.0, "simulated time (minutes)"
    return seconds / 3600.0, "simulated time (hours)"


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, format="png")


def _style(ax: object) -> None:
    ax.grid(True, color="#e5e5e5", linewidth=0.6)  # type: ignore[attr-defined]
    ax.set_axisbelow(True)  # type: ignore[attr-defined]
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)  # type: ignore[attr-defined]


def workload_figure(
    runs: list[PolicyRun],
    workload: str,
    resource: str,
    path: Path,
    *,
    duration: float,
    colours: dict[str, str],
) -> None:
    """Usage of `workload` under each policy's request line. The first run's usage is
    shaded; the other policies under study add their own usage as a thin line (it differs
    where limits cap CPU or OOM kills restart a leak). OOM kills are marked along the top,
    one row per policy."""
    fig = Figure(figsize=(11.2, 3.4), layout="constrained")
    ax = fig.add_subplot()
    _style(ax)
    is_cpu = resource == "cpu"
    scale, unit = (1.0, "cores") if is_cpu else (GIB, "GiB")

    def series(run: PolicyRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = run.series
        c = s.column(workload)
        x, _ = time_axis(s.times, duration)
        used = (s.cpu_used if is_cpu else s.mem_used)[:, c] / scale
        req = (s.cpu_req if is_cpu else s.mem_req)[:, c] / scale
        return x, used, req

    first = runs[0]
    x, used, _ = series(first)
    _, xlabel = time_axis(first.series.times, duration)
    ax.fill_between(
        x, used, step="post", color="#c9d7e8", linewidth=0, label=f"used ({first.policy})"
    )
    ax.plot(x, used, drawstyle="steps-post", color="#7b97bd", linewidth=0.6)
    top = float(used.max()) if used.size else 0.0
    for run in runs[1:]:
        if run.baseline_only:
            continue
        xr, u, _ = series(run)
        top = max(top, float(u.max()) if u.size else 0.0)
        ax.plot(
            xr,
            u,
            drawstyle="steps-post",
            color=colours[run.policy],
            linewidth=0.6,
            alpha=0.75,
            label=f"used ({run.policy})",
        )
    # References first, so the policies under study are drawn on top.
    for run in sorted(runs, key=lambda r: not r.baseline_only):
        xr, _, req = series(run)
        top = max(top, float(req.max()) if req.size else 0.0)
        ax.plot(
            xr,
            req,
            drawstyle="steps-post",
            color=colours[run.policy],
            linewidth=1.8 if not run.baseline_only else 1.2,
            linestyle="-" if not run.baseline_only else "--",
            label=f"requested ({run.policy})",
        )
    ceiling = top if top > 0 else 1.0
    kills = [
        (run, [r.time for r in run.risks if r.workload == workload and r.label == "OOM kill"])
        for run in runs
        if not is_cpu
    ]
    kills = [(run, t) for run, t in kills if t]
    for k, (run, t) in enumerate(kills):
        xt, _ = time_axis(np.asarray(t), duration)
        ax.plot(
            xt,
            np.full(xt.size, ceiling * (1.05 + 0.06 * k)),
            linestyle="none",
            marker="X",
            markersize=6,
            color=colours[run.policy],
            label=f"OOM kill ({run.policy})",
        )
    ax.set_ylim(bottom=0, top=ceiling * (1.1 + 0.06 * len(kills)))
    ax.set_xlim(0, x[-1] if x.size else 1)
    ax.set_ylabel(f"{'CPU' if is_cpu else 'memory'} ({unit})")
    ax.set_xlabel(xlabel)
    ax.set_title(f"{workload} — {'CPU' if is_cpu else 'memory'}", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    _save(fig, path)


def headline_figure(runs: list[PolicyRun], path: Path, *, colours: dict[str, str]) -> None:
    """Requested CPU and memory per policy (bars) with the used amount marked."""
    fig = Figure(figsize=(11.2, 2.9), layout="constrained")
    names = [r.policy for r in runs]
    for i, (key, used_key, unit, title) in enumerate(
        (
            ("cpu_requested_core_hours", "cpu_used_core_hours", "core·h", "CPU requested"),
            ("memory_requested_gib_hours", "memory_used_gib_hours", "GiB·h", "memory requested"),
        )
    ):
        ax = fig.add_subplot(1, 2, i + 1)
        _style(ax)
        vals = [r.summary["totals"].get(key, 0.0) for r in runs]
        used = [r.summary["totals"].get(used_key, 0.0) for r in runs]
        y = np.arange(len(runs))
        ax.barh(y, vals, color=[colours[n] for n in names], height=0.6)
        ax.plot(used, y, linestyle="none", marker="|", markersize=18, color="#222222")
        for yi, v in zip(y, vals, strict=True):
            ax.text(v, float(yi), f" {v:,.1f}", va="center", fontsize=8)
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        ax.set_xlabel(unit + "   (| = used)")
        ax.set_title(title, loc="left")
        ax.set_xlim(0, max([*vals, *used, 1e-9]) * 1.18)
    _save(fig, path)


def risk_figure(run: PolicyRun, workloads: list[str], path: Path, *, duration: float) -> None:
    """One row per workload with risk events; a marker per event, by kind."""
    height = max(2.2, 1.3 + 0.32 * len(workloads))
    fig = Figure(figsize=(11.2, height), layout="constrained")
    ax = fig.add_subplot()
    _style(ax)
    row = {w: i for i, w in enumerate(workloads)}
    for label in RISK_LABELS:
        pts = [(r.time, row[r.workload or "(unattributed)"]) for r in run.risks if r.label == label]
        if not pts:
            continue
        t = np.array([p[0] for p in pts])
        xt, _ = time_axis(t, duration)
        marker, colour = _MARKERS[label]
        ax.plot(
            xt,
            [p[1] for p in pts],
            linestyle="none",
            marker=marker,
            markersize=7,
            color=colour,
            alpha=0.8,
            label=label,
        )
    xmax, xlabel = time_axis(np.array([duration]), duration)
    ax.set_xlim(0, float(xmax[0]))
    ax.set_yticks(range(len(workloads)), workloads, fontsize=8)
    ax.set_ylim(len(workloads) - 0.5, -0.5)
    ax.set_xlabel(xlabel)
    ax.set_title(f"risk events — {run.policy}", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    _save(fig, path)


def gap_figure(run: PolicyRun, path: Path, *, duration: float, max_lines: int = 8) -> None:
    """Per node, scheduler charge minus spec requests over time (CPU and memory).
    With many nodes: the largest nodes' lines only, plus the cluster-wide sum."""
    g = run.gaps
    fig = Figure(figsize=(11.2, 4.4), layout="constrained")
    x, xlabel = time_axis(g.times, duration)
    peak = (
        np.maximum(np.abs(g.cpu).max(axis=0, initial=0), 0)
        + np.abs(g.memory).max(axis=0, initial=0) / GIB * 1000
    )
    order = [i for i in np.argsort(-peak, kind="stable") if peak[i] > 0][:max_lines]
    for k, (data, scale, unit, title) in enumerate(
        (
            (g.cpu, 1.0, "millicores", "CPU"),
            (g.memory, MIB, "MiB", "memory"),
        )
    ):
        ax = fig.add_subplot(2, 1, k + 1)
        _style(ax)
        for i in order:
            ax.plot(x, data[:, i] / scale, drawstyle="steps-post", linewidth=1.2, label=g.nodes[i])
        if len(g.nodes) > len(order) and len(order) > 1:
            ax.plot(
                x,
                data.sum(axis=1) / scale,
                drawstyle="steps-post",
                color="#222222",
                linewidth=0.8,
                linestyle=":",
                label="all nodes",
            )
        ax.set_ylabel(f"{title} ({unit})")
        ax.set_xlim(0, x[-1] if x.size else 1)
        if k == 0:
            ax.set_title(f"scheduler charge − spec requests per node — {run.policy}", loc="left")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
        else:
            ax.set_xlabel(xlabel)
    _save(fig, path)
