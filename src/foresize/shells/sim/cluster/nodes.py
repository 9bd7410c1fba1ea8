"""Node autoscalers: a Karpenter-like and a Cluster-Autoscaler-like one, launching priced
node types for Pending pods and removing nodes they judge unneeded through the Eviction API.

Shared by both (`NodeAutoscaler`): the pool (the scenario's `node_types` it may launch and
the nodes of those types), launches that become Ready nodes after `startup_delay`, what
pending pods the nodes in flight will take, first-fit-decreasing packing, whether a node's
pods fit on the other nodes, and the drain: cordon, evict every pod but DaemonSet pods
through the Eviction API (PDBs apply; refusals are retried), delete the node once only
DaemonSet pods are left. Neither ever evicts a pod that opted out
(`foresize.core.cluster.model.disruption_opt_out`): Karpenter skips nodes with a
`do-not-disrupt` pod, Cluster Autoscaler nodes with a `safe-to-evict: "false"` one, and
both honour either annotation (as they do, each reading its own).
The flavours are `karpenter.py` and `cluster_autoscaler.py`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.actions import EvictPod
from foresize.core.cluster.model import Pod, disruption_opt_out
from foresize.core.cluster.qos import pod_charge
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.scenario_spec import (
    NodeAutoscalerSpec,
    NodeSpec,
    NodeTypeSpec,
)

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.disruption import Disruption
    from foresize.shells.sim.cluster.metering import Metering
    from foresize.shells.sim.cluster.scheduler import Scheduler

# Evictions a node autoscaler makes are counted under this cause (the summary's
# `evictions_by_cause`).
CONSOLIDATION = "consolidation"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Refused evictions in a drain are retried this often (Karpenter's eviction queue backs
# off from 100 ms to 10 s; Cluster Autoscaler retries every 5 s).
DRAIN_RETRY = 5.0

Size = tuple[int, int]  # (cpu millicores, memory bytes)


def _fits(size: Size, free: list[int]) -> bool:
    return size[0] <= free[0] and size[1] <= free[1]


def _ffd_order(sizes: list[tuple[str, Size]]) -> list[tuple[str, Size]]:
    # First-fit-decreasing by the larger share of the two resources is close enough to
    # what both autoscalers' binpacking sorts by (Karpenter: CPU then memory; Cluster
    # Autoscaler's estimator: a score of both).
    return sorted(sizes, key=lambda s: (-s[1][0], -s[1][1], s[0]))


def first_fit(sizes: list[tuple[str, Size]], frees: list[list[int]]) -> dict[str, int | None]:
    """Place pods first-fit-decreasing on `frees` (changed in place): each key's bin, or
    None for a pod no bin holds."""
    placed: dict[str, int | None] = {}
    for key, size in _ffd_order(sizes):
        placed[key] = None
        for i, free in enumerate(frees):
            if _fits(size, free):
                free[0] -= size[0]
                free[1] -= size[1]
                placed[key] = i
                break
    return placed


def place_first_fit(sizes: list[tuple[str, Size]], frees: list[list[int]]) -> list[str]:
    """Place pods first-fit-decreasing on `frees` (changed in place); the keys left over."""
    return [k for k, i in first_fit(sizes, frees).items() if i is None]


@dataclass(slots=True)
class NodeClaim:
    """A bin of pods for one new node and the types that could still hold them."""

    used: list[int]
    keys: list[str] = field(default_factory=list)
    options: list[NodeTypeSpec] = field(default_factory=list)

    def cheapest(self) -> NodeTypeSpec:
        return min(self.options, key=lambda t: (t.price_per_hour, t.cpu, t.memory, t.name))


def pack_claims(
    sizes: list[tuple[str, Size]], types: list[NodeTypeSpec], overhead: Size
) -> tuple[list[NodeClaim], list[str]]:
    """Karpenter's provisioning: pods first-fit-decreasing into node claims, a claim
    keeping every type that still holds its pods plus `overhead` (the DaemonSets); a pod
    no claim can take opens a new one. Returns the claims and the pods no type holds."""
    claims: list[NodeClaim] = []
    unfit: list[str] = []
    for key, size in _ffd_order(sizes):
        for c in claims:
            need = (c.used[0] + size[0], c.used[1] + size[1])
            opts = [t for t in c.options if need[0] <= t.cpu and need[1] <= t.memory]
            if opts:
                c.used = [need[0], need[1]]
                c.keys.append(key)
                c.options = opts
                break
        else:
            need = (overhead[0] + size[0], overhead[1] + size[1])
            opts = [t for t in types if need[0] <= t.cpu and need[1] <= t.memory]
            if not opts:
                unfit.append(key)
                continue
            claims.append(NodeClaim([need[0], need[1]], [key], opts))
    return claims, unfit


@dataclass(slots=True)
class Drain:
    """A node being emptied: cordoned, its pods evicted, deleted once they are gone."""

    started: float
    reason: str
    give_up_after: float | None = None  # Cluster Autoscaler abandons a drain


class NodeAutoscaler:
    """What both flavours share: the pool, launches, drains, node deletion."""

    # Peers, connected by the facade once every part exists.
    scheduler: Scheduler
    disruption: Disruption
    metering: Metering
    join: Callable[[NodeSpec], None]  # a node joins the cluster (Ready)
    leave: Callable[[str, str], None]  # a node is deleted (name, reason)

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
        self.clock = clock
        self.journal = journal
        self.store = store
        self.nodeset = nodeset
        self.spec = spec
        self.types = types  # the pool's node types, in the order the scenario names them
        self.type_names = set(spec.node_types)
        self.inflight: dict[str, NodeTypeSpec] = {}  # launched, not Ready yet
        self.draining: dict[str, Drain] = {}
        self.launched = 0
        self.removed = 0
        self.last_scale_up = -math.inf
        # The order a drain evicts a node's pods in (see `drain_step`); its own stream,
        # so a drain draws nothing from the names' and the usage's.
        self.rng = rng if rng is not None else random.Random(0)

    def start(self) -> None:
        """Schedule the flavour's periodic loop (when the run starts)."""
        raise NotImplementedError

    def pod_unschedulable(self, key: str) -> None:
        """The scheduler could not place pod `key`."""

    # -- the pool -------------------------------------------------------------------
    def managed(self, node: str) -> bool:
        rec = self.nodeset.node_records.get(node)
        return rec is not None and rec.node_type in self.type_names

    def pool_nodes(self) -> list[str]:
        """Nodes of the pool that exist (Ready or not), in name order."""
        return sorted(n for n in self.nodeset.nodes if self.managed(n))

    def pool_size(self) -> int:
        return len(self.pool_nodes()) + len(self.inflight)

    def price(self, node: str) -> float:
        return self.nodeset.node_records[node].price_per_hour

    def daemonset_overhead(self) -> Size:
        """What the DaemonSets will put on every new node (their templates' requests)."""
        cpu = mem = 0
        for key, st in self.store.wl_state.items():
            if st.spec.kind != "DaemonSet":
                continue
            tmpl = self.store.workloads[key].template
            for c in [*tmpl.containers, *tmpl.init_containers]:
                cpu += c.resources.requests.get(CPU, 0)
                mem += c.resources.requests.get(MEMORY, 0)
        return cpu, mem

    # -- pods -----------------------------------------------------------------------
    def unschedulable(self, *, min_priority: int | None = None) -> list[tuple[str, Size]]:
        """Pending pods the scheduler could not place (not DaemonSet pods, not pods waiting
        for the victims of their preemption)."""
        out = []
        for k in sorted(self.scheduler.pending):
            pod = self.store.pods[k]
            meta = self.store.meta[k]
            if meta.pinned_node is not None or meta.nominated_node is not None:
                continue
            if pod.deletion_time is not None:
                continue
            cond = pod.condition("PodScheduled")
            if cond is None or cond.reason != "Unschedulable":
                continue
            if min_priority is not None and pod.priority < min_priority:
                continue
            out.append((k, _charge(pod)))
        return out

    def not_covered(self, pods: list[tuple[str, Size]]) -> list[tuple[str, Size]]:
        """The pods neither the nodes there nor those in flight will take (both
        autoscalers first filter out what the scheduler can still place, and count a node
        in flight as empty but for the DaemonSets)."""
        ds = self.daemonset_overhead()
        frees = self.frees(set()) + [
            [t.cpu - ds[0], t.memory - ds[1]] for t in self.inflight.values()
        ]
        left = set(place_first_fit(pods, frees))
        return [p for p in pods if p[0] in left]

    def movable_pods(self, node: str) -> list[Pod]:
        """The pods a drain would evict: all but DaemonSet pods and finished or
        terminating ones."""
        out = []
        for k in sorted(self.nodeset.node_pods.get(node, ())):
            p = self.store.pods.get(k)
            if p is None or p.deletion_time is not None or p.phase in ("Succeeded", "Failed"):
                continue
            if self.store.meta[k].pinned_node is not None:
                continue
            out.append(p)
        return out

    def frees(self, exclude: set[str]) -> list[list[int]]:
        """Free capacity of the Ready, schedulable nodes not in `exclude`, by name."""
        out = []
        for n in sorted(self.nodeset.nodes):
            node = self.nodeset.nodes[n]
            if n in exclude or n in self.draining or not node.ready or node.unschedulable:
                continue
            out.append(list(self.nodeset.free(n)))
        return out

    def fit_elsewhere(self, nodes: list[str], extra: list[list[int]] | None = None) -> bool:
        """Do the movable pods of `nodes` fit on the other nodes (plus `extra` free
        space, a replacement's)?"""
        pods = [(p.key, self.store.meta[p.key].charge) for n in nodes for p in self.movable_pods(n)]
        frees = self.frees(set(nodes)) + [list(f) for f in extra or []]
        return not place_first_fit(pods, frees)

    def pdb_blocks(self, pods: list[Pod]) -> bool:
        """Would a PDB refuse one of these pods' evictions now (disruptionsAllowed 0)?"""
        for p in pods:
            if self.disruption.can_ignore_pdb(p):
                continue
            if self.disruption.check_budget(p, self.store.meta[p.key].ready) is not None:
                return True
        return False

    # -- launching ------------------------------------------------------------------
    def launch(self, typ: NodeTypeSpec, reason: str, *, replaces: tuple[str, ...] = ()) -> str:
        self.launched += 1
        name = f"{typ.name}-{self.launched}".replace(".", "-").lower()
        while name in self.nodeset.node_records:
            name += "x"
        self.inflight[name] = typ
        self.last_scale_up = self.clock.now
        self.nodeset.record_launch(name, typ.name, typ.price_per_hour)
        self.journal.log(
            "NodeLaunched",
            f"Node/{name}",
            reason,
            f"launching {typ.name} (${typ.price_per_hour:g}/h), ready in "
            f"{self.spec.startup_delay:g}s"
            + (f", to replace {', '.join(replaces)}" if replaces else ""),
            node_type=typ.name,
            replaces=list(replaces),
        )
        spec = NodeSpec(
            name,
            typ.cpu,
            typ.memory,
            typ.capacity_cpu,
            typ.capacity_memory,
            {**typ.labels, INSTANCE_TYPE_LABEL: typ.name},
            node_type=typ.name,
            price_per_hour=typ.price_per_hour,
        )

        def ready() -> None:
            self.inflight.pop(name, None)
            self.join(spec)
            for old in replaces:
                self.drain_step(old)  # cordoned since the decision

        self.clock.at(self.clock.now + self.spec.startup_delay, ready)
        return name

    # -- draining -------------------------------------------------------------------
    def start_drain(
        self,
        node: str,
        reason: str,
        give_up_after: float | None = None,
        *,
        wait: bool = False,
    ) -> None:
        """Cordon `node` and evict its pods (`wait`: not before its replacement is
        Ready, which calls `drain_step`)."""
        if node in self.draining or node not in self.nodeset.nodes:
            return
        self.draining[node] = Drain(self.clock.now, reason, give_up_after)
        self.nodeset.writable(node).unschedulable = True
        self.journal.log("NodeDraining", f"Node/{node}", reason, "cordoned; evicting its pods")
        if not wait:
            self.drain_step(node)

    def drain_step(self, node: str) -> None:
        d = self.draining.get(node)
        if d is None or node not in self.nodeset.nodes:
            return
        left = self.movable_pods(node)
        terminating = [
            k
            for k in self.nodeset.node_pods.get(node, ())
            if k in self.store.pods
            and self.store.pods[k].deletion_time is not None
            and self.store.meta[k].pinned_node is None
        ]
        if not left and not terminating:
            self.delete_node(node, d.reason)
            return
        if d.give_up_after is not None and self.clock.now - d.started > d.give_up_after:
            self.abandon_drain(node)
            return
        # Upstream lists the node's pods from the informer cache (no order) and hands them
        # all to its eviction queue, whose workers evict them concurrently (Karpenter's
        # `terminator.Drain`; Cluster Autoscaler evicts each pod in its own goroutine), so
        # the replacements reach the scheduler in no set order. Evicting in name order
        # would make it the same order every time: with LeastAllocated scoring, the same
        # small pod takes the room consolidation meant for a bigger one, drain after drain.
        self.rng.shuffle(left)
        for p in left:
            if disruption_opt_out(p.annotations) is not None:
                continue  # waits: never evicted by a node autoscaler
            self.disruption.evict(
                EvictPod(p.namespace, p.name, f"Node/{node}", d.reason, uid=p.uid),
                cause=CONSOLIDATION,
            )
        self.clock.at(self.clock.now + DRAIN_RETRY, self.drain_step, node)

    def abandon_drain(self, node: str) -> None:
        self.draining.pop(node, None)
        self.nodeset.writable(node).unschedulable = False
        self.journal.log(
            "ScaleDownFailed", f"Node/{node}", "DrainTimeout", "pods could not be evicted"
        )
        self.on_drain_failed()

    def on_drain_failed(self) -> None:
        """A flavour's reaction to an abandoned drain."""

    def delete_node(self, node: str, reason: str) -> None:
        self.draining.pop(node, None)
        self.removed += 1
        self.leave(node, reason)


def _charge(pod: Pod) -> Size:
    ch = pod_charge(pod)
    return ch.get(CPU, 0), ch.get(MEMORY, 0)
