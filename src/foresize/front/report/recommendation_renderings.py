"""The renderings of `foresize recommend`'s rows (`front.report.recommendations`): the
explanation lines, table, json, yaml, csv, markdown, html, patches and a kustomization."""

from __future__ import annotations

import csv
import html
import io
import json
from dataclasses import asdict
from typing import Any

from foresize.core.api.quantity import CPU, MEMORY
from foresize.front.report.recommendations import (
    TOTAL,
    Prices,
    Row,
    formatted,
    grand_totals,
    oom_forecast_far_above_peak,
    oom_forecast_note,
    pretty,
    round_amount,
    workload_totals,
)


def _change(res: str, current: int | None, new: int | None) -> str:
    if current is None:
        return pretty(res, new)
    return f"{pretty(res, current)} → {pretty(res, new)}"


def _delta(res: str, current: int | None, new: int | None, replicas: int = 1) -> str:
    if current is None or new is None:
        return "-"
    d = (new - current) * replicas
    sign = "+" if d > 0 else "-" if d < 0 else "±"
    return sign + pretty(res, abs(d))


# --- Explanations --------------------------------------------------------------------


def _level(q: float | None) -> str:
    return f"p{100 * q:g}" if q is not None else "-"


def replicas_line(replicas: int) -> str:
    """How the replicas of a workload were folded into its one history (ux.md R20), as
    every shell folds them (`foresize.adapters.history.aggregate`)."""
    from foresize.adapters.history.aggregate import CPU_ACROSS_PODS, MEMORY_ACROSS_PODS

    return (
        f"{replicas} replicas, one history: CPU the {CPU_ACROSS_PODS} across them at each "
        "step (a request is what one replica needs; a replica busier than the median uses "
        "CPU above its request, which is throttled under contention, not killed), memory "
        f"the {MEMORY_ACROSS_PODS} (an OOM kill of any replica is a failure)"
    )


def explain(row: Row) -> list[str]:
    """How each number of a row came about: quantile, spans, forecast model, peaks, kills."""
    import datetime as dt

    lines = []
    for res, rr, model in ((CPU, row.cpu, row.cpu_model), (MEMORY, row.memory, row.memory_model)):
        spans = ", ".join(
            f"{name} {pretty(res, round_amount(res, v))}" for name, v in rr.spans.items()
        )
        peak = "-" if rr.peak is None else pretty(res, round_amount(res, rr.peak))
        base = max(rr.spans.values()) if rr.spans else None
        lines.append(
            f"{res}: {pretty(res, rr.request)}: the highest {_level(rr.quantile)} of 15-minute "
            f"peaks over {spans or 'no data'}"
            + (f" = {pretty(res, round_amount(res, base))}" if base is not None else "")
            + "".join(f"; {step}" for step in rr.steps)
            + f"; peak {peak}; 15-minute forecast {pretty(res, rr.forecast)} "
            f"(model {model or '-'})"
        )
    lines.append(f"history: {row.history_hours:g} h, {row.samples} five-minute samples")
    if row.replicas > 1:
        lines.append(replicas_line(row.replicas))
    if row.oom_kills:
        when = ", ".join(
            dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M") for t in row.oom_kills
        )
        lines.append(
            f"OOM kills: {len(row.oom_kills)} ({when} UTC); memory floor 1.2 x the larger of "
            "the request hit and the peak at each kill, compounding"
        )
    if oom_forecast_far_above_peak(row):
        lines.append(oom_forecast_note(row))
    if row.throttled_share is not None:
        lines.append(f"CPU throttled in {100 * row.throttled_share:.1f}% of CFS periods")
    return lines


# --- Renderings ----------------------------------------------------------------------


def to_dicts(rows: list[Row], prices: Prices | None = None) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        d = asdict(r)
        d["kind"] = r.kind or None
        for res in (CPU, MEMORY):
            rr = d[res]
            for k in ("current_request", "current_limit", "request", "limit", "forecast"):
                rr[k] = formatted(res, rr[k]) if rr[k] is not None else None
        d["explanation"] = explain(r)
        if prices is not None:
            d["monthly_cost"] = round(
                r.replicas * prices.monthly(r.cpu.request, r.memory.request), 2
            )
            if r.cpu.current_request is not None and r.memory.current_request is not None:
                d["monthly_cost_now"] = round(
                    r.replicas * prices.monthly(r.cpu.current_request, r.memory.current_request), 2
                )
        out.append(d)
    return out


def _totals_doc(rows: list[Row], prices: Prices | None) -> dict[str, Any]:
    """JSON/YAML `totals`: {"namespaces": [per namespace], "all": the whole selection},
    each with the fields of a `workloads` entry (workload "*" or "TOTAL")."""
    *namespaces, total = grand_totals(rows, prices)
    return {"namespaces": [asdict(t) for t in namespaces], "all": asdict(total)}


def horizon_line(mode: str, quantiles: dict[str, float]) -> str:
    return (
        f"Static requests for the coming weeks ({mode} mode): the {_level(quantiles[CPU])} of "
        f"15-minute CPU peaks and {_level(quantiles[MEMORY])} of memory peaks over the last "
        "14d, 7d and 1d, whichever is highest. The operator's 15-minute forecast is in --wide."
    )


def render(
    rows: list[Row],
    output: str,
    *,
    source: str,
    mode: str,
    quantiles: dict[str, float],
    width: int = 120,
    wide: bool = False,
    explain_rows: bool = False,
    prices: Prices | None = None,
) -> str:
    if output in ("json", "yaml"):
        doc = {
            "source": source,
            "horizon": horizon_line(mode, quantiles),
            "recommendations": to_dicts(rows, prices),
            "workloads": [asdict(t) for t in workload_totals(rows, prices)],
            "totals": _totals_doc(rows, prices),
        }
        if output == "json":
            return json.dumps(doc, indent=2)
        import yaml

        return yaml.safe_dump(doc, sort_keys=False)
    if output == "csv":
        return _csv(rows, prices)
    if output == "markdown":
        return _markdown(rows, mode, quantiles, prices)
    if output == "html":
        return _html(rows, source, mode, quantiles, prices)
    if output == "patch":
        return patches(rows)
    if output == "kustomize":
        return kustomization(rows)
    return _table(rows, source, mode, quantiles, width, wide, explain_rows, prices)


def _cells(r: Row, wide: bool, prices: Prices | None) -> list[str]:
    cells = [
        r.name if not wide else r.namespace,
        *([r.workload, r.kind or "-", str(r.replicas)] if wide else []),
        r.container,
        _change(CPU, r.cpu.current_request, r.cpu.request),
        _change(MEMORY, r.memory.current_request, r.memory.request),
    ]
    if wide:
        cells += [
            _change(CPU, r.cpu.current_limit, r.cpu.limit),
            _change(MEMORY, r.memory.current_limit, r.memory.limit),
            _delta(CPU, r.cpu.current_request, r.cpu.request, r.replicas),
            _delta(MEMORY, r.memory.current_request, r.memory.request, r.replicas),
            f"{pretty(CPU, r.cpu.forecast)} / {pretty(MEMORY, r.memory.forecast)}",
            _level(r.memory.quantile),
            pretty(CPU, round_amount(CPU, r.cpu.peak)) if r.cpu.peak is not None else "-",
            pretty(MEMORY, int(r.memory.peak)) if r.memory.peak is not None else "-",
            f"{r.history_hours:g}h",
            str(len(r.oom_kills)),
            f"{100 * r.throttled_share:.0f}%" if r.throttled_share is not None else "-",
        ]
        if prices is not None:
            cells.append(f"{r.replicas * prices.monthly(r.cpu.request, r.memory.request):.2f}")
    cells.append(r.severity)
    return cells


def _headers(wide: bool, prices: Prices | None) -> list[str]:
    head = ["workload" if not wide else "namespace"]
    if wide:
        head += ["workload", "kind", "pods"]
    head += ["container", "cpu request", "memory request"]
    if wide:
        head += [
            "cpu limit",
            "memory limit",
            "Δ cpu",
            "Δ memory",
            "15m forecast",
            "mem level",
            "cpu peak",
            "mem peak",
            "history",
            "oom",
            "throttled",
        ]
        if prices is not None:
            head.append("cost/month")
    head.append("severity")
    return head


def _table(
    rows: list[Row],
    source: str,
    mode: str,
    quantiles: dict[str, float],
    width: int,
    wide: bool,
    explain_rows: bool,
    prices: Prices | None,
) -> str:
    from rich.console import Console
    from rich.table import Table

    numeric = {"cpu request", "memory request", "cpu limit", "memory limit", "Δ cpu", "Δ memory"}
    heads = _headers(wide, prices)
    body = [_cells(r, wide, prices) for r in rows]
    title = f"Foresize recommendations ({source})"
    groups = _column_groups(heads, body, width) if wide else [list(range(len(heads)))]
    tables = []
    for g, cols in enumerate(groups):
        part = f", columns {g + 1} of {len(groups)}" if len(groups) > 1 else ""
        table = Table(title=title + part, title_justify="left")
        for i in cols:
            head = heads[i]
            if head in numeric or head in ("severity", "15m forecast", "cost/month"):
                table.add_column(head, no_wrap=True)
            else:
                table.add_column(head, overflow="fold")
        for cells in body:
            table.add_row(*(cells[i] for i in cols))
        tables.append(table)
    totals = _totals_table(rows, prices)
    buf = io.StringIO()
    # --wide prints every column at its natural width (as `kubectl -o wide`); the default
    # table fits the terminal.
    console = Console(
        file=buf, width=1000 if wide else width, force_terminal=False, color_system=None
    )
    for table in tables:
        console.print(table)
    console.width = width
    console.print(totals)
    lines = [horizon_line(mode, quantiles)]
    if prices is not None:
        totals_list = workload_totals(rows, prices)
        if all(t.cost_current is not None for t in totals_list):
            now = sum(t.cost_current or 0.0 for t in totals_list)
            new = sum(t.cost_recommended or 0.0 for t in totals_list)
            lines.append(
                f"Cost per month: {now:.2f} now, {new:.2f} recommended, saving {now - new:.2f}"
            )
    for r in rows:
        for note in r.notes:
            lines.append(f"! {r.name} {r.container}: {note}")
        if explain_rows:
            lines.append(f"{r.name} {r.container}:")
            lines += [f"  {x}" for x in explain(r)]
    console.print("\n".join(lines), overflow="fold", highlight=False, markup=False)
    return "\n".join(line.rstrip() for line in buf.getvalue().rstrip("\n").splitlines())


def _totals_table(rows: list[Row], prices: Prices | None) -> Any:
    """The per-workload change, then the namespaces' and the overall totals (ux.md N5)."""
    from rich.table import Table

    totals = Table(title="Per workload (all replicas): change", title_justify="left")
    heads = ["workload", "pods", "Δ cpu", "Δ memory"]
    if prices is not None:
        heads.append("Δ cost/month")
    for head in heads:
        totals.add_column(head, overflow="fold", no_wrap=head != "workload")
    *ns_totals, everything = grand_totals(rows, prices)
    per_workload = workload_totals(rows, prices)
    # Namespace subtotals when there are several namespaces, then the total (ux.md N5).
    summed = [*ns_totals, everything] if len(ns_totals) > 1 else [everything]
    for i, t in enumerate([*per_workload, *summed]):
        if i == len(per_workload):
            totals.add_section()
        name = t.workload if t.workload == TOTAL else f"{t.namespace}/{t.workload}"
        cells = [
            name,
            str(t.replicas),
            _delta(CPU, t.cpu_current, t.cpu_recommended),
            _delta(MEMORY, t.memory_current, t.memory_recommended),
        ]
        if prices is not None:
            cells.append(
                f"{t.cost_recommended - t.cost_current:+.2f}"
                if t.cost_current is not None and t.cost_recommended is not None
                else "-"
            )
        totals.add_row(*cells)
    return totals


WIDE_KEYS = ("namespace", "workload", "container")
"""The columns every part of a split --wide table repeats, so each row is still named."""


def _column_groups(heads: list[str], body: list[list[str]], width: int) -> list[list[int]]:
    """--wide's columns at their natural widths (a box cell is its text plus 3), in as few
    tables as fit `width`, each led by the WIDE_KEYS columns (ux.md N8: the ~210 columns
    of --wide wrapped every row in a 120-column terminal, the Δ cpu cell starting the
    second line). One table when it fits."""
    natural = [max([len(h), *(len(cells[i]) for cells in body)]) + 3 for i, h in enumerate(heads)]
    if sum(natural) + 1 <= width:
        return [list(range(len(heads)))]
    keys = [i for i, h in enumerate(heads) if h in WIDE_KEYS]
    base = sum(natural[i] for i in keys) + 1
    groups: list[list[int]] = []
    used = base
    for i in (i for i in range(len(heads)) if i not in keys):
        if groups and used + natural[i] <= width:
            groups[-1].append(i)
            used += natural[i]
        else:
            groups.append([*keys, i])
            used = base + natural[i]
    return groups


def _flat(rows: list[Row], prices: Prices | None) -> tuple[list[str], list[list[str]]]:
    head = [
        "namespace",
        "workload",
        "kind",
        "pods",
        "container",
        "cpu_request_now",
        "cpu_request",
        "cpu_limit_now",
        "cpu_limit",
        "memory_request_now",
        "memory_request",
        "memory_limit_now",
        "memory_limit",
        "cpu_forecast_15m",
        "memory_forecast_15m",
        "oom_kills",
        "throttled_share",
        "severity",
        "notes",
    ]
    if prices is not None:
        head.append("monthly_cost")
    out = []
    for r in rows:
        row = [
            r.namespace,
            r.workload,
            r.kind,
            str(r.replicas),
            r.container,
            formatted(CPU, r.cpu.current_request),
            formatted(CPU, r.cpu.request),
            formatted(CPU, r.cpu.current_limit),
            formatted(CPU, r.cpu.limit),
            formatted(MEMORY, r.memory.current_request),
            formatted(MEMORY, r.memory.request),
            formatted(MEMORY, r.memory.current_limit),
            formatted(MEMORY, r.memory.limit),
            formatted(CPU, r.cpu.forecast),
            formatted(MEMORY, r.memory.forecast),
            str(len(r.oom_kills)),
            "" if r.throttled_share is None else f"{r.throttled_share:g}",
            r.severity,
            "; ".join(r.notes),
        ]
        if prices is not None:
            row.append(f"{r.replicas * prices.monthly(r.cpu.request, r.memory.request):.2f}")
        out.append(row)
    return head, out


def _csv(rows: list[Row], prices: Prices | None) -> str:
    head, body = _flat(rows, prices)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(head)
    writer.writerows(body)
    return buf.getvalue().rstrip("\n")


def _markdown(
    rows: list[Row], mode: str, quantiles: dict[str, float], prices: Prices | None
) -> str:
    head = ["workload", "container", "cpu request", "memory request", "memory limit", "severity"]
    if prices is not None:
        head.append("cost/month")

    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [horizon_line(mode, quantiles), "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for r in rows:
        cells = [
            r.name,
            r.container,
            _change(CPU, r.cpu.current_request, r.cpu.request),
            _change(MEMORY, r.memory.current_request, r.memory.request),
            _change(MEMORY, r.memory.current_limit, r.memory.limit),
            r.severity,
        ]
        if prices is not None:
            cells.append(f"{r.replicas * prices.monthly(r.cpu.request, r.memory.request):.2f}")
        lines.append("| " + " | ".join(esc(c) for c in cells) + " |")
    notes = [f"- {r.name} {r.container}: {n}" for r in rows for n in r.notes]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def _html(
    rows: list[Row], source: str, mode: str, quantiles: dict[str, float], prices: Prices | None
) -> str:
    head, body = _flat(rows, prices)
    e = html.escape
    colour = {"critical": "#fdd", "warning": "#ffd", "ok": "#dfd", "unset": "#fff"}
    trs = "\n".join(
        f'<tr style="background:{colour.get(cells[head.index("severity")], "#fff")}">'
        + "".join(f"<td>{e(c)}</td>" for c in cells)
        + "</tr>"
        for cells in body
    )
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'>"
        "<title>Foresize recommendations</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}</style></head><body>"
        f"<h1>Foresize recommendations</h1><p>{e(source)}</p>"
        f"<p>{e(horizon_line(mode, quantiles))}</p>"
        "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>\n"
        f"{trs}\n</table></body></html>"
    )


PATCHABLE = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")


def patches(rows: list[Row]) -> str:
    """One strategic-merge patch per workload (containers merge by name), ready for
    `kubectl patch --patch-file` or a kustomize `patches:` entry."""
    import yaml

    docs = []
    by_wl: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by_wl.setdefault((r.namespace, r.workload), []).append(r)
    for (ns, wl), group in by_wl.items():
        kind = group[0].kind
        containers = []
        for r in group:
            requests = {
                k: formatted(res, v)
                for k, res, v in (("cpu", CPU, r.cpu.request), ("memory", MEMORY, r.memory.request))
                if v is not None
            }
            limits = {
                k: formatted(res, v)
                for k, res, v in (("cpu", CPU, r.cpu.limit), ("memory", MEMORY, r.memory.limit))
                if v is not None
            }
            resources: dict[str, Any] = {}
            if requests:
                resources["requests"] = requests
            if limits:
                resources["limits"] = limits
            if resources:
                containers.append({"name": r.container, "resources": resources})
        if not containers:
            continue
        note = ""
        if kind not in PATCHABLE:
            note = f"# {ns}/{wl}: kind unknown (no kube_pod_owner), assumed Deployment\n"
        pod_spec = {"containers": containers}
        template = {"template": {"spec": pod_spec}}
        spec: dict[str, Any] = (
            {"jobTemplate": {"spec": template}} if kind == "CronJob" else template
        )
        api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
        doc = {
            "apiVersion": api,
            "kind": kind or "Deployment",
            "metadata": {"name": wl, "namespace": ns},
            "spec": spec,
        }
        docs.append(note + yaml.safe_dump(doc, sort_keys=False))
    return "---\n".join(docs).rstrip("\n")


def kustomization(rows: list[Row]) -> str:
    """A kustomization.yaml whose `patches:` carry the per-workload patches inline, each
    with its target (add your `resources:` and build it)."""
    import yaml

    entries = []
    for text in patches(rows).split("---\n"):
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict):
            continue
        meta = doc["metadata"]
        entries.append(
            {
                "target": {
                    "kind": doc["kind"],
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                },
                "patch": yaml.safe_dump(doc, sort_keys=False),
            }
        )
    out = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "patches": entries,
    }
    return yaml.safe_dump(out, sort_keys=False).rstrip("\n")
