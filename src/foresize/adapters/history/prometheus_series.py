"""What the Prometheus reader (`adapters.history.prometheus`) reads and returns: the scope
of a query and its PromQL selectors, one pod's series, a workload's history, counters
turned into kills, and pods folded into workloads (owner kinds, replicas, the fold every
shell uses); kubectl-style pod selectors over kube-state-metrics' labels."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.adapters.history.aggregate import group_max, group_median
from foresize.core.cluster.jobs import JOB, JOB_GROUP_LABEL
from foresize.core.errors import ForesizeError
from foresize.core.history import HistoryWorkload, SeriesKey, TraceSeries, workload_of_pod

KILL_MATCH = 300.0
"""How far apart (beyond one step) cAdvisor's and kube-state-metrics' record of one kill
may be: the restart follows the kill within seconds, and kube-state-metrics is scraped
every 30 s - 2 min, so 5 minutes covers it while two real kills of one container are
further apart (the kubelet's crash-loop back-off starts at 10 s and doubles)."""
REPLICA_WINDOW = 3600.0
"""A workload's replicas are its pods with a reading in the hour before its newest one
(a gap of a few scrapes in one pod does not make it a removed replica)."""


def kind_of_owner(owner: tuple[str, str] | None) -> str:
    """The workload kind behind a pod's owner (a ReplicaSet named `<d>-<hash>` is a
    Deployment's, a Job named `<c>-<minute>` a CronJob's: `history.workload_of_pod`);
    empty when unknown."""
    return "" if owner is None else workload_of_pod("", owner).kind


JOB_GROUP_METRIC_LABEL = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", JOB_GROUP_LABEL)
"""The job-group label as kube-state-metrics names it on `kube_pod_labels`: `label_` and
the key with every character outside [a-zA-Z0-9_] replaced by `_` (Prometheus' label-name
sanitising, which kube-state-metrics applies to the keys it exports), and only when
allow-listed (`--metric-labels-allowlist=pods=[foresize.io/job-group]`)."""


def job_group_note(
    workloads: Mapping[tuple[str, str], HistoryWorkload], labelled: int
) -> str | None:
    """What to say when bare Jobs were read but no pod carried the job-group label on
    `kube_pod_labels` (`labelled`: pods that did): whether they are labelled cannot be
    seen, so each is its own workload (None: nothing to say)."""
    bare = sorted({(ns, wl.name) for (ns, _), wl in workloads.items() if wl.kind == JOB})
    if labelled or not bare:
        return None
    return (
        f"{len(bare)} bare Job{'s' * (len(bare) != 1)} (first: {bare[0][0]}/{bare[0][1]}) "
        f"read as {'their' if len(bare) != 1 else 'its'} own workload"
        f"{'s' * (len(bare) != 1)}: no kube_pod_labels series carries "
        f"{JOB_GROUP_METRIC_LABEL}, so Jobs labelled {JOB_GROUP_LABEL} cannot be grouped "
        "(kube-state-metrics exports a pod label only when allow-listed: "
        f"--metric-labels-allowlist=pods=[{JOB_GROUP_LABEL}])"
    )


PodWorkloads = dict[tuple[str, str], HistoryWorkload]
"""(namespace, pod) -> the workload its history is kept under (`pod_workloads`)."""


def pod_workloads(
    owners: Mapping[tuple[str, str], tuple[str, str]],
    labels: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
) -> PodWorkloads:
    """Each pod kube-state-metrics knows the owner of, as `history.workload_of_pod` keys
    it (its labels, where read, put a bare Job's pod in its job group)."""
    labels = labels or {}
    return {pod: workload_of_pod(pod[1], owner, labels.get(pod)) for pod, owner in owners.items()}


def workload_of(workloads: PodWorkloads, namespace: str, pod: str) -> HistoryWorkload:
    """The workload of a pod: as `pod_workloads` resolved it, else by its name alone."""
    found = workloads.get((namespace, pod))
    return found if found is not None else workload_of_pod(pod)


def promql_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def promql_regex_escape(value: str) -> str:
    return promql_escape(re.escape(value))


@dataclass(frozen=True, slots=True)
class Scope:
    """Which containers to read: namespaces, one cluster (by its label), pod label
    selector (matched on kube-state-metrics' `kube_pod_labels`)."""

    namespaces: tuple[str, ...] = ()
    cluster_label: str = "cluster"
    cluster: str | None = None
    selector: Any = None  # foresize.core.api.types.LabelSelector

    def matchers(self, real_containers: bool = True) -> str:
        parts = ['container!=""', 'container!="POD"'] if real_containers else []
        if self.namespaces:
            parts.append(
                f'namespace=~"{"|".join(promql_regex_escape(n) for n in self.namespaces)}"'
            )
        if self.cluster is not None:
            parts.append(f'{self.cluster_label}="{promql_escape(self.cluster)}"')
        return ",".join(parts)


def container_selector(namespaces: Iterable[str] | None = None) -> str:
    """Label matchers for real containers (not the pause container, not pod-level cgroups)."""
    names = tuple(n for n in (namespaces or []) if n)
    return "{" + Scope(names).matchers() + "}"


def promql_duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def align(start: float, end: float, step: float) -> tuple[float, float]:
    """The grid inside [start, end]: multiples of `step` since the epoch."""
    return math.ceil(start / step) * step, math.floor(end / step) * step


@dataclass(slots=True)
class PodSeries:
    """One container of one pod: the raw result of a range query."""

    namespace: str
    pod: str
    container: str
    timestamps: np.ndarray
    values: np.ndarray


@dataclass(slots=True)
class Resources:
    """Requests and limits of one workload container (cores, bytes), from kube-state-metrics."""

    cpu_request: float | None = None
    memory_request: float | None = None
    cpu_limit: float | None = None
    memory_limit: float | None = None


@dataclass(slots=True)
class ContainerHistory:
    """Everything read for a time range: usage per workload/container, OOMs, throttling,
    and what kube-state-metrics says of each workload (kind, replicas, resources)."""

    series: list[TraceSeries] = field(default_factory=list)
    oom_kills: dict[SeriesKey, list[float]] = field(default_factory=dict)
    throttling: dict[SeriesKey, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    pods: int = 0
    resources: dict[SeriesKey, Resources] = field(default_factory=dict)
    kinds: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, workload) -> kind
    replicas: dict[tuple[str, str], int] = field(default_factory=dict)  # pods seen lately
    notes: list[str] = field(default_factory=list)  # what could not be read, in words


@dataclass(frozen=True, slots=True)
class HPARecord:
    """A HorizontalPodAutoscaler as kube-state-metrics exports it."""

    namespace: str
    name: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    utilization: dict[str, float]  # resource -> target utilisation (percent of request)


def counter_increases(ts: np.ndarray, values: np.ndarray) -> list[tuple[float, int]]:
    """(time, count) for each rise of a counter sampled at `ts`; a drop is a reset (the
    counter restarted at 0, so its new value is the count since)."""
    out = []
    for k in range(1, values.size):
        prev, cur = values[k - 1], values[k]
        if not (np.isfinite(prev) and np.isfinite(cur)):
            continue
        rise = cur - prev if cur >= prev else cur
        n = int(round(rise))
        if n > 0:
            out.append((float(ts[k]), n))
    return out


def counter_rates(
    grid: np.ndarray,
    values: np.ndarray,
    sample_grid: np.ndarray,
    sample_times: np.ndarray,
    step: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(grid points, per-second rise) of a counter from its last sample in each step: at
    each point whose step and the step before it hold a sample, the rise between those two
    samples over the seconds between them (a drop is a reset: the counter restarted at 0,
    so its new value is the rise since). `values` are the last samples' values on `grid`,
    `sample_times` their times on `sample_grid`; a time outside its step (a store's
    look-back reaching an older sample) is no sample of that step. Computed here, not by
    the store's `rate()`, because Prometheus extrapolates a rate to its window's edges and
    VictoriaMetrics does not (it takes the sample before the window instead): the same
    samples gave CPU figures 5% apart. These raw samples read the same on both."""
    common, at_value, at_time = np.intersect1d(grid, sample_grid, return_indices=True)
    t = sample_times[at_time]
    v = values[at_value]
    inside = (t > common - step) & (t <= common) & np.isfinite(v)
    common, t, v = common[inside], t[inside], v[inside]
    if common.size < 2:
        return np.empty(0), np.empty(0)
    # Consecutive steps only: a point after a gap has no sample in the step before it.
    follows = np.abs(np.diff(common) - step) < 1e-3
    rise = np.diff(v)
    rise = np.where(rise >= 0, rise, v[1:])
    rates = rise / np.diff(t)
    return common[1:][follows], rates[follows]


def max_per_container(series: list[PodSeries]) -> list[PodSeries]:
    """One series per (namespace, pod, container): duplicates (a second scrape job,
    cgroup-v1's `image=""` copy, a restarted container's old cgroup) folded by `max` at
    each timestamp, never summed."""
    groups: dict[tuple[str, str, str], list[PodSeries]] = defaultdict(list)
    for s in series:
        groups[(s.namespace, s.pod, s.container)].append(s)
    out = []
    for (namespace, pod, container), parts in groups.items():
        if len(parts) == 1:
            out.append(parts[0])
            continue
        ts = np.concatenate([p.timestamps for p in parts])
        grid, inverse = np.unique(ts, return_inverse=True)
        folded = np.full(grid.size, np.nan)
        ids, best = group_max(inverse, np.concatenate([p.values for p in parts]))
        folded[ids] = best
        keep = np.isfinite(folded)
        out.append(PodSeries(namespace, pod, container, grid[keep], folded[keep]))
    return out


def merge_kills(cadvisor: list[float], ksm: list[float], step: float) -> list[float]:
    """One list of kills from both sources: a kube-state-metrics kill within one step +
    KILL_MATCH of an unmatched cAdvisor kill is that kill (earliest first), the rest are
    kills only one source saw."""
    tolerance = step + KILL_MATCH
    merged = sorted(cadvisor)
    used = [False] * len(merged)
    extra = []
    for t in sorted(ksm):
        for i, c in enumerate(merged):
            if not used[i] and abs(c - t) <= tolerance:
                used[i] = True
                break
        else:
            extra.append(t)
    return sorted(merged + extra)


def workload_kinds_and_replicas(
    series: list[PodSeries],
    workloads: PodWorkloads,
    history: ContainerHistory,
) -> None:
    """Fill `history.kinds` (each workload's kind, where known) and `history.replicas`
    (pods of the workload seen within REPLICA_WINDOW of its newest sample)."""
    newest: dict[tuple[str, str], float] = {}
    for s in series:
        if s.timestamps.size:
            kind, name = workload_of(workloads, s.namespace, s.pod)
            wl = (s.namespace, name)
            newest[wl] = max(newest.get(wl, -math.inf), float(s.timestamps[-1]))
            if kind:
                history.kinds[wl] = kind
    replicas: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in series:
        wl = (s.namespace, workload_of(workloads, s.namespace, s.pod).name)
        if s.timestamps.size and float(s.timestamps[-1]) >= newest[wl] - REPLICA_WINDOW:
            replicas[wl].add(s.pod)
    history.replicas = {wl: len(pods) for wl, pods in replicas.items()}


def fold_series(
    series: list[PodSeries],
    workloads: PodWorkloads,
    reduce: Any = group_max,
) -> dict[SeriesKey, tuple[np.ndarray, np.ndarray]]:
    """Per workload/container: its pods folded at each timestamp by `reduce`
    (`foresize.adapters.history.aggregate.group_max` or `group_median`)."""
    groups: dict[SeriesKey, list[PodSeries]] = defaultdict(list)
    for s in series:
        groups[workload_of(workloads, s.namespace, s.pod).key(s.namespace, s.container)].append(s)
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


def fold_max(
    series: list[PodSeries], workloads: PodWorkloads
) -> dict[SeriesKey, tuple[np.ndarray, np.ndarray]]:
    """Per workload/container: the maximum over its pods at each timestamp."""
    return fold_series(series, workloads, group_max)


def fold_to_workloads(
    cpu: list[PodSeries],
    memory: list[PodSeries],
    workloads: PodWorkloads | None = None,
) -> list[TraceSeries]:
    """Pod series -> one TraceSeries per workload/container on the union of timestamps,
    the pods folded as every shell folds them (`foresize.adapters.history.aggregate`): CPU the
    median across replicas, memory the maximum."""
    workloads = workloads or {}
    cpu_by = fold_series(cpu, workloads, group_median)
    mem_by = fold_series(memory, workloads, group_max)
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


_SELECTOR_TERM = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|!=|=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$"
)


def ksm_label_name(key: str) -> str:
    """A Kubernetes label key as kube-state-metrics names it in `kube_pod_labels`
    (`app.kubernetes.io/name` -> `app_kubernetes_io_name`, without the `label_` prefix)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def pod_selector(text: str) -> Any:
    """A kubectl-style label selector (`app=web,tier!=db,env in (a,b),!canary`) as a
    LabelSelector over kube-state-metrics' label names. Raises ForesizeError."""
    from foresize.core.api.types import LabelSelector, LabelSelectorRequirement

    terms: list[str] = []
    depth, current = 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    match_labels: dict[str, str] = {}
    exprs = []
    for term in terms:
        m = _SELECTOR_TERM.match(term)
        if not m or not term.strip():
            raise ForesizeError(
                f"--selector: cannot read {term.strip()!r} (use key=value, key!=value, "
                "key in (a,b), key notin (a,b), key or !key, joined by commas)"
            )
        if m["absent"]:
            exprs.append(
                LabelSelectorRequirement(key=ksm_label_name(m["absent"]), operator="DoesNotExist")
            )
            continue
        key = ksm_label_name(m["key"])
        if m["op"] in ("=", "=="):
            match_labels[key] = m["value"]
        elif m["op"] == "!=":
            exprs.append(LabelSelectorRequirement(key=key, operator="NotIn", values=[m["value"]]))
        elif m["setop"]:
            values = [v.strip() for v in m["values"].split(",") if v.strip()]
            if m["setop"] == "in":
                exprs.append(LabelSelectorRequirement(key=key, operator="In", values=values))
            else:
                exprs.append(LabelSelectorRequirement(key=key, operator="NotIn", values=values))
        else:
            exprs.append(LabelSelectorRequirement(key=key, operator="Exists"))
    return LabelSelector(matchLabels=match_labels, matchExpressions=exprs)
