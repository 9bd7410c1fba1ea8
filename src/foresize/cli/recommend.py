"""`foresize recommend`: one-shot, read-only recommendations from usage history.

    foresize recommend --prometheus http://prometheus:9090 [--namespace shop] [--format json]
    foresize recommend --traces ../shared/traces/bitbrains-rnd-2013-07 --trace-format bitbrains

Nothing is installed and nothing in the cluster changes (what KRR offers, with Foresize's
forecasts): history is read (PromQL range queries, or trace files), every workload/
container is put on the 5-minute model grid (max per bucket), and the recommender's forecast
of the maximum usage over the next horizon is taken at the mode's quantile, plus buffer,
rounded up (CPU 1m, memory 1Mi). Containers with recent OOM kills get the OOM-remediation
floor (1.2 x the peak working set before the kill). Both sources go through the same code,
so the same samples give the same recommendations.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from typing import Any

import typer

from foresize.errors import ForesizeError
from foresize.recommend.series import Recommendation, recommend_series

FORMATS = ("table", "json", "yaml")


def parse_when(value: str | None, now: float, field: str) -> float | None:
    """`now`, epoch seconds, RFC 3339, or a duration before now (`2d`, `90m`)."""
    if value is None:
        return None
    text = value.strip()
    if text == "now":
        return now
    try:
        return float(text)
    except ValueError:
        pass
    from foresize.cluster.kubejson import parse_time

    if "T" in text or (len(text) == 10 and text[4] == "-"):
        stamp = parse_time(text if "T" in text else text + "T00:00:00Z")
        if stamp is not None:
            return stamp
    try:
        return now - parse_span(text)
    except ForesizeError:
        raise ForesizeError(
            f"{field}: {value!r} is not a time (use now, epoch seconds, RFC 3339 or a "
            "duration back from now such as 2d)"
        ) from None


def parse_span(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    total, num = 0.0, ""
    for ch in text.strip():
        if ch.isdigit() or ch == ".":
            num += ch
        elif ch in units and num:
            total += float(num) * units[ch]
            num = ""
        else:
            raise ForesizeError(f"{text!r} is not a duration (e.g. 14d, 90m, 1h30m)")
    if num or total <= 0:
        raise ForesizeError(f"{text!r} is not a duration (e.g. 14d, 90m, 1h30m)")
    return total


def _span_of(text: str, option: str) -> float:
    try:
        return parse_span(text)
    except ForesizeError as exc:
        raise ForesizeError(f"{option}: {exc}") from None


def _trim(series: list[Any], start: float | None, end: float | None, step: float) -> list[Any]:
    """Keep samples in [start, end + step): the buckets a range query over [start, end] has."""
    import numpy as np

    out = []
    for s in series:
        keep = np.ones(s.timestamps.size, dtype=bool)
        if start is not None:
            keep &= s.timestamps >= start
        if end is not None:
            keep &= s.timestamps < end + step
        if keep.any():
            s.timestamps = s.timestamps[keep]
            s.cpu = s.cpu[keep]
            for name in ("memory", "cpu_capacity", "memory_capacity"):
                arr = getattr(s, name)
                if arr is not None:
                    setattr(s, name, arr[keep])
            out.append(s)
    return out


def render(rows: list[Recommendation], fmt: str, source: str) -> str:
    data = [asdict(r) for r in rows]
    if fmt == "json":
        return json.dumps({"source": source, "recommendations": data}, indent=2)
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump({"source": source, "recommendations": data}, sort_keys=False)
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Foresize recommendations ({source})")
    for col in (
        "namespace",
        "workload",
        "container",
        "cpu request",
        "memory request",
        "memory level",
        "cpu peak",
        "memory peak",
        "history",
        "oom",
        "note",
    ):
        table.add_column(col)
    for r in rows:
        note = "" if r.enough_data else "not enough history for autonomous mode"
        table.add_row(
            r.namespace,
            r.workload,
            r.container,
            r.cpu_request or "-",
            r.memory_request or "-",
            f"p{100 * r.memory_level:g}" if r.memory_level is not None else "-",
            f"{r.cpu_peak_cores:.3f}" if r.cpu_peak_cores is not None else "-",
            f"{r.memory_peak_bytes / 2**20:.0f}Mi" if r.memory_peak_bytes else "-",
            f"{r.history_hours:.1f}h",
            str(r.oom_kills),
            note,
        )
    buf = StringIO()
    Console(file=buf, width=160, force_terminal=False, color_system=None).print(table)
    return buf.getvalue()


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("recommend")
    def recommend(
        prometheus: str = typer.Option(None, "--prometheus", help="Prometheus base URL."),
        traces: str = typer.Option(None, "--traces", help="Trace file or folder instead."),
        trace_format: str = typer.Option(
            "canonical", "--trace-format", help="bitbrains|crane|google2011|canonical"
        ),
        namespace: list[str] = typer.Option(
            None, "--namespace", "-n", help="Only these namespaces (repeatable)."
        ),
        fmt: str = typer.Option("table", "--format", "-f", help="table|json|yaml"),
        lookback: str = typer.Option("14d", "--lookback", help="History to read before --end."),
        start: str = typer.Option(None, "--start", help="Start of history (overrides --lookback)."),
        end: str = typer.Option("now", "--end", help="End of history: now, epoch, RFC 3339."),
        step: float = typer.Option(300.0, "--step", help="Query resolution in seconds."),
        mode: str = typer.Option(
            "balanced",
            "--mode",
            help="undershoot|cost_optimized|balanced|assurance_optimized|overshoot|percentile",
        ),
        percentile: float = typer.Option(None, "--percentile", help="With --mode percentile."),
        buffer: float = typer.Option(0.0, "--buffer", help="forecast_buffer_percentage."),
        min_lookback: str = typer.Option(
            "24h", "--min-lookback", help="History needed for autonomous mode."
        ),
    ) -> None:
        """One-shot, read-only recommendations from Prometheus history (or trace files)."""
        import asyncio

        if fmt not in FORMATS:
            raise ForesizeError(f"--format: must be one of {', '.join(FORMATS)}, not {fmt!r}")
        if (prometheus is None) == (traces is None):
            raise ForesizeError("give exactly one of --prometheus URL or --traces PATH")
        try:
            from foresize.recommend.core import mode_quantile

            mode_quantile(mode, "cpu", percentile)
        except ValueError as exc:
            raise ForesizeError(f"--mode: {exc}") from None
        if not step > 0:
            raise ForesizeError(f"--step: must be a positive number of seconds, got {step:g}")
        if not 0 <= buffer <= 1000:
            # The range of forecast_buffer_percentage in the CRDs.
            raise ForesizeError(f"--buffer: must be between 0 and 1000 percent, got {buffer:g}")
        min_lookback_s = _span_of(min_lookback, "--min-lookback")
        now = time.time()
        t_end = parse_when(end, now, "--end")
        t_start = (
            parse_when(start, now, "--start") if start else t_end - _span_of(lookback, "--lookback")
        )
        if t_start >= t_end:
            raise ForesizeError(f"--start {start or lookback} is not before --end {end}")
        oom: dict = {}
        throttling: dict = {}
        if prometheus:
            from foresize.history.prometheus import PrometheusReader

            history = asyncio.run(
                PrometheusReader(prometheus).read(t_start, t_end, step, namespace or None)
            )
            series, oom, throttling = history.series, history.oom_kills, history.throttling
            source = prometheus
        else:
            from foresize.history.traces import FORMATS as TRACE_FORMATS
            from foresize.history.traces import load_traces

            if trace_format.lower() not in TRACE_FORMATS:
                raise ForesizeError(
                    f"--trace-format: unknown trace format {trace_format!r} "
                    f"(one of {', '.join(TRACE_FORMATS)})"
                )
            series, report = load_traces(traces, trace_format)
            if not series:
                # Every row was unreadable (or the wrong --trace-format): say which and where,
                # not an empty table.
                first = f"; first: {report.problems[0]}" if report.problems else ""
                raise ForesizeError(f"{traces}: no usable series ({report.summary()}){first}")
            series = _trim(
                series, t_start if start else None, t_end if end != "now" else None, step
            )
            if namespace:
                series = [s for s in series if s.key.namespace in namespace]
            source = traces
            print(f"read {report.summary()}", file=sys.stderr)
        rows = recommend_series(
            series,
            mode=mode,
            buffer_percentage=buffer,
            percentile_value=percentile,
            min_lookback=min_lookback_s,
            oom_kills=oom,
            throttling=throttling,
        )
        if not rows:
            print("no container usage found in the given range", file=sys.stderr)
        print(render(rows, fmt, source))
