"""The metrics-server poller: `metrics.k8s.io` pod usage -> per workload/container history.

Every `interval` (60 s by default, DESIGN §4.1: 1-minute collection) the poller lists
`/apis/metrics.k8s.io/v1beta1/pods` and turns each container's usage into one sample keyed
by (namespace, workload, container): the workload comes from the pod's controller chain in
the watch-fed cluster state (ReplicaSet -> Deployment ...), or from the controllers'
naming rules when the pod is not known yet. Samples from a pod's first 2 minutes are
dropped (start-up spikes must not inflate forecasts). CPU arrives in nanocores and is kept
in cores as a float (rounding to millicores here would erase idle containers).

Samples go to a `SampleSink`: the SQLite history store (when configured) and, always, an
in-memory window (`MemoryHistory`) the operator's recommender reads as `TraceSeries`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from foresize.api.quantity import QuantityError, parse_quantity
from foresize.history.prometheus import STARTUP_EXCLUSION, workload_of_pod
from foresize.history.traces import SeriesKey, TraceSeries

log = logging.getLogger("foresize.collector")

METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/pods"


@dataclass(frozen=True, slots=True)
class Sample:
    """One usage reading, in the canonical CSV's columns (DESIGN §5)."""

    timestamp: float
    namespace: str
    workload: str
    pod: str
    container: str
    cpu_cores: float
    memory_bytes: float

    @property
    def key(self) -> SeriesKey:
        return SeriesKey(self.namespace, self.workload, self.container)


class SampleSink(Protocol):
    def add_samples(self, samples: list[Sample]) -> None: ...


class MemoryHistory:
    """A bounded in-memory window of samples per workload/container (max over pods)."""

    def __init__(self, retention: float = 14 * 86400.0, step: float = 60.0) -> None:
        self.retention = retention
        self.step = step
        self._data: dict[SeriesKey, deque[tuple[float, float, float]]] = defaultdict(deque)
        # (namespace, workload) -> [(t, cpu, mem)] summed over the workload's pods and
        # containers at each poll: what the horizontal forecast needs.
        self._totals: dict[tuple[str, str], deque[tuple[float, float, float]]] = defaultdict(deque)

    def add_samples(self, samples: list[Sample]) -> None:
        sums: dict[tuple[str, str, float], list[float]] = {}
        for s in samples:
            self._data[s.key].append((s.timestamp, s.cpu_cores, s.memory_bytes))
            acc = sums.setdefault((s.namespace, s.workload, s.timestamp), [0.0, 0.0])
            acc[0] += s.cpu_cores
            acc[1] += s.memory_bytes
        for (ns, wl, t), (cpu, mem) in sums.items():
            self._totals[(ns, wl)].append((t, cpu, mem))
        if samples:
            horizon = max(s.timestamp for s in samples) - self.retention
            for q in [*self._data.values(), *self._totals.values()]:
                while q and q[0][0] < horizon:
                    q.popleft()

    def keys(self) -> list[SeriesKey]:
        return sorted(self._data)

    def series(self, key: SeriesKey) -> TraceSeries | None:
        """The key's history on the collection step: max over the pods at each step."""
        return self._bucketed(key, self._data.get(key))

    def workload_total(self, namespace: str, workload: str) -> TraceSeries | None:
        """The workload's usage summed over its pods and containers, per collection step."""
        return self._bucketed(
            SeriesKey(namespace, workload, "*"), self._totals.get((namespace, workload))
        )

    def _bucketed(self, key: SeriesKey, rows: Any) -> TraceSeries | None:
        if not rows:
            return None
        arr = np.asarray(rows, dtype=np.float64)
        buckets = np.floor(arr[:, 0] / self.step) * self.step
        grid, inverse = np.unique(buckets, return_inverse=True)
        cpu = np.full(grid.size, -np.inf)
        mem = np.full(grid.size, -np.inf)
        np.maximum.at(cpu, inverse, arr[:, 1])
        np.maximum.at(mem, inverse, arr[:, 2])
        cpu[np.isneginf(cpu)] = np.nan
        mem[np.isneginf(mem)] = np.nan
        return TraceSeries(key, grid, cpu, mem, source="metrics-server")


def _cores(raw: Any) -> float:
    return float(parse_quantity(raw))


def _bytes(raw: Any) -> float:
    return float(parse_quantity(raw).to_integral_value())


def samples_from_pod_metrics(
    items: list[dict[str, Any]],
    *,
    pod_started: Callable[[str, str], float | None] | None = None,
    workload_of: Callable[[str, str], str | None] | None = None,
    startup_exclusion: float = STARTUP_EXCLUSION,
    now: float | None = None,
) -> tuple[list[Sample], int]:
    """PodMetrics items -> samples. Returns (samples, dropped for start-up or bad values)."""
    from foresize.kube.convert import parse_time

    out: list[Sample] = []
    dropped = 0
    for item in items:
        meta = item.get("metadata") or {}
        ns, pod = meta.get("namespace", ""), meta.get("name", "")
        stamp = parse_time(item.get("timestamp")) or now or time.time()
        started = pod_started(ns, pod) if pod_started else None
        if started is not None and stamp - started < startup_exclusion:
            dropped += len(item.get("containers") or [])
            continue
        workload = (workload_of(ns, pod) if workload_of else None) or workload_of_pod(pod)
        for c in item.get("containers") or []:
            usage = c.get("usage") or {}
            try:
                cpu = _cores(usage.get("cpu", "0"))
                mem = _bytes(usage.get("memory", "0"))
            except (QuantityError, ArithmeticError, ValueError):
                log.warning(
                    "pod %s/%s container %s: unreadable usage %r", ns, pod, c.get("name"), usage
                )
                dropped += 1
                continue
            out.append(Sample(stamp, ns, workload, pod, c.get("name", ""), cpu, mem))
    return out, dropped


class MetricsServerPoller:
    """Polls metrics.k8s.io through the kube shell's API client and feeds the sinks."""

    def __init__(
        self,
        api: Any,
        sinks: list[SampleSink],
        *,
        state: Any = None,
        interval: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.sinks = sinks
        self.state = state
        self.interval = interval
        self.clock = clock
        self.polls = 0

    def _pod_started(self, ns: str, name: str) -> float | None:
        pod = self.state.pod(ns, name) if self.state is not None else None
        if pod is None:
            return None
        return pod.start_time or pod.creation_time or None

    async def poll_once(self) -> list[Sample]:
        resp = await self.api.request("GET", METRICS_PATH)
        if not resp.ok:
            raise RuntimeError(f"GET {METRICS_PATH} answered {resp.code}: {resp.body}")
        items = (resp.body or {}).get("items") or []
        workload_of = None
        if self.state is not None:
            snap = self.state.snapshot(self.clock())  # one snapshot per poll for owner lookups

            def workload_of(ns: str, name: str) -> str | None:
                pod = self.state.pod(ns, name)
                owner = snap.top_owner(pod) if pod is not None else None
                return owner.name if owner is not None else None

        samples, dropped = samples_from_pod_metrics(
            items, pod_started=self._pod_started, workload_of=workload_of, now=self.clock()
        )
        for sink in self.sinks:
            sink.add_samples(samples)
        self.polls += 1
        log.debug("collected %d samples (%d dropped)", len(samples), dropped)
        return samples

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.poll_once()
            except Exception as exc:  # metrics-server restarts are routine: keep polling
                log.warning("metrics-server poll failed: %s", exc)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
