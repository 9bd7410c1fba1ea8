"""The simulator tests' builders (tests/support/sim.py) build what they say."""

from __future__ import annotations

from support.sim import make_sim, pods_of, workload


def test_helpers_build_a_running_cluster():
    sim = make_sim([workload("a", 2)], nodes=2)
    pods = pods_of(sim, "a")
    assert len(pods) == 2 and all(p.phase == "Running" and p.ready for p in pods)
    assert {p.node_name for p in pods} == {"n-0", "n-1"}  # LeastAllocated spreads them
