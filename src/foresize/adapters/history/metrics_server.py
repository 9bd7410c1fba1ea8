"""The metrics-server poller: `metrics.k8s.io` pod usage -> per workload/container history.

Every `interval` (60 s by default, architecture §3.1: 1-minute collection) the poller lists
`/apis/metrics.k8s.io/v1beta1/pods` and turns each container's usage into one sample keyed
by (namespace, workload, container): the workload comes from the pod's controller chain in
the watch-fed cluster state (ReplicaSet -> Deployment ...), or from the controllers'
naming rules when the pod is not known yet. The history gets one value per workload
container and step, the pods folded by `foresize.adapters.history.aggregate` (CPU the median
across replicas, memory the maximum), exactly as the simulated operator folds them.
Samples from a pod's first 2 minutes are dropped (start-up spikes must not inflate
forecasts). CPU arrives in nanocores and is kept in cores as a float (rounding to
millicores here would erase idle containers).

Samples go to `SampleSink`s; `HistorySink` writes them into the recommender's history (the
SQLite `HistoryStore` with `--history-db`, else the in-memory `UsageHistory`), where
`foresize.core.recommend.histories.load_histories` reads them back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from foresize.adapters.history.aggregate import per_container, workload_totals
from foresize.adapters.history.prometheus import STARTUP_EXCLUSION
from foresize.core.api.fields import parse_timestamp
from foresize.core.api.quantity import QuantityError, parse_quantity
from foresize.core.cluster.boost import BOOST_ANNOTATION
from foresize.core.history import (
    TOTAL_CONTAINER,
    UNKNOWN_KIND,
    HistoryWorkload,
    HistoryWriter,
    SeriesKey,
    history_workload_of,
    job_pod_history,
    workload_of_pod,
)

log = logging.getLogger("foresize.collector")

METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/pods"


@dataclass(frozen=True, slots=True)
class Sample:
    """One usage reading, in the canonical CSV's columns (architecture §3.6)."""

    timestamp: float
    namespace: str
    workload: str
    pod: str
    container: str
    cpu_cores: float
    memory_bytes: float
    kind: str = UNKNOWN_KIND  # the workload's (`history.HistoryWorkload`)

    @property
    def key(self) -> SeriesKey:
        return SeriesKey(self.namespace, self.workload, self.container, self.kind)


class SampleSink(Protocol):
    def add_samples(self, samples: list[Sample]) -> None: ...


def _stamp(value: object, pod: str) -> float | None:
    """A PodMetrics `timestamp`; one that does not parse is logged and read as absent."""
    if not value:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        log.warning("PodMetrics %s: unparseable timestamp %r ignored", pod, value)
        return None


def fold_samples(samples: list[Sample]) -> dict[float, dict[SeriesKey, tuple[float, float]]]:
    """Per-pod samples -> per timestamp, per workload container: (cpu cores, memory bytes)
    folded across the pods by `foresize.adapters.history.aggregate.per_container` (CPU the median,
    memory the maximum: the same fold the simulated operator applies), plus the workload's
    total under the `__total__` container (sums, for the horizontal forecast)."""
    by_time: dict[float, list[Sample]] = defaultdict(list)
    for s in samples:
        by_time[s.timestamp].append(s)
    out: dict[float, dict[SeriesKey, tuple[float, float]]] = {}
    for t in sorted(by_time):
        step = by_time[t]
        keys: dict[SeriesKey, int] = {}
        totals: dict[SeriesKey, int] = {}
        groups = np.array([keys.setdefault(s.key, len(keys)) for s in step], dtype=np.int64)
        tgroups = np.array(
            [totals.setdefault(s.key.of_container(TOTAL_CONTAINER), len(totals)) for s in step],
            dtype=np.int64,
        )
        cpu = np.array([s.cpu_cores for s in step], dtype=np.float64)
        mem = np.array([s.memory_bytes for s in step], dtype=np.float64)
        row: dict[SeriesKey, tuple[float, float]] = {}
        names = list(keys)
        ids, c, m = per_container(groups, cpu, mem)
        for i, cv, mv in zip(ids.tolist(), c.tolist(), m.tolist(), strict=True):
            row[names[i]] = (cv, mv)
        tnames = list(totals)
        ids, c, m = workload_totals(tgroups, cpu, mem)
        for i, cv, mv in zip(ids.tolist(), c.tolist(), m.tolist(), strict=True):
            row[tnames[i]] = (cv, mv)
        out[t] = row
    return out


class HistorySink:
    """Writes samples into the recommender's history: the SQLite `HistoryStore` or the
    in-memory `UsageHistory`, one value per workload container and step, folded across
    the pods by `fold_samples` (the shared fold of `foresize.adapters.history.aggregate`). Each
    poll also writes the workload's total under the `__total__` container."""

    def __init__(self, store: HistoryWriter) -> None:
        self.store = store

    def add_samples(self, samples: list[Sample]) -> None:
        for t, row in fold_samples(samples).items():
            keys = list(row)
            cpu = np.array([row[k][0] for k in keys], dtype=np.float64)
            mem = np.array([row[k][1] for k in keys], dtype=np.float64)
            self.store.write_poll(t, keys, cpu, mem)

    def record_oom(self, key: SeriesKey, t: float, usage: float = 0.0) -> None:
        self.store.record_event(key, "oom", t, usage)


class DaemonSetSink:
    """Feeds the DaemonSetAutoscaler's usage window (every pod's sample, not the peak):
    samples of pods whose controller is a DaemonSet in the watch-fed state."""

    def __init__(self, window: Any, state: Any) -> None:
        self.window = window  # foresize.core.lifecycle.daemonset.UsageWindow
        self.state = state

    def add_samples(self, samples: list[Sample]) -> None:
        groups: dict[tuple[str, str, str, float], list[tuple[float, float]]] = defaultdict(list)
        for s in samples:
            if f"DaemonSet/{s.namespace}/{s.workload}" in self.state.workloads:
                groups[(s.namespace, s.workload, s.container, s.timestamp)].append(
                    (s.cpu_cores, s.memory_bytes)
                )
        for (ns, ds, container, t), values in sorted(groups.items(), key=lambda kv: kv[0][3]):
            arr = np.asarray(values, dtype=np.float64)
            self.window.add(ns, ds, container, t, arr[:, 0], arr[:, 1])


class PodCpuSink:
    """Feeds the pods' recent CPU samples (`foresize.core.cluster.boost.PodCpuWindow`) that
    a start-up boost ending "when usage settles" reads: every sample of a pod that has a
    boost annotation, its first minutes included (they are what settles)."""

    def __init__(self, window: Any, state: Any) -> None:
        self.window = window
        self.state = state

    def add_samples(self, samples: list[Sample]) -> None:
        boosted: dict[str, bool] = {}
        for s in samples:
            key = f"{s.namespace}/{s.pod}"
            if key not in boosted:
                pod = self.state.pod(s.namespace, s.pod)
                boosted[key] = pod is not None and BOOST_ANNOTATION in pod.annotations
            if boosted[key]:
                self.window.add(key, s.timestamp, s.container, s.cpu_cores)


def _cores(raw: Any) -> float:
    return float(parse_quantity(raw))


def _bytes(raw: Any) -> float:
    return float(parse_quantity(raw).to_integral_value())


def samples_from_pod_metrics(
    items: list[dict[str, Any]],
    *,
    pod_started: Callable[[str, str], float | None] | None = None,
    workload_of: Callable[[str, str], HistoryWorkload | None] | None = None,
    startup_exclusion: float = STARTUP_EXCLUSION,
    now: float | None = None,
    starting: list[Sample] | None = None,
) -> tuple[list[Sample], int]:
    """PodMetrics items -> samples. Returns (samples, dropped for start-up or bad values);
    the samples of a pod's first minutes, left out of them, go to `starting` if given."""
    out: list[Sample] = []
    dropped = 0
    for item in items:
        meta = item.get("metadata") or {}
        ns, pod = meta.get("namespace", ""), meta.get("name", "")
        stamp = _stamp(item.get("timestamp"), f"{ns}/{pod}") or now or time.time()
        started = pod_started(ns, pod) if pod_started else None
        into = out
        if started is not None and stamp - started < startup_exclusion:
            dropped += len(item.get("containers") or [])
            if starting is None:
                continue
            into = starting
        kind, workload = (workload_of(ns, pod) if workload_of else None) or workload_of_pod(pod)
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
            into.append(Sample(stamp, ns, workload, pod, c.get("name", ""), cpu, mem, kind))
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
        startup_sinks: list[SampleSink] | None = None,
    ) -> None:
        self.api = api
        self.sinks = sinks
        # Sinks that also get the samples of a pod's first minutes (the boost's settling).
        self.startup_sinks = startup_sinks or []
        self.state = state
        self.interval = interval
        self.clock = clock
        self.polls = 0

    def _pod_started(self, ns: str, name: str) -> float | None:
        pod = self.state.pod(ns, name) if self.state is not None else None
        if pod is None or job_pod_history(pod.owner):
            return None  # a Job's pod: its first minutes are history too
        return pod.start_time or pod.creation_time or None

    async def poll_once(self) -> list[Sample]:
        resp = await self.api.request("GET", METRICS_PATH)
        if not resp.ok:
            raise RuntimeError(f"GET {METRICS_PATH} answered {resp.code}: {resp.body}")
        items = (resp.body or {}).get("items") or []
        workload_of = None
        if self.state is not None:
            snap = self.state.snapshot(self.clock())  # one snapshot per poll for owner lookups

            def workload_of(ns: str, name: str) -> HistoryWorkload | None:
                pod = self.state.pod(ns, name)
                if pod is None:
                    return None
                if pod.owner is None:
                    return None
                # An owner the state does not hold (a Job already gone): its naming; a
                # bare Job's pod: its job group (`history.history_workload_of`).
                return history_workload_of(pod, snap.top_owner(pod))

        starting: list[Sample] = []
        samples, dropped = samples_from_pod_metrics(
            items,
            pod_started=self._pod_started,
            workload_of=workload_of,
            now=self.clock(),
            starting=starting if self.startup_sinks else None,
        )
        for sink in self.sinks:
            sink.add_samples(samples)
        for sink in self.startup_sinks:
            sink.add_samples(sorted(starting + samples, key=lambda s: s.timestamp))
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
