"""SimCluster: the facade of the simulated cluster (event loop, object store, snapshot,
`ClusterPort.apply`); each Kubernetes part lives in its own collaborator module."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.actions import Action, ActionResult
from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    Node,
    Pod,
    VerticalClaim,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.shells.sim.cluster.api import ApiServer
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.controllers import Controllers
from foresize.shells.sim.cluster.disruption import Disruption, PDBState
from foresize.shells.sim.cluster.hpa import HPAController, HPAState
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.kubelet import Kubelet
from foresize.shells.sim.cluster.lifecycle import PodLifecycle
from foresize.shells.sim.cluster.metering import Metering, UsageObserver
from foresize.shells.sim.cluster.nodes import NodeAutoscaler, make_node_autoscaler
from foresize.shells.sim.cluster.scheduler import Scheduler
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.cluster.summary import summarize
from foresize.shells.sim.events import EventLog, SimEvent
from foresize.shells.sim.objects import PodMeta, WorkloadState, resizable_containers
from foresize.shells.sim.scenario import NodeSpec, Scenario
from foresize.shells.sim.usage import GeneratorSpec, UsageState

AdmissionHook = Callable[[Pod, Workload | None, float], Pod]
ScaleHook = Callable[[Workload, int, float], int]
Periodic = Callable[["SimCluster", float], None]
_T = TypeVar("_T")

HARD_EVICTION_MEMORY = 100 * MIB  # kubelet default memory.available<100Mi


class _Part(Generic[_T]):
    """A facade attribute that lives in one of the cluster's parts (read and written
    there): `pods = _Part[dict[str, Pod]]("store")` is `self.store.pods`."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Part[_T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> _T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> _T | _Part[_T]:
        if obj is None:
            return self
        value: _T = getattr(getattr(obj, self.part), self.name)
        return value

    def __set__(self, obj: object, value: _T) -> None:
        setattr(getattr(obj, self.part), self.name, value)


@dataclass(slots=True)
class NodeRecord:
    """A node's bill: from its launch (a cloud bills from then, start-up included) to its
    deletion."""

    name: str
    node_type: str
    price_per_hour: float
    launched: float
    removed: float | None = None

    def hours(self, now: float) -> float:
        return max(0.0, (self.removed if self.removed is not None else now) - self.launched) / 3600


class SimCluster:
    """A simulated Kubernetes cluster at simulated time (implements `ClusterPort`)."""

    # The state the parts share, where it lives (the facade only forwards).
    now = _Part[float]("clock")
    events = _Part[EventLog]("journal")
    counters = _Part[dict[str, dict[str, int]]]("journal")
    pods = _Part[dict[str, Pod]]("store")
    meta = _Part[dict[str, PodMeta]]("store")
    workloads = _Part[dict[str, Workload]]("store")
    wl_state = _Part[dict[str, WorkloadState]]("store")
    target_status = _Part[dict[tuple[str, str, str], dict[str, Any]]]("store")
    targets = _Part[list[Any]]("store")
    daemonset_autoscalers = _Part[list[Any]]("store")
    templates = _Part[list[Any]]("store")
    vertical_claims = _Part[list[VerticalClaim]]("store")
    paused = _Part[bool]("store")
    server_version = _Part[tuple[int, int]]("store")
    epoch = _Part[int]("store")

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
        self.clock = Clock()
        self.kubelet_delay = kubelet_delay
        self.kubelet_sync_period = kubelet_sync_period
        # Seconds between allocation and actuation (PodResizeInProgress with no reason).
        self.actuation_delay = actuation_delay
        self.failed_pod_ttl = failed_pod_ttl
        self.rng = np.random.default_rng(self.seed)
        self.prng = random.Random(self.seed)
        # Hooks and extension points.
        self.admission_hook: AdmissionHook | None = admission_hook
        self.scale_hook: ScaleHook | None = None
        self.journal = Journal(self.clock)
        # The API server's objects (shared by every collaborator).
        self.store = ObjectStore(self.prng, list(scenario.vertical_autoscalers))
        self.nodes: dict[str, Node] = {}
        # Node index shared by the scheduler and the usage arrays.
        self.node_names: list[str] = []
        self.node_index: dict[str, int] = {}
        self.node_mem_threshold = np.zeros(0)
        self.node_cpu_cores = np.zeros(0)
        self._started = False
        # Collaborators, each holding its own state.
        self.metering = Metering(self)
        self.scheduler = Scheduler(self)
        self.kubelet = Kubelet(self)
        self.lifecycle = PodLifecycle(self)
        self.controllers = Controllers(self)
        self.hpa = HPAController(self)
        self.disruption = Disruption(self)
        self.api = ApiServer(self)
        # Every node the run had, with its price (node-hours and cost in the summary).
        self.node_records: dict[str, NodeRecord] = {}
        self.node_autoscaler: NodeAutoscaler | None = (
            make_node_autoscaler(self, scenario.node_autoscaler)
            if scenario.node_autoscaler is not None
            else None
        )
        for spec in scenario.nodes:
            if spec.add_at <= 0:
                self.add_node_spec(spec, log=False)
            else:
                self.at(spec.add_at, self.add_node_spec, spec)
        for wspec in scenario.workloads:
            self.controllers.add_workload(wspec)
        for p in scenario.pdbs:
            self.disruption.pdbs[f"{p.namespace}/{p.name}"] = PDBState(p)
        for h in scenario.hpas:
            self.hpa.hpas[f"{h.namespace}/{h.name}"] = HPAState(h)

    @property
    def hpas(self) -> dict[str, HPAState]:
        """The HPAs by `namespace/name` (held by the HPA controller)."""
        return self.hpa.hpas

    @property
    def pdbs(self) -> dict[str, PDBState]:
        """The PDBs by `namespace/name` (held by the disruption controller)."""
        return self.disruption.pdbs

    @property
    def usage(self) -> UsageState:
        """Per-container usage arrays (`foresize.shells.sim.usage.UsageState`)."""
        return self.metering.usage

    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at simulated time `t` (not before now)."""
        self.clock.at(t, fn, *args)

    def every(self, interval_seconds: float, fn: Periodic, *, start: float | None = None) -> None:
        """Call `fn(sim, now)` every `interval_seconds` of simulated time."""
        self.clock.every(interval_seconds, lambda: fn(self, self.clock.now), start=start)

    def on_usage(self, fn: UsageObserver) -> None:
        """Observe every usage step: fn(now, keys, cpu_cores, memory_bytes) over running
        containers (`keys` is an object array of `ContainerKey`; cpu and memory are what
        cgroups report: capped at the limit, a working set above it is an OOM kill)."""
        self.metering.observers.append(fn)

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for key in list(self.wl_state):
            self.controllers.queue_reconcile(key)
        for key in self.hpa.hpas:
            self.at(self.scenario.hpa_sync_period, self.hpa.sync, key)
        self.at(self.now, self.metering.usage_step)
        self.at(self.now + self.kubelet_sync_period, self.kubelet.periodic)
        if self.node_autoscaler is not None:
            self.node_autoscaler.start()

    def run_until(self, t: float) -> None:
        """Advance simulated time to `t`, processing every event due until then."""
        self._start()
        self.clock.run_until(t)
        self.metering.account(self.now)

    def run(self, duration: float) -> None:
        self.run_until(self.now + duration)

    def log(
        self, kind: str, obj: str, reason: str = "", message: str = "", **details: Any
    ) -> SimEvent:
        return self.journal.log(kind, obj, reason, message, **details)

    def count(self, wl_key: str | None, name: str, n: int = 1) -> None:
        self.journal.count(wl_key, name, n)

    def record_node_launch(self, name: str, node_type: str, price_per_hour: float) -> None:
        """Start a node's bill (a node autoscaler launching it)."""
        self.node_records[name] = NodeRecord(name, node_type, price_per_hour, self.now)

    def add_node_spec(self, spec: NodeSpec, log: bool = True) -> None:
        node = Node(
            spec.name,
            {CPU: spec.cpu, MEMORY: spec.memory},
            {CPU: spec.capacity_cpu, MEMORY: spec.capacity_memory},
            dict(spec.labels),
        )
        if spec.name not in self.node_records:
            self.record_node_launch(spec.name, spec.node_type, spec.price_per_hour)
        self.nodes[spec.name] = node
        self.scheduler.node_charge[spec.name] = [0, 0]
        self.scheduler.node_pods[spec.name] = set()
        self._reindex_nodes()
        if log:
            self.log("NodeAdded", f"Node/{spec.name}", "NodeReady", "node joined the cluster")
        for key, st in self.wl_state.items():
            if st.spec.kind == "DaemonSet":
                self.controllers.queue_reconcile(key)
        self.scheduler.queue()

    def remove_node(self, name: str, reason: str) -> None:
        """Delete a node: the pods still bound to it (DaemonSet pods, by the time a drain
        ends) go with it, its bill stops."""
        for key in sorted(self.scheduler.node_pods.get(name, ())):
            pod = self.pods.get(key)
            if pod is not None:
                self.lifecycle.remove(key, pod.uid)
        del self.nodes[name]
        del self.scheduler.node_charge[name]
        del self.scheduler.node_pods[name]
        self.scheduler.node_changed_at.pop(name, None)
        self.scheduler.charge_version += 1
        self._reindex_nodes()
        rec = self.node_records.get(name)
        if rec is not None:
            rec.removed = self.now
        self.log("NodeDeleted", f"Node/{name}", reason, "node removed from the cluster")
        for key, st in self.wl_state.items():
            if st.spec.kind == "DaemonSet":
                self.controllers.queue_reconcile(key)
        self.scheduler.queue()

    def writable_node(self, name: str) -> Node:
        """The node `name`, safe to mutate (snapshots may hold the old object)."""
        node = dataclasses.replace(self.nodes[name])
        self.nodes[name] = node
        return node

    def _reindex_nodes(self) -> None:
        """Node positions in the usage arrays, after a node joined or left: running
        containers keep pointing at their own node."""
        old = self.node_names
        self.node_names = list(self.nodes)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        u = self.metering.usage
        if old and u.size and old != self.node_names[: len(old)]:
            remap = np.array([self.node_index.get(n, 0) for n in old], dtype=np.int64)
            u.node[: u.size] = remap[np.clip(u.node[: u.size], 0, len(old) - 1)]
        self.node_mem_threshold = np.array(
            [
                max(
                    0,
                    self.nodes[n].capacity.get(MEMORY, self.nodes[n].allocatable[MEMORY])
                    - HARD_EVICTION_MEMORY,
                )
                for n in self.node_names
            ],
            dtype=np.float64,
        )
        self.node_cpu_cores = np.array(
            [
                self.nodes[n].capacity.get(CPU, self.nodes[n].allocatable[CPU]) / 1000.0
                for n in self.node_names
            ],
            dtype=np.float64,
        )

    def add_node(
        self, name: str, cpu_millis: int, memory_bytes: int, labels: dict[str, str] | None = None
    ) -> None:
        """Add a node now."""
        self.add_node_spec(
            NodeSpec(name, cpu_millis, memory_bytes, cpu_millis, memory_bytes, dict(labels or {}))
        )

    def writable_pod(self, key: str) -> Pod:
        """The pod `key`, safe to mutate."""
        return self.store.writable_pod(key)

    def writable_workload(self, key: str) -> Workload:
        """The workload `key`, safe to mutate."""
        return self.store.writable_workload(key)

    def snapshot(self) -> ClusterSnapshot:
        """A point-in-time view; objects in it are never mutated afterwards."""
        self.store.epoch += 1
        return ClusterSnapshot(
            now=self.now,
            nodes=dict(self.nodes),
            pods=list(self.pods.values()),
            workloads=dict(self.workloads),
            pdbs=[self.disruption.status(p) for p in self.disruption.pdbs.values()],
            hpas=[self.hpa.hpa_object(h) for h in self.hpa.hpas.values()],
            vertical_claims=list(self.vertical_claims),
            targets=list(self.targets),
            daemonset_autoscalers=list(self.daemonset_autoscalers),
            templates=list(self.templates),
            server_version=self.server_version,
            paused=self.paused,
        )

    def hpa_objects(self) -> list[HorizontalPodAutoscaler]:
        """The HPAs as the core sees them (what `snapshot().hpas` holds)."""
        return [self.hpa.hpa_object(h) for h in self.hpa.hpas.values()]

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get(f"{namespace}/{name}")

    def pods_of(self, kind: str, namespace: str, name: str) -> list[Pod]:
        return self.store.pods_of(kind, namespace, name)

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
        i = [c.name for c in resizable_containers(p)].index(container)
        slot = meta.slots[i]
        if cpu is not None:
            self.metering.usage.set_generator(slot, "cpu", GeneratorSpec("constant", base=cpu))
            self.metering.usage.jitter[slot] = 1.0
            self.metering.usage.share_ref[slot] = 0.0
            self.metering.usage.cpu_demand[slot] = cpu
            self.metering.usage.cpu_used[slot] = min(cpu, self.metering.usage.cpu_lim[slot])
        if memory is not None:
            self.metering.usage.set_generator(
                slot, "memory", GeneratorSpec("constant", base=memory)
            )
            self.metering.usage.jitter[slot] = 1.0
            self.metering.usage.mem[slot] = memory

    def container_usage(self, namespace: str, pod: str, container: str) -> tuple[float, float]:
        """Last (cpu cores used, memory bytes) of a running container."""
        meta = self.meta[f"{namespace}/{pod}"]
        p = self.pods[f"{namespace}/{pod}"]
        slot = meta.slots[[c.name for c in resizable_containers(p)].index(container)]
        return float(self.metering.usage.cpu_used[slot]), float(self.metering.usage.mem[slot])

    def node_free(self, node: str) -> tuple[int, int]:
        """Allocatable minus the scheduler's charge of every pod on `node` (cpu m, bytes)."""
        return self.scheduler.free(node)

    def apply(self, action: Action) -> ActionResult:
        """Apply one action as the API server would and answer like it."""
        return self.api.apply(action)

    def create_pod(self, pod: Pod, *, grace: float = 30.0, readiness_delay: float = 0.0) -> Pod:
        """Create a bare pod (no controller) through admission, as `kubectl run` would."""
        return self.lifecycle.create_pod(pod, grace=grace, readiness_delay=readiness_delay)

    def update_pdb(
        self,
        namespace: str,
        name: str,
        *,
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        processing_delay: float = 1.0,
        unhealthy_pod_eviction_policy: str | None = None,
    ) -> None:
        """Change a PDB's spec (see `Disruption.update_pdb`)."""
        self.disruption.update_pdb(
            namespace,
            name,
            min_available=min_available,
            max_unavailable=max_unavailable,
            processing_delay=processing_delay,
            unhealthy_pod_eviction_policy=unhealthy_pod_eviction_policy,
        )

    def workload_for_object(self, kind: str, namespace: str, name: str) -> str | None:
        """The workload key an object (workload, pod or target) counts against."""
        return self.api.workload_for_object(kind, namespace, name)

    def summary(self, *, policy: str = "static") -> dict[str, Any]:
        """The run's summary (the JSON of `foresize simulate --json`)."""
        return summarize(self, policy=policy)
