"""What the simulated operator (`shells.sim.operator.SimOperator`) takes from the simulator's
usage steps, as the kube shell's collector takes it from metrics-server: every pod's
sample of a target's container for the recommender, keyed by its workload container (a
pod's first 2 minutes and a container that is down left out); the samples of DaemonSets
that DaemonSetAutoscalers scale, into the pass's DaemonSet usage window; the CPU samples
of pods with a start-up boost, into the pods' usage window. Which samples those are is
worked out once per active set of the simulator (`Sampling`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.adapters.history.aggregate import Grouping
from foresize.core.cluster.boost import BOOST_ANNOTATION, PodCpuWindow
from foresize.core.cluster.target import dsa_view
from foresize.core.history import HistoryWorkload, SeriesKey, job_pod_history
from foresize.core.lifecycle.daemonset import UsageWindow
from foresize.shells.sim.recommenders import ForesizeRecommender, Recommender, SeriesInfo

NEW_POD_EXCLUSION = 120.0
"""architecture §3.1: the first 2 minutes of a new pod are not history (start-up spikes)."""


@dataclass(slots=True)
class Sampling:
    """The samples of one active set of the simulator that the recommender gets."""

    keys: np.ndarray  # the active set's sample keys (held: its identity is the cache key)
    positions: np.ndarray  # sample positions of a target's container
    series: np.ndarray  # the series of each
    start: np.ndarray  # the start time of each one's pod
    history_keys: list[SeriesKey]  # the history key of each
    # How the kept samples fold into history columns (per container, per workload
    # total), per mask of the positions kept: the mask only changes when a pod passes its
    # first 2 minutes or a container goes down.
    by_mask: dict[bytes, tuple[Grouping, Grouping]] = field(default_factory=dict)

    def groupings(self, keep: np.ndarray, rec: ForesizeRecommender) -> tuple[Grouping, Grouping]:
        mask = keep.tobytes()
        hit = self.by_mask.get(mask)
        if hit is None:
            kept = [k for k, on in zip(self.history_keys, keep, strict=True) if on]
            hit = rec.groupings(kept)
            self.by_mask[mask] = hit
        return hit


class UsageObserver:
    """The usage observer of `SimOperator` (its base): reads the operator's simulator,
    recommender and series, writes the recommender's history and the usage windows."""

    sim: Any
    rec: Recommender | ForesizeRecommender
    series: dict[tuple[str, str, str], int]
    info: list[SeriesInfo]
    history_names: dict[str, HistoryWorkload]
    dsa_usage: UsageWindow
    pod_usage: PodCpuWindow
    _sampling: Sampling | None
    _boosted_at: tuple[np.ndarray, list[tuple[int, str, str]]] | None

    def _observe(self, now: float, keys: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> None:
        """Every pod's sample of a target's container goes to the recommender, keyed by
        its workload container (a pod's first 2 minutes and a container that is down are
        left out, as the kube shell's collector leaves them out)."""
        if self.sim.daemonset_autoscalers:
            self._observe_daemonsets(now, keys, cpu, mem)
        self._observe_boosted(now, keys, cpu)
        sampling = self._sampling_for(keys)
        if sampling.positions.size == 0:
            return
        memory = np.asarray(mem)
        # No np.errstate here: comparisons never raise floating-point errors (NaN compares
        # False), and entering one costs more than the comparison on every usage step.
        keep = ~(memory[sampling.positions] <= 0) & (now - sampling.start >= NEW_POD_EXCLUSION)
        if not keep.any():
            return
        sel = sampling.positions[keep]
        if isinstance(self.rec, ForesizeRecommender):
            containers, totals = sampling.groupings(keep, self.rec)
            self.rec.observe_grouped(now, containers, totals, np.asarray(cpu)[sel], memory[sel])
            return
        self.rec.observe(now, sampling.series[keep], np.asarray(cpu)[sel] * 1000.0, memory[sel])

    def _observe_daemonsets(
        self, now: float, keys: np.ndarray, cpu: np.ndarray, mem: np.ndarray
    ) -> None:
        """Every pod's sample of a DaemonSet a DaemonSetAutoscaler scales, into the usage
        window the pass's DaemonSet step reads (the percentile is over pods: no fold),
        without a pod's first 2 minutes or a container that is down."""
        wanted: dict[tuple[str, str], str] = {}
        for d in self.sim.daemonset_autoscalers:
            view = dsa_view(d)
            wanted[(view.namespace, f"DaemonSet/{view.ref_name}")] = view.ref_name
            self.dsa_usage.window = max(self.dsa_usage.window, view.observation_window)
        pods = self.sim.pods
        groups: dict[tuple[str, str, str], list[int]] = {}
        for i, k in enumerate(keys):
            ds = wanted.get((k.namespace, k.workload))
            if ds is None or mem[i] <= 0:
                continue
            pod = pods.get(f"{k.namespace}/{k.pod}")
            if pod is None or pod.start_time is None or now - pod.start_time < NEW_POD_EXCLUSION:
                continue
            groups.setdefault((k.namespace, ds, k.container), []).append(i)
        for (ns, ds, container), idx in groups.items():
            ix = np.asarray(idx)
            self.dsa_usage.add(ns, ds, container, now, np.asarray(cpu)[ix], np.asarray(mem)[ix])

    def _observe_boosted(self, now: float, keys: np.ndarray, cpu: np.ndarray) -> None:
        """Every CPU sample of a pod admitted with a start-up boost, into `pod_usage`
        (which samples those are is worked out once per active set, like `_sampling`)."""
        cached = self._boosted_at
        if cached is None or cached[0] is not keys:
            pods = self.sim.pods
            found: list[tuple[int, str, str]] = []
            for i, k in enumerate(keys):
                pod = pods.get(f"{k.namespace}/{k.pod}")
                if pod is not None and BOOST_ANNOTATION in pod.annotations:
                    found.append((i, pod.key, k.container))
            cached = self._boosted_at = (keys, found)
        for i, pod_key, container in cached[1]:
            self.pod_usage.add(pod_key, now, container, float(cpu[i]))

    def _sampling_for(self, keys: np.ndarray) -> Sampling:
        """Which samples of the simulator's active set belong to a target's container,
        worked out once per active set (the simulator hands the same `keys` array until a
        pod starts or stops): the per-step work is then a few vector operations."""
        cached = self._sampling
        if cached is not None and cached.keys is keys:
            return cached
        pods = self.sim.pods
        positions: list[int] = []
        series: list[int] = []
        start: list[float] = []
        for i, k in enumerate(keys):
            if not k.workload:  # a bare pod
                continue
            s = self.series.get((k.namespace, k.workload, k.container))
            if s is None:  # not a container of a target
                continue
            pod = pods.get(f"{k.namespace}/{k.pod}")
            if pod is None or pod.start_time is None:
                continue
            # A pod's start time is set when it is bound, before its samples start, and
            # stays while they last. A Job's pods are all start-up and work: their first
            # minutes are kept (`job_pod_history`).
            positions.append(i)
            series.append(s)
            start.append(-math.inf if job_pod_history(pod.owner) else pod.start_time)
        self._sampling = Sampling(
            keys,
            np.asarray(positions, dtype=np.int64),
            np.asarray(series, dtype=np.int64),
            np.asarray(start, dtype=np.float64),
            [self._history_key(s) for s in series],
        )
        return self._sampling

    def _history_key(self, series: int) -> SeriesKey:
        """The history key of a series: namespace, workload kind and name (a bare Job of
        a job group: the group's, `cluster.jobs`), container."""
        info = self.info[series]
        grouped = self.history_names.get(info.workload)
        if grouped is not None:
            return grouped.key(info.namespace, info.container)
        kind, _, name = info.workload.rpartition("/")
        return SeriesKey(info.namespace, name, info.container, kind)
