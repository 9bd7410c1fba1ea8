"""The simulated node autoscalers (Karpenter-like and Cluster-Autoscaler-like): scenario
fields, provisioning, consolidation and scale-down, node-hours and cost.

Upstream cases are named where a test translates one: Karpenter's
`pkg/apis/v1/nodepool_budgets_test.go` and `pkg/controllers/disruption/consolidation_test.go`,
Cluster Autoscaler's `simulator/utilization/info_test.go` (`TestCalculate`)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.cluster.actions import PatchScale
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    Pod,
    ResourceRequirements,
)
from foresize.core.errors import ForesizeError
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.cluster.cluster_autoscaler import node_utilization
from foresize.shells.sim.cluster.karpenter import budget_nodes
from foresize.shells.sim.cluster.nodes import pack_claims
from foresize.shells.sim.scenario import parse_scenario
from support.sim import container, pods_of, workload

TYPES = [
    {"name": "small", "cpu": "2", "memory": "8Gi", "price_per_hour": 0.1},
    {"name": "big", "cpu": "8", "memory": "32Gi", "price_per_hour": 0.4},
]


def app(name: str, replicas: int, cpu: str = "900m", **kw: Any) -> dict[str, Any]:
    return workload(
        name, replicas, containers=[container(req={"cpu": cpu, "memory": "1Gi"}, lim={})], **kw
    )


def scenario(
    flavour: str,
    workloads: list[dict[str, Any]],
    nodes: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    return {
        "name": "nodes",
        "node_types": TYPES,
        "nodes": nodes if nodes is not None else [{"name": "base", "type": "big"}],
        "node_autoscaler": {"flavour": flavour, **settings},
        "workloads": workloads,
    }


def make(data: dict[str, Any], **top: Any) -> SimCluster:
    return SimCluster(parse_scenario({**data, **top}, "<test>"), seed=1)


def launches(sim: SimCluster) -> list[tuple[float, str]]:
    return [(e.time, e.details["node_type"]) for e in sim.events.query("NodeLaunched")]


# -- scenario fields --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"nodes": [{"name": "n", "type": "huge"}]}, "nodes[0].type", "unknown node type 'huge'"),
        (
            {"node_autoscaler": {"flavour": "karpenter", "node_types": ["small", "tiny"]}},
            "node_autoscaler.node_types[1]",
            "unknown node type 'tiny'",
        ),
        (
            {"node_types": [{"name": "s", "cpu": "2", "memory": "8Gi", "price_per_hour": 0}]},
            "node_types[0].price_per_hour",
            "must be a positive price",
        ),
        (
            {"node_types": [{"name": "s", "cpu": "2", "memory": "8Gi", "price_per_hour": -1}]},
            "node_types[0].price_per_hour",
            "must be a positive price",
        ),
        (
            {"node_types": [{"name": "s", "cpu": "2", "memory": "8Gi"}]},
            "node_types[0].price_per_hour",
            "required field is missing",
        ),
        (
            {"node_autoscaler": {"flavour": "karpenter", "disruption_budget": "0%"}},
            "node_autoscaler.disruption_budget",
            "allows no node to be disrupted",
        ),
        (
            {"node_autoscaler": {"flavour": "karpenter", "disruption_budget": 0}},
            "node_autoscaler.disruption_budget",
            "allows no node to be disrupted",
        ),
        (
            {"node_autoscaler": {"flavour": "karpenter", "disruption_budget": "ten"}},
            "node_autoscaler.disruption_budget",
            "expected a node count or a percentage",
        ),
        (
            {"node_autoscaler": {"flavour": "gke"}},
            "node_autoscaler.flavour",
            "unknown flavour 'gke'",
        ),
        (
            {"node_autoscaler": {"flavour": "karpenter", "scale_down_unneeded_time": "5m"}},
            "node_autoscaler.scale_down_unneeded_time",
            "not a setting of the karpenter flavour",
        ),
        (
            {
                "node_autoscaler": {
                    "flavour": "cluster-autoscaler",
                    "scale_down_utilization_threshold": 1.5,
                }
            },
            "node_autoscaler.scale_down_utilization_threshold",
            "must be above 0 and at most 1",
        ),
        (
            {
                "workloads": [
                    app("a", 1, annotations={"karpenter.sh/do-not-disrupt": "yes"}),
                ]
            },
            "workloads[0].annotations.karpenter.sh/do-not-disrupt",
            "must be 'true' or 'false', got 'yes'",
        ),
    ],
)
def test_bad_node_fields_are_named(change: dict[str, Any], field: str, problem: str) -> None:
    data = {**scenario("karpenter", [app("a", 1)]), **change}
    with pytest.raises(ForesizeError) as err:
        parse_scenario(data, "<test>")
    assert f"<test>: {field}: " in str(err.value)
    assert problem in str(err.value)


def test_a_typed_node_takes_its_types_size_price_and_label() -> None:
    sc = parse_scenario(scenario("karpenter", [app("a", 1)]), "<test>")
    (node,) = sc.nodes
    assert (node.cpu, node.memory, node.node_type, node.price_per_hour) == (
        8000,
        32 * 2**30,
        "big",
        0.4,
    )
    assert sc.node_autoscaler is not None and sc.node_autoscaler.node_types == ["small", "big"]


# -- upstream rules -----------------------------------------------------------------------


def test_karpenter_budget_values() -> None:
    # nodepool_budgets_test.go "should return the int value when a budget is active"
    assert budget_nodes(10, 100) == 10
    # "should return the string value when a budget is active" (100% of 100 nodes)
    assert budget_nodes("100%", 100) == 100
    # GetAllowedDisruptions' comment: 5% of 10 nodes rounds up to 1 rather than blocking.
    assert budget_nodes("5%", 10) == 1
    assert budget_nodes("10%", 25) == 3


def _pod(name: str, cpu: int, mem: int, **kw: Any) -> Pod:
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v >= 0}
    kw.setdefault("owner", OwnerRef("ReplicaSet", "rs", "uid", "apps/v1"))
    return Pod("default", name, containers=[Container("c", ResourceRequirements(req))], **kw)


def test_cluster_autoscaler_utilization_test_calculate() -> None:
    """`TestCalculate`: node 2000m / 2000000 B; p1 = 100m / 200000 B, p2 without requests."""
    node = (2000, 2000000)
    p1, p2 = _pod("p1", 100, 200000), _pod("p2", -1, -1)
    # Basic: max(cpu 0.1, memory 0.2).
    assert node_utilization(node, [p1, p1, p2]) == pytest.approx(2.0 / 10)
    # DaemonSet pods count (ignoreDaemonSetsUtilization=false).
    ds = _pod("p3", 100, 200000, owner=OwnerRef("DaemonSet", "ds", "uid", "apps/v1"))
    assert node_utilization(node, [p1, p2, ds]) == pytest.approx(2.0 / 10)
    # A terminating pod does not count.
    gone = _pod("podTerminated", 100, 200000, deletion_time=0.0)
    assert node_utilization(node, [p1, p1, p2, gone]) == pytest.approx(2.0 / 10)
    # Init containers: a sidecar adds, a large non-restartable one dominates (50.25).
    init = _pod("p-init", 100, 200000)
    init.init_containers = [
        Container(
            "side", ResourceRequirements({"cpu": 50, "memory": 100000}), restart_policy="Always"
        ),
        Container("once", ResourceRequirements({"cpu": 5, "memory": 100})),
    ]
    large = _pod("p-large-init", 100, 200000)
    large.init_containers = [
        Container("big", ResourceRequirements({"cpu": 50000, "memory": 100000000}))
    ]
    assert node_utilization(node, [p1, init, large]) == pytest.approx(50.25)


def test_provisioning_packs_into_the_cheapest_type_that_holds_the_batch() -> None:
    small, big = parse_scenario(scenario("karpenter", [app("a", 1)]), "<t>").node_types.values()
    pods = [(f"p{i}", (900, 2**30)) for i in range(4)]
    claims, unfit = pack_claims(pods, [small, big], (100, 0))
    # One claim for all four (3.7 cores): only `big` holds it.
    assert unfit == [] and len(claims) == 1 and claims[0].cheapest().name == "big"
    claims, _ = pack_claims(pods[:1], [small, big], (100, 0))
    assert claims[0].cheapest().name == "small"
    claims, unfit = pack_claims([("huge", (9000, 1))], [small, big], (0, 0))
    assert claims == [] and unfit == ["huge"]


# -- Karpenter ----------------------------------------------------------------------------


def test_karpenter_batches_pending_pods_then_launches_after_startup_delay() -> None:
    sim = make(scenario("karpenter", [app("a", 10)], startup_delay="45s"))
    sim.run(5)
    # 8 pods fit the big base node; 2 wait. The batch closes 1 s after the last pod.
    assert launches(sim) == [(1.0, "small")]
    assert sum(p.phase == "Pending" for p in pods_of(sim, "a")) == 2
    sim.run(40)
    assert len(sim.nodes) == 1  # still starting
    sim.run(20)
    assert len(sim.nodes) == 2
    assert all(p.phase == "Running" for p in pods_of(sim, "a"))


def test_karpenter_max_nodes_bounds_provisioning() -> None:
    sim = make(scenario("karpenter", [app("a", 20)], max_nodes=2))
    sim.run(300)
    assert len(launches(sim)) == 1
    assert sum(p.phase == "Pending" for p in pods_of(sim, "a")) > 0


def test_karpenter_can_delete_nodes() -> None:
    """consolidation_test.go "can delete nodes": pods that fit on another node let their
    node go (evicted, then the node deleted)."""
    nodes = [{"name": "n", "type": "big", "count": 2}]
    sim = make(scenario("karpenter", [app("a", 4, cpu="1")], nodes, disruption_budget="100%"))
    sim.run(30)
    assert {p.node_name for p in pods_of(sim, "a")} == {"n-0", "n-1"}  # spread
    sim.run(120)
    assert len(sim.nodes) == 1 and all(p.phase == "Running" for p in pods_of(sim, "a"))
    summary = sim.summary()["node_autoscaler"]
    assert summary["evictions_by_cause"]["consolidation"] == 2
    assert summary["evictions_by_cause"]["policy"] == 0
    assert sim.events.count("NodeDeleted") == 1


def test_karpenter_can_replace_node() -> None:
    """consolidation_test.go "can replace node": a pod on the most expensive type moves to
    a cheaper one; the old node goes only once the new one is Ready."""
    sim = make(scenario("karpenter", [app("a", 1)], startup_delay="60s"))
    sim.run(30)
    (launch,) = sim.events.query("NodeLaunched")
    assert launch.details["node_type"] == "small" and launch.details["replaces"] == ["base"]
    assert sim.nodes["base"].unschedulable  # cordoned at the decision
    sim.run(launch.time + 59 - sim.now)
    assert "base" in sim.nodes and pods_of(sim, "a")[0].node_name == "base"
    sim.run(60)
    assert list(sim.nodes) == ["small-1"]
    assert pods_of(sim, "a")[0].node_name == "small-1"
    nodes = sim.summary()["node_autoscaler"]
    # base (big) for its hour share until deleted, the small one from its launch.
    rec = sim.node_records
    assert rec["base"].removed is not None and rec["small-1"].removed is None
    expect = rec["base"].hours(sim.now) * 0.4 + rec["small-1"].hours(sim.now) * 0.1
    assert nodes["cost"] == pytest.approx(expect, abs=1e-6)


def test_karpenter_can_replace_nodes_considers_pdb() -> None:
    """consolidation_test.go "can replace nodes, considers PDB": a PDB allowing no
    disruption keeps the node."""
    data = scenario("karpenter", [app("a", 3, cpu="500m")])
    data["pdbs"] = [{"name": "a", "selector": {"app": "a"}, "max_unavailable": 0}]
    sim = make(data)
    sim.run(600)
    assert list(sim.nodes) == ["base"] and launches(sim) == []


@pytest.mark.parametrize(
    "annotation",
    [
        {"karpenter.sh/do-not-disrupt": "true"},
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    ],
)
def test_karpenter_leaves_a_node_with_a_do_not_disrupt_pod(annotation: dict[str, str]) -> None:
    """consolidation_test.go "can replace nodes, considers do-not-consolidate annotation",
    for the pod annotation of Karpenter v1: the annotated pod's node stays, the other goes."""
    nodes = [{"name": "n", "type": "big", "count": 2}]
    work = [app("keep", 1, annotations=annotation), app("move", 1)]
    sim = make(scenario("karpenter", work, nodes, disruption_budget="100%"))
    sim.run(30)
    keep = pods_of(sim, "keep")[0].node_name
    sim.run(600)
    assert list(sim.nodes) == [keep]
    assert sim.summary()["node_autoscaler"]["do_not_disrupt_evictions"] == 0


def test_karpenter_budget_bounds_nodes_disrupted_at_once() -> None:
    nodes = [{"name": "n", "type": "small", "count": 10}]
    sim = make(scenario("karpenter", [], nodes, disruption_budget="20%"))
    sim.run(30)
    # Empty nodes: 20% of 10 = 2 at once, re-checked after the 15 s validation.
    deleted = sim.events.query("NodeDeleted")
    assert [e.time for e in deleted] == [25.0, 25.0]
    sim.run(600)
    assert sim.nodes == {}


def test_karpenter_consolidate_after_never_turns_consolidation_off() -> None:
    nodes = [{"name": "n", "type": "small", "count": 2}]
    sim = make(scenario("karpenter", [], nodes, consolidate_after="Never"))
    sim.run(600)
    assert len(sim.nodes) == 2


# -- Cluster Autoscaler -------------------------------------------------------------------


def test_cluster_autoscaler_scales_up_for_unschedulable_pods_within_max_nodes() -> None:
    sim = make(scenario("cluster-autoscaler", [app("a", 10)], max_nodes=2, startup_delay="2m"))
    sim.run(15)
    # Scan at 10 s: 2 pending pods of 900m, least waste on `small` (1.8 of 2 cores).
    assert launches(sim) == [(10.0, "small")]
    sim.run(120)
    assert len(sim.nodes) == 2 and all(p.phase == "Running" for p in pods_of(sim, "a"))
    sim.apply(PatchScale("default", "Deployment", "a", 13))
    sim.run(600)
    assert len(launches(sim)) == 1  # max_nodes (the pool: base + 1)
    assert sum(p.phase == "Pending" for p in pods_of(sim, "a")) == 3


def test_cluster_autoscaler_scales_down_after_unneeded_time() -> None:
    nodes = [{"name": "n", "type": "big", "count": 2}]
    sim = make(scenario("cluster-autoscaler", [app("a", 4, cpu="1")], nodes))
    sim.run(30)
    assert {p.node_name for p in pods_of(sim, "a")} == {"n-0", "n-1"}  # 25% each
    sim.run(560)  # both unneeded since the scan at 0 s (n-0's pods fit n-1): not 10 min yet
    assert len(sim.nodes) == 2 and sim.events.count("NodeDraining") == 0
    sim.run(20)
    assert [e.time for e in sim.events.query("NodeDraining")] == [600.0]
    sim.run(60)
    assert len(sim.nodes) == 1 and all(p.phase == "Running" for p in pods_of(sim, "a"))


@pytest.mark.parametrize(
    ("annotation", "pdb"),
    [({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, False), ({}, True)],
)
def test_cluster_autoscaler_keeps_nodes_with_unevictable_pods(
    annotation: dict[str, str], pdb: bool
) -> None:
    nodes = [{"name": "n", "type": "big", "count": 2}]
    data = scenario("cluster-autoscaler", [app("a", 2, cpu="1", annotations=annotation)], nodes)
    if pdb:
        data["pdbs"] = [{"name": "a", "selector": {"app": "a"}, "min_available": 2}]
    sim = make(data)
    sim.run(1800)
    assert (
        len(sim.nodes) == 2
        and sim.summary()["node_autoscaler"]["evictions_by_cause"]["consolidation"] == 0
    )


def test_cluster_autoscaler_waits_scale_down_delay_after_add() -> None:
    sim = make(
        scenario(
            "cluster-autoscaler",
            [app("a", 9)],
            scale_down_unneeded_time="1m",
            scale_down_delay_after_add="15m",
        )
    )
    sim.run(120)
    assert len(sim.nodes) == 2
    sim.apply(PatchScale("default", "Deployment", "a", 1))
    sim.run(600)  # unneeded for over a minute, but within 15 min of the scale-up
    assert len(sim.nodes) == 2
    sim.run(600)
    assert len(sim.nodes) == 1


def test_node_deletion_keeps_usage_on_the_right_node() -> None:
    nodes = [{"name": "n", "type": "big", "count": 3}]
    sim = make(scenario("cluster-autoscaler", [app("a", 3, cpu="100m")], nodes))
    sim.run(30)
    by_node = {p.node_name: p for p in pods_of(sim, "a")}
    sim.node_autoscaler.start_drain("n-0", "Test")  # type: ignore[union-attr]
    sim.run(60)
    assert list(sim.nodes) == ["n-1", "n-2"]
    u = sim.metering.usage
    for name in ("n-1", "n-2"):
        slot = sim.meta[by_node[name].key].slots[0]
        assert sim.node_names[int(u.node[slot])] == name


ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["0", "-1", "0%", "101%", "-5%", "1e999", "nan", "Never", "5m", "huge"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
NODE_TYPE_KEYS = ("name", "cpu", "memory", "capacity_cpu", "capacity_memory", "price_per_hour")
AUTOSCALER_KEYS = {
    "karpenter": ("node_types", "max_nodes", "startup_delay", "batch_idle_duration",
                  "batch_max_duration", "consolidation_policy", "consolidate_after",
                  "disruption_budget"),
    "cluster-autoscaler": ("node_types", "max_nodes", "startup_delay", "scan_interval",
                           "scale_down_utilization_threshold", "scale_down_unneeded_time",
                           "scale_down_delay_after_add", "max_empty_bulk_delete",
                           "max_pod_eviction_time", "min_nodes"),
}  # fmt: skip


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.data())
def test_odd_node_fields_are_refused_naming_the_field_or_accepted(data: st.DataObject) -> None:
    """Whatever one node-type or node-autoscaler field holds, the scenario is built or
    refused with one line naming that field, never another exception."""
    flavour = data.draw(st.sampled_from(sorted(AUTOSCALER_KEYS)))
    sc = scenario(flavour, [app("a", 1)])
    sc["node_types"] = [dict(t) for t in TYPES]
    if data.draw(st.booleans()):
        key = data.draw(st.sampled_from(NODE_TYPE_KEYS))
        sc["node_types"][0][key] = data.draw(ODD)
        field = f"node_types[0].{key}"
    else:
        key = data.draw(st.sampled_from(AUTOSCALER_KEYS[flavour]))
        sc["node_autoscaler"][key] = data.draw(ODD)
        field = f"node_autoscaler.{key}"
    try:
        parsed = parse_scenario(sc, "<test>")
    except ForesizeError as err:
        message = str(err)
        assert len(message.splitlines()) == 1
        # The field itself, or (a renamed type) the reference that no longer resolves.
        assert message.startswith(f"<test>: {field}") or "unknown node type" in message, message
        return
    for t in parsed.node_types.values():
        assert t.price_per_hour > 0 and math.isfinite(t.price_per_hour)
        assert t.cpu > 0 and t.memory > 0
    spec = parsed.node_autoscaler
    assert spec is not None and spec.max_nodes >= 1
