"""The nodes of the simulated cluster: the Node objects, their positions in the usage
arrays, the scheduler's per-node charge cache, and every node's bill."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.model import Node
from foresize.core.cluster.qos import pod_charge
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.store import ObjectStore

HARD_EVICTION_MEMORY = 100 * MIB  # kubelet default memory.available<100Mi


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


class NodeSet:
    """Nodes by name, their index in the usage arrays (with each one's memory eviction
    threshold and CPU cores), the charge cache and the bills."""

    def __init__(self, clock: Clock, store: ObjectStore) -> None:
        self.clock = clock
        self.store = store
        self.nodes: dict[str, Node] = {}
        # Positions in the usage arrays, shared by the scheduler and the usage step.
        self.node_names: list[str] = []
        self.node_index: dict[str, int] = {}
        self.node_mem_threshold = np.zeros(0)
        self.node_cpu_cores = np.zeros(0)
        # Scheduler charge per node ([cpu m, memory bytes], `foresize.core.cluster.qos.pod_charge`)
        # and the pods bound to each.
        self.node_charge: dict[str, list[int]] = {}
        self.node_pods: dict[str, set[str]] = {}
        # Bumped on every change of a pod's charge or of the nodes: a node autoscaler
        # re-evaluates consolidation only when it moved. When a node last had a pod
        # change (Karpenter's consolidateAfter counts from it).
        self.charge_version = 0
        self.node_changed_at: dict[str, float] = {}
        # Every node the run had, with its price (node-hours and cost in the summary).
        self.node_records: dict[str, NodeRecord] = {}

    def add(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.node_charge[node.name] = [0, 0]
        self.node_pods[node.name] = set()

    def remove(self, name: str) -> None:
        del self.nodes[name]
        del self.node_charge[name]
        del self.node_pods[name]
        self.node_changed_at.pop(name, None)
        self.charge_version += 1
        rec = self.node_records.get(name)
        if rec is not None:
            rec.removed = self.clock.now

    def record_launch(self, name: str, node_type: str, price_per_hour: float) -> None:
        """Start a node's bill (a node autoscaler launching it)."""
        self.node_records[name] = NodeRecord(name, node_type, price_per_hour, self.clock.now)

    def writable(self, name: str) -> Node:
        """The node `name`, safe to mutate (snapshots may hold the old object)."""
        node = dataclasses.replace(self.nodes[name])
        self.nodes[name] = node
        return node

    def reindex(self) -> list[str]:
        """Node positions after a node joined or left; returns the old order (the usage
        arrays remap their containers' node positions from it)."""
        old = self.node_names
        self.node_names = list(self.nodes)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
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
        return old

    def free(self, node: str) -> tuple[int, int]:
        """Allocatable minus the scheduler's charge of every pod on `node` (cpu m, bytes)."""
        alloc = self.nodes[node].allocatable
        used = self.node_charge[node]
        return alloc.get(CPU, 0) - used[0], alloc.get(MEMORY, 0) - used[1]

    def recharge(self, key: str) -> None:
        """Refresh the cached scheduler charge of pod `key` on its node."""
        meta = self.store.meta[key]
        pod = self.store.pods.get(key)
        self.charge_version += 1
        if meta.charged_node is not None:
            self.node_changed_at[meta.charged_node] = self.clock.now
            used = self.node_charge.get(meta.charged_node)
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
        used = self.node_charge[pod.node_name]
        used[0] += meta.charge[0]
        used[1] += meta.charge[1]
        self.node_changed_at[pod.node_name] = self.clock.now
