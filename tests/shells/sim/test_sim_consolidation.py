"""Consolidation and the scheduler it does not control: the simulated Karpenter judges
where a node's pods would go by its own first-fit simulation, the kube-scheduler places
their replacements by LeastAllocated scoring, one at a time, in the order they were
created. Upstream the two disagree too (aws/karpenter-provider-aws#3921, "Karpenter
consolidation got in a loop of recreating nodes"; kubernetes-sigs/karpenter#1228, the
scheduler's LeastAllocated default makes Karpenter disrupt more), but the order the
replacements come in is not fixed: Karpenter's `terminator.Drain` lists the node's pods
from the informer cache and hands them all to its eviction queue, whose workers evict
them concurrently."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from foresize.core.cluster.actions import PatchScale
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.scenario import parse_scenario
from support.sim import container, pods_of, workload


def app(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    return workload(
        name, replicas, containers=[container(req={"cpu": cpu, "memory": "1Gi"}, lim={})]
    )


SMALL = {"name": "small", "cpu": "2", "memory": "8Gi", "price_per_hour": 0.1}


def test_a_drain_evicts_in_a_seeded_order_not_by_name() -> None:
    """The same seed evicts in the same order; other seeds in others."""

    def order(seed: int) -> list[str]:
        data = {
            "name": "drain",
            "node_types": [SMALL],
            "nodes": [{"name": "n", "type": "small", "count": 2}],
            "node_autoscaler": {"flavour": "cluster-autoscaler"},
            "workloads": [app(f"w{i}", 1, "100m") for i in range(6)],
        }
        sim = SimCluster(parse_scenario(data, "<test>"), seed=seed)
        sim.run(30)
        on_n0 = {p.key for w in range(6) for p in pods_of(sim, f"w{w}") if p.node_name == "n-0"}
        assert len(on_n0) >= 3
        sim.node_autoscaler.start_drain("n-0", "Test")  # type: ignore[union-attr]
        return [e.object for e in sim.events.query("Evicted") if e.object[4:] in on_n0]

    orders = [order(seed) for seed in range(1, 6)]
    assert order(1) == orders[0]
    assert any(o != sorted(o) for o in orders)
    assert len({tuple(o) for o in orders}) > 1


def loop_cluster(seed: int) -> SimCluster:
    """A cluster in the state that made the simulated Karpenter launch and delete 45
    nodes an hour (the `vpa` policy at hours 85-91 of `bench nodes` on crane): a small
    node holding a 300m pod and a 1000m one, another holding an 800m one, and 400m free on
    a node of its own. Consolidation sees the 1000m pod fitting the second node and the
    300m one the third; the scheduler puts whichever replacement comes first on the
    emptier second node. When that is the 300m one, the other no longer fits anywhere,
    goes Pending and a node is launched for it: the same state again."""
    data = {
        "name": "loop",
        "node_types": [SMALL],
        "nodes": [{"name": "base", "cpu": "4", "memory": "16Gi"}],
        "node_autoscaler": {"flavour": "karpenter"},
        "workloads": [
            app("fill", 3, "1200m"),
            app("a-small", 0, "300m"),  # its name sorts first
            app("b-large", 0, "1000m"),
            app("c-mid", 0, "800m"),
        ],
    }
    sim = SimCluster(parse_scenario(data, "<test>"), seed=seed)
    sim.run(10)
    sim.apply(PatchScale("default", "Deployment", "b-large", 1))
    sim.run(90)
    sim.apply(PatchScale("default", "Deployment", "a-small", 1))
    sim.run(10)
    sim.apply(PatchScale("default", "Deployment", "c-mid", 1))
    return sim


def test_consolidation_misjudging_the_scheduler_does_not_loop_for_ever() -> None:
    """Evicting in name order sent the 300m pod first every time: 45 nodes launched and
    43 deleted in the hour, 86 consolidation evictions. In no set order the loop ends once
    the 1000m or 800m replacement comes first (1 in 2 each round)."""
    sim = loop_cluster(seed=1)
    sim.run(3600 - sim.now)
    counts = Counter(e.kind for e in sim.events if e.kind in ("NodeLaunched", "NodeDeleted"))
    evictions = sim.summary()["node_autoscaler"]["evictions_by_cause"]["consolidation"]
    # The disagreement is upstream's too: it happens, but not drain after drain.
    assert 2 <= counts["NodeLaunched"] <= 10, counts
    assert evictions <= 16
    # It settles: the last launch is long before the hour is over.
    last = max(e.time for e in sim.events.query("NodeLaunched"))
    assert last < 1800
    assert all(
        p.phase == "Running" for w in ("a-small", "b-large", "c-mid") for p in pods_of(sim, w)
    )


# -- what consolidation simulates (upstream `SimulateScheduling`, `computeConsolidation`,
#    `filterOutSameType`, `ValidateCommand` in pkg/controllers/disruption/) -------------

TYPES = [
    SMALL,
    {"name": "big", "cpu": "8", "memory": "32Gi", "price_per_hour": 0.4},
]


def karpenter(
    workloads: list[dict[str, Any]], nodes: list[dict[str, Any]], **settings: Any
) -> SimCluster:
    data = {
        "name": "consolidation",
        "node_types": TYPES,
        "nodes": nodes,
        "node_autoscaler": {"flavour": "karpenter", **settings},
        "workloads": workloads,
    }
    return SimCluster(parse_scenario(data, "<test>"), seed=1)


def test_a_pending_pod_takes_the_room_before_the_candidates_pods() -> None:
    """`SimulateScheduling` starts from every Pending pod (`GetPendingPods`) and places
    them with the candidate's pods; only the candidate's must all fit. The 1200m pod no
    node holds would take the room on n-1 first, so deleting n-0 needs a new node of its
    own price: no consolidation (before, n-0 went and its pod was Pending in its turn)."""
    nodes = [{"name": "n", "type": "small", "count": 2}]
    work = [app("x", 1, "900m"), app("y", 1, "900m"), app("z", 1, "1200m")]
    sim = karpenter(work, nodes, max_nodes=2, disruption_budget="100%")
    sim.run(600)
    assert pods_of(sim, "z")[0].phase == "Pending"
    assert sorted(sim.nodes) == ["n-0", "n-1"]
    assert sim.events.count("NodeDraining") == 0


def test_the_pods_of_a_node_being_deleted_need_room_too() -> None:
    """`SimulateScheduling` adds the pods of the nodes being deleted: n-0 is cordoned and
    waits for a replacement, so its 900m pod and n-1's cannot both move to n-2's 1100m."""
    nodes = [{"name": "n", "type": "small", "count": 3}]
    work = [app("a", 1, "900m"), app("b", 1, "900m"), app("c", 1, "900m")]
    sim = karpenter(work, nodes, disruption_budget="100%", consolidate_after="Never")
    sim.run(30)
    assert len({p.node_name for w in "abc" for p in pods_of(sim, w)}) == 3
    ka = sim.node_autoscaler
    assert ka is not None
    ka.start_drain("n-0", "Replaced", wait=True)  # its replacement never comes
    ka.spec = dataclasses.replace(ka.spec, consolidate_after=0.0)
    sim.run(600)
    assert sorted(sim.nodes) == ["n-0", "n-1", "n-2"]
    assert [e.object for e in sim.events.query("NodeDraining")] == ["Node/n-0"]


def test_several_nodes_are_not_replaced_by_one_of_their_own_types() -> None:
    """`filterOutSameType`'s own example: [2xlarge, 2xlarge, small] replaced by one of
    {small, ...} is deleting the two 2xlarge nodes, which the smaller option finds; the
    small node and its pod stay (before: a new small node replaced all three)."""
    nodes = [
        {"name": "s", "type": "small"},
        {"name": "b", "type": "big", "count": 2, "add_at": "5s"},
    ]
    sim = karpenter([app("p", 1, "500m")], nodes, disruption_budget="100%")
    sim.run(6)
    sim.apply(PatchScale("default", "Deployment", "p", 3))  # the new pods go to the bigs
    sim.run(2)
    assert sorted(p.node_name for p in pods_of(sim, "p")) == ["b-0", "b-1", "s"]
    sim.run(600)
    assert sorted(sim.nodes) == ["s"]
    assert sim.events.count("NodeLaunched") == 0
    assert sim.summary()["node_autoscaler"]["evictions_by_cause"]["consolidation"] == 2


def test_a_replacement_no_longer_enough_at_validation_is_dropped() -> None:
    """`ValidateCommand`: 15 s after the decision the simulation runs again and must want
    one new node whose types include the one chosen. The 900m pod on `big` would move to a
    `small` node; by validation its Deployment has grown to 2700m, which only `big` holds,
    so nothing is launched (before: a `small` node was, and the pods went Pending)."""
    nodes = [{"name": "base", "type": "big"}]
    sim = karpenter([app("a", 1, "900m")], nodes)
    sim.run(12)
    decided = sim.node_autoscaler.pending_decision  # type: ignore[union-attr]
    assert decided is not None and decided[2] is not None and decided[2].name == "small"
    sim.apply(PatchScale("default", "Deployment", "a", 3))
    sim.run(600)
    assert sim.events.count("NodeLaunched") == 0
    assert list(sim.nodes) == ["base"] and not sim.nodes["base"].unschedulable
