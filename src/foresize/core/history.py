"""The value types of usage history (`SeriesKey`, `TraceSeries`, `resample_max`) and the
read interface every history backend offers (in-memory numpy, SQLite, Prometheus). Pure:
the core reads history only through this module; the adapters beside it do the I/O.

Series are keyed by namespace/workload/container and the workload's kind (`SeriesKey`),
never by pod, so a workload's history outlives its pods, a scale to zero, or its target
being deleted and re-created within retention, and a CronJob never shares a history with
a Deployment of the same name. History of an unknown kind (`UNKNOWN_KIND`: written before
kinds were kept, or of a pod known only by its name) is read by a workload only while
that workload's name is its kind's alone (`history_kinds`). Resources are "cpu" (cores,
float) and "memory" (bytes). Times are float Unix seconds passed by the caller; nothing
here reads a clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from foresize.core.cluster.jobs import (
    CRONJOB,
    JOB,
    JOB_GROUP,
    cronjob_of_job_name,
    history_workload,
    job_group_of,
)
from foresize.core.cluster.model import OwnerRef, Pod, Workload

if TYPE_CHECKING:
    from foresize.core.cluster.snapshot import ClusterSnapshot

UNKNOWN_KIND = ""
"""The kind of history whose workload kind nobody recorded: rows a store kept before it
kept kinds (`adapters.history.sqlite_schema`, series remote-written without the label),
and a pod whose controller is known only by its name, which several kinds share."""
DEPLOYMENT = "Deployment"


@dataclass(frozen=True, slots=True, order=True)
class SeriesKey:
    """History is keyed by workload (its kind and name) and container, never by pod, so it
    outlives pods; the kind keeps a CronJob and a Deployment of one name apart."""

    namespace: str
    workload: str
    container: str
    kind: str = UNKNOWN_KIND

    def __str__(self) -> str:
        # What users read (rows, logs): the kind is shown beside it where it matters.
        return f"{self.namespace}/{self.workload}/{self.container}"

    def of_kind(self, kind: str) -> SeriesKey:
        return SeriesKey(self.namespace, self.workload, self.container, kind)

    def of_container(self, container: str) -> SeriesKey:
        return SeriesKey(self.namespace, self.workload, container, self.kind)


class HistoryWorkload(NamedTuple):
    """The workload a pod's history is kept under: its kind (`UNKNOWN_KIND` when only
    the pod's name tells) and its name."""

    kind: str
    name: str

    def key(self, namespace: str, container: str) -> SeriesKey:
        return SeriesKey(namespace, self.name, container, self.kind)


@dataclass(slots=True)
class TraceSeries:
    key: SeriesKey
    timestamps: np.ndarray  # float64 Unix seconds, sorted, unique
    cpu: np.ndarray  # float64 cores, NaN = missing
    memory: np.ndarray | None = None  # float64 bytes, NaN = missing
    cpu_capacity: np.ndarray | None = None  # cores provisioned (manual sizing), if known
    memory_capacity: np.ndarray | None = None  # bytes provisioned, if known
    source: str = ""


RESOURCES = ("cpu", "memory")
OOM = "oom"
THROTTLE = "throttle"
EVENT_KINDS = (OOM, THROTTLE)


TOTAL_CONTAINER = "__total__"
"""Container name of a workload's summed usage (over pods and containers) in the history:
what the horizontal forecast reads. Real container names are DNS labels, never this."""


class HistoryReader(Protocol):
    def series(
        self, key: SeriesKey, resource: str, start: float, end: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of the stored samples in [start, end), NaN where missing."""
        ...

    def window(
        self, keys: list[SeriesKey], resource: str, end: float, length: int, step: float
    ) -> np.ndarray:
        """(len(keys), length) matrix on the `step` grid whose last bucket contains `end`
        (bucket = max of the samples in it; NaN = no sample). Buckets are aligned to
        multiples of `step` so time-of-day slots line up across calls."""
        ...

    def events(
        self, key: SeriesKey, kind: str | None, start: float, end: float
    ) -> list[tuple[float, str, float]]:
        """(time, kind, value) of OOM / throttling events in [start, end)."""
        ...

    def first_seen(self, key: SeriesKey) -> float | None:
        """Time of the oldest stored sample of the key (for hasEnoughDataToScale)."""
        ...


class HistoryWriter(Protocol):
    """What the collectors write into a history store (in memory or SQLite): one poll at a
    time, and events."""

    def write_poll(
        self, t: float, keys: Sequence[SeriesKey], cpu: np.ndarray, memory: np.ndarray
    ) -> None:
        """One poll at time `t`: the CPU (cores) and memory (bytes) of each key, NaN = no
        sample. Both resources land together or not at all (no torn samples)."""
        ...

    def record_event(self, key: SeriesKey, kind: str, t: float, value: float = 0.0) -> None:
        """An OOM kill or a throttling observation (never mixed into usage)."""
        ...


def check_resource(resource: str) -> None:
    if resource not in RESOURCES:
        raise ValueError(f"unknown resource {resource!r} (one of {RESOURCES})")


def aligned_start(t: float, period: float) -> float:
    """Start of the `period`-long block holding `t`, blocks aligned to multiples of
    `period` since the Unix epoch (UTC), never to the newest sample.

    The one alignment rule of every aggregation of history: the stores' buckets (`window`),
    the 5-minute model grid and the 15-minute peaks of a static request
    (`foresize.core.recommend.static`). Blocks counted back from the newest sample would move
    with every new sample, so two readings of a live history a few minutes apart would
    cut the same data differently (a peak shared by one block or split over two) and the
    numbers computed from them would cycle with the block's period."""
    return float(np.floor(t / period + ALIGN_EPS) * period)


ALIGN_EPS = 1e-9
"""Times are float seconds: a time on a boundary (k x period) computed as a float may sit
a hair below it; without the tolerance it would fall into the previous block."""


def block_numbers(start: float, n: int, step: float, block: float) -> np.ndarray:
    """For each of the `n` columns of a grid of `step` starting at `start`, the number of
    the epoch-aligned `block` holding it (`aligned_start` / `block`), as int64."""
    times = start + np.arange(n, dtype=np.float64) * step
    return np.floor(times / block + ALIGN_EPS).astype(np.int64)


def window_start(end: float, length: int, step: float) -> float:
    """Start of the first bucket of a `length`-bucket window whose last bucket holds `end`
    (buckets aligned to multiples of `step`: `aligned_start`)."""
    return aligned_start(end, step) - (length - 1) * step


def resample_max(
    timestamps: np.ndarray, values: np.ndarray, step: float, start: float, n_steps: int
) -> np.ndarray:
    """Maximum of the samples in each [start + i*step, start + (i+1)*step) bucket.

    Buckets with no finite sample stay NaN: gaps stay gaps, nothing is interpolated.
    """
    out = np.full(n_steps, -np.inf)
    idx = np.floor((timestamps - start) / step).astype(np.int64)
    ok = (idx >= 0) & (idx < n_steps) & np.isfinite(values)
    np.maximum.at(out, idx[ok], values[ok])
    out[np.isneginf(out)] = np.nan
    return out


def trace_series(
    reader: HistoryReader,
    key: SeriesKey,
    start: float,
    end: float,
    kinds: Sequence[str] | None = None,
) -> TraceSeries | None:
    """A stored key as a TraceSeries (cpu cores, memory bytes) over [start, end); with
    `kinds` (`history_kinds`), the key read under each kind, folded by the maximum at each
    time."""
    times: list[np.ndarray] = []
    cpus: list[np.ndarray] = []
    mems: list[np.ndarray] = []
    for kind in kinds if kinds is not None else (key.kind,):
        t, cpu = reader.series(key.of_kind(kind), "cpu", start, end)
        _, mem = reader.series(key.of_kind(kind), "memory", start, end)
        times.append(np.asarray(t, dtype=np.float64))
        cpus.append(np.asarray(cpu, dtype=np.float64))
        mems.append(np.asarray(mem, dtype=np.float64))
    t = np.concatenate(times)
    if t.size == 0:
        return None
    grid, at = np.unique(t, return_inverse=True)
    cpu = np.full(grid.size, np.nan)
    mem = np.full(grid.size, np.nan)
    with np.errstate(all="ignore"):
        np.fmax.at(cpu, at, np.concatenate(cpus))
        np.fmax.at(mem, at, np.concatenate(mems))
    have = np.isfinite(cpu) | np.isfinite(mem)
    if not have.any():
        return None
    return TraceSeries(key, grid[have], cpu[have], mem[have])


# How the collectors key a pod's history: by its workload (the controller's naming when
# the owner is unknown). One function, so the recommender reads what was written.
_RS_HASH = re.compile(r"^(?P<wl>.+)-[bcdfghjklmnpqrstvwxz2456789]{6,10}$")
_DEPLOY_POD = re.compile(r"^(?P<wl>.+)-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[a-z0-9]{5}$")
_STS_POD = re.compile(r"^(?P<wl>.+)-\d+$")
_GENERATED_POD = re.compile(r"^(?P<wl>.+)-[a-z0-9]{5}$")


def job_pod_history(owner: OwnerRef | None) -> bool:
    """Whether a pod's first minutes are history: a Job's pod runs to completion, its
    start-up is part of its work and often its peak (architecture §3.1 leaves out the
    first 2 minutes of a service's pod, whose start-up spikes would inflate forecasts).
    `owner`: the pod's controlling owner reference."""
    return owner is not None and owner.kind == JOB


def workload_of_pod(
    pod: str, owner: tuple[str, str] | None = None, labels: Mapping[str, str] | None = None
) -> HistoryWorkload:
    """The workload a pod belongs to: from its owner (kube_pod_owner) if known (a
    ReplicaSet named `<d>-<pod-template-hash>`: Deployment `d`; a Job run by a CronJob:
    the CronJob; a bare Job's pod labelled `foresize.io/job-group`: its group,
    `cluster.jobs`; `labels`: the pod's, where the caller has them), else from the
    controllers' naming (Deployment `w-<rs hash>-<5>`, StatefulSet `w-<n>`, DaemonSet or
    bare ReplicaSet `w-<5>`) under `UNKNOWN_KIND` (a name alone does not tell a
    Deployment from an Argo Rollout, nor a DaemonSet from a Job), else the pod itself."""
    if owner is not None:
        kind, name = owner
        if kind == "ReplicaSet":
            match = _RS_HASH.match(name)
            # An Argo Rollout names its ReplicaSets the same way; the shells that have
            # the ReplicaSet object resolve its owner instead (`history_workload_of`).
            return (
                HistoryWorkload(DEPLOYMENT, match["wl"]) if match else HistoryWorkload(kind, name)
            )
        if kind == JOB:
            # The runs of one CronJob are one workload with one history, not a new
            # workload with a few hours of it every run (`cluster.jobs`).
            cronjob = cronjob_of_job_name(name)
            if cronjob is not None:
                return HistoryWorkload(CRONJOB, cronjob)
            group = job_group_of(labels)
            if group is not None:
                return HistoryWorkload(JOB_GROUP, history_workload(group))
            return HistoryWorkload(JOB, name)
        if kind and name and kind != "Node":
            return HistoryWorkload(kind, name)
    for pattern in (_DEPLOY_POD, _STS_POD, _GENERATED_POD):
        match = pattern.match(pod)
        if match:
            return HistoryWorkload(UNKNOWN_KIND, match["wl"])
    return HistoryWorkload(UNKNOWN_KIND, pod)


def history_workload_of(pod: Pod, top: Workload | None) -> HistoryWorkload:
    """The workload a pod's history is kept under, given its top controller as the
    snapshot resolves it (`ClusterSnapshot.top_owner`; None: not in the snapshot, so from
    the owner's naming): a bare Job's pod labelled with a job group goes to its group
    (`cluster.jobs`), every other pod to its top controller."""
    if top is not None and not (top.kind == JOB and top.owner is None):
        return HistoryWorkload(top.kind, top.name)
    owner = (pod.owner.kind, pod.owner.name) if pod.owner is not None else None
    if top is not None and job_group_of(pod.labels) is None:
        return HistoryWorkload(top.kind, top.name)
    return workload_of_pod(pod.name, owner, pod.labels)


def history_kinds(
    snapshot: ClusterSnapshot, namespace: str, workload: HistoryWorkload
) -> tuple[str, ...]:
    """The kinds of history a workload reads: its own, and the `UNKNOWN_KIND` history of
    its name while no workload of another kind has that name in the namespace (history
    written before kinds were kept, or keyed by a pod's name alone, is then its; with two
    kinds of one name it is a mixture of both, which neither may take for its own)."""
    if workload.kind == UNKNOWN_KIND:
        return (UNKNOWN_KIND,)
    if snapshot.workload_kinds(namespace, workload.name) <= {workload.kind}:
        return (workload.kind, UNKNOWN_KIND)
    return (workload.kind,)


def merged_window(
    reader: HistoryReader,
    key: SeriesKey,
    kinds: Sequence[str],
    resource: str,
    end: float,
    length: int,
    step: float,
) -> np.ndarray:
    """`reader.window` of `key` read under each of `kinds` (`history_kinds`), the kinds
    folded by their maximum at each bucket (NaN where none has a sample)."""
    rows = reader.window([key.of_kind(k) for k in kinds], resource, end, length, step)
    if len(kinds) == 1:
        return np.asarray(rows[0])
    with np.errstate(all="ignore"):
        return np.asarray(np.fmax.reduce(rows, axis=0))
