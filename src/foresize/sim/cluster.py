"""The simulated cluster: a discrete-event model of the Kubernetes parts Foresize touches.

`SimCluster` implements `foresize.cluster.port.ClusterPort` at simulated time:

- **scheduler**: filters nodes on the scheduler's charge (`foresize.cluster.qos.pod_charge`:
  max of spec, allocated and actual requests), scores LeastAllocated, preempts
  lower-priority pods only when nothing fits (lowest priorities first, with the
  scheduler's reprieve of higher-priority victims), leaves the rest Pending and retries;
- **kubelet**: in-place resize (`Deferred` / `Infeasible` / `PodResizeInProgress` `Error`,
  all or nothing per pod, `generation`/`observedGeneration`, retried each sync: downsizes
  first, then higher priority, Guaranteed before Burstable, then oldest), `resizePolicy`
  `RestartContainer` restarts, OOM kills above the memory limit (with crash back-off), CPU
  throttling above the CPU limit, node-pressure eviction (BestEffort, Burstable,
  Guaranteed), graceful termination and readiness delay;
- **controllers**: Deployment -> ReplicaSet (rolling restart with maxSurge/maxUnavailable
  25%), StatefulSet (ordered `name-0..`, OrderedReady), DaemonSet (one pod per node, also on
  nodes added later), Job (optionally periodic); every pod CREATE goes through
  `admission_hook`; HPAs with the replica arithmetic of the HPA controller;
- **API**: the resize subresource (validated by `foresize.cluster.validation`), the
  Eviction API with PDBs (201 / 429 DisruptionBudget / 429 retryAfterSeconds 10 while a
  PDB is being processed / 500 for several PDBs), scale, metadata patches, rollout
  restarts, target status and events.

Usage lives in numpy arrays (`foresize.sim.usage.UsageState`), one slot per running
container, so a usage step for thousands of containers is a few vector operations.
Everything random comes from one seed: the same seed gives the same event log.
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from foresize.api.quantity import CPU, MEMORY, MIB
from foresize.cluster.actions import (
    OK,
    Action,
    ActionResult,
    EmitEvent,
    EvictPod,
    PatchPodMetadata,
    PatchScale,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.cluster.model import (
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    READY,
    REASON_DEFERRED,
    REASON_ERROR,
    REASON_INFEASIBLE,
    RESTART_CONTAINER,
    ContainerStatus,
    HorizontalPodAutoscaler,
    HPAMetric,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    ResourceRequirements,
    Workload,
)
from foresize.cluster.qos import effective_requests, pod_charge, pod_qos_class, spec_requests
from foresize.cluster.snapshot import ClusterSnapshot, labels_match
from foresize.cluster.validation import apply_resize_patch, check_resize
from foresize.sim.events import EventLog, SimEvent
from foresize.sim.objects import (
    ContainerKey,
    PodMeta,
    WorkloadState,
    clone_pod,
    clone_workload,
    template_from_spec,
)
from foresize.sim.scenario import HPASpec, NodeSpec, PDBSpec, Scenario, WorkloadSpec
from foresize.sim.usage import GeneratorSpec, UsageState

AdmissionHook = Callable[[Pod, Workload | None, float], Pod]
ScaleHook = Callable[[Workload, int, float], int]
UsageObserver = Callable[[float, np.ndarray, np.ndarray, np.ndarray], None]
Periodic = Callable[["SimCluster", float], None]
_T = TypeVar("_T")

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
EVICTION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_PDBS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, "
    "which the eviction subresource does not support."
)
HARD_EVICTION_MEMORY = 100 * MIB  # kubelet default memory.available<100Mi
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def _budget_refusal(message: str, retry_after_seconds: float | None = None) -> ActionResult:
    """The Eviction API's 429 for a PodDisruptionBudget, its cause saying why."""
    return ActionResult(
        False,
        429,
        "TooManyRequests",
        EVICTION_MESSAGE,
        ({"type": "DisruptionBudget", "message": message},),
        retry_after_seconds=retry_after_seconds,
    )


def _rfc3339(t: float) -> str:
    import datetime as _dt

    base = _dt.datetime(2026, 1, 5, tzinfo=_dt.UTC)  # a Monday: day 0 of every simulation
    return (base + _dt.timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _PDB:
    spec: PDBSpec
    generation: int = 1
    observed_generation: int = 1
    members: set[str] = field(default_factory=set)  # keys of pods the selector matches


@dataclass(slots=True)
class _HPA:
    spec: HPASpec
    current: int = 0
    desired: int = 0
    recommendations: list[tuple[float, int]] = field(default_factory=list)


class SimCluster:
    """A simulated Kubernetes cluster at simulated time (implements `ClusterPort`)."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int | None = None,
        step: float = 60.0,
        admission_hook: AdmissionHook | None = None,
        kubelet_delay: float = 1.0,
        kubelet_sync_period: float = 60.0,
        failed_pod_ttl: float = 600.0,
        actuation_delay: float = 0.0,
    ) -> None:
        if step <= 0:
            raise ValueError("step must be positive")
        if seed is not None and seed < 0:
            raise ValueError("seed must be a non-negative integer")
        self.scenario = scenario
        self.seed = (
            seed if seed is not None else (scenario.seed if scenario.seed is not None else 0)
        )
        self.step = float(step)
        self.now = 0.0
        self.kubelet_delay = kubelet_delay
        self.kubelet_sync_period = kubelet_sync_period
        # Seconds between allocation and actuation (PodResizeInProgress with no reason).
        self.actuation_delay = actuation_delay
        self.failed_pod_ttl = failed_pod_ttl
        self.rng = np.random.default_rng(self.seed)
        self._prng = random.Random(self.seed)
        # Hooks and extension points.
        self.admission_hook: AdmissionHook | None = admission_hook
        self.scale_hook: ScaleHook | None = None
        self._observers: list[UsageObserver] = []
        self.events = EventLog()
        # State.
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.meta: dict[str, PodMeta] = {}
        self.workloads: dict[str, Workload] = {}
        self.wl_state: dict[str, WorkloadState] = {}
        self._wl_names: list[str] = []
        self.pdbs: dict[str, _PDB] = {}
        self.hpas: dict[str, _HPA] = {}
        self.target_status: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.targets: list[Any] = []
        self.daemonset_autoscalers: list[Any] = []
        self.templates: list[Any] = []
        self.paused = False
        self.server_version: tuple[int, int] = (1, 35)  # (1, 36): NodeCapacity refusals
        self.usage = UsageState(capacity=256)
        self._slot_keys: dict[int, ContainerKey] = {}
        self._active_idx: np.ndarray | None = None
        self._active_keys: np.ndarray | None = None
        self._node_charge: dict[str, list[int]] = {}
        self._node_pods: dict[str, set[str]] = {}
        self._pending: set[str] = set()
        self._resizing: set[str] = set()
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._uid = 0
        self._epoch = 0
        self._pod_epoch: dict[str, int] = {}
        self._wl_epoch: dict[str, int] = {}
        self._reconcile_queued: set[str] = set()
        self._schedule_queued = False
        self._last_account = 0.0
        self._started = False
        self._ca_added = 0
        self._ca_provisioning = False
        # Accounting, one row per top-level workload (row 0: bare pods).
        self._acc_names: list[str] = ["(bare pods)"]
        self._acc = {
            k: np.zeros(8)
            for k in (
                "cpu_req",
                "cpu_used",
                "cpu_demand",
                "mem_req",
                "mem_used",
                "throttled",
                "pending",
            )
        }
        self.counters: dict[str, dict[str, int]] = {}
        self._wl_ready = np.zeros(8)
        self._hpa_metrics: dict[str, np.ndarray] | None = None
        for spec in scenario.nodes:
            if spec.add_at <= 0:
                self._add_node(spec, log=False)
            else:
                self.at(spec.add_at, self._add_node, spec)
        for wspec in scenario.workloads:
            self._add_workload(wspec)
        for p in scenario.pdbs:
            self.pdbs[f"{p.namespace}/{p.name}"] = _PDB(p)
        for h in scenario.hpas:
            self.hpas[f"{h.namespace}/{h.name}"] = _HPA(h)

    # ------------------------------------------------------------------ event loop
    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at simulated time `t` (not before now)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now), self._seq, fn, args))

    def every(self, interval_seconds: float, fn: Periodic, *, start: float | None = None) -> None:
        """Call `fn(sim, now)` every `interval_seconds` of simulated time."""
        if interval_seconds <= 0:
            raise ValueError("interval must be positive")

        def tick() -> None:
            fn(self, self.now)
            self.at(self.now + interval_seconds, tick)

        self.at(self.now if start is None else start, tick)

    def on_usage(self, fn: UsageObserver) -> None:
        """Observe every usage step: fn(now, keys, cpu_cores, memory_bytes) over running
        containers (`keys` is an object array of `ContainerKey`; cpu and memory are what
        cgroups report: capped at the limit, a working set above it is an OOM kill)."""
        self._observers.append(fn)

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for key in list(self.wl_state):
            self._queue_reconcile(key)
        for key in self.hpas:
            self.at(self.scenario.hpa_sync_period, self._hpa_sync, key)
        self.at(self.now, self._usage_step)
        self.at(self.now + self.kubelet_sync_period, self._kubelet_periodic)

    def run_until(self, t: float) -> None:
        """Advance simulated time to `t`, processing every event due until then."""
        self._start()
        while self._heap and self._heap[0][0] <= t:
            when, _, fn, args = heapq.heappop(self._heap)
            self.now = when
            fn(*args)
        self.now = max(self.now, t)
        self._account(self.now)

    def run(self, duration: float) -> None:
        self.run_until(self.now + duration)

    def log(
        self, kind: str, obj: str, reason: str = "", message: str = "", **details: Any
    ) -> SimEvent:
        ev = SimEvent(self.now, kind, obj, reason, message, details)
        self.events.append(ev)
        return ev

    def _count(self, wl_key: str | None, name: str, n: int = 1) -> None:
        row = self.counters.setdefault(wl_key or "", {})
        row[name] = row.get(name, 0) + n

    # ------------------------------------------------------------------ nodes
    def _add_node(self, spec: NodeSpec, log: bool = True) -> None:
        node = Node(
            spec.name,
            {CPU: spec.cpu, MEMORY: spec.memory},
            {CPU: spec.capacity_cpu, MEMORY: spec.capacity_memory},
            dict(spec.labels),
        )
        self.nodes[spec.name] = node
        self._node_charge[spec.name] = [0, 0]
        self._node_pods[spec.name] = set()
        self._node_names = list(self.nodes)
        self._node_index = {n: i for i, n in enumerate(self._node_names)}
        self._node_mem_threshold = np.array(
            [
                max(
                    0,
                    self.nodes[n].capacity.get(MEMORY, self.nodes[n].allocatable[MEMORY])
                    - HARD_EVICTION_MEMORY,
                )
                for n in self._node_names
            ],
            dtype=np.float64,
        )
        self._node_cpu_cores = np.array(
            [
                self.nodes[n].capacity.get(CPU, self.nodes[n].allocatable[CPU]) / 1000.0
                for n in self._node_names
            ],
            dtype=np.float64,
        )
        if log:
            self.log("NodeAdded", f"Node/{spec.name}", "NodeReady", "node joined the cluster")
        for key, st in self.wl_state.items():
            if st.spec.kind == "DaemonSet":
                self._queue_reconcile(key)
        self._queue_schedule()

    def add_node(
        self, name: str, cpu_millis: int, memory_bytes: int, labels: dict[str, str] | None = None
    ) -> None:
        """Add a node now (a cluster-autoscaler stand-in may call this)."""
        self._add_node(
            NodeSpec(name, cpu_millis, memory_bytes, cpu_millis, memory_bytes, dict(labels or {}))
        )

    def _free(self, node: str) -> tuple[int, int]:
        alloc = self.nodes[node].allocatable
        used = self._node_charge[node]
        return alloc.get(CPU, 0) - used[0], alloc.get(MEMORY, 0) - used[1]

    def _recharge(self, key: str) -> None:
        """Refresh the cached scheduler charge of pod `key` on its node."""
        meta = self.meta[key]
        pod = self.pods.get(key)
        if meta.charged_node is not None:
            used = self._node_charge.get(meta.charged_node)
            if used is not None:
                used[0] -= meta.charge[0]
                used[1] -= meta.charge[1]
            meta.charged_node = None
            meta.charge = (0, 0)
        if pod is None or pod.node_name is None or pod.phase in ("Succeeded", "Failed"):
            return
        ch = pod_charge(pod)
        meta.charge = (ch.get(CPU, 0), ch.get(MEMORY, 0))
        meta.charged_node = pod.node_name
        used = self._node_charge[pod.node_name]
        used[0] += meta.charge[0]
        used[1] += meta.charge[1]

    # ------------------------------------------------------------------ copy-on-write
    def _writable(
        self, objects: dict[str, _T], epochs: dict[str, int], key: str, clone: Callable[[_T], _T]
    ) -> _T:
        """`objects[key]`, safe to mutate: cloned once after each snapshot, since the
        snapshot may hold the old object."""
        obj = objects[key]
        if epochs.get(key, -1) < self._epoch:
            obj = clone(obj)
            objects[key] = obj
            epochs[key] = self._epoch
        return obj

    def _w(self, key: str) -> Pod:
        """The pod `key`, safe to mutate."""
        return self._writable(self.pods, self._pod_epoch, key, clone_pod)

    def _ww(self, key: str) -> Workload:
        """The workload `key`, safe to mutate."""
        return self._writable(self.workloads, self._wl_epoch, key, clone_workload)

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> ClusterSnapshot:
        """A point-in-time view; objects in it are never mutated afterwards."""
        self._epoch += 1
        return ClusterSnapshot(
            now=self.now,
            nodes=dict(self.nodes),
            pods=list(self.pods.values()),
            workloads=dict(self.workloads),
            pdbs=[self._pdb_status(p) for p in self.pdbs.values()],
            hpas=[self._hpa_object(h) for h in self.hpas.values()],
            targets=list(self.targets),
            daemonset_autoscalers=list(self.daemonset_autoscalers),
            templates=list(self.templates),
            server_version=self.server_version,
            paused=self.paused,
        )

    def hpa_objects(self) -> list[HorizontalPodAutoscaler]:
        """The HPAs as the core sees them (what `snapshot().hpas` holds)."""
        return [self._hpa_object(h) for h in self.hpas.values()]

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get(f"{namespace}/{name}")

    def pods_of(self, kind: str, namespace: str, name: str) -> list[Pod]:
        st = self.wl_state.get(f"{kind}/{namespace}/{name}")
        if st is None:
            return []
        return [self.pods[k] for k in sorted(st.pods) if k in self.pods]

    def _hpa_object(self, h: _HPA) -> HorizontalPodAutoscaler:
        s = h.spec
        wl = self.workloads.get(f"{s.target_kind}/{s.namespace}/{s.target_name}")
        return HorizontalPodAutoscaler(
            s.namespace,
            s.name,
            s.target_kind,
            s.target_name,
            s.min_replicas,
            s.max_replicas,
            [HPAMetric("Resource", r, u) for r, u in s.metrics],
            current_replicas=wl.replicas if wl else 0,
            desired_replicas=h.desired or (wl.replicas if wl else 0),
        )

    # ------------------------------------------------------------------ workloads
    def _acc_row(self, name: str) -> int:
        self._acc_names.append(name)
        idx = len(self._acc_names) - 1
        if idx >= self._acc["cpu_req"].size:
            for k, arr in self._acc.items():
                self._acc[k] = np.concatenate([arr, np.zeros(arr.size)])
            self._wl_ready = np.concatenate([self._wl_ready, np.zeros(self._wl_ready.size)])
        return idx

    def _new_uid(self) -> str:
        self._uid += 1
        return f"sim-{self._uid:08d}"

    def _suffix(self, n: int = 5) -> str:
        return "".join(self._prng.choice(_NAME_ALPHABET) for _ in range(n))

    def _rs_name(self, name: str, revision: int) -> str:
        digest = hashlib.sha256(f"{name}/{revision}".encode()).digest()
        return f"{name}-" + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:10])

    def _add_workload(self, spec: WorkloadSpec) -> None:
        key = f"{spec.kind}/{spec.namespace}/{spec.name}"
        uid = self._new_uid()
        wl = Workload(
            spec.kind,
            spec.namespace,
            spec.name,
            uid,
            dict(spec.labels),
            dict(spec.labels),
            spec.replicas if spec.kind != "Job" else spec.parallelism,
            template_from_spec(spec),
        )
        self.workloads[key] = wl
        st = WorkloadState(spec, self._acc_row(f"{spec.kind}/{spec.namespace}/{spec.name}"))
        st.owner_ref = OwnerRef(spec.kind, spec.name, uid, "apps/v1")
        self.wl_state[key] = st
        self.counters.setdefault(key, {})
        if spec.kind == "Deployment":
            self._new_replicaset(key)

    def _new_replicaset(self, key: str) -> None:
        st = self.wl_state[key]
        dep = self.workloads[key]
        st.rs_name = self._rs_name(dep.name, st.revision)
        rs = Workload(
            "ReplicaSet",
            dep.namespace,
            st.rs_name,
            self._new_uid(),
            dict(dep.labels),
            dict(dep.selector),
            0,
            clone_workload(dep).template,
            owner=OwnerRef("Deployment", dep.name, dep.uid, "apps/v1"),
        )
        self.workloads[f"ReplicaSet/{dep.namespace}/{st.rs_name}"] = rs

    def _queue_reconcile(self, key: str | None) -> None:
        if key is None or key in self._reconcile_queued or key not in self.wl_state:
            return
        self._reconcile_queued.add(key)
        self.at(self.now, self._reconcile, key)

    def _reconcile(self, key: str) -> None:
        self._reconcile_queued.discard(key)
        st = self.wl_state[key]
        kind = st.spec.kind
        if kind == "Deployment":
            self._reconcile_deployment(key, st)
        elif kind == "StatefulSet":
            self._reconcile_statefulset(key, st)
        elif kind == "DaemonSet":
            self._reconcile_daemonset(key, st)
        elif kind == "Job":
            self._reconcile_job(key, st)

    def _live(self, st: WorkloadState) -> list[Pod]:
        """Pods of the workload that are neither finished nor terminating (stable order)."""
        out = []
        for k in sorted(st.pods):
            p = self.pods.get(k)
            if p is not None and p.phase not in ("Succeeded", "Failed") and p.deletion_time is None:
                out.append(p)
        return out

    def _deletion_rank(self, p: Pod) -> tuple[int, int, float, str]:
        # ReplicaSet scale-down order: unscheduled, then not ready, then newest first.
        return (
            0 if p.node_name is None else 1,
            0 if not self.meta[p.key].ready else 1,
            -p.creation_time,
            p.name,
        )

    def _reconcile_deployment(self, key: str, st: WorkloadState) -> None:
        dep = self.workloads[key]
        desired = dep.replicas
        live = self._live(st)
        new = [p for p in live if self.meta[p.key].revision == st.revision]
        old = [p for p in live if self.meta[p.key].revision != st.revision]
        if not old:
            st.rollout = False
            if len(new) < desired:
                for _ in range(desired - len(new)):
                    self._create_for(key, st)
            elif len(new) > desired:
                for p in sorted(new, key=self._deletion_rank)[: len(new) - desired]:
                    self._delete_pod(p.key, self.meta[p.key].grace, "ScaledDown")
        else:
            st.rollout = True
            surge = math.ceil(0.25 * desired)
            unavailable = math.floor(0.25 * desired)
            if surge == 0 and unavailable == 0:
                unavailable = 1
            total = len(new) + len(old)
            create = min(desired + surge - total, desired - len(new))
            for _ in range(max(0, create)):
                self._create_for(key, st)
            ready = sum(1 for p in live if self.meta[p.key].ready)
            budget = ready - (desired - unavailable)
            for p in sorted(old, key=self._deletion_rank):
                if not self.meta[p.key].ready:
                    self._delete_pod(p.key, self.meta[p.key].grace, "RollingUpdate")
                elif budget > 0:
                    budget -= 1
                    self._delete_pod(p.key, self.meta[p.key].grace, "RollingUpdate")
        # ReplicaSet replica counts for snapshots; drop emptied old ReplicaSets.
        counts: dict[str, int] = {}
        for k in st.pods:
            p = self.pods.get(k)
            if p is not None and p.owner is not None and p.phase not in ("Succeeded", "Failed"):
                counts[p.owner.name] = counts.get(p.owner.name, 0) + (p.deletion_time is None)
        for rs_key in [
            k
            for k, w in self.workloads.items()
            if w.kind == "ReplicaSet"
            and w.owner is not None
            and w.owner.name == dep.name
            and w.namespace == dep.namespace
        ]:
            rs = self.workloads[rs_key]
            want = desired if rs.name == st.rs_name else counts.get(rs.name, 0)
            if rs.name != st.rs_name and rs.name not in counts:
                del self.workloads[rs_key]
                continue
            if rs.replicas != want:
                self._ww(rs_key).replicas = want

    def _reconcile_statefulset(self, key: str, st: WorkloadState) -> None:
        sts = self.workloads[key]
        existing: dict[int, Pod] = {}
        for k in sorted(st.pods):
            p = self.pods.get(k)
            if p is None:
                continue
            if p.phase in ("Succeeded", "Failed"):
                # The StatefulSet controller deletes a failed pod to recreate its ordinal.
                self._remove_pod(k, p.uid)
                continue
            existing[self.meta[k].ordinal] = p
        if any(p.deletion_time is not None for p in existing.values()):
            return  # OrderedReady: one change at a time
        # Scale down from the highest ordinal.
        extra = sorted((i for i in existing if i >= sts.replicas), reverse=True)
        if extra:
            if all(self.meta[existing[i].key].ready for i in existing if i < sts.replicas):
                self._delete_pod(
                    existing[extra[0]].key, self.meta[existing[extra[0]].key].grace, "ScaledDown"
                )
            return
        for i in range(sts.replicas):
            p = existing.get(i)
            if p is None:
                self._create_for(key, st, ordinal=i)
                return
            if not self.meta[p.key].ready:
                return
        # Rolling update: replace the highest-ordinal pod of an old revision.
        stale = [i for i, p in existing.items() if self.meta[p.key].revision != st.revision]
        st.rollout = bool(stale)
        if stale:
            p = existing[max(stale)]
            self._delete_pod(p.key, self.meta[p.key].grace, "RollingUpdate")

    def _reconcile_daemonset(self, key: str, st: WorkloadState) -> None:
        by_node: dict[str, list[Pod]] = {}
        for p in self._live(st):
            by_node.setdefault(self.meta[p.key].pinned_node or "", []).append(p)
        for name, node in self.nodes.items():
            if not node.ready:
                continue
            if name not in by_node:
                terminating = [
                    k
                    for k in st.pods
                    if k in self.pods
                    and self.meta[k].pinned_node == name
                    and self.pods[k].deletion_time is not None
                ]
                if not terminating:  # maxSurge 0: the old pod goes first
                    self._create_for(key, st, node=name)
        for name, pods in by_node.items():
            if name not in self.nodes:
                for p in pods:
                    self._delete_pod(p.key, self.meta[p.key].grace, "NodeGone")
        ready_nodes = sum(1 for n in self.nodes.values() if n.ready)
        if self.workloads[key].replicas != ready_nodes:
            self._ww(key).replicas = ready_nodes  # desiredNumberScheduled
        # Rolling update, maxUnavailable 1.
        live = self._live(st)
        stale = [p for p in live if self.meta[p.key].revision != st.revision]
        st.rollout = bool(stale)
        busy = any(
            self.pods[k].deletion_time is not None for k in st.pods if k in self.pods
        ) or any(not self.meta[p.key].ready for p in live)
        if stale and not busy:
            self._delete_pod(stale[0].key, self.meta[stale[0].key].grace, "RollingUpdate")

    def _reconcile_job(self, key: str, st: WorkloadState) -> None:
        spec = st.spec
        if st.job_done:
            return
        live = self._live(st)
        if st.succeeded >= spec.completions:
            st.job_done = True
            self.log(
                "JobCompleted",
                key,
                "Completed",
                f"{st.succeeded} completions",
            )
            if spec.every:
                self.at(st.job_round_started + spec.every, self._job_restart, key)
            return
        need = min(spec.parallelism, spec.completions - st.succeeded) - len(live)
        for _ in range(max(0, need)):
            self._create_for(key, st)

    def _job_restart(self, key: str) -> None:
        st = self.wl_state[key]
        for k in sorted(st.pods):
            p = self.pods.get(k)
            if p is not None and p.phase == "Succeeded":
                self._remove_pod(k, p.uid)
        st.succeeded = 0
        st.job_done = False
        st.job_round_started = self.now
        self._queue_reconcile(key)

    # ------------------------------------------------------------------ pods
    def _create_for(
        self, key: str, st: WorkloadState, *, ordinal: int = -1, node: str | None = None
    ) -> Pod | None:
        wl = self.workloads[key]
        spec = st.spec
        if spec.kind == "Deployment":
            owner = OwnerRef(
                "ReplicaSet",
                st.rs_name,
                self.workloads[f"ReplicaSet/{wl.namespace}/{st.rs_name}"].uid,
                "apps/v1",
            )
            name = f"{st.rs_name}-{self._suffix()}"
        elif spec.kind == "StatefulSet":
            owner = st.owner_ref
            name = f"{spec.name}-{ordinal}"
        else:
            owner = OwnerRef(
                spec.kind, spec.name, wl.uid, "batch/v1" if spec.kind == "Job" else "apps/v1"
            )
            name = f"{spec.name}-{self._suffix()}"
        tmpl = clone_workload(wl).template
        pod = Pod(
            namespace=wl.namespace,
            name=name,
            uid=self._new_uid(),
            labels=dict(tmpl.labels),
            annotations=dict(tmpl.annotations),
            owner=owner,
            priority=tmpl.priority,
            containers=tmpl.containers,
            init_containers=tmpl.init_containers,
            restart_policy="OnFailure" if spec.kind == "Job" else "Always",
        )
        if spec.kind == "Deployment":
            pod.labels["pod-template-hash"] = st.rs_name.rsplit("-", 1)[1]
        elif spec.kind in ("StatefulSet", "DaemonSet"):
            pod.labels["controller-revision-hash"] = f"{spec.name}-{st.revision}"
        meta = PodMeta(
            top=key,
            owner_key=f"{owner.kind}/{wl.namespace}/{owner.name}" if owner else None,
            wl_index=st.index,
            revision=st.revision,
            pinned_node=node,
            readiness_delay=spec.readiness_delay,
            grace=spec.termination_grace,
            ordinal=ordinal,
        )
        return self._admit(pod, meta, wl)

    def create_pod(self, pod: Pod, *, grace: float = 30.0, readiness_delay: float = 0.0) -> Pod:
        """Create a bare pod (no controller) through admission, as `kubectl run` would."""
        meta = PodMeta(None, None, 0, readiness_delay=readiness_delay, grace=grace)
        if not pod.uid:
            pod.uid = self._new_uid()
        created = self._admit(pod, meta, None)
        assert created is not None
        return created

    def _admit(self, pod: Pod, meta: PodMeta, wl: Workload | None) -> Pod | None:
        pod.creation_time = self.now
        before = [c.resources.copy() for c in pod.containers]
        if self.admission_hook is not None:
            pod = self.admission_hook(pod, wl, self.now)
        mutated = [c.resources for c in pod.containers] != before
        key = pod.key
        if key in self.pods:
            self.log(
                "PodCreateFailed",
                f"Pod/{key}",
                "AlreadyExists",
                f'pods "{pod.name}" already exists',
            )
            return None
        pod.phase = "Pending"
        pod.node_name = None
        pod.conditions = [PodCondition(READY, "False", "", "", self.now)]
        self.pods[key] = pod
        self.meta[key] = meta
        self._pod_epoch[key] = self._epoch
        self._index_pdbs(pod)
        if meta.top is not None:
            self.wl_state[meta.top].pods.add(key)
        self._pending.add(key)
        self.log(
            "PodCreated",
            f"Pod/{key}",
            "SuccessfulCreate",
            f"created pod {pod.name}",
            owner=meta.top or "",
            mutated=mutated,
            annotations=dict(pod.annotations),
        )
        self._queue_schedule()
        return pod

    def _bind(self, key: str, node: str) -> None:
        pod = self._w(key)
        meta = self.meta[key]
        self._pending.discard(key)
        meta.nominated_node = None
        pod.node_name = node
        pod.phase = "Running"
        pod.conditions = [c for c in pod.conditions if c.type != "PodScheduled"]
        pod.start_time = self.now
        pod.container_statuses = []
        for c in pod.containers:
            reqs = {k: v for k, v in effective_requests(c).items() if k in (CPU, MEMORY)}
            lims = {k: v for k, v in c.resources.limits.items() if k in (CPU, MEMORY)}
            pod.container_statuses.append(
                ContainerStatus(
                    c.name, dict(reqs), ResourceRequirements(dict(reqs), lims), ready=False
                )
            )
        pod.observed_generation = pod.generation
        self._node_pods[node].add(key)
        self._recharge(key)
        self._open_slots(key)
        self.log(
            "PodScheduled",
            f"Pod/{key}",
            "Scheduled",
            f"Successfully assigned {key} to {node}",
            node=node,
        )
        self.at(self.now + meta.readiness_delay, self._become_ready, key, pod.uid)
        if meta.top is not None and self.wl_state[meta.top].spec.kind == "Job":
            meta.run_until = self.now + self.wl_state[meta.top].spec.run_time
            self.at(meta.run_until, self._job_pod_done, key, pod.uid)

    def _generator_for(self, meta: PodMeta, container: str) -> tuple[GeneratorSpec, GeneratorSpec]:
        if meta.top is not None:
            for c in self.wl_state[meta.top].spec.containers:
                if c.name == container:
                    return c.cpu, c.memory
        return GeneratorSpec(), GeneratorSpec()

    def _open_slots(self, key: str) -> None:
        pod = self.pods[key]
        meta = self.meta[key]
        u = self.usage
        self._account(self.now)
        spec = self.wl_state[meta.top].spec if meta.top is not None else None
        top = self.workloads[meta.top] if meta.top is not None else None
        for c, s in zip(pod.containers, pod.container_statuses, strict=True):
            slot = u.allocate()
            meta.slots.append(slot)
            cpu_gen, mem_gen = self._generator_for(meta, c.name)
            u.set_generator(slot, "cpu", cpu_gen)
            u.set_generator(slot, "memory", mem_gen)
            u.active[slot] = True
            u.wl[slot] = meta.wl_index
            u.node[slot] = self._node_index[pod.node_name or ""]
            u.started[slot] = self.now
            j = spec.jitter if spec is not None else 0.0
            u.jitter[slot] = 1.0 + self._prng.uniform(-j, j) if j else 1.0
            u.share_ref[slot] = (
                float(spec.replicas) if spec is not None and spec.load_shared else 0.0
            )
            u.down_until[slot] = -math.inf
            self._set_slot_resources(slot, s.resources)
            u.cpu_demand[slot] = u.cpu_used[slot] = u.mem[slot] = 0.0
            self._slot_keys[slot] = ContainerKey(
                pod.namespace, f"{top.kind}/{top.name}" if top is not None else "", pod.name, c.name
            )
        self._active_idx = None

    def _set_slot_resources(self, slot: int, res: ResourceRequirements) -> None:
        u = self.usage
        u.cpu_req[slot] = res.requests.get(CPU, 0) / 1000.0
        u.mem_req[slot] = float(res.requests.get(MEMORY, 0))
        u.cpu_lim[slot] = res.limits[CPU] / 1000.0 if res.limits.get(CPU) else math.inf
        u.mem_lim[slot] = float(res.limits[MEMORY]) if res.limits.get(MEMORY) else math.inf

    def _close_slots(self, key: str) -> None:
        meta = self.meta[key]
        if not meta.slots:
            return
        self._account(self.now)
        if meta.ready:
            self._wl_ready[meta.wl_index] -= 1
            meta.ready = False
        for slot in meta.slots:
            self.usage.release(slot)
            self._slot_keys.pop(slot, None)
        meta.slots = []
        self._active_idx = None

    def _still_running(self, key: str, uid: str) -> bool:
        """A scheduled event for pod `key` (uid `uid`) still applies: the same pod is
        Running and not terminating."""
        pod = self.pods.get(key)
        return (
            pod is not None
            and pod.uid == uid
            and pod.phase == "Running"
            and pod.deletion_time is None
        )

    def _become_ready(self, key: str, uid: str) -> None:
        if not self._still_running(key, uid):
            return
        meta = self.meta[key]
        if meta.ready or any(self.usage.down_until[s] > self.now for s in meta.slots):
            return
        pod = self._w(key)
        cond = pod.condition(READY)
        if cond is not None:
            cond.status = "True"
            cond.last_transition_time = self.now
        for s in pod.container_statuses:
            s.ready = True
        meta.ready = True
        self._wl_ready[meta.wl_index] += 1
        self.usage.ready[meta.slots] = True
        if meta.top is not None:
            st = self.wl_state[meta.top]
            if st.rollout or st.spec.kind == "StatefulSet" or st.spec.kind == "DaemonSet":
                self._queue_reconcile(meta.top)

    def _unready(self, key: str) -> None:
        meta = self.meta[key]
        pod = self._w(key)
        cond = pod.condition(READY)
        if cond is not None and cond.status == "True":
            cond.status = "False"
            cond.last_transition_time = self.now
        for s in pod.container_statuses:
            s.ready = False
        if meta.ready:
            meta.ready = False
            self._wl_ready[meta.wl_index] -= 1
            self.usage.ready[meta.slots] = False

    def _delete_pod(self, key: str, grace: float, reason: str) -> None:
        """Graceful deletion: terminating now, gone after the grace period."""
        pod = self.pods.get(key)
        if pod is None or pod.deletion_time is not None:
            return
        meta = self.meta[key]
        if pod.node_name is None or pod.phase in ("Succeeded", "Failed"):
            self._remove_pod(key, pod.uid)
            return
        self._unready(key)
        pod = self._w(key)
        pod.deletion_time = self.now
        self.log("PodTerminating", f"Pod/{key}", reason, f"grace period {grace:g}s", grace=grace)
        self.at(self.now + grace, self._remove_pod, key, pod.uid)
        self._queue_reconcile(meta.top)

    def _remove_pod(self, key: str, uid: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod.uid != uid:
            return
        meta = self.meta[key]
        self._close_slots(key)
        self._pending.discard(key)
        self._resizing.discard(key)
        node = pod.node_name
        del self.pods[key]
        self._recharge(key)
        if node is not None:
            self._node_pods[node].discard(key)
        if meta.top is not None:
            self.wl_state[meta.top].pods.discard(key)
        del self.meta[key]
        self._pod_epoch.pop(key, None)
        for pdb in self.pdbs.values():
            pdb.members.discard(key)
        self.log("PodDeleted", f"Pod/{key}", "Deleted", "", node=node or "")
        self._queue_reconcile(meta.top)
        self._queue_schedule()
        if node is not None:
            self.at(self.now, self._kubelet_sync, node)

    def _finish_pod(self, key: str, phase: str, reason: str, message: str) -> None:
        """The pod ends (Succeeded, or Failed by node-pressure eviction): it stops being
        charged, its controller replaces it, and it is garbage-collected later."""
        self._unready(key)
        self._close_slots(key)
        pod = self._w(key)
        pod.phase = phase
        self._recharge(key)
        self._resizing.discard(key)
        meta = self.meta[key]
        self.log("PodFinished", f"Pod/{key}", reason, message, phase=phase)
        self.at(self.now + self.failed_pod_ttl, self._remove_pod, key, pod.uid)
        self._queue_reconcile(meta.top)
        self._queue_schedule()
        if pod.node_name is not None:
            self.at(self.now, self._kubelet_sync, pod.node_name)

    def _job_pod_done(self, key: str, uid: str) -> None:
        if not self._still_running(key, uid):
            return
        meta = self.meta[key]
        if meta.top is not None:
            self.wl_state[meta.top].succeeded += 1
        self._finish_pod(key, "Succeeded", "Completed", "job pod completed")

    # ------------------------------------------------------------------ scheduler
    def _queue_schedule(self) -> None:
        if not self._schedule_queued:
            self._schedule_queued = True
            self.at(self.now, self._schedule)

    def _fits(self, charge: tuple[int, int], free: tuple[int, int]) -> bool:
        return charge[0] <= free[0] and charge[1] <= free[1]

    def _candidate_nodes(self, key: str) -> list[str]:
        pinned = self.meta[key].pinned_node
        if pinned is not None:
            node = self.nodes.get(pinned)
            return [pinned] if node is not None and node.ready else []
        return [n for n, node in self.nodes.items() if node.ready and not node.unschedulable]

    def _schedule(self) -> None:
        self._schedule_queued = False
        if not self._pending:
            return
        order = sorted(
            self._pending,
            key=lambda k: (-self.pods[k].priority, self.pods[k].creation_time, k),
        )
        # Capacity reserved for pods nominated after preemption.
        reserved: dict[str, list[int]] = {}
        for k in order:
            nom = self.meta[k].nominated_node
            if nom is not None:
                ch = pod_charge(self.pods[k])
                r = reserved.setdefault(nom, [0, 0])
                r[0] += ch.get(CPU, 0)
                r[1] += ch.get(MEMORY, 0)
        names = self._node_names
        alloc = np.array(
            [
                [self.nodes[n].allocatable.get(CPU, 0), self.nodes[n].allocatable.get(MEMORY, 0)]
                for n in names
            ],
            dtype=np.float64,
        )
        free_all = alloc - np.array([self._node_charge[n] for n in names], dtype=np.float64)
        usable = np.array([self.nodes[n].ready and not self.nodes[n].unschedulable for n in names])
        res_arr = np.zeros_like(free_all)
        for n, r in reserved.items():
            res_arr[self._node_index[n]] += r
        scale = np.maximum(alloc, 1.0)
        for key in order:
            pod = self.pods[key]
            meta = self.meta[key]
            ch = pod_charge(pod)
            charge = (ch.get(CPU, 0), ch.get(MEMORY, 0))
            best: tuple[float, str] | None = None
            free = free_all - res_arr
            if meta.nominated_node is not None:
                free[self._node_index[meta.nominated_node]] += res_arr[
                    self._node_index[meta.nominated_node]
                ]
            if meta.pinned_node is not None:
                mask = np.zeros(len(names), dtype=bool)
                pi = self._node_index.get(meta.pinned_node)
                if pi is not None:
                    mask[pi] = self.nodes[meta.pinned_node].ready
            else:
                mask = usable.copy()
            mask &= (free[:, 0] >= charge[0]) & (free[:, 1] >= charge[1])
            if mask.any():
                # LeastAllocated: prefer the node with the most room left after placing.
                score = ((free - np.array(charge)) / scale).mean(axis=1)
                score[~mask] = -np.inf
                bi = int(np.argmax(score))
                best = (float(score[bi]), names[bi])
                free_all[bi] -= charge
            if best is not None:
                if meta.nominated_node is not None:
                    r = reserved.get(meta.nominated_node)
                    if r is not None:
                        r[0] -= charge[0]
                        r[1] -= charge[1]
                        res_arr[self._node_index[meta.nominated_node]] -= charge
                self._bind(key, best[1])
                continue
            if meta.nominated_node is not None:
                continue  # waiting for its victims to terminate
            if not self._preempt(key, charge) and not pod.condition("PodScheduled"):
                p = self._w(key)
                p.conditions.append(
                    PodCondition(
                        "PodScheduled",
                        "False",
                        "Unschedulable",
                        self._unschedulable_message(charge),
                        self.now,
                    )
                )
                self.log(
                    "FailedScheduling",
                    f"Pod/{key}",
                    "FailedScheduling",
                    self._unschedulable_message(charge),
                )

    def _unschedulable_message(self, charge: tuple[int, int]) -> str:
        n = len(self.nodes)
        cpu_short = sum(1 for node in self.nodes if self._free(node)[0] < charge[0])
        mem_short = sum(1 for node in self.nodes if self._free(node)[1] < charge[1])
        parts = []
        if cpu_short:
            parts.append(f"{cpu_short} Insufficient cpu")
        if mem_short:
            parts.append(f"{mem_short} Insufficient memory")
        return f"0/{n} nodes are available: " + ", ".join(parts or ["no matching node"]) + "."

    def _preempt(self, key: str, charge: tuple[int, int]) -> bool:
        pod = self.pods[key]
        best: tuple[tuple[int, int, int, int], str, list[str]] | None = None
        for n_i, node in enumerate(self._candidate_nodes(key)):
            free = list(self._free(node))
            lower = []
            for k in self._node_pods[node]:
                p = self.pods.get(k)
                if p is None or p.deletion_time is not None or p.phase in ("Succeeded", "Failed"):
                    continue
                if p.priority < pod.priority:
                    lower.append(k)
            if not lower:
                continue
            for k in lower:
                free[0] += self.meta[k].charge[0]
                free[1] += self.meta[k].charge[1]
            if not self._fits(charge, (free[0], free[1])):
                continue
            # Reprieve as many victims as possible, highest priority first.
            victims = []
            for k in sorted(
                lower, key=lambda k: (-self.pods[k].priority, self.pods[k].creation_time, k)
            ):
                c = self.meta[k].charge
                if self._fits(charge, (free[0] - c[0], free[1] - c[1])):
                    free[0] -= c[0]
                    free[1] -= c[1]
                else:
                    victims.append(k)
            score = (
                max(self.pods[k].priority for k in victims),
                len(victims),
                sum(self.pods[k].priority for k in victims),
                n_i,
            )
            if best is None or score < best[0]:
                best = (score, node, victims)
        if best is None:
            return False
        _, node, victims = best
        for v in sorted(victims, key=lambda k: (self.pods[k].priority, k)):
            vm = self.meta[v]
            self.log(
                "Preempted",
                f"Pod/{v}",
                "Preempted",
                f"Preempted by pod {pod.uid} on node {node}",
                preemptor=key,
                node=node,
                victim_priority=self.pods[v].priority,
                preemptor_priority=pod.priority,
            )
            self._count(vm.top, "preemptions")
            self._delete_pod(v, vm.grace, "Preempted")
        self.meta[key].nominated_node = node
        return True

    # ------------------------------------------------------------------ usage step
    def _active(self) -> tuple[np.ndarray, np.ndarray]:
        if self._active_idx is None:
            idx = np.nonzero(self.usage.active[: self.usage.size])[0]
            self._active_idx = idx
            keys = np.empty(idx.size, dtype=object)
            for i, s in enumerate(idx.tolist()):
                keys[i] = self._slot_keys[s]
            self._active_keys = keys
        assert self._active_keys is not None
        return self._active_idx, self._active_keys

    def _account(self, t: float) -> None:
        dt = t - self._last_account
        if dt <= 0:
            return
        self._last_account = t
        u = self.usage
        idx, _ = self._active()
        n = self._acc["cpu_req"].size
        if idx.size:
            wl = u.wl[idx]
            acc = self._acc
            acc["cpu_req"] += np.bincount(wl, u.cpu_req[idx], n) * dt
            acc["cpu_used"] += np.bincount(wl, u.cpu_used[idx], n) * dt
            acc["cpu_demand"] += np.bincount(wl, u.cpu_demand[idx], n) * dt
            acc["mem_req"] += np.bincount(wl, u.mem_req[idx], n) * dt
            acc["mem_used"] += np.bincount(wl, u.mem[idx], n) * dt
            throttled = u.cpu_demand[idx] > u.cpu_lim[idx]
            if throttled.any():
                acc["throttled"] += np.bincount(wl, throttled.astype(np.float64), n) * dt
        for k in self._pending:
            self._acc["pending"][self.meta[k].wl_index] += dt

    def _usage_step(self) -> None:
        t = self.now
        self._account(t)
        u = self.usage
        idx, keys = self._active()
        if idx.size:
            share_ref = u.share_ref[idx]
            if share_ref.any():
                ready = self._wl_ready[u.wl[idx]]
                share = np.where(share_ref > 0, share_ref / np.maximum(ready, 1.0), 1.0)
            else:
                share = np.ones(idx.size)
            cpu, mem = u.step(t, idx, share, self.rng)
            up = u.down_until[idx] <= t
            if not up.all():
                cpu = np.where(up, cpu, 0.0)
                mem = np.where(up, mem, 0.0)
            used = np.minimum(cpu, u.cpu_lim[idx])
            used = self._cpu_contention(idx, used)
            u.cpu_demand[idx] = cpu
            u.cpu_used[idx] = used
            u.mem[idx] = mem
            # Metrics never show a working set above the memory limit: the cgroup kills
            # the container at the limit (the kill is reported on its own, as OOMKilled).
            seen = np.minimum(mem, u.mem_lim[idx])
            for obs in self._observers:
                obs(t, keys, used, seen)
            if self.hpas:
                # What the metrics API reports for Ready pods, per workload (HPA input).
                wl, rdy = u.wl[idx], u.ready[idx]
                n = self._acc["cpu_req"].size
                self._hpa_metrics = {
                    CPU: np.stack(
                        [np.bincount(wl, used * rdy, n), np.bincount(wl, u.cpu_req[idx] * rdy, n)]
                    ),
                    MEMORY: np.stack(
                        [np.bincount(wl, mem * rdy, n), np.bincount(wl, u.mem_req[idx] * rdy, n)]
                    ),
                    "ready": self._wl_ready[None, :n].copy(),
                }
            oom = mem > u.mem_lim[idx]
            if oom.any():
                for s in idx[oom].tolist():
                    self._oom_kill(s)
            node_mem = np.bincount(u.node[idx], mem, len(self._node_names))
            over = node_mem > self._node_mem_threshold
            if over.any():
                for ni in np.nonzero(over)[0].tolist():
                    self._node_pressure(self._node_names[ni])
        if self._pending:
            self._queue_schedule()
            if self.scenario.autoscaler is not None:
                self._cluster_autoscale()
        self.at(t + self.step, self._usage_step)

    def _cpu_contention(self, idx: np.ndarray, want: np.ndarray) -> np.ndarray:
        """CFS shares on an overcommitted node: when the containers of a node want more CPU
        than it has, each gets a share proportional to its CPU request (cpu.shares, at
        least 2m), and what the satisfied ones leave is shared again among the rest."""
        u = self.usage
        nodes = u.node[idx]
        n = len(self._node_names)
        total = np.bincount(nodes, want, n)
        over = total > self._node_cpu_cores
        if not over.any():
            return want
        hit = over[nodes]
        w = np.maximum(u.cpu_req[idx], 0.002)
        cap = self._node_cpu_cores
        share = cap[nodes] * w / np.bincount(nodes, w, n)[nodes]
        got = np.where(hit, np.minimum(want, share), want)
        # One redistribution of the capacity the satisfied containers left unused.
        left = cap - np.bincount(nodes, np.where(hit, got, 0.0), n)
        hungry = hit & (want > got)
        w_h = np.where(hungry, w, 0.0)
        w_sum = np.bincount(nodes, w_h, n)
        extra = np.where(hungry, left[nodes] * w_h / np.maximum(w_sum[nodes], 1e-12), 0.0)
        return np.where(hit, np.minimum(want, got + extra), want)

    def _cluster_autoscale(self) -> None:
        """Cluster-autoscaler stand-in: when pods have been Pending longer than
        `pending_after` and one would fit an empty template node, add one node (ready after
        `provision_time`), at most `max_nodes` in total. Nodes are never removed."""
        ca = self.scenario.autoscaler
        assert ca is not None
        if self._ca_provisioning or self._ca_added >= ca.max_nodes:
            return
        cap = (ca.node.cpu, ca.node.memory)
        for k in sorted(self._pending):
            pod = self.pods[k]
            meta = self.meta[k]
            if meta.pinned_node is not None or meta.nominated_node is not None:
                continue
            if self.now - pod.creation_time < ca.pending_after:
                continue
            ch = pod_charge(pod)
            if ch.get(CPU, 0) <= cap[0] and ch.get(MEMORY, 0) <= cap[1]:
                self._ca_added += 1
                self._ca_provisioning = True
                name = f"{ca.node.name}-{self._ca_added}"
                spec = NodeSpec(name, cap[0], cap[1], cap[0], cap[1], dict(ca.node.labels))
                self.log(
                    "ScaleUp",
                    f"Node/{name}",
                    "TriggeredScaleUp",
                    f"pod {k} triggered scale-up: adding {name}",
                    pod=k,
                    ready_at=self.now + ca.provision_time,
                )

                def ready(spec: NodeSpec = spec) -> None:
                    self._ca_provisioning = False
                    self._add_node(spec)

                self.at(self.now + ca.provision_time, ready)
                return

    def _oom_kill(self, slot: int) -> None:
        key_t = self._slot_keys.get(slot)
        if key_t is None:
            return
        key = f"{key_t.namespace}/{key_t.pod}"
        pod = self.pods.get(key)
        if pod is None:
            return
        meta = self.meta[key]
        u = self.usage
        usage, limit = u.mem[slot], u.mem_lim[slot]
        pod = self._w(key)
        st = pod.status_of(key_t.container)
        if st is not None:
            st.restart_count += 1
            st.last_termination_reason = "OOMKilled"
            st.last_termination_time = self.now
        # Crash back-off: 10s doubling to 5 minutes, reset after 10 minutes without a crash.
        if self.now - meta.last_crash > 600:
            meta.crash_count = 0
        meta.crash_count += 1
        meta.last_crash = self.now
        backoff = min(300.0, 10.0 * 2 ** (meta.crash_count - 1))
        u.started[slot] = self.now + backoff
        u.down_until[slot] = self.now + backoff
        u.mem[slot] = 0.0
        u.cpu_demand[slot] = u.cpu_used[slot] = 0.0
        self._count(meta.top, "oom_kills")
        self.log(
            "OOMKilled",
            f"Pod/{key}",
            "OOMKilled",
            f"container {key_t.container} exceeded its memory limit",
            container=key_t.container,
            usage_bytes=int(usage),
            limit_bytes=int(limit),
            restart_count=st.restart_count if st else 0,
            backoff_seconds=backoff,
        )
        self._unready(key)
        self.at(self.now + backoff + meta.readiness_delay, self._become_ready, key, pod.uid)
        if meta.top is not None and self.wl_state[meta.top].rollout:
            self._queue_reconcile(meta.top)

    def _node_pressure(self, node: str) -> None:
        u = self.usage
        threshold = self._node_mem_threshold[self._node_index[node]]
        cands = []
        for k in self._node_pods[node]:
            p = self.pods.get(k)
            meta = self.meta.get(k)
            if p is None or meta is None or not meta.slots or p.phase != "Running":
                continue
            use = float(sum(u.mem[s] for s in meta.slots))
            req = float(sum(u.mem_req[s] for s in meta.slots))
            cands.append((_QOS_RANK[pod_qos_class(p)], -(use - req), p.priority, k, use))
        total = float(sum(c[4] for c in cands))
        for rank, _, _, k, use in sorted(cands):
            if total <= threshold:
                break
            total -= use
            meta = self.meta[k]
            self._count(meta.top, "evictions")
            self._count(meta.top, "node_pressure_evictions")
            msg = "The node was low on resource: memory. "
            self.log(
                "NodePressureEviction",
                f"Pod/{k}",
                "Evicted",
                msg,
                node=node,
                qos=["BestEffort", "Burstable", "Guaranteed"][rank],
                usage_bytes=int(use),
            )
            self._finish_pod(k, "Failed", "Evicted", msg)

    # ------------------------------------------------------------------ kubelet resize
    def _kubelet_periodic(self) -> None:
        nodes = sorted({self.pods[k].node_name for k in self._resizing if k in self.pods} - {None})
        for n in nodes:
            self._kubelet_sync(n)  # type: ignore[arg-type]
        self.at(self.now + self.kubelet_sync_period, self._kubelet_periodic)

    def _kubelet_sync(self, node: str) -> None:
        """Retry pending resizes on `node`: downsizes first, then higher priority,
        Guaranteed before Burstable, then the oldest request."""
        keys = [k for k in self._resizing if k in self.pods and self.pods[k].node_name == node]
        if not keys:
            return

        def order(k: str) -> tuple[int, int, int, float, str]:
            p = self.pods[k]
            return (
                0 if self._is_downsize(p) else 1,
                -p.priority,
                -_QOS_RANK[pod_qos_class(p)],
                self.meta[k].resize_requested_at or 0.0,
                k,
            )

        for k in sorted(keys, key=order):
            self._kubelet_resize(k)

    def _is_downsize(self, pod: Pod) -> bool:
        for c in pod.containers:
            st = pod.status_of(c.name)
            if st is None:
                continue
            want = effective_requests(c)
            for r in (CPU, MEMORY):
                if want.get(r, 0) > st.allocated.get(r, 0):
                    return False
        return True

    def _is_downsize_of_actual(self, pod: Pod) -> bool:
        """Whether applying the spec lowers some request in force (frees capacity)."""
        for c in pod.containers:
            st = pod.status_of(c.name)
            want = effective_requests(c)
            if st is not None and any(
                want.get(r, 0) < st.resources.requests.get(r, 0) for r in (CPU, MEMORY)
            ):
                return True
        return False

    def _set_condition(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        cond = pod.condition(type_)
        if cond is None:
            pod.conditions.append(PodCondition(type_, "True", reason, message, self.now))
        elif cond.reason != reason or cond.message != message:
            cond.reason = reason
            cond.message = message
            cond.last_transition_time = self.now

    def _clear_condition(self, pod: Pod, type_: str) -> None:
        pod.conditions = [c for c in pod.conditions if c.type != type_]

    def _stall(self, key: str, pod: Pod, kind: str, reason: str, message: str) -> None:
        meta = self.meta[key]
        if meta.stall_generation != pod.generation:
            meta.stall_generation = pod.generation
            self._count(meta.top, "stalls")
            self.log(kind, f"Pod/{key}", reason, message, generation=pod.generation)

    def _kubelet_resize(self, key: str) -> None:
        pod0 = self.pods.get(key)
        if (
            pod0 is None
            or pod0.node_name is None
            or pod0.phase != "Running"
            or pod0.deletion_time is not None
        ):
            self._resizing.discard(key)
            return
        meta = self.meta[key]
        node = self.nodes[pod0.node_name]
        pod = self._w(key)
        desired = [
            (
                {r: v for r, v in effective_requests(c).items() if r in (CPU, MEMORY)},
                {r: v for r, v in c.resources.limits.items() if r in (CPU, MEMORY)},
            )
            for c in pod.containers
        ]
        statuses = [pod.status_of(c.name) for c in pod.containers]
        allocated_ok = all(
            s is not None and s.allocated == req
            for s, (req, _) in zip(statuses, desired, strict=True)
        )
        actual_ok = all(
            s is not None and s.resources.requests == req and s.resources.limits == lim
            for s, (req, lim) in zip(statuses, desired, strict=True)
        )
        pod.observed_generation = pod.generation
        if allocated_ok and actual_ok:
            self._clear_condition(pod, POD_RESIZE_PENDING)
            self._clear_condition(pod, POD_RESIZE_IN_PROGRESS)
            self._resizing.discard(key)
            self._recharge(key)
            return
        if not allocated_ok:
            want = spec_requests(pod)
            cpu_req, mem_req = want.get(CPU, 0), want.get(MEMORY, 0)
            cpu_cap, mem_cap = node.allocatable.get(CPU, 0), node.allocatable.get(MEMORY, 0)
            if cpu_req > cpu_cap or mem_req > mem_cap:
                if mem_req > mem_cap:
                    msg = f"memory, requested: {mem_req}, capacity: {mem_cap}"
                else:
                    msg = f"cpu, requested: {cpu_req}, capacity: {cpu_cap}"
                msg = "Node didn't have enough capacity: " + msg
                self._set_condition(pod, POD_RESIZE_PENDING, REASON_INFEASIBLE, msg)
                self._clear_condition(pod, POD_RESIZE_IN_PROGRESS)
                self._recharge(key)
                self._stall(key, pod, "ResizeInfeasible", REASON_INFEASIBLE, msg)
                return
            # The kubelet admits against what other pods have allocated.
            used_cpu = used_mem = 0
            for k in self._node_pods[node.name]:
                if k == key:
                    continue
                p = self.pods.get(k)
                if p is None or p.phase in ("Succeeded", "Failed"):
                    continue
                for s in p.container_statuses:
                    used_cpu += s.allocated.get(CPU, 0)
                    used_mem += s.allocated.get(MEMORY, 0)
            if cpu_req + used_cpu > cpu_cap or mem_req + used_mem > mem_cap:
                if mem_req + used_mem > mem_cap:
                    msg = f"memory, requested: {mem_req}, used: {used_mem}, capacity: {mem_cap}"
                else:
                    msg = f"cpu, requested: {cpu_req}, used: {used_cpu}, capacity: {cpu_cap}"
                msg = "Node didn't have enough resource: " + msg
                self._set_condition(pod, POD_RESIZE_PENDING, REASON_DEFERRED, msg)
                self._recharge(key)
                self._stall(key, pod, "ResizeDeferred", REASON_DEFERRED, msg)
                return
            for s, (req, _) in zip(statuses, desired, strict=True):
                assert s is not None
                s.allocated = dict(req)
            self._clear_condition(pod, POD_RESIZE_PENDING)
        downsize = self._is_downsize_of_actual(pod)
        if self.actuation_delay > 0:
            # Allocated, not yet actuated: PodResizeInProgress with no reason meanwhile.
            if meta.actuate_at is None:
                meta.actuate_at = self.now + self.actuation_delay
                self._set_condition(pod, POD_RESIZE_IN_PROGRESS, "", "")
                self._recharge(key)
                self.at(meta.actuate_at, self._kubelet_resize_if_pending, key, pod.uid)
                return
            if self.now < meta.actuate_at:
                return
        # Actuation: all or nothing. A memory limit below live usage cannot be set.
        u = self.usage
        for i, (s, (_, lim)) in enumerate(zip(statuses, desired, strict=True)):
            assert s is not None
            new_lim = lim.get(MEMORY)
            old_lim = s.resources.limits.get(MEMORY)
            slot = meta.slots[i] if i < len(meta.slots) else None
            if (
                slot is not None
                and new_lim is not None
                and (old_lim is None or new_lim < old_lim)
                and u.mem[slot] > new_lim
            ):
                msg = (
                    f"container {s.name}: attempting to set memory limit ({new_lim}) "
                    f"below current usage ({int(u.mem[slot])})"
                )
                self._set_condition(pod, POD_RESIZE_IN_PROGRESS, REASON_ERROR, msg)
                self._recharge(key)
                self._stall(key, pod, "ResizeError", REASON_ERROR, msg)
                return
        changes: dict[str, Any] = {}
        self._account(self.now)
        for i, (c, s, (req, lim)) in enumerate(zip(pod.containers, statuses, desired, strict=True)):
            assert s is not None
            changed = {
                r
                for r in (CPU, MEMORY)
                if s.resources.requests.get(r) != req.get(r)
                or s.resources.limits.get(r) != lim.get(r)
            }
            if not changed:
                continue
            changes[c.name] = {
                "from": {
                    "requests": dict(s.resources.requests),
                    "limits": dict(s.resources.limits),
                },
                "to": {"requests": dict(req), "limits": dict(lim)},
            }
            s.resources = ResourceRequirements(dict(req), dict(lim))
            if i < len(meta.slots):
                self._set_slot_resources(meta.slots[i], s.resources)
            if any(c.resize_policy.get(r) == RESTART_CONTAINER for r in changed):
                s.restart_count += 1
                if i < len(meta.slots):
                    u.started[meta.slots[i]] = self.now
                self._count(meta.top, "resize_restarts")
                self.log(
                    "ContainerRestarted",
                    f"Pod/{key}",
                    "ResizeRestart",
                    f"container {c.name} restarted to apply its resize "
                    "(resizePolicy RestartContainer)",
                    container=c.name,
                    resources=sorted(changed),
                )
        self._clear_condition(pod, POD_RESIZE_IN_PROGRESS)
        self._clear_condition(pod, POD_RESIZE_PENDING)
        self._resizing.discard(key)
        self._recharge(key)
        self._count(meta.top, "resizes")
        self.log(
            "ResizeApplied",
            f"Pod/{key}",
            "Resized",
            "in-place resize applied",
            generation=pod.generation,
            containers=changes,
            waited_seconds=self.now - (meta.resize_requested_at or self.now),
        )
        meta.resize_requested_at = None
        meta.actuate_at = None
        if downsize:
            # Freed capacity: the kubelet retries the node's other pending resizes and the
            # scheduler its pending pods.
            self.at(self.now, self._kubelet_sync, node.name)
            self._queue_schedule()

    # ------------------------------------------------------------------ HPA
    def _hpa_sync(self, hkey: str) -> None:
        h = self.hpas.get(hkey)
        if h is None:
            return
        s = h.spec
        self.at(self.now + self.scenario.hpa_sync_period, self._hpa_sync, hkey)
        wkey = f"{s.target_kind}/{s.namespace}/{s.target_name}"
        st = self.wl_state.get(wkey)
        wl = self.workloads.get(wkey)
        if st is None or wl is None:
            return
        if self._hpa_metrics is None:
            return
        # Ready pods as of the metrics' sample (pods Ready since have no metrics yet).
        ready_pods = int(self._hpa_metrics["ready"][0, st.index])
        if ready_pods <= 0:
            return
        current = wl.replicas
        proposal = 0
        reasons: list[str] = []
        for resource, target in s.metrics:
            use, req = self._hpa_metrics[resource][:, st.index]
            if req <= 0:
                continue
            util = 100.0 * use / req
            ratio = util / target
            want = current if abs(ratio - 1.0) <= 0.1 else math.ceil(ratio * ready_pods)
            if want > proposal:
                proposal = want
                side = "above" if ratio > 1 else "below"
                reasons = [f"{resource} resource utilization (percentage of request) {side} target"]
        if proposal == 0:
            return
        # Scale-down stabilisation (5 minutes) and the default scale-up limit.
        h.recommendations = [(t, r) for t, r in h.recommendations if t > self.now - 300.0]
        h.recommendations.append((self.now, proposal))
        desired = proposal
        if desired < current:
            desired = min(current, max(r for _, r in h.recommendations))
        desired = min(desired, max(2 * current, current + 4))
        desired = max(s.min_replicas, min(s.max_replicas, desired))
        h.desired = desired
        if desired != current:
            self._set_replicas(
                wkey, desired, source=f"HorizontalPodAutoscaler/{s.namespace}/{s.name}"
            )
            self.log(
                "HPAScaled",
                f"HorizontalPodAutoscaler/{s.namespace}/{s.name}",
                "SuccessfulRescale",
                f"New size: {desired}; reason: {reasons[0] if reasons else ''}",
                previous=current,
                replicas=self.workloads[wkey].replicas,
            )

    def _set_replicas(self, wkey: str, replicas: int, *, source: str) -> int:
        wl = self.workloads[wkey]
        if self.scale_hook is not None:
            replicas = self.scale_hook(wl, replicas, self.now)
        if replicas != wl.replicas:
            self._ww(wkey).replicas = replicas
            self.log(
                "Scaled",
                wkey,
                "ScalingReplicaSet",
                f"scaled to {replicas}",
                replicas=replicas,
                source=source,
            )
            self._queue_reconcile(wkey)
        return replicas

    # ------------------------------------------------------------------ PDBs
    def _pdb_status(self, pdb: _PDB) -> PodDisruptionBudget:
        s = pdb.spec
        matched = [
            p
            for p in (self.pods[k] for k in sorted(pdb.members))
            if p.phase not in ("Succeeded", "Failed")
        ]
        healthy = sum(1 for p in matched if p.deletion_time is None and self.meta[p.key].ready)
        owners: dict[str, int] = {}
        bare = 0
        for p in matched:
            top = self.meta[p.key].top
            if top is None:
                bare += 1
            else:
                owners[top] = self.workloads[top].replicas
        expected = sum(owners.values()) + bare

        def amount(v: int | str) -> int:
            if isinstance(v, str):
                return math.ceil(int(v.rstrip("%")) * expected / 100)
            return v

        if s.min_available is not None:
            desired = amount(s.min_available)
        else:
            desired = max(0, expected - amount(s.max_unavailable or 0))
        return PodDisruptionBudget(
            s.namespace,
            s.name,
            dict(s.selector),
            s.min_available,
            s.max_unavailable,
            disruptions_allowed=max(0, healthy - desired),
            current_healthy=healthy,
            desired_healthy=desired,
            expected_pods=expected,
        )

    def _index_pdbs(self, pod: Pod) -> None:
        for pdb in self.pdbs.values():
            s = pdb.spec
            if s.namespace == pod.namespace and labels_match(s.selector, pod.labels):
                pdb.members.add(pod.key)
            else:
                pdb.members.discard(pod.key)

    def update_pdb(
        self,
        namespace: str,
        name: str,
        *,
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        processing_delay: float = 1.0,
    ) -> None:
        """Change a PDB's spec; until the disruption controller has processed it (after
        `processing_delay`), evictions it covers get 429 with retryAfterSeconds 10."""
        pdb = self.pdbs[f"{namespace}/{name}"]
        pdb.spec = PDBSpec(
            pdb.spec.name, namespace, pdb.spec.selector, min_available, max_unavailable
        )
        pdb.generation += 1
        gen = pdb.generation

        def processed() -> None:
            pdb.observed_generation = max(pdb.observed_generation, gen)

        self.at(self.now + processing_delay, processed)

    # ------------------------------------------------------------------ ClusterPort.apply
    def apply(self, action: Action) -> ActionResult:
        """Apply one action as the API server would and answer like it."""
        if isinstance(action, ResizePod):
            return self._apply_resize(action)
        if isinstance(action, EvictPod):
            return self._apply_evict(action)
        if isinstance(action, PatchPodMetadata):
            return self._apply_metadata(action)
        if isinstance(action, PatchScale):
            return self._apply_scale(action)
        if isinstance(action, RestartWorkload):
            return self._apply_restart(action)
        if isinstance(action, WriteTargetStatus):
            return self._apply_status(action)
        if isinstance(action, EmitEvent):
            return self._apply_event(action)
        return ActionResult(False, 400, "BadRequest", f"unsupported action {type(action).__name__}")

    @staticmethod
    def _not_found(resource: str, name: str) -> ActionResult:
        return ActionResult(False, 404, "NotFound", f'{resource} "{name}" not found')

    def _apply_resize(self, a: ResizePod) -> ActionResult:
        key = f"{a.namespace}/{a.name}"
        pod = self.pods.get(key)
        if pod is None:
            return self._not_found("pods", a.name)
        refused = check_resize(pod, a)
        if refused is not None:
            self.log(
                "ResizeRefused",
                f"Pod/{key}",
                refused.reason,
                refused.message,
                code=refused.code,
                target=a.target,
            )
            return refused
        containers, inits = apply_resize_patch(pod, a)
        if self.server_version >= (1, 36) and pod.node_name in self.nodes:
            refused = self._node_capacity_refusal(pod, containers, inits)
            if refused is not None:
                self.log("ResizeRefused", f"Pod/{key}", refused.reason, refused.message, code=403)
                return refused
        if [c.resources for c in containers] == [c.resources for c in pod.containers] and [
            c.resources for c in inits
        ] == [c.resources for c in pod.init_containers]:
            return OK
        pod = self._w(key)
        pod.containers = containers
        pod.init_containers = inits
        pod.generation += 1
        meta = self.meta[key]
        if meta.resize_requested_at is None:
            meta.resize_requested_at = self.now
        self.log(
            "ResizeRequested",
            f"Pod/{key}",
            a.reason or "Resize",
            "pods/resize patched",
            generation=pod.generation,
            target=a.target,
            direction=a.direction,
            containers={
                c.name: {"requests": dict(c.requests), "limits": dict(c.limits)}
                for c in a.containers
            },
        )
        self._recharge(key)  # a pending upsize is charged at its larger request at once
        if pod.node_name is not None and pod.phase == "Running":
            self._resizing.add(key)
            self.at(self.now + self.kubelet_delay, self._kubelet_resize_if_pending, key, pod.uid)
        return OK

    def _node_capacity_refusal(
        self, pod: Pod, containers: list, inits: list
    ) -> ActionResult | None:
        """1.36+: a resize larger than the node's allocatable is refused at admission
        (403, cause NodeCapacity) instead of becoming Infeasible."""
        probe = clone_pod(pod)
        probe.containers, probe.init_containers = containers, inits
        want = spec_requests(probe)
        node = self.nodes[pod.node_name or ""]
        for r in (MEMORY, CPU):
            cap = node.allocatable.get(r, 0)
            if want.get(r, 0) > cap:
                detail = (
                    f"Node didn't have enough capacity: {r}, requested: {want[r]}, capacity: {cap}"
                )
                return ActionResult(
                    False,
                    403,
                    "Forbidden",
                    f'pods "{pod.name}" is forbidden: {detail}',
                    ({"type": "NodeCapacity", "message": detail},),
                )
        return None

    def _kubelet_resize_if_pending(self, key: str, uid: str) -> None:
        pod = self.pods.get(key)
        if pod is not None and pod.uid == uid and key in self._resizing:
            self._kubelet_resize(key)

    def _refuse_eviction(self, key: str, target: str, res: ActionResult) -> ActionResult:
        """Log a refused eviction (429 / 500) with its code and hand the result back."""
        self.log(
            "EvictionRefused", f"Pod/{key}", res.reason, res.message, code=res.code, target=target
        )
        return res

    def _apply_evict(self, a: EvictPod) -> ActionResult:
        key = f"{a.namespace}/{a.name}"
        pod = self.pods.get(key)
        if pod is None:
            return self._not_found("pods", a.name)
        meta = self.meta[key]
        grace = float(a.grace_period_seconds) if a.grace_period_seconds is not None else meta.grace
        skip_pdb = (
            pod.node_name is None
            or pod.phase in ("Pending", "Succeeded", "Failed")
            or pod.deletion_time is not None
        )
        if not skip_pdb:
            pdbs = [
                p
                for p in self.pdbs.values()
                if p.spec.namespace == pod.namespace and labels_match(p.spec.selector, pod.labels)
            ]
            if len(pdbs) > 1:
                res = ActionResult(False, 500, "InternalError", MANY_PDBS_MESSAGE)
                return self._refuse_eviction(key, a.target, res)
            if pdbs:
                pdb = pdbs[0]
                if pdb.observed_generation < pdb.generation:
                    res = _budget_refusal(
                        f"The disruption budget {pdb.spec.name} "
                        "is still being processed by the server.",
                        retry_after_seconds=10,
                    )
                    return self._refuse_eviction(key, a.target, res)
                status = self._pdb_status(pdb)
                healthy_pod = meta.ready
                # IfHealthyBudget: an unhealthy pod may go only if the budget is met.
                allowed = (
                    status.disruptions_allowed > 0
                    if healthy_pod
                    else status.current_healthy >= status.desired_healthy
                )
                if not allowed:
                    res = _budget_refusal(
                        f"The disruption budget {pdb.spec.name} needs "
                        f"{status.desired_healthy} healthy pods and has "
                        f"{status.current_healthy} currently"
                    )
                    return self._refuse_eviction(key, a.target, res)
        self._count(meta.top, "evictions")
        self.log(
            "Evicted",
            f"Pod/{key}",
            a.reason or "Evicted",
            "evicted through the Eviction API",
            target=a.target,
        )
        self._delete_pod(key, grace, "Evicted")
        return ActionResult(True, 201, "Created")

    def _apply_metadata(self, a: PatchPodMetadata) -> ActionResult:
        key = f"{a.namespace}/{a.name}"
        if key not in self.pods:
            return self._not_found("pods", a.name)
        pod = self._w(key)
        for src, dst in ((a.annotations, pod.annotations), (a.labels, pod.labels)):
            for k, v in src.items():
                if v is None:
                    dst.pop(k, None)
                else:
                    dst[k] = v
        if a.labels:
            self._index_pdbs(pod)
        self.log(
            "PodMetadataPatched",
            f"Pod/{key}",
            "Patched",
            "",
            annotations=dict(a.annotations),
            labels=dict(a.labels),
        )
        return OK

    def _apply_scale(self, a: PatchScale) -> ActionResult:
        wkey = f"{a.kind}/{a.namespace}/{a.name}"
        if wkey not in self.wl_state or a.kind not in ("Deployment", "StatefulSet"):
            return self._not_found(f"{a.kind.lower()}s.apps", a.name)
        if a.replicas < 0:
            return ActionResult(
                False,
                422,
                "Invalid",
                f'{a.kind} "{a.name}" is invalid: spec.replicas: Invalid value: {a.replicas}: '
                "must be greater than or equal to 0",
            )
        self._set_replicas(wkey, a.replicas, source=a.target or "PatchScale")
        return OK

    def _apply_restart(self, a: RestartWorkload) -> ActionResult:
        wkey = f"{a.kind}/{a.namespace}/{a.name}"
        st = self.wl_state.get(wkey)
        if st is None or a.kind not in ("Deployment", "StatefulSet", "DaemonSet"):
            return self._not_found(f"{a.kind.lower()}s.apps", a.name)
        wl = self._ww(wkey)
        if wl.paused:
            return ActionResult(
                False,
                400,
                "BadRequest",
                f'deployments.apps "{a.name}" can\'t restart paused deployment '
                "(run rollout resume first)",
            )
        wl.template.annotations[RESTARTED_AT] = _rfc3339(a.restarted_at)
        st.revision += 1
        st.rollout = True
        if a.kind == "Deployment":
            self._new_replicaset(wkey)
        self.log(
            "RolloutRestart",
            wkey,
            a.reason or "Restarted",
            f"rollout restart at {_rfc3339(a.restarted_at)}",
            target=a.target,
            revision=st.revision,
        )
        self._queue_reconcile(wkey)
        return OK

    def _apply_status(self, a: WriteTargetStatus) -> ActionResult:
        key = (a.kind, a.namespace, a.name)
        current = self.target_status.setdefault(key, {})
        _merge(current, a.status)
        return OK

    def _apply_event(self, a: EmitEvent) -> ActionResult:
        obj = f"{a.kind}/{a.namespace}/{a.name}"
        if a.reason in ("CircuitBreakerOpen", "CircuitBreakerOpened"):
            wl = self._workload_for_object(a.kind, a.namespace, a.name)
            self._count(wl, "breaker_openings")
        self.log("Event", obj, a.reason, a.message, type=a.type)
        return OK

    def _workload_for_object(self, kind: str, namespace: str, name: str) -> str | None:
        key = f"{kind}/{namespace}/{name}"
        if key in self.wl_state:
            return key
        if kind == "Pod" and f"{namespace}/{name}" in self.meta:
            return self.meta[f"{namespace}/{name}"].top
        for t in [*self.targets, *self.daemonset_autoscalers]:
            meta = getattr(t, "metadata", None)
            ref = getattr(getattr(t, "spec", None), "scaleTargetRef", None)
            if meta is None or ref is None:
                continue
            if getattr(meta, "name", None) == name and getattr(meta, "namespace", None) in (
                namespace,
                None,
            ):
                key = f"{getattr(ref, 'kind', '')}/{namespace}/{getattr(ref, 'name', '')}"
                if key in self.wl_state:
                    return key
        for k in self.wl_state:  # else: a target named after its workload
            if k.endswith(f"/{namespace}/{name}"):
                return k
        return None

    # ------------------------------------------------------------------ test and tool helpers
    def set_usage(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        cpu: float | None = None,
        memory: float | None = None,
    ) -> None:
        """Pin a running container's usage (cpu in cores, memory in bytes) from now on."""
        meta = self.meta[f"{namespace}/{pod}"]
        p = self.pods[f"{namespace}/{pod}"]
        i = [c.name for c in p.containers].index(container)
        slot = meta.slots[i]
        if cpu is not None:
            self.usage.set_generator(slot, "cpu", GeneratorSpec("constant", base=cpu))
            self.usage.jitter[slot] = 1.0
            self.usage.share_ref[slot] = 0.0
            self.usage.cpu_demand[slot] = cpu
            self.usage.cpu_used[slot] = min(cpu, self.usage.cpu_lim[slot])
        if memory is not None:
            self.usage.set_generator(slot, "memory", GeneratorSpec("constant", base=memory))
            self.usage.jitter[slot] = 1.0
            self.usage.mem[slot] = memory

    def container_usage(self, namespace: str, pod: str, container: str) -> tuple[float, float]:
        """Last (cpu cores used, memory bytes) of a running container."""
        meta = self.meta[f"{namespace}/{pod}"]
        p = self.pods[f"{namespace}/{pod}"]
        slot = meta.slots[[c.name for c in p.containers].index(container)]
        return float(self.usage.cpu_used[slot]), float(self.usage.mem[slot])

    def node_free(self, node: str) -> tuple[int, int]:
        """Allocatable minus the scheduler's charge of every pod on `node` (cpu m, bytes)."""
        return self._free(node)

    # ------------------------------------------------------------------ summary
    def summary(self, *, policy: str = "static") -> dict[str, Any]:
        """The run's summary (the JSON of `foresize simulate --json`)."""
        self._account(self.now)
        hours = self.now / 3600.0
        rows = []
        totals: dict[str, float] = {}
        for key, st in self.wl_state.items():
            i = st.index
            acc = self._acc
            cnt = self.counters.get(key, {})
            row: dict[str, Any] = {
                "name": key,
                "kind": st.spec.kind,
                "cpu_requested_core_hours": acc["cpu_req"][i] / 3600.0,
                "cpu_used_core_hours": acc["cpu_used"][i] / 3600.0,
                "cpu_demand_core_hours": acc["cpu_demand"][i] / 3600.0,
                "memory_requested_gib_hours": acc["mem_req"][i] / 3600.0 / 2**30,
                "memory_used_gib_hours": acc["mem_used"][i] / 3600.0 / 2**30,
                "oom_kills": cnt.get("oom_kills", 0),
                "throttled_seconds": float(acc["throttled"][i]),
                "evictions": cnt.get("evictions", 0),
                "resizes": cnt.get("resizes", 0),
                "pending_pod_hours": acc["pending"][i] / 3600.0,
                "stalls": cnt.get("stalls", 0),
                "breaker_openings": cnt.get("breaker_openings", 0),
                "preemptions": cnt.get("preemptions", 0),
                "resize_restarts": cnt.get("resize_restarts", 0),
                "node_pressure_evictions": cnt.get("node_pressure_evictions", 0),
                "replicas_final": self.workloads[key].replicas,
            }
            row["cpu_slack_core_hours"] = (
                row["cpu_requested_core_hours"] - row["cpu_used_core_hours"]
            )
            row["memory_slack_gib_hours"] = (
                row["memory_requested_gib_hours"] - row["memory_used_gib_hours"]
            )
            for k, v in row.items():
                if k not in ("name", "kind", "replicas_final") and isinstance(v, int | float):
                    totals[k] = totals.get(k, 0) + v
            rows.append(row)
        for k, v in list(totals.items()):
            totals[k] = round(v, 6) if isinstance(v, float) else v
        for row in rows:
            for k, v in list(row.items()):
                if isinstance(v, float):
                    row[k] = round(float(v), 6)
        return {
            "scenario": self.scenario.name,
            "policy": policy,
            "duration_hours": round(hours, 6),
            "seed": self.seed,
            "step_seconds": self.step,
            "nodes": len(self.nodes),
            "pods_final": sum(1 for p in self.pods.values() if p.phase in ("Pending", "Running")),
            "totals": totals,
            "workloads": rows,
            "events": self.events.kinds(),
            "event_log_sha256": self.events.fingerprint(),
        }


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386) of `patch` into `into`.

    A null removes its key at any depth, also inside an object the patch newly adds (the
    RFC merges an object value into `{}` when the target has no object there), and the
    stored values are copies, never the caller's dicts. Arrays are replaced whole."""
    for k, v in patch.items():
        if v is None:
            into.pop(k, None)
        elif isinstance(v, dict):
            sub = into.get(k)
            if not isinstance(sub, dict):
                sub = into[k] = {}
            _merge(sub, v)
        else:
            into[k] = copy.deepcopy(v)
