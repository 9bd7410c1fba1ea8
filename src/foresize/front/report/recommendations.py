"""`foresize recommend` results: rows (current vs recommended, limits, severity, cost,
explanation) and their renderings (table, json, yaml, csv, markdown, html, patches).

Pure: series, forecasts and what kube-state-metrics said come in; text goes out. The
request is the static one (`foresize.core.recommend.static`), for a manifest that stays for
the coming period; the operator's 15-minute forecast is shown beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, MIB, format_bytes, format_cpu
from foresize.core.cluster.jobs import JOB_GROUP, group_of_history_workload

OUTPUTS = ("table", "json", "yaml", "csv", "markdown", "html", "patch", "kustomize")
HOURS_PER_MONTH = 730.0
"""The average month (365 x 24 / 12), as cloud price lists count it."""
GIB = 2**30
KILLED_AT_LIMIT = 0.9
"""A kill whose working-set peak in the hour before reached 90% of the memory limit was a
kill at the limit (cAdvisor samples the working set every 10-60 s and misses the last
rise before the kill)."""
THROTTLED_WARNING = 0.1
"""Throttled in more than 10% of CFS periods: usage is capped by the CPU limit, so the
demand above it is unseen and the history understates what the container wants."""
UNDER_CRITICAL = 0.8
"""A request below 80% of the recommendation is critical: it is short by more than the
largest step (25%) the operator would take at once."""
UNDER_WARNING = 0.95
OVER_WARNING = 2.0
"""A request over twice the recommendation wastes at least half of it."""
SEVERITIES = ("critical", "warning", "ok", "unset")
MIN_CPU_REQUEST = 10
"""The lowest CPU request written (millicores; --cpu-min overrides it). A request is the
container's CFS weight under contention (10m = 10 shares of a core's 1024): a few
millicores starve it whenever the node is busy, and a pod's first 2 minutes, where its
start-up CPU goes, are left out of the history, so nothing in the data speaks for them.
KRR's floor is the same 10m."""
MIN_MEMORY_REQUEST = 64 * MIB
"""The lowest memory request (and so limit) written (--memory-min overrides it). The limit
equals the request, and a pod's first 2 minutes are not in the history: a start-up above a
few MiB of steady working set would be an OOM kill. 64Mi holds a runtime, its libraries
and a small heap."""
MIN_CPU_LIMIT = 100
"""The lowest CPU limit written (millicores): the limit is a CFS quota per 100 ms period,
100m = 10 ms of CPU per period; below that one request's work spans several periods and
waits out each one throttled."""
OOM_FORECAST_NOTE = 2.0
"""A 15-minute memory forecast above twice the peak working set is explained (the
operator's OOM floor compounding over the history's kills)."""


@dataclass(slots=True)
class ResourceRow:
    """One resource of one container, in canonical units (millicores, bytes)."""

    current_request: int | None = None
    current_limit: int | None = None
    request: int | None = None
    limit: int | None = None
    forecast: int | None = None  # the operator's forecast for the next 15 minutes
    peak: float | None = None  # the highest reading (cores or bytes)
    quantile: float | None = None
    spans: dict[str, float] = field(default_factory=dict)  # span -> quantile of 15-min peaks
    steps: list[str] = field(default_factory=list)  # what changed the value after the spans
    severity: str = "unset"


@dataclass(slots=True)
class Row:
    namespace: str
    workload: str
    container: str
    kind: str = ""
    replicas: int = 1
    cpu: ResourceRow = field(default_factory=ResourceRow)
    memory: ResourceRow = field(default_factory=ResourceRow)
    history_hours: float = 0.0
    samples: int = 0
    enough_data: bool = True
    oom_kills: list[float] = field(default_factory=list)
    throttled_share: float | None = None
    cpu_model: str = ""
    memory_model: str = ""
    severity: str = "unset"
    notes: list[str] = field(default_factory=list)
    no_usage: bool = False  # requests in kube-state-metrics, no usage reading in the range

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.workload}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """--cpu-min/--cpu-max (millicores) and --memory-min/--memory-max (bytes)."""

    cpu_min: int | None = None
    cpu_max: int | None = None
    memory_min: int | None = None
    memory_max: int | None = None

    def floor(self, resource: str) -> int:
        """The lowest request written: --cpu-min/--memory-min, else the default floor."""
        given = self.cpu_min if resource == CPU else self.memory_min
        if given is not None:
            return given
        return MIN_CPU_REQUEST if resource == CPU else MIN_MEMORY_REQUEST

    def clamp(self, resource: str, value: int | None) -> int | None:
        """`value` within [floor, --*-max] (the maximum wins if it is below the floor)."""
        if value is None:
            return None
        value = max(value, self.floor(resource))
        hi = self.cpu_max if resource == CPU else self.memory_max
        if hi is not None:
            value = min(value, hi)
        return value


@dataclass(frozen=True, slots=True)
class Prices:
    """Price per core-hour and per GiB-hour of requests (any currency)."""

    core_hour: float = 0.0
    gib_hour: float = 0.0

    def monthly(self, cpu_millis: int | None, memory_bytes: int | None) -> float:
        return HOURS_PER_MONTH * (
            (cpu_millis or 0) / 1000.0 * self.core_hour + (memory_bytes or 0) / GIB * self.gib_hour
        )


def round_amount(resource: str, value: float) -> int:
    """Cores or bytes -> the request the operator would write, by its one rounding rule
    (`recommend.finish.round_up_request`, which ignores float32 noise: 0.3 cores is 300m)."""
    from foresize.core.recommend.finish import round_up_request

    return round_up_request(resource, value * 1000.0 if resource == CPU else value)


def severity_of(current: int | None, recommended: int | None) -> str:
    if current is None or recommended is None or recommended <= 0:
        return "unset"
    ratio = current / recommended
    if ratio < UNDER_CRITICAL:
        return "critical"
    if ratio < UNDER_WARNING or ratio > OVER_WARNING:
        return "warning"
    return "ok"


def worst(*severities: str) -> str:
    known = [s for s in severities if s != "unset"]
    return min(known, key=SEVERITIES.index) if known else "unset"


def build_rows(
    series: list[Any],
    forecasts: list[Any],
    *,
    quantiles: dict[str, float],
    buffer_percentage: float = 0.0,
    lookback: float = 14 * 86400.0,
    resources: dict[Any, Any] | None = None,
    kinds: dict[tuple[str, str], str] | None = None,
    replicas: dict[tuple[str, str], int] | None = None,
    oom_kills: dict[Any, list[float]] | None = None,
    throttling: dict[Any, tuple[Any, Any]] | None = None,
    bounds: Bounds | None = None,
) -> list[Row]:
    """Rows for TraceSeries and their `recommend_series` results (same order): the static
    request at `quantiles[resource]` over the history on the model grid, the OOM floor
    (the operator's rule, `recommend.oom.apply_ooms`, on each kill in the window),
    bounds, limits and severity."""
    from foresize.core.history import aligned_start, resample_max
    from foresize.core.recommend.histories import MODEL_STEP
    from foresize.core.recommend.oom import OOM_FACTOR
    from foresize.core.recommend.static import static_request

    resources = resources or {}
    kinds = kinds or {}
    replicas = replicas or {}
    oom_kills = oom_kills or {}
    throttling = throttling or {}
    bounds = bounds or Bounds()
    by_key = {(f.namespace, f.workload, f.container): f for f in forecasts}
    live = [s for s in series if s.timestamps.size]
    if not live:
        return []
    step = MODEL_STEP
    newest = max(float(s.timestamps[-1]) for s in live)
    end = aligned_start(newest, step)
    n = max(1, int(round(lookback / step)))
    start = end - (n - 1) * step
    rows = []
    for s in sorted(live, key=lambda s: (s.key.namespace, s.key.workload, s.key.container)):
        key = s.key
        fc = by_key.get((key.namespace, key.workload, key.container))
        cur = resources.get(key)
        grids = {
            CPU: resample_max(s.timestamps, s.cpu, step, start, n),
            MEMORY: resample_max(s.timestamps, s.memory, step, start, n)
            if s.memory is not None
            else np.full(n, np.nan),
        }
        kills = [t for t in oom_kills.get(key, []) if start <= t <= end + step]
        row = Row(
            key.namespace,
            key.workload,
            key.container,
            kind=key.kind
            or kinds.get((key.namespace, key.workload), "")
            or _group_kind(key.workload),
            replicas=replicas.get((key.namespace, key.workload), 1),
            oom_kills=kills,
        )
        have = np.isfinite(grids[CPU]) | np.isfinite(grids[MEMORY])
        row.samples = int(have.sum())
        row.history_hours = (
            round((n - int(np.argmax(have))) * step / 3600.0, 2) if row.samples else 0
        )
        if fc is not None:
            row.enough_data = bool(fc.enough_data)
            row.cpu_model, row.memory_model = fc.cpu_model, fc.memory_model
            row.cpu.forecast = fc.cpu_millicores
            row.memory.forecast = fc.memory_bytes
        tt = throttling.get(key)
        if tt is not None and len(tt[1]):
            row.throttled_share = round(float(np.nanmean(tt[1])), 4)
        runs = _job_runs(row, grids, kills, end, step)
        for res, rr in ((CPU, row.cpu), (MEMORY, row.memory)):
            grid = grids[res]
            rr.quantile = quantiles[res]
            value, rr.spans = static_request(grid, step, quantiles[res], start)
            if np.isfinite(grid).any():
                rr.peak = float(np.nanmax(grid))
            if cur is not None:
                req, lim = getattr(cur, f"{res}_request"), getattr(cur, f"{res}_limit")
                rr.current_request = round_amount(res, req) if req is not None else None
                rr.current_limit = round_amount(res, lim) if lim is not None else None
            if runs is not None:  # a Job's or CronJob's: its runs' peaks, not a quantile
                rr.spans = {}
                job_value = _job_request(runs, res, rr)
                if job_value is not None:
                    _bound(rr, res, job_value * (1.0 + buffer_percentage / 100.0), bounds)
                continue
            if not math.isfinite(value):
                continue
            if buffer_percentage:
                value *= 1.0 + buffer_percentage / 100.0
                rr.steps.append(
                    f"+{buffer_percentage:g}% buffer: {pretty(res, round_amount(res, value))}"
                )
            if res == MEMORY and kills:
                floor = _oom_floor(kills, grid, start, step, rr.current_request)
                if floor > value:
                    value = floor
                    rr.steps.append(
                        f"raised to the OOM floor, {OOM_FACTOR:g} x the larger of the request "
                        f"hit and the working-set peak at a kill, compounding: "
                        f"{pretty(res, round_amount(res, value))}"
                    )
            _bound(rr, res, value, bounds)
        _limits(row)
        _notes(row)
        row.cpu.severity = severity_of(row.cpu.current_request, row.cpu.request)
        row.memory.severity = severity_of(row.memory.current_request, row.memory.request)
        killed_at_limit = any("at its" in n for n in row.notes)
        row.severity = (
            "critical" if killed_at_limit else worst(row.cpu.severity, row.memory.severity)
        )
        rows.append(row)
    rows += _rows_without_usage({s.key for s in live}, resources, kinds, replicas)
    rows.sort(key=lambda r: (r.namespace, r.workload, r.container))
    return rows


JOB_KINDS = ("CronJob", "Job", JOB_GROUP)
"""Workloads whose pods run to completion: sized from their runs' peaks (`recommend.runs`)."""


def _group_kind(workload: str) -> str:
    """JobGroup for the history of a group of bare Jobs (`cluster.jobs`), else ""."""
    return JOB_GROUP if group_of_history_workload(workload) is not None else ""


def _job_runs(
    row: Row, grids: dict[str, np.ndarray], kills: list[float], end: float, step: float
) -> Any:
    """A Job's or CronJob's runs on the model grid (None for any other workload), with a
    note saying what they showed."""
    from foresize.core.recommend.histories import ContainerHistory
    from foresize.core.recommend.runs import MIN_RUNS, ContainerRuns

    if row.kind not in JOB_KINDS:
        return None
    runs = ContainerRuns.of(ContainerHistory(grids[CPU], grids[MEMORY], oom_times=kills), end, step)
    finished = sum(1 for r in runs.runs if not r.in_progress)
    row.enough_data = runs.clean >= MIN_RUNS
    row.notes.append(
        f"a {row.kind}: sized from its runs' peaks ({finished} run(s), {runs.clean} without "
        f"an OOM kill; {MIN_RUNS} needed to act)"
    )
    return runs


def _job_request(runs: Any, res: str, rr: ResourceRow) -> float | None:
    """The run rule's request of `res` (`recommend.runs.request_from_runs`) in the history's
    units (cores, bytes), its steps in words into the row."""
    from foresize.core.recommend.histories import TO_CANONICAL
    from foresize.core.recommend.runs import request_from_runs

    value = request_from_runs(runs, res, rr.current_request, rr.current_limit)
    rr.steps.extend(step.why for step in runs.explanation.of(res) if step.step != "rounding")
    return None if value is None else value / TO_CANONICAL[res]  # in the rows' units


# The working set seen "at" a kill: the peak of the hour of grid steps before it (the
# kill itself ends the sample that would show the spike).
_KILL_WINDOW_STEPS = 12


def _oom_floor(
    kills: list[float], grid: np.ndarray, start: float, step: float, request: int | None
) -> float:
    """The memory floor the operator would hold after these kills: its own OOM rule
    (`recommend.oom.apply_ooms`: 1.2 x the larger of the request that was hit and the
    usage seen, compounding), with one named difference: the report holds the floor for
    every kill in its lookback window (stabilization unbounded), as the window is what it
    recommends from."""
    from foresize.core.recommend.oom import OOMState, apply_ooms

    usage = []
    for t in kills:
        k = int((t - start) // step)
        before = grid[max(0, k - _KILL_WINDOW_STEPS) : k + 1]
        usage.append(float(np.nanmax(before)) if np.isfinite(before).any() else math.nan)
    now = max(kills)
    state = apply_ooms(OOMState(), kills, usage, request or 0, now, stabilization=math.inf)
    return float(state.active(now))


def _bound(rr: ResourceRow, res: str, value: float, bounds: Bounds) -> None:
    """The request: `value` rounded, within the floor and the bounds; the step said."""
    rounded = round_amount(res, value)
    rr.request = bounds.clamp(res, rounded)
    if rr.request == rounded:
        return
    given = (bounds.cpu_min if res == CPU else bounds.memory_min) is not None
    if given or rr.request != bounds.floor(res):
        rr.steps.append(f"bounded by --{res}-min/--{res}-max: {pretty(res, rr.request)}")
    else:
        rr.steps.append(
            f"raised to the lowest request written, {pretty(res, rr.request)} "
            f"(--{res}-min to change it)"
        )


def _rows_without_usage(
    with_usage: set[Any],
    resources: dict[Any, Any],
    kinds: dict[tuple[str, str], str],
    replicas: dict[tuple[str, str], int],
) -> list[Row]:
    """A row for each container kube-state-metrics gave requests or limits for but with no
    usage reading in the range (ux.md N4): listed with what it has today and a note, so
    "no data" is told apart from "not looked at"; nothing is recommended or patched."""
    out = []
    for key, cur in sorted(resources.items()):
        if key in with_usage:
            continue
        row = Row(
            key.namespace,
            key.workload,
            key.container,
            kind=key.kind or kinds.get((key.namespace, key.workload), ""),
            replicas=replicas.get((key.namespace, key.workload), 1),
            enough_data=False,
            no_usage=True,
        )
        for res, rr in ((CPU, row.cpu), (MEMORY, row.memory)):
            req, lim = getattr(cur, f"{res}_request"), getattr(cur, f"{res}_limit")
            rr.current_request = round_amount(res, req) if req is not None else None
            rr.current_limit = round_amount(res, lim) if lim is not None else None
        row.notes.append(
            "no usage in the history (requests in kube-state-metrics, no cAdvisor reading): "
            "nothing recommended, its resources stay as they are"
        )
        out.append(row)
    return out


def _limits(row: Row) -> None:
    """Limits a careful engineer would apply (docs/recommend.md "Limits"):

    - memory limit = the memory request (a container above its request is the first to go
      under node pressure, and a higher limit only postpones the kill), never below the
      highest working set in the history (a limit below a level the container has reached
      is a kill waiting for that level to come back);
    - a CPU limit only where one is set today (CPU above the request is throttled, not
      fatal, so no limit is added), never lowered: the history holds 5-minute averages,
      and a CFS quota caps 100-ms bursts an average does not show, so no average can say
      a lower limit is safe (a throttled container's history is even capped by it). It
      rises with the request at today's limit:request ratio, and is at least
      MIN_CPU_LIMIT."""
    mem = row.memory
    if mem.request is not None:
        peak = round_amount(MEMORY, mem.peak) if mem.peak is not None else 0
        mem.limit = max(mem.request, peak)
        if mem.limit > mem.request:
            mem.steps.append(f"limit at the peak working set: {pretty(MEMORY, mem.limit)}")
    cpu = row.cpu
    if cpu.current_limit and cpu.request:
        ratio = cpu.current_limit / cpu.current_request if cpu.current_request else 1.0
        scaled = int(math.ceil(cpu.request * max(ratio, 1.0)))
        cpu.limit = max(cpu.current_limit, scaled, MIN_CPU_LIMIT, cpu.request)
        if cpu.limit == cpu.current_limit and scaled < cpu.current_limit:
            cpu.steps.append(
                f"limit kept at {pretty(CPU, cpu.limit)}: a CPU limit is never lowered from "
                "5-minute averages"
            )


def _notes(row: Row) -> None:
    mem = row.memory
    if row.oom_kills and mem.current_limit:
        # The peak before a kill at the limit is the limit itself: the floor already sized
        # the request 20% above it.
        if mem.peak is not None and mem.peak >= KILLED_AT_LIMIT * mem.current_limit:
            row.notes.append(
                f"OOM-killed {len(row.oom_kills)}x at its {format_bytes(mem.current_limit)} "
                f"memory limit: raise the limit (recommended {formatted(MEMORY, mem.limit)})"
            )
    elif row.oom_kills:
        row.notes.append(f"OOM-killed {len(row.oom_kills)}x")
    if row.throttled_share is not None and row.throttled_share > THROTTLED_WARNING:
        row.notes.append(
            f"CPU throttled in {100 * row.throttled_share:.0f}% of periods: its demand above "
            "the limit is not in the history, so the CPU recommendation may be low"
        )
    if oom_forecast_far_above_peak(row):
        row.notes.append(oom_forecast_note(row))
    if not row.enough_data:
        row.notes.append(f"only {row.history_hours:g} h of history")


def oom_forecast_far_above_peak(row: Row) -> bool:
    mem = row.memory
    return bool(
        row.oom_kills
        and mem.forecast is not None
        and mem.peak
        and mem.forecast > OOM_FORECAST_NOTE * mem.peak
    )


def oom_forecast_note(row: Row) -> str:
    """Why the operator's 15-minute memory forecast is far above anything seen (ux.md N9)."""
    from foresize.core.recommend.core import KILL_MEMORY
    from foresize.core.recommend.oom import OOM_FACTOR

    mem = row.memory
    ratio = (mem.forecast or 0) / (mem.peak or 1)
    return (
        f"15-minute memory forecast {pretty(MEMORY, mem.forecast)} is {ratio:.1f}x the "
        f"{pretty(MEMORY, int(mem.peak or 0))} peak: the operator's OOM floor, which rises "
        f"{OOM_FACTOR:g}x with each kill while it holds ({KILL_MEMORY / 86400:g} days), "
        f"replayed over the {len(row.oom_kills)} kills of the history. Those kills came at "
        "today's limit, before any raise; apply the memory request, not the forecast"
    )


def formatted(res: str, value: int | None) -> str:
    if value is None:
        return "-"
    return format_cpu(value) if res == CPU else format_bytes(value)


def pretty(res: str, value: int | None) -> str:
    """The one unit per resource of every table and explanation (ux.md R26: `16 → 3992m`,
    `-12.0` beside `-400m`, a peak of `0.228` cores beside millicore requests): CPU in
    millicores, memory in Mi (rounded up); both valid Kubernetes quantities."""
    if value is None:
        return "-"
    if res == CPU:
        return f"{value}m"
    return f"{math.ceil(value / MIB)}Mi"


# --- Per-workload totals -------------------------------------------------------------


@dataclass(slots=True)
class WorkloadTotal:
    namespace: str
    workload: str
    kind: str
    replicas: int
    cpu_current: int | None
    cpu_recommended: int
    memory_current: int | None
    memory_recommended: int
    cost_current: float | None = None
    cost_recommended: float | None = None


def workload_totals(rows: list[Row], prices: Prices | None = None) -> list[WorkloadTotal]:
    """Per workload, all replicas and containers: requests today and recommended (where
    nothing is recommended, today's request: the patches leave it as it is)."""
    out: dict[tuple[str, str], WorkloadTotal] = {}
    for r in rows:
        t = out.setdefault(
            (r.namespace, r.workload),
            WorkloadTotal(r.namespace, r.workload, r.kind, r.replicas, 0, 0, 0, 0),
        )
        for res, rr in ((CPU, r.cpu), (MEMORY, r.memory)):
            cur_attr, rec_attr = f"{res}_current", f"{res}_recommended"
            cur = getattr(t, cur_attr)
            if cur is not None and rr.current_request is not None:
                setattr(t, cur_attr, cur + rr.current_request * r.replicas)
            else:
                setattr(t, cur_attr, None)
            after = rr.request if rr.request is not None else rr.current_request
            setattr(t, rec_attr, getattr(t, rec_attr) + (after or 0) * r.replicas)
    if prices is not None:
        for t in out.values():
            _cost(t, prices)
    return list(out.values())


def _cost(t: WorkloadTotal, prices: Prices) -> None:
    t.cost_recommended = prices.monthly(t.cpu_recommended, t.memory_recommended)
    if t.cpu_current is not None and t.memory_current is not None:
        t.cost_current = prices.monthly(t.cpu_current, t.memory_current)


TOTAL = "TOTAL"
"""The workload name of the whole selection's total (ux.md N5); a namespace's total is
named `<namespace>/*`."""


def grand_totals(rows: list[Row], prices: Prices | None = None) -> list[WorkloadTotal]:
    """Per namespace, then over everything listed (the cluster, or the namespaces and
    selector chosen): the sums of `workload_totals`. `cpu_current` is None where some
    container has no request today (a sum without it would understate today)."""

    def add(into: WorkloadTotal, t: WorkloadTotal) -> None:
        into.replicas += t.replicas
        into.cpu_recommended += t.cpu_recommended
        into.memory_recommended += t.memory_recommended
        into.cpu_current = (
            into.cpu_current + t.cpu_current
            if into.cpu_current is not None and t.cpu_current is not None
            else None
        )
        into.memory_current = (
            into.memory_current + t.memory_current
            if into.memory_current is not None and t.memory_current is not None
            else None
        )

    per_ns: dict[str, WorkloadTotal] = {}
    total = WorkloadTotal("", TOTAL, "", 0, 0, 0, 0, 0)
    for t in workload_totals(rows):
        add(per_ns.setdefault(t.namespace, WorkloadTotal(t.namespace, "*", "", 0, 0, 0, 0, 0)), t)
        add(total, t)
    out = [*per_ns.values(), total]
    if prices is not None:
        for t in out:
            _cost(t, prices)
    return out
