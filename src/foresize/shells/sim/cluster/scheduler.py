"""The simulated kube-scheduler: the per-node charge cache, filtering and LeastAllocated
scoring, preemption with reprieve; pods it cannot place are reported to the node
autoscaler (`foresize.shells.sim.cluster.nodes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import (
    PodCondition,
)
from foresize.core.cluster.qos import pod_charge

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.facade import SimCluster


class Scheduler:
    """The kube-scheduler of the simulated cluster and its per-node charge cache."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.clock = sim.clock
        self.journal = sim.journal
        self.store = sim.store
        # Scheduler charge per node ([cpu m, memory bytes], `foresize.core.cluster.qos.pod_charge`).
        self.node_charge: dict[str, list[int]] = {}
        self.node_pods: dict[str, set[str]] = {}
        self.pending: set[str] = set()
        self.queued = False
        # Bumped on every change of a pod's charge or of the nodes: a node autoscaler
        # re-evaluates consolidation only when it moved. When a node last had a pod
        # change (Karpenter's consolidateAfter counts from it).
        self.charge_version = 0
        self.node_changed_at: dict[str, float] = {}

    def free(self, node: str) -> tuple[int, int]:
        alloc = self.sim.nodes[node].allocatable
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

    def queue(self) -> None:
        if not self.queued:
            self.queued = True
            self.clock.at(self.clock.now, self.schedule)

    def fits(self, charge: tuple[int, int], free: tuple[int, int]) -> bool:
        return charge[0] <= free[0] and charge[1] <= free[1]

    def candidate_nodes(self, key: str) -> list[str]:
        pinned = self.store.meta[key].pinned_node
        if pinned is not None:
            node = self.sim.nodes.get(pinned)
            return [pinned] if node is not None and node.ready else []
        return [n for n, node in self.sim.nodes.items() if node.ready and not node.unschedulable]

    def schedule(self) -> None:
        self.queued = False
        if not self.pending:
            return
        order = sorted(
            self.pending,
            key=lambda k: (-self.store.pods[k].priority, self.store.pods[k].creation_time, k),
        )
        # Capacity reserved for pods nominated after preemption.
        reserved: dict[str, list[int]] = {}
        for k in order:
            nom = self.store.meta[k].nominated_node
            if nom is not None:
                ch = pod_charge(self.store.pods[k])
                r = reserved.setdefault(nom, [0, 0])
                r[0] += ch.get(CPU, 0)
                r[1] += ch.get(MEMORY, 0)
        names = self.sim.node_names
        alloc = np.array(
            [
                [
                    self.sim.nodes[n].allocatable.get(CPU, 0),
                    self.sim.nodes[n].allocatable.get(MEMORY, 0),
                ]
                for n in names
            ],
            dtype=np.float64,
        )
        free_all = alloc - np.array([self.node_charge[n] for n in names], dtype=np.float64)
        usable = np.array(
            [self.sim.nodes[n].ready and not self.sim.nodes[n].unschedulable for n in names]
        )
        res_arr = np.zeros_like(free_all)
        for n, r in reserved.items():
            res_arr[self.sim.node_index[n]] += r
        scale = np.maximum(alloc, 1.0)
        for key in order:
            pod = self.store.pods[key]
            meta = self.store.meta[key]
            ch = pod_charge(pod)
            charge = (ch.get(CPU, 0), ch.get(MEMORY, 0))
            best: tuple[float, str] | None = None
            free = free_all - res_arr
            if meta.nominated_node is not None:
                free[self.sim.node_index[meta.nominated_node]] += res_arr[
                    self.sim.node_index[meta.nominated_node]
                ]
            if meta.pinned_node is not None:
                mask = np.zeros(len(names), dtype=bool)
                pi = self.sim.node_index.get(meta.pinned_node)
                if pi is not None:
                    mask[pi] = self.sim.nodes[meta.pinned_node].ready
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
                    held = reserved.get(meta.nominated_node)
                    if held is not None:
                        held[0] -= charge[0]
                        held[1] -= charge[1]
                        res_arr[self.sim.node_index[meta.nominated_node]] -= charge
                self.sim.lifecycle.bind(key, best[1])
                continue
            if meta.nominated_node is not None:
                continue  # waiting for its victims to terminate
            if not self.preempt(key, charge) and not pod.condition("PodScheduled"):
                p = self.store.writable_pod(key)
                p.conditions.append(
                    PodCondition(
                        "PodScheduled",
                        "False",
                        "Unschedulable",
                        self.unschedulable_message(charge),
                        self.clock.now,
                    )
                )
                self.unschedulable(key, charge)

    def unschedulable(self, key: str, charge: tuple[int, int]) -> None:
        """Report a pod nothing could place (FailedScheduling) to the node autoscaler."""
        self.journal.log(
            "FailedScheduling", f"Pod/{key}", "FailedScheduling", self.unschedulable_message(charge)
        )
        if self.sim.node_autoscaler is not None:
            self.sim.node_autoscaler.pod_unschedulable(key)

    def unschedulable_message(self, charge: tuple[int, int]) -> str:
        n = len(self.sim.nodes)
        cpu_short = sum(1 for node in self.sim.nodes if self.free(node)[0] < charge[0])
        mem_short = sum(1 for node in self.sim.nodes if self.free(node)[1] < charge[1])
        parts = []
        if cpu_short:
            parts.append(f"{cpu_short} Insufficient cpu")
        if mem_short:
            parts.append(f"{mem_short} Insufficient memory")
        return f"0/{n} nodes are available: " + ", ".join(parts or ["no matching node"]) + "."

    def preempt(self, key: str, charge: tuple[int, int]) -> bool:
        pod = self.store.pods[key]
        best: tuple[tuple[int, int, int, int], str, list[str]] | None = None
        for n_i, node in enumerate(self.candidate_nodes(key)):
            free = list(self.free(node))
            lower = []
            for k in self.node_pods[node]:
                p = self.store.pods.get(k)
                if p is None or p.deletion_time is not None or p.phase in ("Succeeded", "Failed"):
                    continue
                if p.priority < pod.priority:
                    lower.append(k)
            if not lower:
                continue
            for k in lower:
                free[0] += self.store.meta[k].charge[0]
                free[1] += self.store.meta[k].charge[1]
            if not self.fits(charge, (free[0], free[1])):
                continue
            # Reprieve as many victims as possible, highest priority first.
            victims = []
            for k in sorted(
                lower,
                key=lambda k: (-self.store.pods[k].priority, self.store.pods[k].creation_time, k),
            ):
                c = self.store.meta[k].charge
                if self.fits(charge, (free[0] - c[0], free[1] - c[1])):
                    free[0] -= c[0]
                    free[1] -= c[1]
                else:
                    victims.append(k)
            score = (
                max(self.store.pods[k].priority for k in victims),
                len(victims),
                sum(self.store.pods[k].priority for k in victims),
                n_i,
            )
            if best is None or score < best[0]:
                best = (score, node, victims)
        if best is None:
            return False
        _, node, victims = best
        for v in sorted(victims, key=lambda k: (self.store.pods[k].priority, k)):
            vm = self.store.meta[v]
            self.journal.log(
                "Preempted",
                f"Pod/{v}",
                "Preempted",
                f"Preempted by pod {pod.uid} on node {node}",
                preemptor=key,
                node=node,
                victim_priority=self.store.pods[v].priority,
                preemptor_priority=pod.priority,
            )
            self.journal.count(vm.top, "preemptions")
            self.sim.lifecycle.delete(v, vm.grace, "Preempted")
        self.store.meta[key].nominated_node = node
        return True
