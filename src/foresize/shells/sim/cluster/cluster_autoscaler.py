"""The Cluster-Autoscaler-like node autoscaler (`NodeAutoscaler` in `nodes.py` is what it
shares with Karpenter): every `scan_interval` (10 s), scale-up for
unschedulable pods (priority at least the expendable cutoff, -10): each node type is
a node group, the binpacking estimate says how many nodes it needs, the least-waste
expander picks the group. Scale-down: a node whose requested share of allocatable
(the larger of CPU and memory) is under `scale_down_utilization_threshold` (0.5) and
whose pods fit elsewhere is unneeded; after `scale_down_unneeded_time` (10 min), and
not within `scale_down_delay_after_add` (10 min) of a scale-up, it is removed: empty
ones in bulk (`max_empty_bulk_delete`), else one drained at a time; a drain that cannot
evict within `max_pod_eviction_time` is abandoned and the node uncordoned. Pods
without a controller and kube-system pods without a PDB block a node's scale-down.
"""

from __future__ import annotations

import math
import random

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import Pod, disruption_opt_out
from foresize.core.cluster.qos import pod_charge
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodes import NodeAutoscaler, Size, pack_claims
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.scenario_spec import NodeAutoscalerSpec, NodeTypeSpec

# Cluster Autoscaler: pods below this priority neither trigger scale-up nor hold a node
# (`--expendable-pods-priority-cutoff`); a failed scale-down pauses scale-down for 3 min
# (`--scale-down-delay-after-failure`).
EXPENDABLE_PRIORITY_CUTOFF = -10
SCALE_DOWN_DELAY_AFTER_FAILURE = 180.0
KUBE_SYSTEM = "kube-system"


def node_utilization(allocatable: Size, pods: list[Pod]) -> float:
    """Cluster Autoscaler's utilization of a node (`utilization.Calculate`): the larger of
    the CPU and memory requests of its pods over allocatable; pods being deleted do not
    count, DaemonSet and mirror pods do (the flags that leave them out are off by
    default). Requests are what the scheduler charges (`pod_charge`)."""
    cpu = mem = 0
    for p in pods:
        if p.deletion_time is not None or p.phase in ("Succeeded", "Failed"):
            continue
        ch = pod_charge(p)
        cpu += ch.get(CPU, 0)
        mem += ch.get(MEMORY, 0)
    return max(cpu / max(allocatable[0], 1), mem / max(allocatable[1], 1))


class ClusterAutoscaler(NodeAutoscaler):
    """The Cluster-Autoscaler-like flavour (see the module docstring)."""

    def __init__(
        self,
        clock: Clock,
        journal: Journal,
        store: ObjectStore,
        nodeset: NodeSet,
        spec: NodeAutoscalerSpec,
        types: list[NodeTypeSpec],
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(clock, journal, store, nodeset, spec, types, rng)
        self.unneeded_since: dict[str, float] = {}
        self.last_scale_down = -math.inf
        self.last_failure = -math.inf

    def start(self) -> None:
        self.clock.every(self.spec.scan_interval, self.scan, start=0.0)

    def on_drain_failed(self) -> None:
        self.last_failure = self.clock.now

    def scan(self) -> None:
        if not self.scale_up():
            self.scale_down()

    # -- scale-up -------------------------------------------------------------------
    def scale_up(self) -> bool:
        pods = self.not_covered(self.unschedulable(min_priority=EXPENDABLE_PRIORITY_CUTOFF))
        if not pods:
            return False
        room = self.spec.max_nodes - self.pool_size()
        if room <= 0:
            return False
        ds = self.daemonset_overhead()
        best: tuple[float, float, str, NodeTypeSpec, int] | None = None
        for typ in self.types:
            claims, _ = pack_claims(pods, [typ], ds)
            if not claims:
                continue
            n = min(len(claims), room)
            # least-waste: the unrequested share of what the new nodes would have.
            cpu = sum(c.used[0] for c in claims[:n])
            mem = sum(c.used[1] for c in claims[:n])
            waste = (1 - cpu / (n * typ.cpu) + 1 - mem / (n * typ.memory)) / 2
            key = (waste, typ.price_per_hour * n, typ.name, typ, n)
            if best is None or key[:3] < best[:3]:
                best = key
        if best is None:
            return False
        typ, n = best[3], best[4]
        for _ in range(n):
            self.launch(typ, "TriggeredScaleUp")
        return True

    # -- scale-down -----------------------------------------------------------------
    def blocks_scale_down(self, pods: list[Pod]) -> bool:
        """A pod that keeps its node: safe-to-evict "false" (or Karpenter's
        do-not-disrupt), no controller (unless safe-to-evict "true"), a kube-system pod
        without a PDB, a PDB that allows no disruption."""
        for p in pods:
            if p.priority < EXPENDABLE_PRIORITY_CUTOFF:
                continue
            if disruption_opt_out(p.annotations) is not None:
                return True
            if p.annotations.get("cluster-autoscaler.kubernetes.io/safe-to-evict") == "true":
                continue
            if p.owner is None or not p.owner.controller:
                return True
            if p.namespace == KUBE_SYSTEM and not self.disruption.matching(p):
                return True
        return self.pdb_blocks(pods)

    def scale_down(self) -> None:
        now = self.clock.now
        pool = self.pool_nodes()
        claimed: set[str] = set()  # nodes judged removable this scan (their pods move)
        for n in pool:
            node = self.nodeset.nodes[n]
            if n in self.draining or not node.ready:
                self.unneeded_since.pop(n, None)
                continue
            alloc = (node.allocatable.get(CPU, 0), node.allocatable.get(MEMORY, 0))
            pods = [self.store.pods[k] for k in self.nodeset.node_pods[n] if k in self.store.pods]
            if node_utilization(alloc, pods) >= self.spec.scale_down_utilization_threshold:
                self.unneeded_since.pop(n, None)
                continue
            movable = self.movable_pods(n)
            if self.blocks_scale_down(movable) or not self.fit_elsewhere(sorted(claimed | {n})):
                self.unneeded_since.pop(n, None)
                continue
            claimed.add(n)
            self.unneeded_since.setdefault(n, now)
        for n in list(self.unneeded_since):
            if n not in self.nodeset.nodes:
                del self.unneeded_since[n]
        if (
            now - self.last_scale_up < self.spec.scale_down_delay_after_add
            or now - self.last_scale_down < self.spec.scan_interval
            or now - self.last_failure < SCALE_DOWN_DELAY_AFTER_FAILURE
            or self.draining
        ):
            return
        ripe = [
            n
            for n in pool
            if n in self.unneeded_since
            and now - self.unneeded_since[n] >= self.spec.scale_down_unneeded_time
        ]
        keep = max(0, len(pool) - self.spec.min_nodes)
        ripe = ripe[:keep]
        if not ripe:
            return
        empty = [n for n in ripe if not self.movable_pods(n)]
        self.last_scale_down = now
        if empty:
            for n in empty[: self.spec.max_empty_bulk_delete]:
                self.unneeded_since.pop(n, None)
                self.start_drain(n, "ScaleDownEmpty")
            return
        n = ripe[0]
        self.unneeded_since.pop(n, None)
        self.start_drain(n, "ScaleDown", give_up_after=self.spec.max_pod_eviction_time)
