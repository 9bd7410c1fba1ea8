"""`foresize recommend`: one-shot, read-only recommendations from usage history.

    foresize recommend --prometheus http://prometheus:9090 [-n shop] [-o json]
    foresize recommend --traces traces/ --trace-format bitbrains

Nothing is installed and nothing in the cluster changes (what KRR offers, with Foresize's
modes): history is read (PromQL range queries on a step-aligned grid, or trace files),
every workload/container is put on the 5-minute model grid (max per bucket), and the
static request for a manifest is the mode's quantile of the 15-minute peaks over the last
14, 7 and 1 days, whichever is highest (`foresize.core.recommend.static`), with the OOM floor
(1.2 x the working-set peak before a kill). The recommender's own 15-minute forecast
(what the operator would set now) is shown beside it. Current requests and limits come
from kube-state-metrics. The same data give the same output whatever the minute of the run.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import typer

from foresize.core.errors import ForesizeError
from foresize.front.cli.options import choice, duration, format_seconds, split_list, terminal_width
from foresize.front.report.recommendations import OUTPUTS

if TYPE_CHECKING:  # imported where used, so `foresize --help` stays quick
    from foresize.adapters.history.prometheus import PrometheusReader
    from foresize.adapters.history.prometheus_series import ContainerHistory, Scope
    from foresize.core.history import TraceSeries
    from foresize.front.report.recommendations import Bounds, Prices

MAX_LOOKBACK = 14 * 86400.0  # the recommender reads 14 days (recommend.histories.HISTORY_WINDOW)


def parse_when(value: str, now: float, field: str) -> float:
    """`now`, epoch seconds, RFC 3339, or a duration before now (`2d`, `90m`)."""
    text = value.strip()
    if text == "now":
        return now
    try:
        return float(text)
    except ValueError:
        pass
    from foresize.core.api.fields import parse_timestamp

    if "T" in text or (len(text) == 10 and text[4] == "-"):
        try:
            return parse_timestamp(text if "T" in text else text + "T00:00:00Z")
        except ValueError:
            pass
    try:
        return now - duration(text, field)
    except ForesizeError:
        raise ForesizeError(
            f"{field}: {value!r} is not a time (use now, epoch seconds, RFC 3339 or a "
            "duration back from now such as 2d)"
        ) from None


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _trim(
    series: list[TraceSeries], start: float | None, end: float | None, step: float
) -> list[TraceSeries]:
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
            if s.memory is not None:
                s.memory = s.memory[keep]
            if s.cpu_capacity is not None:
                s.cpu_capacity = s.cpu_capacity[keep]
            if s.memory_capacity is not None:
                s.memory_capacity = s.memory_capacity[keep]
            out.append(s)
    return out


CADVISOR_SERIES = 'container_memory_working_set_bytes{container!="",container!="POD"}'


async def read_prometheus(
    reader: PrometheusReader,
    start: float,
    end: float,
    step: float,
    scope: Scope,
    selector_text: str | None,
) -> ContainerHistory:
    """History for `foresize recommend`, or a ForesizeError saying why there is none: no
    cAdvisor data in the range, an unknown namespace or cluster, a selector matching no
    pod, several clusters mixed, or a step too fine for the scrape interval."""
    from foresize.adapters.history.prometheus_series import align

    start, end = align(start, end, step)
    span = f"between {_iso(start)} and {_iso(end)}"
    namespaces = await reader.label_values("namespace", CADVISOR_SERIES, start, end)
    if not namespaces:
        raise ForesizeError(
            f"Prometheus at {reader.url} holds no cAdvisor container series "
            f"(container_memory_working_set_bytes) {span}: is the kubelet's /metrics/cadvisor "
            "scraped, and are --end and --lookback right?"
        )
    label = scope.cluster_label
    clusters = await reader.label_values(label, CADVISOR_SERIES, start, end)
    if scope.cluster is not None and scope.cluster not in clusters:
        known = ", ".join(clusters) if clusters else f"no series carries the label {label!r}"
        raise ForesizeError(f"--cluster: no series with {label}={scope.cluster!r} {span} ({known})")
    if scope.cluster is None and len(clusters) > 1:
        raise ForesizeError(
            f"series from {len(clusters)} clusters ({label}: {', '.join(clusters)}): "
            "choose one with --cluster (or name the label with --cluster-label)"
        )
    missing = [n for n in scope.namespaces if n not in namespaces]
    if missing:
        raise ForesizeError(
            f"--namespace: no containers in {', '.join(missing)} {span} "
            f"(namespaces with data: {', '.join(namespaces)})"
        )
    history = await reader.read(start, end, step, scope=scope)
    for note in history.notes:  # what could not be read (bare Jobs not grouped, ...)
        print(f"note: {note}", file=sys.stderr)
    if not history.series:
        if selector_text is not None:
            raise ForesizeError(
                f"--selector {selector_text!r}: no pod with data {span} matches it (pod labels "
                "come from kube-state-metrics' kube_pod_labels, which shows only the labels "
                "in its --metric-labels-allowlist)"
            )
        raise ForesizeError(f"no container usage matched {span}")
    newest = max(float(s.timestamps[-1]) for s in history.series if s.timestamps.size)
    interval = await reader.scrape_interval(newest, scope)
    from foresize.adapters.history.prometheus import RATE_SAMPLES

    # 5% slack: the measured interval is 3600 / (samples in an hour - 1) and jitters.
    if interval is not None and step < RATE_SAMPLES * interval * 0.95:
        need = RATE_SAMPLES * interval
        raise ForesizeError(
            f"--step {format_seconds(step)} is too fine for cAdvisor's {interval:.0f}s scrape "
            f"interval: a CPU point needs a counter sample in its step and the one before, "
            f"so a step of {RATE_SAMPLES} scrapes or more (use --step "
            f"{format_seconds(max(60.0, 60.0 * -(-need // 60)))} or more)"
        )
    import numpy as np

    if not any(np.isfinite(s.cpu).any() for s in history.series):
        raise ForesizeError(
            f"no CPU usage (container_cpu_usage_seconds_total) {span}, only memory: "
            "is cAdvisor's CPU counter dropped by a relabelling rule?"
        )
    return history


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("recommend")
    def recommend(
        prometheus: str | None = typer.Option(
            None, "--prometheus", envvar="FORESIZE_PROMETHEUS_URL", help="Prometheus base URL."
        ),
        traces: str | None = typer.Option(None, "--traces", help="Trace file or folder instead."),
        trace_format: str = typer.Option(
            "canonical", "--trace-format", help="bitbrains, crane, google2011 or canonical."
        ),
        namespace: list[str] | None = typer.Option(
            None, "--namespace", "-n", help="A filter: only these namespaces (repeatable or a,b)."
        ),
        selector: str | None = typer.Option(
            None, "--selector", "-l", help="Pod label selector: app=web,tier!=db,env in (a,b)."
        ),
        cluster: str | None = typer.Option(
            None, "--cluster", help="Only this cluster (label value)."
        ),
        cluster_label: str = typer.Option(
            "cluster", "--cluster-label", help="The label that names the cluster."
        ),
        token: str | None = typer.Option(
            None, "--token", envvar="FORESIZE_PROMETHEUS_TOKEN", help="Bearer token."
        ),
        username: str | None = typer.Option(
            None, "--username", envvar="FORESIZE_PROMETHEUS_USERNAME", help="Basic auth user."
        ),
        password: str | None = typer.Option(
            None, "--password", envvar="FORESIZE_PROMETHEUS_PASSWORD", help="Basic auth password."
        ),
        ca_file: str | None = typer.Option(
            None, "--ca-file", envvar="FORESIZE_PROMETHEUS_CA_FILE", help="CA bundle (PEM)."
        ),
        insecure_skip_verify: bool = typer.Option(
            False,
            "--insecure-skip-verify",
            envvar="FORESIZE_PROMETHEUS_INSECURE_SKIP_VERIFY",
            help="Do not verify the server's TLS certificate.",
        ),
        timeout: str = typer.Option(
            "60s", "--timeout", envvar="FORESIZE_PROMETHEUS_TIMEOUT", help="Per request."
        ),
        output: str = typer.Option(
            "table",
            "--output",
            "-o",
            help="table, json, yaml, csv, markdown, html, patch or kustomize.",
        ),
        fmt: str | None = typer.Option(None, "--format", "-f", hidden=True),
        wide: bool = typer.Option(False, "--wide", help="Every column in the table."),
        explain: bool = typer.Option(False, "--explain", help="How each number came about."),
        lookback: str = typer.Option("14d", "--lookback", help="History to read before --end."),
        start: str | None = typer.Option(
            None, "--start", help="Start of history (overrides --lookback)."
        ),
        end: str = typer.Option("now", "--end", help="End of history: now, epoch, RFC 3339."),
        step: str = typer.Option("5m", "--step", help="Query resolution (at least 2 scrapes)."),
        mode: str = typer.Option(
            "balanced",
            "--mode",
            help="undershoot, cost_optimized, balanced, assurance_optimized, overshoot or "
            "percentile.",
        ),
        percentile: float | None = typer.Option(
            None, "--percentile", help="With --mode percentile."
        ),
        buffer: float = typer.Option(0.0, "--buffer", help="Percent added to every request."),
        min_lookback: str = typer.Option(
            "24h", "--min-lookback", help="History needed for autonomous mode."
        ),
        cpu_min: str | None = typer.Option(
            None, "--cpu-min", help="Lowest CPU request (e.g. 10m)."
        ),
        cpu_max: str | None = typer.Option(None, "--cpu-max", help="Highest CPU request."),
        memory_min: str | None = typer.Option(
            None, "--memory-min", help="Lowest memory (e.g. 64Mi)."
        ),
        memory_max: str | None = typer.Option(None, "--memory-max", help="Highest memory request."),
        cpu_price: float | None = typer.Option(None, "--cpu-price", help="Price per core-hour."),
        memory_price: float | None = typer.Option(
            None, "--memory-price", help="Price per GiB-hour."
        ),
    ) -> None:
        """One-shot, read-only recommendations from Prometheus history (or trace files)."""
        from foresize.core.recommend.series import recommend_series
        from foresize.front.report.recommendation_renderings import render
        from foresize.front.report.recommendations import build_rows

        output = choice(fmt if fmt is not None else output, "--output", OUTPUTS)
        if (prometheus is None) == (traces is None):
            raise ForesizeError("give exactly one of --prometheus URL or --traces PATH")
        quantiles = mode_quantiles(mode, percentile)
        step_s = duration(step, "--step")
        if not 0 <= buffer <= 1000:
            # The range of forecast_buffer_percentage in the CRDs.
            raise ForesizeError(f"--buffer: must be between 0 and 1000 percent, got {buffer:g}")
        bounds = _bounds(cpu_min, cpu_max, memory_min, memory_max)
        prices = _prices(cpu_price, memory_price)
        min_lookback_s = duration(min_lookback, "--min-lookback")
        timeout_s = duration(timeout, "--timeout")
        namespaces = split_list(namespace)
        t_start, t_end = history_window(start, end, lookback, step_s, now=time.time())
        if prometheus is not None:
            history = read_prometheus_history(
                prometheus,
                t_start,
                t_end,
                step_s,
                namespaces=namespaces,
                selector=selector,
                cluster=cluster,
                cluster_label=cluster_label,
                token=token,
                username=username,
                password=password,
                ca_file=ca_file,
                insecure_skip_verify=insecure_skip_verify,
                timeout=timeout_s,
            )
            source = prometheus
        elif traces is not None:
            if selector or cluster:
                raise ForesizeError("--selector and --cluster need --prometheus")
            history = read_trace_history(
                traces,
                trace_format,
                t_start,
                t_end,
                step_s,
                namespaces=namespaces,
                trim_start=bool(start),
                trim_end=end != "now",
            )
            source = traces
        else:  # the check at the top: exactly one of the two is given
            raise ForesizeError("give exactly one of --prometheus URL or --traces PATH")
        forecasts = recommend_series(
            history.series,
            mode=mode,
            buffer_percentage=buffer,
            percentile_value=percentile,
            min_lookback=min_lookback_s,
            oom_kills=history.oom_kills,
            throttling=history.throttling,
        )
        rows = build_rows(
            history.series,
            forecasts,
            quantiles=quantiles,
            buffer_percentage=buffer,
            lookback=min(MAX_LOOKBACK, t_end - t_start),
            resources=history.resources,
            kinds=history.kinds,
            replicas=history.replicas,
            oom_kills=history.oom_kills,
            throttling=history.throttling,
            bounds=bounds,
        )
        if not rows:
            raise ForesizeError("no container usage found in the given range")
        print(
            render(
                rows,
                output,
                source=source,
                mode=mode,
                quantiles=quantiles,
                width=terminal_width(),
                wide=wide,
                explain_rows=explain,
                prices=prices,
            )
        )


def mode_quantiles(mode: str, percentile: float | None) -> dict[str, float]:
    """`--mode` (and `--percentile`) as the quantile of the static request per resource."""
    from foresize.core.api.quantity import CPU, MEMORY
    from foresize.core.recommend.core import MODE_CPU_QUANTILES, mode_quantile

    if mode == "percentile" and percentile is None:
        raise ForesizeError("--mode percentile needs --percentile (e.g. 95)")
    try:
        return {res: mode_quantile(mode, res, percentile) for res in (CPU, MEMORY)}
    except ValueError as exc:
        modes = ", ".join([*MODE_CPU_QUANTILES, "percentile"])
        raise ForesizeError(f"--mode: {exc} (one of {modes})") from None


def _prices(cpu_price: float | None, memory_price: float | None) -> Prices | None:
    """`--cpu-price` and `--memory-price` (None if neither is given: no cost column)."""
    from foresize.front.report.recommendations import Prices

    if cpu_price is None and memory_price is None:
        return None
    for name, value in (("--cpu-price", cpu_price), ("--memory-price", memory_price)):
        if value is not None and not value >= 0:
            raise ForesizeError(f"{name}: must be 0 or more, got {value:g}")
    return Prices(cpu_price or 0.0, memory_price or 0.0)


def history_window(
    start: str | None, end: str, lookback: str, step: float, *, now: float
) -> tuple[float, float]:
    """The (start, end) of the history to read from `--start` (or `--lookback` back from
    `--end`) and `--end`: start before end and at most 14 days apart."""
    t_end = parse_when(end, now, "--end")
    if start:
        t_start = parse_when(start, now, "--start")
    else:
        span = duration(lookback, "--lookback")
        if span > MAX_LOOKBACK:
            raise ForesizeError(
                f"--lookback {lookback}: the recommender reads at most 14d of history "
                "(use --lookback 14d or less)"
            )
        t_start = t_end - span
    if t_start >= t_end:
        raise ForesizeError(f"--start {start or lookback} is not before --end {end}")
    if t_end - t_start > MAX_LOOKBACK + step:
        raise ForesizeError(
            f"--start {start}: more than 14d before --end; the recommender reads at most 14d"
        )
    return t_start, t_end


def read_prometheus_history(
    url: str,
    start: float,
    end: float,
    step: float,
    *,
    namespaces: list[str],
    selector: str | None,
    cluster: str | None,
    cluster_label: str,
    token: str | None,
    username: str | None,
    password: str | None,
    ca_file: str | None,
    insecure_skip_verify: bool,
    timeout: float,
) -> ContainerHistory:
    """Check the Prometheus options, then read the history of the containers they select
    (`read_prometheus`)."""
    import asyncio

    from foresize.adapters.history.prometheus import PrometheusReader
    from foresize.adapters.history.prometheus_series import Scope, pod_selector

    if not url.startswith(("http://", "https://")):
        raise ForesizeError(f"--prometheus: {url!r} is not an http:// or https:// URL")
    if (username is None) != (password is None):
        raise ForesizeError("--username and --password go together")
    scope = Scope(
        tuple(namespaces),
        cluster_label,
        cluster,
        pod_selector(selector) if selector else None,
    )
    reader = PrometheusReader(
        url,
        timeout=timeout,
        bearer_token=token,
        basic_auth=(username, password) if username is not None and password is not None else None,
        ca_file=ca_file,
        insecure_skip_verify=insecure_skip_verify,
    )
    print(f"reading {url} ({_iso(start)} to {_iso(end)})", file=sys.stderr)
    return asyncio.run(read_prometheus(reader, start, end, step, scope, selector))


def read_trace_history(
    traces: str,
    trace_format: str,
    start: float,
    end: float,
    step: float,
    *,
    namespaces: list[str],
    trim_start: bool,
    trim_end: bool,
) -> ContainerHistory:
    """The usage in trace files (nothing else: traces record no OOM kills, throttling or
    workload objects), cut to [start, end] where `--start`/`--end` were given and to
    `--namespace`; an error naming the first bad line if no row is usable, or saying
    what the traces cover if nothing falls in the range."""
    from foresize.adapters.history.prometheus_series import ContainerHistory
    from foresize.adapters.history.traces import FORMATS as TRACE_FORMATS
    from foresize.adapters.history.traces import load_traces

    if trace_format.lower() not in TRACE_FORMATS:
        raise ForesizeError(
            f"--trace-format: unknown trace format {trace_format!r} "
            f"(one of {', '.join(TRACE_FORMATS)})"
        )
    hint = " (another format? --trace-format bitbrains, crane or google2011)"
    try:
        series, report = load_traces(traces, trace_format)
    except ForesizeError as exc:
        if trace_format.lower() == "canonical" and "header" in str(exc):
            raise ForesizeError(f"{exc}{hint}") from None
        raise
    if not series:
        # Every row was unreadable (or the wrong --trace-format): say which and where,
        # not an empty table.
        first = f"; first: {report.problems[0]}" if report.problems else ""
        if trace_format.lower() != "canonical" or "header" not in first:
            hint = ""
        raise ForesizeError(f"{traces}: no usable series ({report.summary()}){first}{hint}")
    data_from = min(float(s.timestamps[0]) for s in series if s.timestamps.size)
    data_to = max(float(s.timestamps[-1]) for s in series if s.timestamps.size)
    series = _trim(series, start if trim_start else None, end if trim_end else None, step)
    if namespaces:
        known = sorted({s.key.namespace for s in series})
        missing = [n for n in namespaces if n not in known]
        if missing:
            raise ForesizeError(
                f"--namespace: no series in {', '.join(missing)} "
                f"(namespaces in {traces}: {', '.join(known)})"
            )
        series = [s for s in series if s.key.namespace in namespaces]
    if not series:
        raise ForesizeError(
            f"{traces}: no samples between {_iso(start)} and {_iso(end)} (--start/"
            f"--lookback and --end); the traces cover {_iso(data_from)} to {_iso(data_to)}"
        )
    print(f"read {report.summary()}", file=sys.stderr)
    return ContainerHistory(series=series)


def _bounds(
    cpu_min: str | None, cpu_max: str | None, memory_min: str | None, memory_max: str | None
) -> Bounds:
    from foresize.core.api.quantity import CPU, MEMORY, QuantityError, to_canonical
    from foresize.front.report.recommendations import Bounds

    values: dict[str, int | None] = {}
    for name, res, text in (
        ("cpu_min", CPU, cpu_min),
        ("cpu_max", CPU, cpu_max),
        ("memory_min", MEMORY, memory_min),
        ("memory_max", MEMORY, memory_max),
    ):
        option = "--" + name.replace("_", "-")
        if text is None:
            values[name] = None
            continue
        try:
            amount = to_canonical(res, text)
        except (QuantityError, ValueError) as exc:
            raise ForesizeError(f"{option}: {text!r} is not a quantity ({exc})") from None
        if amount <= 0:
            raise ForesizeError(f"{option}: must be more than 0, got {text!r}")
        values[name] = amount
    for res in ("cpu", "memory"):
        lo, hi = values[f"{res}_min"], values[f"{res}_max"]
        if lo is not None and hi is not None and lo > hi:
            raise ForesizeError(f"--{res}-min is above --{res}-max")
    return Bounds(
        cpu_min=values["cpu_min"],
        cpu_max=values["cpu_max"],
        memory_min=values["memory_min"],
        memory_max=values["memory_max"],
    )
