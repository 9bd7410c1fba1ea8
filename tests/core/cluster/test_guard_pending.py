"""The capacity guard counts Pending pods (issue 27 part 3, audit seed.md N4): an in-place
upsize is not sent when it would take the room a Pending pod of equal or higher priority
needs, placed as the scheduler would take it, or still waiting for room."""

from __future__ import annotations

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, Sample
from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, ResizePod
from foresize.core.cluster.capacity import NodeLedger, pending_pods
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    Pod,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.reconcile import ReconcileState, plan_pass
from foresize.core.vertical import WorkerState, plan
from foresize.shells.sim.scenario import load_scenario
from support.guard import _in_place_target, _node, _pod, _sugg_all

WEB = OwnerRef("Deployment", "web")


def pending(name: str, cpu: int, priority: int = 0, created: float = 0.0) -> Pod:
    """A replica the scheduler has not placed (an HPA's scale-out waiting for room)."""
    return Pod(
        namespace="shop",
        name=name,
        uid=f"uid-{name}",
        owner=OwnerRef("ReplicaSet", "front-abc"),
        priority=priority,
        containers=[Container("app", ResourceRequirements({"cpu": cpu, "memory": 1}, {}))],
        phase="Pending",
        creation_time=created,
    )


def cluster(*waiting: Pod, web_priority: int = 0) -> ClusterSnapshot:
    """Node n1 (2000m): web-0 at 500m (its target wants 900m: +400m) and a filler at
    900m, so 600m free; node n2 (1000m) full."""
    web = _pod("web-0", "n1", 500, owner=WEB, labels={"app": "web"}, ns="shop")
    web.priority = web_priority
    filler = _pod("filler", "n1", 900, owner=None, labels={}, ns="default")
    other = _pod("other", "n2", 1000, owner=None, labels={}, ns="default")
    s = ClusterSnapshot(
        now=0.0,
        nodes={"n1": _node("n1", 2000), "n2": _node("n2", 1000)},
        pods=[web, filler, other, *waiting],
        workloads={"Deployment/shop/web": Workload("Deployment", "shop", "web", replicas=1)},
        targets=[_in_place_target("shop", "web")],
    )
    return s


def upsized(s: ClusterSnapshot) -> tuple[list[str], list[str]]:
    actions, _ = plan(s, 0.0, WorkerState(), suggestions={"shop/web": _sugg_all(900)})
    resized = [a.name for a in actions if isinstance(a, ResizePod)]
    held = [
        a.message
        for a in actions
        if isinstance(a, EmitEvent) and a.kind == "Pod" and a.reason == "ResizeWaitingForCapacity"
    ]
    return resized, held


def test_without_pending_pods_the_upsize_fits_and_is_sent():
    assert upsized(cluster()) == (["web-0"], [])


def test_upsize_that_takes_a_placed_pending_pods_room_is_held_and_names_it():
    """front-1 (500m) fits n1's 600m free; +400m for web-0 would leave it 200m."""
    resized, held = upsized(cluster(pending("front-1", 500)))
    assert resized == []
    assert len(held) == 1 and "Pending pod shop/front-1 (priority 0)" in held[0]


def test_upsize_that_leaves_the_pending_pod_its_room_is_sent():
    assert upsized(cluster(pending("front-1", 200)))[0] == ["web-0"]  # 600 - 400 >= 200


def test_a_lower_priority_pending_pod_does_not_hold_the_upsize():
    assert upsized(cluster(pending("batch-1", 500, priority=-10)))[0] == ["web-0"]


def test_a_higher_priority_pods_upsize_may_take_a_lower_pending_pods_room():
    assert upsized(cluster(pending("front-1", 500), web_priority=100))[0] == ["web-0"]


def test_a_pending_pod_that_fits_nowhere_keeps_upsizes_off_the_room_it_lacks():
    """front-1 needs 800m: no node has it now (n1 600m free). An upsize on n1, where it
    could run, would take part of what it waits for; a pod too big for any node holds
    nothing."""
    resized, held = upsized(cluster(pending("front-1", 800)))
    assert resized == [] and "room node n1 lacks" in held[0]
    assert upsized(cluster(pending("huge", 5000)))[0] == ["web-0"]


def test_pending_pods_are_placed_in_the_schedulers_order():
    """Priority first, then age: the older of two equal pods takes the room first; the
    upsize is held for the one that got the room."""
    s = cluster(pending("young", 500, created=20.0), pending("old", 500, created=10.0))
    assert [p.name for p in pending_pods(s)] == ["old", "young"]
    ledger = NodeLedger(s)
    placed = {p.key: p.node for p in ledger.pending()}
    assert placed == {"shop/old": "n1", "shop/young": None}
    assert ledger.why_not("n1", {"cpu": 400}, 0) is not None
    assert ledger.why_not("n1", {"cpu": 400}, 1) is None  # above every Pending pod


# --------------------------------------------------------------------------- yielding

NOW = 1_780_000_000.0


def upsized_db(*waiting: Pod) -> ClusterSnapshot:
    """db-0 on n1 (2000m) already upsized ahead of a peak to 1700m while it uses 300m;
    a filler takes 200m, so 100m is free; n2 (1000m) is full."""
    db = _pod("db-0", "n1", 1700, owner=OwnerRef("Deployment", "db"), labels={}, ns="shop")
    filler = _pod("filler", "n1", 200, owner=None, labels={}, ns="default")
    other = _pod("other", "n2", 1000, owner=None, labels={}, ns="default")
    return ClusterSnapshot(
        now=NOW,
        nodes={"n1": _node("n1", 2000), "n2": _node("n2", 1000)},
        pods=[db, filler, other, *waiting],
        workloads={"Deployment/shop/db": Workload("Deployment", "shop", "db", replicas=1)},
        targets=[_in_place_target("shop", "db")],
    )


def used_history(cores: float) -> UsageHistory:
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(
        [Sample(NOW - i * 60.0, "shop", "db", "db-0", "app", cores, 100 * MIB) for i in range(60)]
    )
    return history


def db_resizes(s: ClusterSnapshot) -> list[int]:
    pp = plan_pass(
        s, NOW, ReconcileState(), used_history(0.3), suggestions={"shop/db": _sugg_all(1700)}
    )
    return [
        a.containers[0].requests["cpu"]
        for a in pp.actions
        if isinstance(a, ResizePod) and a.name == "db-0"
    ]


def test_an_applied_upsize_yields_to_a_replica_that_cannot_be_scheduled():
    """front-1 (500m, same priority) fits nowhere; db-0 holds 1400m more than it uses on
    n1: its cpu goes back to what it uses (300m) so the replica can be placed."""
    assert db_resizes(upsized_db()) == []  # nothing waits: the upsize stays
    assert db_resizes(upsized_db(pending("front-1", 500))) == [300]


def test_no_yield_to_lower_priority_or_to_pods_no_node_could_run():
    assert db_resizes(upsized_db(pending("batch-1", 500, priority=-1))) == []
    assert db_resizes(upsized_db(pending("huge", 4000))) == []


def test_the_seed_004_scenario_is_built_in():
    """`foresize simulate -s hpa-collision` (docs/vertical.md's measurement) loads: the web
    tier above its worker, an HPA on web's CPU."""
    sc = load_scenario("hpa-collision")
    prio = {w.name: w.priority for w in sc.workloads}
    assert prio == {"web": 1000, "web-worker": 0}
    assert [(h.target_name, h.max_replicas) for h in sc.hpas] == [("web", 6)]
