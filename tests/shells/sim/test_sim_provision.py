"""The capacity fallback where a node autoscaler adds nodes (`core.vertical.provision`) in
the simulator: the operator reads from the scenario that a node autoscaler runs, so an
upsize no node has room for is recreated into Pending after stall_timeout and Karpenter
launches a node for it; without a node autoscaler the pod is never evicted."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import GIB, MIB
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.scenario import parse_scenario
from support.sim import container, evicted, operator, pods_of, suggest, workload

TYPES = [{"name": "small", "cpu": "2", "memory": "8Gi", "price_per_hour": 0.1}]
# Two replicas of 900m fill the 2-CPU node; each is to grow to 1500m: neither fits beside
# its sibling, an empty node of the same type holds it.
GROWN = {"cpu": 1500, "memory": 256 * MIB}


def run(node_autoscaler: bool) -> SimCluster:
    data: dict[str, Any] = {
        "name": "provision",
        "node_types": TYPES,
        "nodes": [{"name": "base", "type": "small"}],
        "workloads": [
            workload("a", 2, containers=[container(req={"cpu": "900m", "memory": "256Mi"}, lim={})])
        ],
    }
    if node_autoscaler:
        data["node_autoscaler"] = {"flavour": "karpenter"}
    sim = SimCluster(parse_scenario(data, "<test>"), seed=1, step=15.0)
    sim.run(30)
    op = operator(sim, "in_place_or_recreate")
    suggest(op, "a", app=(GROWN, {"memory": GIB}))
    sim.run(900)
    return sim


def test_with_karpenter_the_held_upsize_goes_pending_and_gets_a_node() -> None:
    sim = run(node_autoscaler=True)
    (first, *_) = evicted(sim)
    assert first.details.get("cause") == "policy" and first.reason == "capacity"
    assert first.time >= 30 + 120  # held for the default stall_timeout first
    assert sim.events.count("Event", reason="EvictingIntoPending") >= 1
    assert sim.events.query("NodeLaunched")
    pods = pods_of(sim, "a")
    assert len(pods) == 2 and all(p.node_name for p in pods)
    assert all(p.status_of("app").allocated["cpu"] == 1500 for p in pods)


def test_without_a_node_autoscaler_the_pod_is_never_evicted() -> None:
    sim = run(node_autoscaler=False)
    assert not evicted(sim)
    assert all(p.status_of("app").allocated["cpu"] == 900 for p in pods_of(sim, "a"))
