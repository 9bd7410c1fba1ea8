"""Usage history from Prometheus (cAdvisor and kube-state-metrics series), read-only.

PromQL range queries, per container of every pod, at a fixed step:

- CPU cores: `rate(container_cpu_usage_seconds_total[W])` with W = 1.1 x step, so each
  point is the average usage over the step that ends at it (the extra tenth lets the
  window always hold the sample one step back; rate's extrapolation is exact for that).
- Memory bytes: `max_over_time(container_memory_working_set_bytes[step - 1s])`: the peak
  working set within the step (the window stops short of the previous step's sample).
- OOM kills: `increase(container_oom_events_total[W])` (cAdvisor) and, where only
  kube-state-metrics is scraped, restarts whose last termination reason is OOMKilled.
- CPU throttling: throttled periods / periods (CFS), per container.

Pods are folded into their workload (owner from `kube_pod_owner` when kube-state-metrics
is there, else the controller naming conventions) and history is keyed by workload and
container, the replicas folded at each step as every shell folds them
(`foresize.history.aggregate`: CPU the median across replicas, memory the maximum), as
the recommender consumes it (`foresize.history.traces.TraceSeries`). Samples from a pod's
first 2 minutes are dropped so start-up spikes do not inflate forecasts. Long ranges are
split so no query asks for more than Prometheus' 11,000 points per series.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.errors import ForesizeError
from foresize.history.aggregate import group_max, group_median
from foresize.history.base import SeriesKey, TraceSeries, workload_of_pod

STARTUP_EXCLUSION = 120.0  # seconds of a new pod's life left out of history
MAX_POINTS = 10_000  # per series per query (Prometheus refuses more than 11,000)


def _escape(value: str) -> str:
    return re.escape(value).replace("\\", "\\\\").replace('"', '\\"')


def container_selector(namespaces: Iterable[str] | None = None) -> str:
    """Label matchers for real containers (not the pause container, not pod-level cgroups)."""
    parts = ['container!=""', 'container!="POD"']
    names = [n for n in (namespaces or []) if n]
    if names:
        parts.append(f'namespace=~"{"|".join(_escape(n) for n in names)}"')
    return "{" + ",".join(parts) + "}"


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


@dataclass(slots=True)
class PodSeries:
    """One container of one pod: the raw result of a range query."""

    namespace: str
    pod: str
    container: str
    timestamps: np.ndarray
    values: np.ndarray


@dataclass(slots=True)
class ContainerHistory:
    """Everything read for a time range: usage per workload/container, OOMs, throttling."""

    series: list[TraceSeries] = field(default_factory=list)
    oom_kills: dict[SeriesKey, list[float]] = field(default_factory=dict)
    throttling: dict[SeriesKey, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    pods: int = 0


class PrometheusReader:
    """PromQL over HTTP (`/api/v1/query_range`, `/api/v1/query`)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
        startup_exclusion: float = STARTUP_EXCLUSION,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.headers = headers or {}
        self.startup_exclusion = startup_exclusion

    async def _get(self, session: Any, path: str, params: dict[str, str]) -> Any:
        import aiohttp

        try:
            async with session.get(f"{self.url}{path}", params=params) as resp:
                text = await resp.text()
                if resp.status != 200:
                    raise ForesizeError(
                        f"Prometheus {self.url}{path} answered HTTP {resp.status}: {text[:300]}"
                    )
                body = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ForesizeError(f"cannot reach Prometheus at {self.url}: {exc}") from None
        if body.get("status") != "success":
            raise ForesizeError(f"Prometheus query failed: {body.get('error', body)}")
        return body["data"]

    def _session(self) -> Any:
        import aiohttp

        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout), headers=self.headers
        )

    async def query_range(
        self, query: str, start: float, end: float, step: float, session: Any = None
    ) -> list[tuple[dict[str, str], np.ndarray, np.ndarray]]:
        """A range query split into chunks of at most MAX_POINTS steps, stitched per series."""
        own = session is None
        session = session or self._session()
        try:
            merged: dict[tuple, tuple[dict[str, str], list[np.ndarray], list[np.ndarray]]] = {}
            chunk = step * (MAX_POINTS - 1)
            t = start
            while t <= end:
                stop = min(end, t + chunk)
                data = await self._get(
                    session,
                    "/api/v1/query_range",
                    {"query": query, "start": repr(t), "end": repr(stop), "step": repr(step)},
                )
                for item in data.get("result", []):
                    labels = item.get("metric", {})
                    values = item.get("values", [])
                    if not values:
                        continue
                    arr = np.asarray(values, dtype=object)
                    ts = arr[:, 0].astype(np.float64)
                    vs = np.asarray([float(v) for v in arr[:, 1]], dtype=np.float64)
                    key = tuple(sorted(labels.items()))
                    entry = merged.setdefault(key, (labels, [], []))
                    entry[1].append(ts)
                    entry[2].append(vs)
                t = stop + step
            out = []
            for labels, ts_parts, v_parts in merged.values():
                ts = np.concatenate(ts_parts)
                vs = np.concatenate(v_parts)
                ts, idx = np.unique(ts, return_index=True)
                out.append((labels, ts, vs[idx]))
            return out
        finally:
            if own:
                await session.close()

    async def query(self, query: str, at: float, session: Any = None) -> list[dict[str, Any]]:
        own = session is None
        session = session or self._session()
        try:
            data = await self._get(session, "/api/v1/query", {"query": query, "time": repr(at)})
            return data.get("result", [])
        finally:
            if own:
                await session.close()

    # ------------------------------------------------------------------ queries
    @staticmethod
    def cpu_query(selector: str, step: float) -> str:
        return (
            "sum by (namespace, pod, container) "
            f"(rate(container_cpu_usage_seconds_total{selector}[{_duration(step * 1.1)}]))"
        )

    @staticmethod
    def memory_query(selector: str, step: float) -> str:
        return (
            "max by (namespace, pod, container) "
            f"(max_over_time(container_memory_working_set_bytes{selector}"
            f"[{_duration(max(step - 1.0, 1.0))}]))"
        )

    @staticmethod
    def oom_queries(selector: str, step: float) -> list[str]:
        window = _duration(step * 1.1)
        ksm = selector.replace('container!="",container!="POD"', 'container!=""')
        return [
            "sum by (namespace, pod, container) "
            f"(increase(container_oom_events_total{selector}[{window}])) > 0",
            "sum by (namespace, pod, container) "
            f"(increase(kube_pod_container_status_restarts_total{ksm}[{window}])) > 0 "
            "and on (namespace, pod, container) "
            'kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1',
        ]

    @staticmethod
    def throttling_query(selector: str, step: float) -> str:
        window = _duration(step * 1.1)
        return (
            "sum by (namespace, pod, container) "
            f"(rate(container_cpu_cfs_throttled_periods_total{selector}[{window}])) / "
            "sum by (namespace, pod, container) "
            f"(rate(container_cpu_cfs_periods_total{selector}[{window}])) > 0"
        )

    async def owners(
        self, at: float, session: Any = None
    ) -> dict[tuple[str, str], tuple[str, str]]:
        """(namespace, pod) -> (owner kind, owner name) from kube-state-metrics, if scraped."""
        result = await self.query('kube_pod_owner{owner_kind!=""}', at, session)
        out = {}
        for item in result:
            m = item.get("metric", {})
            if m.get("namespace") and m.get("pod"):
                out[(m["namespace"], m["pod"])] = (m.get("owner_kind", ""), m.get("owner_name", ""))
        return out

    async def pod_series(
        self, query: str, start: float, end: float, step: float, session: Any = None
    ) -> list[PodSeries]:
        rows = await self.query_range(query, start, end, step, session)
        return [
            PodSeries(
                labels.get("namespace", ""),
                labels.get("pod", ""),
                labels.get("container", ""),
                ts,
                vs,
            )
            for labels, ts, vs in rows
        ]

    def exclude_startup(self, series: list[PodSeries], start: float, step: float) -> None:
        """Drop each new pod's first `startup_exclusion` seconds (pods that appeared inside
        the range; a pod already running at `start` has no start-up inside it)."""
        first: dict[tuple[str, str], float] = {}
        for s in series:
            if s.timestamps.size:
                k = (s.namespace, s.pod)
                first[k] = min(first.get(k, math.inf), float(s.timestamps[0]))
        for s in series:
            born = first.get((s.namespace, s.pod), math.inf)
            if born > start + step:
                keep = s.timestamps >= born + self.startup_exclusion
                s.timestamps, s.values = s.timestamps[keep], s.values[keep]

    async def read(
        self,
        start: float,
        end: float,
        step: float = 300.0,
        namespaces: Iterable[str] | None = None,
    ) -> ContainerHistory:
        """CPU, memory, OOM kills and throttling for every container in the range."""
        if end <= start:
            raise ForesizeError(f"empty time range: start {start} is not before end {end}")
        if step <= 0:
            raise ForesizeError(f"--step must be positive, got {step}")
        selector = container_selector(namespaces)
        async with self._session() as session:
            cpu, mem, owners = await asyncio.gather(
                self.pod_series(self.cpu_query(selector, step), start, end, step, session),
                self.pod_series(self.memory_query(selector, step), start, end, step, session),
                self.owners(end, session),
            )
            ooms: list[PodSeries] = []
            for q in self.oom_queries(selector, step):
                ooms += await self.pod_series(q, start, end, step, session)
            throttled = await self.pod_series(
                self.throttling_query(selector, step), start, end, step, session
            )
        # The start-up rule applies per pod, judged on every series of the pod.
        self.exclude_startup([*cpu, *mem], start, step)
        history = ContainerHistory(pods=len({(s.namespace, s.pod) for s in [*cpu, *mem]}))
        history.series = fold_to_workloads(cpu, mem, owners)
        for s in ooms:
            key = SeriesKey(
                s.namespace, workload_of_pod(s.pod, owners.get((s.namespace, s.pod))), s.container
            )
            history.oom_kills.setdefault(key, []).extend(float(t) for t in s.timestamps)
        for key, (ts, vs) in _fold_max(throttled, owners).items():
            history.throttling[key] = (ts, vs)
        for key in history.oom_kills:
            history.oom_kills[key].sort()
        return history


def _fold(
    series: list[PodSeries],
    owners: dict[tuple[str, str], tuple[str, str]],
    reduce: Any = group_max,
) -> dict[SeriesKey, tuple[np.ndarray, np.ndarray]]:
    """Per workload/container: its pods folded at each timestamp by `reduce`
    (`foresize.history.aggregate.group_max` or `group_median`)."""
    groups: dict[SeriesKey, list[PodSeries]] = defaultdict(list)
    for s in series:
        wl = workload_of_pod(s.pod, owners.get((s.namespace, s.pod)))
        groups[SeriesKey(s.namespace, wl, s.container)].append(s)
    out = {}
    for key, parts in groups.items():
        ts = np.concatenate([p.timestamps for p in parts])
        vs = np.concatenate([p.values for p in parts])
        if ts.size == 0:
            continue
        grid, inverse = np.unique(ts, return_inverse=True)
        folded = np.full(grid.size, np.nan)
        ids, values = reduce(inverse, vs)
        folded[ids] = values
        out[key] = (grid, folded)
    return out


def _fold_max(
    series: list[PodSeries], owners: dict[tuple[str, str], tuple[str, str]]
) -> dict[SeriesKey, tuple[np.ndarray, np.ndarray]]:
    """Per workload/container: the maximum over its pods at each timestamp."""
    return _fold(series, owners, group_max)


def fold_to_workloads(
    cpu: list[PodSeries],
    memory: list[PodSeries],
    owners: dict[tuple[str, str], tuple[str, str]] | None = None,
) -> list[TraceSeries]:
    """Pod series -> one TraceSeries per workload/container on the union of timestamps,
    the pods folded as every shell folds them (`foresize.history.aggregate`): CPU the
    median across replicas, memory the maximum."""
    owners = owners or {}
    cpu_by = _fold(cpu, owners, group_median)
    mem_by = _fold(memory, owners, group_max)
    out: list[TraceSeries] = []
    for key in sorted(set(cpu_by) | set(mem_by)):
        parts = [x[0] for x in (cpu_by.get(key), mem_by.get(key)) if x is not None]
        grid = np.unique(np.concatenate(parts))
        c = np.full(grid.size, np.nan)
        m = np.full(grid.size, np.nan)
        if key in cpu_by:
            ts, vs = cpu_by[key]
            c[np.searchsorted(grid, ts)] = vs
        if key in mem_by:
            ts, vs = mem_by[key]
            m[np.searchsorted(grid, ts)] = vs
        out.append(TraceSeries(key, grid, c, m, source="prometheus"))
    return out
