"""One capacity guard for every resize: the disruption worker, the DaemonSetAutoscaler and
the revert all admit their upsizes through the pass's `NodeLedger`, so no upsize is sent
that would sit Deferred while the scheduler charges the node for it."""

from __future__ import annotations

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, ResizePod, WriteTargetStatus
from foresize.core.cluster.capacity import NodeLedger, resize_delta
from foresize.core.cluster.model import (
    ContainerSuggestion,
    OwnerRef,
    Pod,
    PodCondition,
    ResourceRequirements,
    Suggestion,
    Workload,
)
from foresize.core.cluster.qos import pod_charge
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.lifecycle.daemonset import plan_dsa
from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle
from foresize.core.vertical import WorkerState, plan
from support.guard import (
    _dsa,
    _dsa_snapshot,
    _in_place_target,
    _node,
    _pod,
    _revert_snapshot,
    _sugg_all,
)


def _free_cpu(snapshot: ClusterSnapshot, node: str) -> int:
    return snapshot.nodes[node].allocatable["cpu"] - sum(
        pod_charge(p).get("cpu", 0) for p in snapshot.pods_on_node(node)
    )


# ----------------------------------------------------------------------- DaemonSetAutoscaler


def _dsa_suggestion(cpu: int) -> Suggestion:
    return Suggestion(
        "mon/agent@0", 0.0, {"agent": ContainerSuggestion("app", {"cpu": cpu, "memory": 100 * MIB})}
    )


def test_dsa_upsize_that_does_not_fit_its_node_is_not_sent_and_is_reported_on_the_dsa() -> None:
    s = _dsa_snapshot()
    assert _free_cpu(s, "full") == 100
    dp = plan_dsa(s, _dsa(), _sugg_all(500), 0.0)
    # +300m does not fit "full" (100m free): only the roomy node's agent is resized.
    assert [a.name for a in dp.actions if isinstance(a, ResizePod)] == ["agent-roomy"]
    assert list(dp.waiting) == ["mon/agent-full"]
    events = [a for a in dp.actions if isinstance(a, EmitEvent)]
    assert {(e.kind, e.name, e.reason) for e in events} == {
        ("Pod", "agent-full", "ResizeWaitingForCapacity"),
        ("DaemonSetAutoscaler", "agent", "ResizeWaitingForCapacity"),
    }
    (status,) = [a for a in dp.actions if isinstance(a, WriteTargetStatus)]
    assert status.kind == "DaemonSetAutoscaler"
    assert status.status["pods_waiting_for_capacity"] == 1


def test_dsa_upsize_that_fits_and_downsizes_are_sent() -> None:
    s = _dsa_snapshot()
    # +100m fits the 100m left on "full" exactly.
    dp = plan_dsa(s, _dsa(), _sugg_all(300), 0.0)
    assert sorted(a.name for a in dp.actions if isinstance(a, ResizePod)) == [
        "agent-full",
        "agent-roomy",
    ]
    # A downsize always passes: it frees capacity once actuated and charges nothing more.
    dp = plan_dsa(_dsa_snapshot(full_cpu=300), _dsa(), _sugg_all(50), 0.0)
    assert len([a for a in dp.actions if isinstance(a, ResizePod)]) == 2


def test_one_ledger_per_pass_dsa_and_vertical_do_not_count_on_the_same_room() -> None:
    """A DaemonSet upsize admitted on a node takes that room from the disruption worker's
    upsize of another pod on the same node in the same pass."""
    s = _dsa_snapshot(full_cpu=1600)  # "full": agent 200m, filler 1300m; 100m free
    web = _pod(
        "web-0",
        "full",
        0,
        owner=OwnerRef("Deployment", "web"),
        labels={"app": "web"},
        ns="mon",
    )
    s.pods.remove(next(p for p in s.pods if p.name == "filler"))
    s.pods.append(_pod("filler", "full", 1200, owner=None, labels={}, ns="default"))
    s.pods.append(web)
    s.workloads["Deployment/mon/web"] = Workload("Deployment", "mon", "web", replicas=1)
    s._by_node = s._by_owner = None
    s.targets = [_in_place_target("mon", "web")]
    assert _free_cpu(s, "full") == 200
    ledger = NodeLedger(s)
    dp = plan_dsa(s, _dsa(), _sugg_all(350), 0.0, ledger)  # agent +150m: fits
    assert "mon/agent-full" not in dp.waiting
    actions, _ = plan(s, 0.0, WorkerState(), suggestions={"mon/web": _sugg_all(100)}, ledger=ledger)
    # web +100m no longer fits (50m left): held, not sent.
    assert not [a for a in actions if isinstance(a, ResizePod)]
    # Without the shared ledger both would go out and overcommit the node by 50m.
    alone, _ = plan(s, 0.0, WorkerState(), suggestions={"mon/web": _sugg_all(100)})
    assert [a.name for a in alone if isinstance(a, ResizePod)] == ["web-0"]


# ----------------------------------------------------------------------- revert


def test_revert_upsize_waits_for_room_and_the_revert_stays_open() -> None:
    s = _revert_snapshot(template_cpu=500)  # back to 500m: +300m, "full" has 100m free
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    resized = [a.name for a in lp.actions if isinstance(a, ResizePod)]
    assert resized == ["web-b"]
    (rp,) = lp.reverts.values()
    assert list(rp.held) == ["default/web-a"] and not rp.complete
    held = [a for a in lp.actions if isinstance(a, EmitEvent) and a.name == "web-a"]
    assert [e.reason for e in held] == ["RevertWaitingForCapacity"]
    # Next pass: still no room, still not sent, not announced again; the job is kept.
    lp2 = plan_lifecycle(s, 60.0, lp.state)
    assert not [a for a in lp2.actions if isinstance(a, ResizePod) and a.name == "web-a"]
    assert not [a for a in lp2.actions if isinstance(a, EmitEvent) and a.name == "web-a"]
    assert lp2.state.jobs
    # The filler leaves: the revert goes out.
    s.pods = [p for p in s.pods if p.name != "filler"]
    s._by_node = s._by_owner = None
    lp3 = plan_lifecycle(s, 120.0, lp2.state)
    assert [a.name for a in lp3.actions if isinstance(a, ResizePod)] == ["web-a", "web-b"]


def test_resize_delta_is_the_scheduler_charge_difference() -> None:
    p = _pod("p", "n", 200, owner=None, labels={}, ns="default")
    from foresize.core.cluster.actions import ContainerResize

    assert resize_delta(p, [ContainerResize("app", {"cpu": 500})]) == {"cpu": 300}
    # A downsize frees nothing until actuated (allocated still 200m).
    assert resize_delta(p, [ContainerResize("app", {"cpu": 50})]) == {}


def test_the_ledger_charges_each_pod_object_once_and_a_new_object_afresh() -> None:
    import dataclasses

    p = _pod("p", "n", 200, owner=None, labels={}, ns="default")
    ledger = NodeLedger(ClusterSnapshot(now=0.0, nodes={"n": _node("n", 1000)}, pods=[p]))
    first = ledger.charge(p)
    assert first == pod_charge(p) == {"cpu": 200, "memory": first["memory"]}
    assert ledger.charge(p) is first  # the node walk, the resize and the eviction share it
    # The shells replace a pod that changed: the same uid in a new object is charged anew.
    bigger = dataclasses.replace(
        p, containers=[p.containers[0].copy(ResourceRequirements({"cpu": 400}))]
    )
    assert ledger.charge(bigger)["cpu"] == 400
    # The delta from the charge the ledger holds is the delta computed from scratch.
    from foresize.core.cluster.actions import ContainerResize

    change = [ContainerResize("app", {"cpu": 500})]
    assert resize_delta(p, change, ledger.charge(p)) == resize_delta(p, change) == {"cpu": 300}


# ----------------------------------------------------------------------- records


def test_dsa_resize_events_name_the_daemonset_autoscaler() -> None:
    from foresize.adapters.telemetry.recorder import ChangeRecorder
    from foresize.core.cluster.actions import ActionResult

    s = _dsa_snapshot()
    dp = plan_dsa(s, _dsa(), _sugg_all(250), 0.0)
    resize = next(a for a in dp.actions if isinstance(a, ResizePod))
    recorder = ChangeRecorder()
    events = recorder.record([(resize, ActionResult(ok=True, code=200))], s)
    assert {(e.kind, e.name) for e in events} == {
        ("Pod", resize.name),
        ("DaemonSetAutoscaler", "agent"),
    }
    counted = recorder.metrics.request_changes.labels("mon/agent", "cpu", "up", "in_place")
    assert counted._value.get() == 1


def test_a_pod_sized_at_admission_is_counted_and_its_event_names_its_target() -> None:
    from foresize.adapters.telemetry.recorder import ChangeRecorder
    from foresize.core.admission.pod import PodDecision
    from foresize.core.cluster.target import dsa_view

    recorder = ChangeRecorder()
    new = _pod("", "roomy", 200, owner=OwnerRef("DaemonSet", "agent"), labels={}, ns="mon")
    decision = PodDecision(
        target=dsa_view(_dsa()),
        containers={"app": ResourceRequirements({"cpu": 300, "memory": 100 * MIB}, {})},
    )
    for _ in range(3):  # three pods of a rollout: three counts, one Event
        recorder.admitted(new, decision)
    counted = recorder.metrics.request_changes.labels("mon/agent", "cpu", "up", "admission")
    assert counted._value.get() == 3
    (event,) = recorder.drain_admissions()
    assert (event.kind, event.namespace, event.name) == ("DaemonSetAutoscaler", "mon", "agent")
    assert "new pod of DaemonSet agent" in event.message and "200m -> 300m" in event.message
    assert recorder.drain_admissions() == []


def test_charge_gap_shows_a_deferred_upsize_a_pending_downsize_and_infeasible() -> None:
    """The preemption case: an upsize that sits Deferred is charged at its new size while the
    kubelet grants the old one; the gauge must not read 0 for it."""
    from foresize.adapters.telemetry.recorder import ChangeRecorder
    from foresize.core.cluster.capacity import charge_gap

    def resized(spec: int, alloc: int, reason: str | None) -> Pod:
        p = _pod("p", "n1", spec, owner=None, labels={}, ns="default")
        p.container_statuses[0].allocated["cpu"] = alloc
        p.container_statuses[0].resources.requests["cpu"] = alloc
        if reason is not None:
            p.conditions.append(PodCondition("PodResizePending", "True", reason, ""))
        return p

    assert charge_gap(resized(500, 500, None)).get("cpu", 0) == 0
    assert charge_gap(resized(800, 500, "Deferred"))["cpu"] == 300
    assert charge_gap(resized(200, 500, None))["cpu"] == 300  # downsize not actuated yet
    assert charge_gap(resized(9000, 500, "Infeasible"))["cpu"] == -8500
    s = ClusterSnapshot(
        now=0.0, nodes={"n1": _node("n1", 1000)}, pods=[resized(800, 500, "Deferred")]
    )
    recorder = ChangeRecorder()
    recorder.observe(s)
    gauge = recorder.metrics.node_charge_gap.labels("n1", "cpu")
    assert gauge._value.get() == 0.3


def test_one_pass_shares_its_node_capacity_between_the_revert_and_the_worker() -> None:
    """`plan_pass` admits every resize of the pass through one ledger: the revert (first)
    takes 50m of the 100m free on "full", so the worker's +100m upsize of another pod on
    that node is held instead of overcommitting it."""
    from foresize.core.reconcile import ReconcileState, plan_pass

    s = _revert_snapshot(template_cpu=250)  # web-a back to 250m: +50m on "full"
    api = OwnerRef("Deployment", "api")
    s.pods.append(_pod("api-0", "full", 0, owner=api, labels={"app": "api"}, ns="default"))
    s.workloads["Deployment/default/api"] = Workload("Deployment", "default", "api", replicas=1)
    s._by_node = s._by_owner = None
    s.targets.append(_in_place_target("default", "api"))
    assert _free_cpu(s, "full") == 100
    pp = plan_pass(s, 0.0, ReconcileState(), None, suggestions={"default/api": _sugg_all(100)})
    resized = sorted(a.name for a in pp.actions if isinstance(a, ResizePod))
    assert resized == ["web-a", "web-b"]
    # Alone, the worker's upsize fits: it is the revert's reservation that holds it.
    alone, _ = plan(s, 0.0, WorkerState(), suggestions={"default/api": _sugg_all(100)})
    assert [a.name for a in alone if isinstance(a, ResizePod)] == ["api-0"]


def test_one_pass_shares_its_node_capacity_between_the_daemonset_and_the_worker() -> None:
    """`plan_pass` with DaemonSet usage: the agent's upsize (+150m, from 4 h of usage at
    350m) goes first and leaves 50m on "full", so web-0's +100m is held."""
    import numpy as np

    from foresize.core.lifecycle.daemonset import UsageWindow
    from foresize.core.reconcile import ReconcileState, plan_pass

    s = _dsa_snapshot(full_cpu=1600)  # "full": agent 200m, filler 1300m; 100m free
    s.pods.remove(next(p for p in s.pods if p.name == "filler"))
    web = OwnerRef("Deployment", "web")
    s.pods.append(_pod("filler", "full", 1200, owner=None, labels={}, ns="default"))
    s.pods.append(_pod("web-0", "full", 0, owner=web, labels={"app": "web"}, ns="mon"))
    s.workloads["Deployment/mon/web"] = Workload("Deployment", "mon", "web", replicas=1)
    s._by_node = s._by_owner = None
    s.targets = [_in_place_target("mon", "web")]
    now = 4 * 3600.0
    window = UsageWindow()
    for i in range(4 * 60 + 1):
        window.add("mon", "agent", "app", i * 60.0, np.full(2, 0.35), np.full(2, 100.0 * MIB))
    assert _free_cpu(s, "full") == 200
    pp = plan_pass(
        s, now, ReconcileState(), None, dsa_usage=window, suggestions={"mon/web": _sugg_all(100)}
    )
    resized = sorted(a.name for a in pp.actions if isinstance(a, ResizePod))
    assert resized == ["agent-full", "agent-roomy"]
