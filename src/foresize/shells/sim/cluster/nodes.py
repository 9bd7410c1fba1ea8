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

- **Karpenter** (`Karpenter`): Pending pods open a batch that closes after
  `batch_idle_duration` without a new one or `batch_max_duration` in all (1 s / 10 s); what
  the nodes in flight will not take is packed first-fit-decreasing into new node claims,
  each launched as the cheapest type that holds its pods plus the DaemonSets.
  Consolidation, every 10 s while the cluster changed (or every 5 min): empty nodes first
  (all that the budget allows at once), then with `WhenEmptyOrUnderutilized` multi-node
  (the most nodes, in disruption-cost order, whose pods fit the rest plus at most one
  replacement cheaper than the priciest of them), then single-node (delete when the pods
  fit elsewhere, else replace with a cheaper type that holds them); each decision is re-
  checked after 15 s before it acts, a replacement is Ready before its node is drained.
  Nodes count as candidates only after `consolidate_after` without a pod change and when no
  pod on them is protected by a PDB that allows no disruption; the NodePool budget (`10%`
  of the pool, rounded up) bounds the nodes being disrupted at once.
- **Cluster Autoscaler** (`ClusterAutoscaler`): every `scan_interval` (10 s), scale-up for
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

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.actions import EvictPod
from foresize.core.cluster.model import Pod, disruption_opt_out
from foresize.core.cluster.qos import pod_charge
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.scenario_spec import (
    KARPENTER,
    WHEN_EMPTY_OR_UNDERUTILIZED,
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
# Karpenter's disruption controller polls every 10 s; a decision is validated again after
# 15 s (`consolidationTTL`) before it acts; without a cluster change the candidates are
# re-evaluated after 5 min (the consolidation state's timeout).
KARPENTER_POLL = 10.0
CONSOLIDATION_VALIDATION = 15.0
CONSOLIDATION_STATE_TIMEOUT = 300.0
MULTI_NODE_MAX_CANDIDATES = 100  # multi-node consolidation looks at this many at most
# Refused evictions in a drain are retried this often (Karpenter's eviction queue backs
# off from 100 ms to 10 s; Cluster Autoscaler retries every 5 s).
DRAIN_RETRY = 5.0
# Cluster Autoscaler: pods below this priority neither trigger scale-up nor hold a node
# (`--expendable-pods-priority-cutoff`); a failed scale-down pauses scale-down for 3 min
# (`--scale-down-delay-after-failure`).
EXPENDABLE_PRIORITY_CUTOFF = -10
SCALE_DOWN_DELAY_AFTER_FAILURE = 180.0
KUBE_SYSTEM = "kube-system"

Size = tuple[int, int]  # (cpu millicores, memory bytes)


def budget_nodes(budget: int | str, nodes: int) -> int:
    """A NodePool budget's `nodes` as a node count (`Budget.GetAllowedDisruptions`: a
    percentage of the pool rounds up, so 10% of 5 nodes still allows 1)."""
    if isinstance(budget, str):
        return math.ceil(int(budget.rstrip("%")) * nodes / 100)
    return budget


def eviction_cost(pod: Pod) -> float:
    """Karpenter's cost of evicting one pod (`disruptionutils.EvictionCost`): 1, plus
    the pod-deletion-cost annotation / 2^27 and the priority / 2^25, clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get("controller.kubernetes.io/pod-deletion-cost")
    if raw is not None:
        with contextlib.suppress(ValueError):  # the API server validates it; be safe
            cost += float(raw) / 2.0**27
    cost += pod.priority / 2.0**25
    return max(-10.0, min(10.0, cost))


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


def _fits(size: Size, free: list[int]) -> bool:
    return size[0] <= free[0] and size[1] <= free[1]


def _ffd_order(sizes: list[tuple[str, Size]]) -> list[tuple[str, Size]]:
    # First-fit-decreasing by the larger share of the two resources is close enough to
    # what both autoscalers' binpacking sorts by (Karpenter: CPU then memory; Cluster
    # Autoscaler's estimator: a score of both).
    return sorted(sizes, key=lambda s: (-s[1][0], -s[1][1], s[0]))


def place_first_fit(sizes: list[tuple[str, Size]], frees: list[list[int]]) -> list[str]:
    """Place pods first-fit-decreasing on `frees` (changed in place); the keys left over."""
    left = []
    for key, size in _ffd_order(sizes):
        for free in frees:
            if _fits(size, free):
                free[0] -= size[0]
                free[1] -= size[1]
                break
        else:
            left.append(key)
    return left


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


class Karpenter(NodeAutoscaler):
    """The Karpenter-like flavour (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batch_started: float | None = None
        self.batch_last: float = 0.0
        self.seen_state: tuple[int, int] | None = None
        self.seen_at = -math.inf
        self.pending_decision: tuple[str, list[str], NodeTypeSpec | None] | None = None

    def start(self) -> None:
        self.clock.every(KARPENTER_POLL, self.poll, start=KARPENTER_POLL)

    # -- provisioning ---------------------------------------------------------------
    def pod_unschedulable(self, key: str) -> None:
        """The scheduler could not place a pod: open (or extend) the batch."""
        now = self.clock.now
        self.batch_last = now
        if self.batch_started is None:
            self.batch_started = now
            self.clock.at(now + self.spec.batch_idle_duration, self.batch_check)

    def batch_check(self) -> None:
        if self.batch_started is None:
            return
        now = self.clock.now
        idle_end = self.batch_last + self.spec.batch_idle_duration
        max_end = self.batch_started + self.spec.batch_max_duration
        if now < idle_end and now < max_end:
            self.clock.at(min(idle_end, max_end), self.batch_check)
            return
        self.batch_started = None
        self.provision()

    def provision(self) -> None:
        pods = self.not_covered(self.unschedulable())
        if not pods:
            return
        claims, unfit = pack_claims(pods, self.types, self.daemonset_overhead())
        for key in unfit:
            self.journal.log(
                "NoCompatibleNodeType",
                f"Pod/{key}",
                "FailedProvisioning",
                "no node type of the pool holds the pod",
            )
        for c in claims:
            if self.pool_size() >= self.spec.max_nodes:
                self.journal.log("ProvisioningLimited", "NodePool", "LimitReached", "max_nodes")
                return
            self.launch(c.cheapest(), "Provisioning")

    # -- consolidation --------------------------------------------------------------
    def poll(self) -> None:
        if self.unschedulable() and self.batch_started is None:
            self.provision()  # pods the last batch could not place (e.g. at the limit)
        if self.pending_decision is not None or self.spec.consolidate_after is None:
            return
        state = (self.nodeset.charge_version, int(self.metering.wl_ready.sum()))
        if state == self.seen_state and self.clock.now - self.seen_at < CONSOLIDATION_STATE_TIMEOUT:
            return
        self.seen_state, self.seen_at = state, self.clock.now
        allowed = self.allowed_disruptions()
        if allowed <= 0:
            return
        cands = self.candidates()
        if not cands:
            return
        decision = self.decide(cands, allowed)
        if decision is not None:
            self.pending_decision = decision
            self.clock.at(self.clock.now + CONSOLIDATION_VALIDATION, self.validate_and_act)

    def allowed_disruptions(self) -> int:
        """The NodePool budget minus the nodes being disrupted or not Ready."""
        pool = self.pool_nodes()
        busy = sum(1 for n in pool if n in self.draining or not self.nodeset.nodes[n].ready)
        return budget_nodes(self.spec.disruption_budget, len(pool)) - busy

    def candidates(self) -> list[str]:
        """Pool nodes that may be consolidated, by disruption cost (cheapest first)."""
        after = self.spec.consolidate_after or 0.0
        out = []
        for n in self.pool_nodes():
            node = self.nodeset.nodes[n]
            if n in self.draining or not node.ready or node.unschedulable:
                continue
            if self.clock.now - self.nodeset.node_changed_at.get(n, 0.0) < after:
                continue
            pods = self.movable_pods(n)
            if any(disruption_opt_out(p.annotations) for p in pods):
                continue
            if self.pdb_blocks(pods):
                continue
            out.append(n)
        return sorted(out, key=lambda n: (self.disruption_cost(n), n))

    def disruption_cost(self, node: str) -> float:
        return sum(eviction_cost(p) for p in self.movable_pods(node))

    def decide(
        self, cands: list[str], allowed: int
    ) -> tuple[str, list[str], NodeTypeSpec | None] | None:
        empty = [n for n in cands if not self.movable_pods(n)]
        if empty:
            return ("Empty", empty[:allowed], None)
        if self.spec.consolidation_policy != WHEN_EMPTY_OR_UNDERUTILIZED:
            return None
        multi = self.multi_node(cands[: min(allowed, MULTI_NODE_MAX_CANDIDATES)])
        if multi is not None:
            return multi
        for n in cands:
            option = self.consolidation_option([n])
            if option is not None:
                return option
        return None

    def multi_node(self, cands: list[str]) -> tuple[str, list[str], NodeTypeSpec | None] | None:
        """The longest prefix of `cands` (two nodes at least) that can go, by binary
        search as Karpenter's `firstNConsolidationOption` does."""
        lo, hi = 2, len(cands)
        best = None
        while lo <= hi:
            mid = (lo + hi) // 2
            option = self.consolidation_option(cands[:mid])
            if option is not None:
                best = option
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def consolidation_option(
        self, nodes: list[str]
    ) -> tuple[str, list[str], NodeTypeSpec | None] | None:
        """Delete `nodes` when their pods fit elsewhere; else replace them with one node
        of the cheapest type that holds what does not fit, if it costs less than they do."""
        if self.fit_elsewhere(nodes):
            return ("Underutilized", nodes, None)
        pods = [(p.key, self.store.meta[p.key].charge) for n in nodes for p in self.movable_pods(n)]
        left = place_first_fit(pods, self.frees(set(nodes)))
        sizes = [s for s in pods if s[0] in set(left)]
        claims, unfit = pack_claims(sizes, self.types, self.daemonset_overhead())
        if unfit or len(claims) != 1:
            return None
        # The replacement must cost less than the priciest node it replaces (Karpenter's
        # `filterOutSameInstanceType`: replacing two nodes by one of their own type is
        # deleting one of them, which the smaller option already finds).
        top = max(self.price(n) for n in nodes)
        claims[0].options = [t for t in claims[0].options if t.price_per_hour < top]
        if not claims[0].options:
            return None
        return ("Underutilized", nodes, claims[0].cheapest())

    def validate_and_act(self) -> None:
        decision, self.pending_decision = self.pending_decision, None
        if decision is None:
            return
        reason, nodes, typ = decision
        still = set(self.candidates())
        if not all(n in still for n in nodes) or len(nodes) > self.allowed_disruptions():
            return
        if reason == "Empty":
            if any(self.movable_pods(n) for n in nodes):
                return
        elif typ is None and not self.fit_elsewhere(nodes):
            return
        if typ is None:
            for n in nodes:
                self.start_drain(n, reason)
            return
        # Replace: cordon now, drain once the replacement is Ready.
        for n in nodes:
            self.start_drain(n, "Replaced", wait=True)
        self.launch(typ, "Consolidation", replaces=tuple(nodes))


class ClusterAutoscaler(NodeAutoscaler):
    """The Cluster-Autoscaler-like flavour (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
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


def make_node_autoscaler(
    clock: Clock,
    journal: Journal,
    store: ObjectStore,
    nodeset: NodeSet,
    spec: NodeAutoscalerSpec,
    types: list[NodeTypeSpec],
) -> NodeAutoscaler:
    """The flavour the scenario names."""
    flavour = Karpenter if spec.flavour == KARPENTER else ClusterAutoscaler
    return flavour(clock, journal, store, nodeset, spec, types)
