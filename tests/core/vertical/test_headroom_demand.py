"""The forecast upsize demand of the coming window (issue 23 item 4): the growth the CPU
day schedule or the seasonal history sees, the demand per node pool after this pass's
resizes, and the placeholder Deployments growing at once and shrinking late."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import ContainerResize, EnsureHeadroom, ResizePod
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.headroom import HEADROOM_LABEL, HeadroomConfig
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.history import SeriesKey
from foresize.core.recommend.request import CachedSchedule
from foresize.core.vertical.headroom import (
    DAY,
    SHRINK_AFTER,
    HeadroomState,
    forecast_demand,
    headroom_actions,
    schedule_level,
    seasonal_peak,
)
from support.guard import _in_place_target, _node, _pod, _sugg_all

CONFIG = HeadroomConfig()
NOW = 3 * DAY + 8 * 3600.0  # 08:00 on day 3


def schedule(levels: list[float]) -> CachedSchedule:
    return CachedSchedule(
        (0.0, 0.9, 3, b""),
        0.0,
        3600.0,
        np.zeros(len(levels), dtype=bool),
        np.asarray(levels, dtype=np.float64),
    )


def test_the_schedule_level_is_the_highest_segment_of_the_window() -> None:
    day = [1.0] * 24
    day[9] = 2.5  # 09:00-10:00, inside the hour after 08:30
    assert schedule_level(schedule(day), NOW + 1800, 3600.0) == 2.5
    assert schedule_level(schedule(day), NOW - 3 * 3600, 3600.0) == 1.0  # 05:00: flat
    assert schedule_level(schedule([float("nan")] * 24), NOW, 3600.0) is None


def test_the_seasonal_peak_is_yesterdays_over_the_same_window() -> None:
    history = UsageHistory(step=60.0)
    key = SeriesKey("shop", "web", "app")
    for t in np.arange(NOW - DAY - 1800, NOW - DAY + 7200, 60.0):
        cores = 0.5 if NOW - DAY <= t < NOW - DAY + 3600 else 0.2  # 08:00-09:00 yesterday
        cores = 3.0 if t >= NOW - DAY + 3600 else cores  # beyond the window: not read
        history.write_poll(float(t), [key], np.array([cores]), np.array([100.0 * MIB]))
    assert seasonal_peak(history, key, "cpu", NOW, 3600.0) == pytest.approx(0.5)
    assert seasonal_peak(history, key, "memory", NOW, 3600.0) == pytest.approx(100.0 * MIB)
    assert seasonal_peak(history, SeriesKey("shop", "x", "app"), "cpu", NOW, 3600.0) is None


def two_pools() -> ClusterSnapshot:
    """web-0 on n1 (pool a), web-1 on n2 (pool b), both at 500m."""
    owner = OwnerRef("Deployment", "web")
    pods = [
        _pod("web-0", "n1", 500, owner=owner, labels={}, ns="shop"),
        _pod("web-1", "n2", 500, owner=owner, labels={}, ns="shop"),
    ]
    nodes = {"n1": _node("n1", 4000), "n2": _node("n2", 4000)}
    nodes["n1"].labels["karpenter.sh/nodepool"] = "a"
    nodes["n2"].labels["eks.amazonaws.com/nodegroup"] = "b"  # the EKS managed node group
    return ClusterSnapshot(
        now=NOW,
        nodes=nodes,
        pods=pods,
        workloads={"Deployment/shop/web": Workload("Deployment", "shop", "web", replicas=2)},
        targets=[_in_place_target("shop", "web")],
    )


def test_demand_is_the_coming_request_minus_the_request_after_this_pass_per_pool() -> None:
    s = two_pools()
    day = [0.6] * 24
    day[9] = 1.2  # the CPU schedule is 1.2 cores per pod from 09:00
    schedules = {"shop/web": {"app": schedule(day)}}
    suggestions = {"shop/web": _sugg_all(600)}  # the pass moves both pods to 600m now

    def demand(now: float, resized=None, config=CONFIG, sugg=suggestions):
        return forecast_demand(s, now, sugg, schedules, None, config, HeadroomState(), resized)

    # 1200m coming, 500m requested: 700m per pod; memory: no history, nothing seen.
    assert demand(NOW + 1800) == {"a": {"cpu": 700}, "b": {"cpu": 700}}
    # web-0's resize to 1200m goes out in this pass: nothing of it is still to come.
    resized = {"shop/web-0": {"app": {"cpu": 1200, "memory": 100 * MIB}}}
    assert demand(NOW + 1800, resized) == {"a": {}, "b": {"cpu": 700}}
    # At 05:00 the window sees 600m: only the suggestion's 100m per pod is to come.
    assert demand(NOW - 3 * 3600) == {"a": {"cpu": 100}, "b": {"cpu": 100}}
    # No suggestion: Foresize resizes nothing, so nothing is to come.
    assert demand(NOW + 1800, sugg={}) == {"a": {}, "b": {}}
    assert set(demand(NOW, config=HeadroomConfig(pools=("a",)))) == {"a"}


def test_the_deployment_grows_at_once_and_shrinks_only_after_the_delay() -> None:
    s = two_pools()
    config = HeadroomConfig(pools=("a",))
    pause = Container("pause", ResourceRequirements(dict(config.pod_requests)))
    s.workloads["Deployment/foresize-headroom/foresize-headroom-a"] = Workload(
        "Deployment",
        config.namespace,
        "foresize-headroom-a",
        labels={HEADROOM_LABEL: "a"},
        replicas=2,
        template=PodTemplate(containers=[pause]),
    )
    state = HeadroomState()
    resize = ResizePod("shop", "web-0", (ContainerResize("app", {"cpu": 1500}),))

    def ensured(now: float, planned: list) -> list[int]:
        _, ensure = headroom_actions(
            s,
            now,
            config,
            state,
            NodeLedger(s),
            planned,
            {"shop/web": _sugg_all(1500)},
            {},
            None,
            sizing=s,
        )
        return [e.replicas for e in ensure if isinstance(e, EnsureHeadroom)]

    assert ensured(NOW, []) == [4]  # +1000m to come on n1: four 250m placeholders
    assert ensured(NOW, [resize]) == []  # sent in this pass: 0 wanted, but not yet
    assert ensured(NOW + SHRINK_AFTER - 1, [resize]) == []
    assert ensured(NOW + SHRINK_AFTER, [resize]) == [0]


def test_only_the_replica_that_sizes_makes_deployments_every_replica_releases() -> None:
    """Shards: the Deployments are sized by one replica over the whole cluster (the one
    that reconciles templates); the others only release what their own resizes need."""
    from foresize.core.reconcile import ReconcileConfig, ReconcileState, plan_pass

    s = two_pools()
    sugg = {"shop/web": _sugg_all(1500)}
    config = ReconcileConfig(headroom=HeadroomConfig())
    sized = plan_pass(s, NOW, ReconcileState(), None, config, suggestions=sugg)
    # web-0 (pool a) is resized in this pass, web-1 (pool b) waits for the next batch.
    (made,) = [a for a in sized.actions if isinstance(a, EnsureHeadroom)]
    assert (made.pool, made.pool_label) == ("b", "eks.amazonaws.com/nodegroup")
    config.reconcile_templates = False
    other = plan_pass(s, NOW, ReconcileState(), None, config, suggestions=sugg)
    assert not [a for a in other.actions if isinstance(a, EnsureHeadroom)]


def test_the_placeholders_an_upsize_released_are_not_recreated() -> None:
    """A placeholder released for an upsize of this pass is demand that landed: the
    Deployment shrinks by it at once (kept, it would come back Pending and have a node
    autoscaler add a node nothing will use); the rest of the shrink still waits."""
    s = two_pools()
    config = HeadroomConfig(pools=("a",))
    pause = Container("pause", ResourceRequirements(dict(config.pod_requests)))
    s.workloads["Deployment/foresize-headroom/foresize-headroom-a"] = Workload(
        "Deployment",
        config.namespace,
        "foresize-headroom-a",
        labels={HEADROOM_LABEL: "a"},
        replicas=4,
        template=PodTemplate(containers=[pause]),
    )
    for i in range(4):
        holder = _pod(
            f"h-{i}",
            "n1",
            250,
            owner=OwnerRef("ReplicaSet", "foresize-headroom-a-1"),
            labels={HEADROOM_LABEL: "a"},
            ns=config.namespace,
        )
        holder.priority = -1
        s.pods.append(holder)
    s = ClusterSnapshot(
        now=s.now, nodes=s.nodes, pods=s.pods, workloads=s.workloads, targets=s.targets
    )
    ledger = NodeLedger(s, headroom_namespace=config.namespace)
    ledger.free("n1")
    ledger.reserve("n1", {"cpu": 2600})  # 2500m really free on n1: one placeholder goes
    assert len(ledger.released) == 1
    resize = ResizePod("shop", "web-0", (ContainerResize("app", {"cpu": 1500}),))
    state = HeadroomState()

    def ensured(now: float, led: NodeLedger) -> list[int]:
        sugg = {"shop/web": _sugg_all(1500)}
        _, ensure = headroom_actions(s, now, config, state, led, [resize], sugg, {}, None, sizing=s)
        return [e.replicas for e in ensure if isinstance(e, EnsureHeadroom)]

    assert ensured(NOW, ledger) == [3]  # 0 wanted: the released one goes now
    assert ensured(NOW + 60, NodeLedger(s, headroom_namespace=config.namespace)) == []
    assert ensured(NOW + SHRINK_AFTER, NodeLedger(s, headroom_namespace=config.namespace)) == [0]
