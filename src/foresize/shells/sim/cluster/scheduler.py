"""The simulated kube-scheduler: filtering on the charge cache (`NodeSet`), LeastAllocated
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
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.lifecycle import PodLifecycle
    from foresize.shells.sim.cluster.nodes import NodeAutoscaler


class Scheduler:
    """The kube-scheduler of the simulated cluster (its charge cache is the `NodeSet`'s)."""

    # Peers, connected by the facade once every part exists.
    lifecycle: PodLifecycle
    node_autoscaler: NodeAutoscaler | None

    def __init__(
        self, clock: Clock, journal: Journal, store: ObjectStore, nodeset: NodeSet
    ) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.nodeset = nodeset
        self.pending: set[str] = set()
        self.queued = False

    def queue(self) -> None:
        if not self.queued:
            self.queued = True
            self.clock.at(self.clock.now, self.schedule)

    def fits(self, charge: tuple[int, int], free: tuple[int, int]) -> bool:
        return charge[0] <= free[0] and charge[1] <= free[1]

    def candidate_nodes(self, key: str) -> list[str]:
        pinned = self.store.meta[key].pinned_node
        if pinned is not None:
            node = self.nodeset.nodes.get(pinned)
            return [pinned] if node is not None and node.ready else []
        return [
            n for n, node in self.nodeset.nodes.items() if node.ready and not node.unschedulable
        ]

    def schedule(self) -> None:
        self.queued = False
        if not self.pending:
            return
        # The scheduling queue's order (`PrioritySort`: priority, then the time the pod
        # was queued). Pods created at one instant queue in the order they were created,
        # which the uid's sequence number keeps (not their names).
        order = sorted(
            self.pending,
            key=lambda k: (
                -self.store.pods[k].priority,
                self.store.pods[k].creation_time,
                self.store.pods[k].uid,
                k,
            ),
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
        names = self.nodeset.node_names
        alloc = np.array(
            [
                [
                    self.nodeset.nodes[n].allocatable.get(CPU, 0),
                    self.nodeset.nodes[n].allocatable.get(MEMORY, 0),
                ]
                for n in names
            ],
            dtype=np.float64,
        )
        free_all = alloc - np.array([self.nodeset.node_charge[n] for n in names], dtype=np.float64)
        usable = np.array(
            [self.nodeset.nodes[n].ready and not self.nodeset.nodes[n].unschedulable for n in names]
        )
        res_arr = np.zeros_like(free_all)
        for n, r in reserved.items():
            res_arr[self.nodeset.node_index[n]] += r
        scale = np.maximum(alloc, 1.0)
        for key in order:
            pod = self.store.pods[key]
            meta = self.store.meta[key]
            ch = pod_charge(pod)
            charge = (ch.get(CPU, 0), ch.get(MEMORY, 0))
            best: tuple[float, str] | None = None
            free = free_all - res_arr
            if meta.nominated_node is not None:
                free[self.nodeset.node_index[meta.nominated_node]] += res_arr[
                    self.nodeset.node_index[meta.nominated_node]
                ]
            if meta.pinned_node is not None:
                mask = np.zeros(len(names), dtype=bool)
                pi = self.nodeset.node_index.get(meta.pinned_node)
                if pi is not None:
                    mask[pi] = self.nodeset.nodes[meta.pinned_node].ready
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
                        res_arr[self.nodeset.node_index[meta.nominated_node]] -= charge
                self.lifecycle.bind(key, best[1])
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
        if self.node_autoscaler is not None:
            self.node_autoscaler.pod_unschedulable(key)

    def unschedulable_message(self, charge: tuple[int, int]) -> str:
        n = len(self.nodeset.nodes)
        cpu_short = sum(1 for node in self.nodeset.nodes if self.nodeset.free(node)[0] < charge[0])
        mem_short = sum(1 for node in self.nodeset.nodes if self.nodeset.free(node)[1] < charge[1])
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
            free = list(self.nodeset.free(node))
            lower = []
            for k in self.nodeset.node_pods[node]:
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
            if not victims:
                # It fits without evicting anyone: the room is held for pods nominated
                # after an earlier preemption (the filter counted them, this view does
                # not); preempting more frees nothing for it, it waits for them.
                continue
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
            self.lifecycle.delete(v, vm.grace, "Preempted")
        self.store.meta[key].nominated_node = node
        return True
