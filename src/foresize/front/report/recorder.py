"""Light recorders that collect what a report draws, while a simulation runs.

- `UsageRecorder` (a `sim.on_usage` observer): per usage step and per top-level workload,
  the sums over its running containers of CPU used (cores), CPU requested (cores, the
  requests in force), memory used (bytes) and memory requested (bytes). One `np.bincount`
  per step for the four quantities, never a Python loop over pods.
- `NodeGapSampler` (a `sim.every` callback): every `interval` seconds, per node, the gap
  between the scheduler's charge and what the specs and allocations of the pods bound to
  it agree on (`foresize.core.cluster.capacity.charge_gap`). It takes a `sim.snapshot()` and, as
  the simulator never mutates an object a snapshot holds (copy-on-write), a pod object
  seen at the previous sample is unchanged: pods are matched by identity (a vectorised
  `np.isin` over their ids) and only new or changed ones are recomputed.
- `risk_events(sim)`: the OOM kills, evictions, stalls, preemptions and circuit-breaker
  openings of the event log, each attributed to its workload.

Neither recorder changes the simulation: they only read (the summary of a recorded run
equals the summary of an unrecorded one; a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.capacity import charge_gap

if TYPE_CHECKING:
    from foresize.shells.sim.cluster import SimCluster


@dataclass
class WorkloadSeries:
    """Per-step sums per workload: arrays of shape (steps, workloads)."""

    times: np.ndarray  # seconds of simulated time
    names: list[str]  # `Kind/namespace/name`, aligned with the columns
    cpu_used: np.ndarray  # cores
    cpu_req: np.ndarray  # cores (requests in force)
    mem_used: np.ndarray  # bytes
    mem_req: np.ndarray  # bytes (requests in force)

    def column(self, name: str) -> int:
        return self.names.index(name)


class UsageRecorder:
    """Collects `WorkloadSeries` through `sim.on_usage` (install with `install`)."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self._times: list[float] = []
        self._rows: list[np.ndarray] = []  # each (4, n_rows)
        self._keys_seen: object = None
        self._idx = np.zeros(0, dtype=np.int64)
        self._bins = np.zeros(0, dtype=np.int64)
        self._n = 1

    def install(self) -> UsageRecorder:
        self.sim.on_usage(self._observe)
        return self

    def _observe(self, now: float, keys: Any, cpu: np.ndarray, mem: np.ndarray) -> None:
        u = self.sim.usage
        if keys is not self._keys_seen:
            # The simulator rebuilds `keys` only when containers start or stop; the running
            # slots are then the active ones, in slot order (the order of `keys`). A slot's
            # workload row is fixed while it runs, so the bins are computed here, once.
            self._keys_seen = keys
            self._idx = np.nonzero(u.active[: u.size])[0]
            wl = u.wl[self._idx]
            n = max(len(self.sim.wl_state) + 1, int(wl.max()) + 1 if wl.size else 0)
            self._n = n
            self._bins = np.concatenate((wl, wl + n, wl + 2 * n, wl + 3 * n))
        idx = self._idx
        if idx.size != cpu.size:  # defensive: never mis-attribute, skip the step
            return
        # One bincount for the four quantities (requests may change at every step).
        weights = np.concatenate((cpu, u.cpu_req[idx], mem, u.mem_req[idx]))
        row = np.bincount(self._bins, weights, 4 * self._n).reshape(4, self._n)
        self._times.append(now)
        self._rows.append(row)

    def series(self) -> WorkloadSeries:
        sim = self.sim
        order = sorted(sim.wl_state.items(), key=lambda kv: kv[1].index)
        names = [k for k, _ in order]
        cols = np.array([st.index for _, st in order], dtype=np.int64)
        steps = len(self._rows)
        width = max((r.shape[1] for r in self._rows), default=0)
        width = max(width, int(cols.max()) + 1 if cols.size else 0)
        data = np.zeros((4, steps, width))
        for i, r in enumerate(self._rows):
            data[:, i, : r.shape[1]] = r
        data = data[:, :, cols]
        return WorkloadSeries(
            times=np.asarray(self._times, dtype=np.float64),
            names=names,
            cpu_used=data[0],
            cpu_req=data[1],
            mem_used=data[2],
            mem_req=data[3],
        )


@dataclass
class NodeGaps:
    """Scheduler charge gap per node (`cluster.capacity.charge_gap`): arrays of shape
    (samples, nodes)."""

    times: np.ndarray
    nodes: list[str]
    cpu: np.ndarray  # millicores
    memory: np.ndarray  # bytes
    allocatable_cpu: np.ndarray  # millicores per node
    allocatable_memory: np.ndarray  # bytes per node


def pod_gap(pod: Any) -> tuple[int, int]:
    """(cpu millicores, memory bytes) the scheduler charges `pod` beyond what its spec and
    allocation agree on (`cluster.capacity.charge_gap`)."""
    if pod.node_name is None or pod.phase in ("Succeeded", "Failed"):
        return 0, 0
    gap = charge_gap(pod)
    return gap.get(CPU, 0), gap.get(MEMORY, 0)


@dataclass
class NodeGapSampler:
    """Samples the per-node charge gap every `interval` seconds (install with `install`)."""

    sim: SimCluster
    interval: float = 900.0
    _times: list[float] = field(default_factory=list)
    _samples: list[dict[str, tuple[int, int]]] = field(default_factory=list)
    # The previous sample's pods (kept alive, so no other object can take one of their
    # ids), their ids sorted, and the (node, cpu gap, memory gap) of those with a gap.
    _prev_pods: list[Any] = field(default_factory=list)
    _prev_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _with_gap: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    _alloc: dict[str, tuple[int, int]] = field(default_factory=dict)

    def install(self) -> NodeGapSampler:
        self.sim.every(self.interval, self._sample)
        return self

    def _sample(self, sim: SimCluster, now: float) -> None:
        snap = sim.snapshot()
        pods = snap.pods
        ids = np.fromiter(map(id, pods), dtype=np.int64, count=len(pods))
        # A pod object present at the previous sample is unchanged (copy-on-write): only
        # new objects (new pods, or pods the simulator changed since) are recomputed.
        fresh = np.nonzero(~np.isin(ids, self._prev_ids, assume_unique=True))[0]
        kept = set(ids.tolist()) if self._with_gap else set()
        with_gap = {i: g for i, g in self._with_gap.items() if i in kept}
        for k in fresh.tolist():
            pod = pods[k]
            c, m = pod_gap(pod)
            if (c or m) and pod.node_name is not None:
                with_gap[id(pod)] = (pod.node_name, c, m)
        self._prev_pods = list(pods)
        self._prev_ids = np.sort(ids)
        self._with_gap = with_gap
        gaps: dict[str, tuple[int, int]] = {}
        for node, c, m in with_gap.values():
            gc, gm = gaps.get(node, (0, 0))
            gaps[node] = (gc + c, gm + m)
        for name, node_model in snap.nodes.items():
            self._alloc[name] = (
                node_model.allocatable.get(CPU, 0),
                node_model.allocatable.get(MEMORY, 0),
            )
        self._times.append(now)
        self._samples.append(gaps)

    def gaps(self) -> NodeGaps:
        nodes = sorted(self._alloc)
        pos = {n: i for i, n in enumerate(nodes)}
        cpu = np.zeros((len(self._samples), len(nodes)))
        mem = np.zeros((len(self._samples), len(nodes)))
        for i, sample in enumerate(self._samples):
            for node, (c, m) in sample.items():
                if node in pos:
                    cpu[i, pos[node]] = c
                    mem[i, pos[node]] = m
        return NodeGaps(
            times=np.asarray(self._times, dtype=np.float64),
            nodes=nodes,
            cpu=cpu,
            memory=mem,
            allocatable_cpu=np.array([self._alloc[n][0] for n in nodes], dtype=np.float64),
            allocatable_memory=np.array([self._alloc[n][1] for n in nodes], dtype=np.float64),
        )


# Event-log kinds that are a risk to the workload, and how the report names them.
RISK_KINDS = {
    "OOMKilled": "OOM kill",
    "Evicted": "eviction",
    "NodePressureEviction": "eviction",
    "Preempted": "preemption",
    "ResizeDeferred": "stall",
    "ResizeInfeasible": "stall",
    "ResizeError": "stall",
    "ContainerRestarted": "resize restart",
}
BREAKER_REASONS = ("CircuitBreakerOpen", "CircuitBreakerOpened")
RISK_LABELS = ("OOM kill", "resize restart", "eviction", "stall", "preemption", "breaker open")


@dataclass(frozen=True)
class RiskEvent:
    time: float
    label: str  # one of RISK_LABELS
    workload: str  # `Kind/namespace/name`, or "" when unknown
    object: str  # `Pod/namespace/name` or the object of the event
    kind: str  # the event log kind
    message: str


def risk_events(sim: SimCluster) -> list[RiskEvent]:
    """The risk events of `sim.events`, in time order, attributed to workloads."""
    owner: dict[str, str] = {}
    out: list[RiskEvent] = []
    for ev in sim.events:
        if ev.kind == "PodCreated":
            owner[ev.object] = str(ev.details.get("owner") or "")
            continue
        label = RISK_KINDS.get(ev.kind)
        if label is None and ev.kind == "Event" and ev.reason in BREAKER_REASONS:
            label = "breaker open"
        if label is None:
            continue
        if label == "breaker open":
            workload = _breaker_workload(sim, ev.object)
        else:
            workload = owner.get(ev.object, "")
        message = ev.message + _detail(ev.kind, ev.reason, ev.details)
        out.append(RiskEvent(ev.time, label, workload, ev.object, ev.kind, message))
    return out


def _mib(v: Any) -> str:
    return f"{float(v) / 2**20:,.0f} MiB"


def _detail(kind: str, reason: str, d: dict[str, Any]) -> str:
    """The facts a reader wants next to the message (from the event's details)."""
    if kind == "Evicted":
        why = [f"reason {reason}"] if reason and reason != "Evicted" else []
        if d.get("target"):
            why.append(f"by target {d['target']}")
        return f" ({', '.join(why)})" if why else ""
    if kind == "OOMKilled" and "usage_bytes" in d and "limit_bytes" in d:
        return f" (usage {_mib(d['usage_bytes'])}, limit {_mib(d['limit_bytes'])})"
    if kind == "NodePressureEviction" and "node" in d:
        return f" (node {d['node']}, {d.get('qos', '?')})"
    if kind == "Preempted" and "preemptor" in d:
        return f" (by {d['preemptor']} on {d.get('node', '?')})"
    return ""


def _breaker_workload(sim: SimCluster, obj: str) -> str:
    """The workload a breaker opening counts against (the simulator's own attribution,
    so the timeline agrees with the summary's `breaker_openings`)."""
    kind, _, rest = obj.partition("/")
    namespace, _, name = rest.partition("/")
    return sim.workload_for_object(kind, namespace, name) or ""
