"""Forecast-sized headroom (issue 23 item 4): the placeholder Deployment's size from a
pool's demand, which pods are placeholders, and the capacity guard taking their room for
an upsize (released in the same pass, before the resize)."""

from __future__ import annotations

import pytest

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EnsureHeadroom, ReleaseHeadroom, ResizePod
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.headroom import (
    HEADROOM_LABEL,
    HeadroomConfig,
    deployment_name,
    is_placeholder,
    placeholder_count,
    plan_headroom,
)
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.reconcile import ReconcileConfig, ReconcileState, plan_pass
from support.guard import _in_place_target, _node, _pod, _sugg_all

NS = "foresize-headroom"
CONFIG = HeadroomConfig()


def placeholder(name: str, node: str, cpu: int = 250, priority: int = -1):
    pod = _pod(
        name,
        node,
        cpu,
        owner=OwnerRef("ReplicaSet", "foresize-headroom-abc"),
        labels={HEADROOM_LABEL: ""},
        ns=NS,
    )
    pod.priority = priority
    return pod


def headroom_deployment(replicas: int, cpu: int = 250, pool: str = "") -> Workload:
    pause = Container("pause", ResourceRequirements({"cpu": cpu, "memory": 512 * MIB}))
    return Workload(
        "Deployment",
        NS,
        deployment_name(pool),
        labels={HEADROOM_LABEL: pool},
        replicas=replicas,
        template=PodTemplate(containers=[pause]),
    )


def test_placeholders_are_enough_for_each_resource_and_bounded() -> None:
    assert placeholder_count({}, CONFIG) == 0
    assert placeholder_count({"cpu": 251}, CONFIG) == 2  # 250m each
    assert placeholder_count({"cpu": 100, "memory": 1100 * MIB}, CONFIG) == 3  # 512Mi each
    assert placeholder_count({"cpu": 10**6}, CONFIG) == CONFIG.max_replicas


def test_bad_settings_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"headroom pod_requests\.cpu: must be positive"):
        HeadroomConfig(pod_requests={"cpu": 0, "memory": MIB})
    with pytest.raises(ValueError, match="headroom window"):
        HeadroomConfig(window=0)
    with pytest.raises(ValueError, match="headroom max_replicas"):
        HeadroomConfig(max_replicas=-1)


def test_deployment_names_are_dns_labels_per_pool() -> None:
    assert deployment_name("") == "foresize-headroom"
    assert deployment_name("General_Purpose") == "foresize-headroom-general-purpose"
    assert len(deployment_name("x" * 100)) <= 63


def test_only_negative_priority_labelled_pods_in_the_namespace_are_placeholders() -> None:
    assert is_placeholder(placeholder("p", "n1"), NS)
    assert not is_placeholder(placeholder("p", "n1", priority=0), NS)  # a real pod
    assert not is_placeholder(placeholder("p", "n1"), "other")


def test_plan_creates_resizes_and_empties_only_what_differs() -> None:
    empty = ClusterSnapshot(now=0.0)
    (made,) = plan_headroom(empty, {"": {"cpu": 600}}, CONFIG)
    assert isinstance(made, EnsureHeadroom)
    assert (made.name, made.replicas, made.priority, made.pool) == ("foresize-headroom", 3, -1, "")
    assert made.requests == {"cpu": 250, "memory": 512 * MIB}
    assert plan_headroom(empty, {"": {}}, CONFIG) == []  # nothing to hold, nothing made
    have = ClusterSnapshot(now=0.0, workloads={"Deployment/x": headroom_deployment(3)})
    assert plan_headroom(have, {"": {"cpu": 600}}, CONFIG) == []  # already so
    (gone,) = plan_headroom(have, {}, CONFIG)
    assert gone.replicas == 0  # the demand is gone: scaled to 0, not left holding nodes
    # A pool left out of `pools` keeps no placeholders.
    only = HeadroomConfig(pools=("gpu",))
    assert [e.replicas for e in plan_headroom(have, {"": {"cpu": 600}}, only)] == [0]


def cluster(*extra):
    """n1 (2000m): web-0 at 500m, a filler at 900m, then what `extra` adds."""
    web = _pod("web-0", "n1", 500, owner=OwnerRef("Deployment", "web"), labels={}, ns="shop")
    filler = _pod("filler", "n1", 900, owner=None, labels={}, ns="default")
    return ClusterSnapshot(
        now=0.0,
        nodes={"n1": _node("n1", 2000)},
        pods=[web, filler, *extra],
        workloads={"Deployment/shop/web": Workload("Deployment", "shop", "web", replicas=1)},
        targets=[_in_place_target("shop", "web")],
    )


def test_the_ledger_counts_placeholder_room_as_free_and_releases_what_an_upsize_takes() -> None:
    s = cluster(placeholder("h-a", "n1"), placeholder("h-b", "n1"))  # 100m really free
    ledger = NodeLedger(s, headroom_namespace=NS)
    assert ledger.free("n1")["cpu"] == 600
    assert ledger.why_not("n1", {"cpu": 300}) is None
    ledger.reserve("n1", {"cpu": 300})  # needs 200m of the placeholders' 500m: one goes
    assert [p.name for p in ledger.released] == ["h-b"]
    ledger.reserve("n1", {"cpu": 50}, release=False)  # a recreated pod preempts instead
    assert [p.name for p in ledger.released] == ["h-b"]
    # Without the headroom namespace placeholders are ordinary pods: no room.
    assert NodeLedger(s).why_not("n1", {"cpu": 300}) is not None


def test_the_pass_releases_placeholders_before_the_resize_that_needs_their_room() -> None:
    s = cluster(placeholder("h-a", "n1"), placeholder("h-b", "n1"))
    config = ReconcileConfig(headroom=CONFIG)
    out = plan_pass(
        s, 0.0, ReconcileState(), None, config, suggestions={"shop/web": _sugg_all(900)}
    )
    kinds = [type(a).__name__ for a in out.actions if isinstance(a, ReleaseHeadroom | ResizePod)]
    assert kinds == ["ReleaseHeadroom", "ReleaseHeadroom", "ResizePod"]  # +400m: both
    release = out.actions[0]
    assert isinstance(release, ReleaseHeadroom) and release.uid == "uid-h-b"
    # Off by default: the placeholders are just pods, the upsize has no room and waits.
    plain = plan_pass(s, 0.0, ReconcileState(), None, suggestions={"shop/web": _sugg_all(900)})
    assert not any(isinstance(a, ReleaseHeadroom | ResizePod) for a in plain.actions)


def test_pending_placeholders_claim_no_room() -> None:
    waiting = placeholder("h-c", "n1")
    waiting.node_name, waiting.phase = None, "Pending"
    ledger = NodeLedger(cluster(waiting), headroom_namespace=NS)
    assert ledger.pending() == []
    assert ledger.why_not("n1", {"cpu": 600}, 0) is None
