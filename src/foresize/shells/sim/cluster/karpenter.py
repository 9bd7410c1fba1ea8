"""The Karpenter-like node autoscaler (`NodeAutoscaler` in `nodes.py` is what it
shares with Cluster Autoscaler): Pending pods open a batch that closes after
`batch_idle_duration` without a new one or `batch_max_duration` in all (1 s / 10 s); what
the nodes in flight will not take is packed first-fit-decreasing into new node claims,
each launched as the cheapest type that holds its pods plus the DaemonSets.
Consolidation, every 10 s while the cluster changed (or every 5 min): empty nodes first
(all that the budget allows at once), then with `WhenEmptyOrUnderutilized` multi-node
(the most nodes, in disruption-cost order, that can go or be replaced by one node),
then single-node. Each simulates scheduling as upstream's `SimulateScheduling` does: the
candidates' pods with the Pending pods and those of nodes being deleted, on the other
nodes; no new node needed is a deletion, one new node a replacement if its type costs
less than the candidates together (and, for several, less than the cheapest of them of
a type it could be). Each decision is simulated again after 15 s before it acts; a
replacement is Ready before its node is drained.
Nodes count as candidates only after `consolidate_after` without a pod change and when no
pod on them is protected by a PDB that allows no disruption; the NodePool budget (`10%`
of the pool, rounded up) bounds the nodes being disrupted at once.
"""

from __future__ import annotations

import contextlib
import math
import random

from foresize.core.cluster.model import Pod, disruption_opt_out
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodes import (
    NodeAutoscaler,
    NodeClaim,
    first_fit,
    pack_claims,
)
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.scenario_spec import (
    WHEN_EMPTY_OR_UNDERUTILIZED,
    NodeAutoscalerSpec,
    NodeTypeSpec,
)

# Karpenter's disruption controller polls every 10 s; a decision is validated again after
# 15 s (`consolidationTTL`) before it acts; without a cluster change the candidates are
# re-evaluated after 5 min (the consolidation state's timeout).
KARPENTER_POLL = 10.0
CONSOLIDATION_VALIDATION = 15.0
CONSOLIDATION_STATE_TIMEOUT = 300.0
MULTI_NODE_MAX_CANDIDATES = 100  # multi-node consolidation looks at this many at most


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


class Karpenter(NodeAutoscaler):
    """The Karpenter-like flavour (see the module docstring)."""

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

    def simulate(self, nodes: list[str]) -> list[NodeClaim] | None:
        """Karpenter's `SimulateScheduling` for taking `nodes` away: the pods of `nodes`,
        those of the nodes being deleted and the Pending pods, first-fit-decreasing on the
        other Ready nodes, then on the nodes in flight, then into new node claims. The new
        claims, or None when a pod of `nodes` or of a deleting node cannot be placed (a
        Pending pod may stay unplaced: `AllNonPendingPodsScheduled`), or when a pod of
        `nodes` would go to a node in flight (`UninitializedNodeError`)."""
        cand = set(nodes)
        charge = self.store.meta
        moved = [(p.key, charge[p.key].charge) for n in nodes for p in self.movable_pods(n)]
        deleting = [
            (p.key, charge[p.key].charge)
            for n in sorted(self.draining)
            if n not in cand and n in self.nodeset.nodes
            for p in self.movable_pods(n)
        ]
        pods = moved + deleting + self.unschedulable()
        frees = self.frees(cand)
        ready = len(frees)
        ds = self.daemonset_overhead()
        frees += [[t.cpu - ds[0], t.memory - ds[1]] for t in self.inflight.values()]
        placed = first_fit(pods, frees)
        must = {k for k, _ in moved + deleting}
        for k, _ in moved:
            i = placed[k]
            if i is not None and i >= ready:
                return None
        left = [s for s in pods if placed[s[0]] is None]
        claims, unfit = pack_claims(left, self.types, ds)
        if any(k in must for k in unfit):
            return None
        return claims

    def consolidation_option(
        self, nodes: list[str]
    ) -> tuple[str, list[str], NodeTypeSpec | None] | None:
        """Karpenter's `computeConsolidation`: delete `nodes` when the simulation needs no
        new node; replace them when it needs one, of a type cheaper than they cost together
        (`RemoveInstanceTypeOptionsByPriceAndMinValues`) and, for several nodes, cheaper
        than the cheapest of them whose type it could be (`filterOutSameType`: replacing
        them by one of their own types is deleting the others, which a smaller option finds)."""
        claims = self.simulate(nodes)
        if claims is None or len(claims) > 1:
            return None
        if not claims:
            return ("Underutilized", nodes, None)
        total = sum(self.price(n) for n in nodes)
        options = [t for t in claims[0].options if t.price_per_hour < total]
        if len(nodes) > 1:
            names = {t.name for t in options}
            same = [self.price(n) for n in nodes if self.node_type(n) in names]
            if same:
                options = [t for t in options if t.price_per_hour < min(same)]
        if not options:
            return None
        claims[0].options = options
        return ("Underutilized", nodes, claims[0].cheapest())

    def node_type(self, node: str) -> str:
        return self.nodeset.node_records[node].node_type

    def still_valid(self, nodes: list[str], typ: NodeTypeSpec | None) -> bool:
        """Karpenter's `ValidateCommand`: the simulation run again gives the same answer, no
        new node for a deletion, one new node for a replacement whose types still include
        the one chosen (a replacement no longer needed, or needing more, is dropped)."""
        claims = self.simulate(nodes)
        if claims is None:
            return False
        if typ is None:
            return not claims
        return len(claims) == 1 and typ.name in {t.name for t in claims[0].options}

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
        elif not self.still_valid(nodes, typ):
            return
        if typ is None:
            for n in nodes:
                self.start_drain(n, reason)
            return
        # Replace: cordon now, drain once the replacement is Ready.
        for n in nodes:
            self.start_drain(n, "Replaced", wait=True)
        self.launch(typ, "Consolidation", replaces=tuple(nodes))
