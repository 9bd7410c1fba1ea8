"""SimCluster: the facade of the simulated cluster (event loop, object store, snapshot,
`ClusterPort.apply`); each Kubernetes part lives in its own collaborator module."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
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
from foresize.shells.sim.cluster.cluster_autoscaler import ClusterAutoscaler
from foresize.shells.sim.cluster.controllers import Controllers
from foresize.shells.sim.cluster.disruption import Disruption, PDBState
from foresize.shells.sim.cluster.hpa import HPAController, HPAState
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.karpenter import Karpenter
from foresize.shells.sim.cluster.kubelet import Kubelet
from foresize.shells.sim.cluster.lifecycle import PodLifecycle
from foresize.shells.sim.cluster.metering import Metering, UsageObserver
from foresize.shells.sim.cluster.nodes import NodeAutoscaler
from foresize.shells.sim.cluster.nodeset import NodeRecord, NodeSet
from foresize.shells.sim.cluster.scheduler import Scheduler
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.cluster.summary import summarize
from foresize.shells.sim.events import EventLog, SimEvent
from foresize.shells.sim.objects import PodMeta, WorkloadState, resizable_containers
from foresize.shells.sim.scenario import NodeSpec, Scenario
from foresize.shells.sim.scenario_spec import KARPENTER
from foresize.shells.sim.usage import GeneratorSpec, UsageState

AdmissionHook = Callable[[Pod, Workload | None, float], Pod]
ScaleHook = Callable[[Workload, int, float], int]
Periodic = Callable[["SimCluster", float], None]
_T = TypeVar("_T")


class _Part(Generic[_T]):
    """A facade attribute that lives in one of the cluster's parts (read and written
    there): `pods = _Part[dict[str, Pod]]("store")` is `self.store.pods`, and
    `kubelet_delay = _Part[float]("kubelet", "delay")` is `self.kubelet.delay`."""

    def __init__(self, part: str, name: str = "") -> None:
        self.part = part
        self.name = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

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
    revert_all = _Part[bool]("store")
    server_version = _Part[tuple[int, int]]("store")
    epoch = _Part[int]("store")
    nodes = _Part[dict[str, Node]]("nodeset")
    node_names = _Part[list[str]]("nodeset")
    node_index = _Part[dict[str, int]]("nodeset")
    node_records = _Part[dict[str, NodeRecord]]("nodeset")
    admission_hook = _Part[AdmissionHook | None]("lifecycle")
    failed_pod_ttl = _Part[float]("lifecycle")
    scale_hook = _Part[ScaleHook | None]("controllers")
    kubelet_delay = _Part[float]("kubelet", "delay")
    kubelet_sync_period = _Part[float]("kubelet", "sync_period")
    actuation_delay = _Part[float]("kubelet")

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
        self.rng = np.random.default_rng(self.seed)
        self.prng = random.Random(self.seed)
        self._started = False
        # The state the parts share: time, what happened, the API objects, the nodes.
        self.clock = clock = Clock()
        self.journal = journal = Journal(clock)
        self.store = store = ObjectStore(self.prng, list(scenario.vertical_autoscalers))
        # The policy hierarchy's objects (`scenario_policies`), as the snapshot shows them.
        self.policies: list[Any] = list(scenario.policies)
        self.namespaces: dict[str, dict[str, str]] = dict(scenario.namespaces)
        self.nodeset = nodeset = NodeSet(clock, store)
        # The parts of Kubernetes, each given the state it works on.
        self.metering = Metering(
            clock, store, nodeset, step=self.step, rng=self.rng, prng=self.prng
        )
        self.scheduler = Scheduler(clock, journal, store, nodeset)
        self.kubelet = Kubelet(
            clock,
            journal,
            store,
            nodeset,
            delay=kubelet_delay,
            sync_period=kubelet_sync_period,
            actuation_delay=actuation_delay,
        )
        self.lifecycle = PodLifecycle(
            clock,
            journal,
            store,
            nodeset,
            admission_hook=admission_hook,
            failed_pod_ttl=failed_pod_ttl,
        )
        self.controllers = Controllers(clock, journal, store, nodeset)
        self.hpa = HPAController(
            clock, journal, store, sync_period=scenario.hpa_sync_period, step=self.step
        )
        self.disruption = Disruption(clock, journal, store)
        self.api = ApiServer(clock, journal, store, nodeset)
        self.node_autoscaler: NodeAutoscaler | None = None
        if scenario.node_autoscaler is not None:
            na = scenario.node_autoscaler
            types = [scenario.node_types[n] for n in na.node_types]
            flavour = Karpenter if na.flavour == KARPENTER else ClusterAutoscaler
            drain_order = random.Random(f"{self.seed}/drain-order")
            self.node_autoscaler = flavour(clock, journal, store, nodeset, na, types, drain_order)
        self._connect()
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

    def _connect(self) -> None:
        """Give each part the peers it calls (the parts call each other, not the facade)."""
        self.metering.scheduler, self.metering.kubelet = self.scheduler, self.kubelet
        self.metering.lifecycle = self.lifecycle
        self.scheduler.lifecycle = self.lifecycle
        self.scheduler.node_autoscaler = self.node_autoscaler
        self.kubelet.metering, self.kubelet.scheduler = self.metering, self.scheduler
        self.kubelet.lifecycle, self.kubelet.controllers = self.lifecycle, self.controllers
        self.lifecycle.scheduler, self.lifecycle.metering = self.scheduler, self.metering
        self.lifecycle.kubelet, self.lifecycle.controllers = self.kubelet, self.controllers
        self.lifecycle.disruption = self.disruption
        self.controllers.lifecycle, self.controllers.metering = self.lifecycle, self.metering
        self.hpa.metering, self.hpa.controllers = self.metering, self.controllers
        self.disruption.lifecycle = self.lifecycle
        self.api.controllers, self.api.kubelet = self.controllers, self.kubelet
        self.api.disruption, self.api.lifecycle = self.disruption, self.lifecycle
        na = self.node_autoscaler
        if na is not None:
            na.scheduler, na.disruption, na.metering = (
                self.scheduler,
                self.disruption,
                self.metering,
            )
            na.join, na.leave = self.add_node_spec, self.remove_node

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

    def on_event(self, kind: str, fn: Callable[[SimEvent], None]) -> None:
        """Call `fn(event)` when an event of `kind` is logged (at once, inside the step that
        logs it: schedule work with `at`), as a shell's watch delivers a status change."""
        self.journal.watchers.setdefault(kind, []).append(fn)

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
        self.nodeset.record_launch(name, node_type, price_per_hour)

    def add_node_spec(self, spec: NodeSpec, log: bool = True) -> None:
        node = Node(
            spec.name,
            {CPU: spec.cpu, MEMORY: spec.memory},
            {CPU: spec.capacity_cpu, MEMORY: spec.capacity_memory},
            dict(spec.labels),
        )
        if spec.name not in self.nodeset.node_records:
            self.nodeset.record_launch(spec.name, spec.node_type, spec.price_per_hour)
        self.nodeset.add(node)
        self._reindex_nodes()
        if log:
            self.log("NodeAdded", f"Node/{spec.name}", "NodeReady", "node joined the cluster")
        self._node_set_changed()

    def remove_node(self, name: str, reason: str) -> None:
        """Delete a node: the pods still bound to it (DaemonSet pods, by the time a drain
        ends) go with it, its bill stops."""
        for key in sorted(self.nodeset.node_pods.get(name, ())):
            pod = self.pods.get(key)
            if pod is not None:
                self.lifecycle.remove(key, pod.uid)
        self.nodeset.remove(name)
        self._reindex_nodes()
        self.log("NodeDeleted", f"Node/{name}", reason, "node removed from the cluster")
        self._node_set_changed()

    def _node_set_changed(self) -> None:
        """A node joined or left: DaemonSets reconcile, the scheduler looks again."""
        for key, st in self.wl_state.items():
            if st.spec.kind == "DaemonSet":
                self.controllers.queue_reconcile(key)
        self.scheduler.queue()

    def writable_node(self, name: str) -> Node:
        """The node `name`, safe to mutate (snapshots may hold the old object)."""
        return self.nodeset.writable(name)

    def _reindex_nodes(self) -> None:
        """Node positions in the usage arrays, after a node joined or left: running
        containers keep pointing at their own node."""
        old = self.nodeset.reindex()
        names, index = self.nodeset.node_names, self.nodeset.node_index
        u = self.metering.usage
        if old and u.size and old != names[: len(old)]:
            remap = np.array([index.get(n, 0) for n in old], dtype=np.int64)
            u.node[: u.size] = remap[np.clip(u.node[: u.size], 0, len(old) - 1)]

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
            policies=list(self.policies),
            namespaces=dict(self.namespaces),
            server_version=self.server_version,
            paused=self.paused or self.revert_all,
            revert_all=self.revert_all,
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
        return self.nodeset.free(node)

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
