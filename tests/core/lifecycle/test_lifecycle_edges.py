"""Edges of the lifecycle planner (reverts, the revert finalizer) that a one-line
mutation of the code changed without any other test noticing (session 7 mutation round)."""

from __future__ import annotations

from foresize.core.cluster.actions import ResizePod, RestartWorkload
from foresize.core.cluster.model import Container, ResourceRequirements
from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle
from support.guard import _revert_snapshot
from support.lifecycle import _target, _with


def _resized(actions: list) -> list[str]:
    return sorted(a.name for a in actions if isinstance(a, ResizePod))


def test_a_deleted_targets_finalizer_stays_while_a_revert_waits_for_room() -> None:
    """web-a's revert (+300m) does not fit its node: the revert is not done, so the
    finalizer is not released; it is once the revert could go out."""
    s = _with(_revert_snapshot(template_cpu=500), _target("autonomous", deleting=True))
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert _resized(lp.actions) == ["web-b"]
    # web-b is back at its template; web-a is still held.
    s.pods = [p for p in s.pods if p.name != "web-b"]
    s._by_node = s._by_owner = None
    lp = plan_lifecycle(s, 60.0, lp.state)
    assert not _resized(lp.actions) and lp.finalizers_done == []
    # The filler leaves: web-a's revert goes out; once nothing is left, the finalizer goes.
    s.pods = [p for p in s.pods if p.name != "filler"]
    s._by_node = s._by_owner = None
    lp = plan_lifecycle(s, 120.0, lp.state)
    assert _resized(lp.actions) == ["web-a"] and lp.finalizers_done == []
    s.pods = []
    s._by_node = s._by_owner = None
    lp = plan_lifecycle(s, 180.0, lp.state)
    assert lp.finalizers_done == ["AIScaleTarget/default/web"]


def test_a_deleted_target_without_the_revert_finalizer_is_not_reverted() -> None:
    """Nothing holds such a target while a revert runs (docs/webhooks.md: a target being
    deleted *with* the foresize.io/revert finalizer is reverted), and there is no
    finalizer of ours to release."""
    s = _with(
        _revert_snapshot(template_cpu=250), _target("autonomous", deleting=True, finalizer=False)
    )
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert not _resized(lp.actions) and not lp.state.jobs and lp.finalizers_done == []


def test_back_to_autonomous_cancels_the_revert() -> None:
    s = _with(_revert_snapshot(template_cpu=250), _target("recommendation"))
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert _resized(lp.actions) == ["web-a", "web-b"]
    # Before the kubelet actuated the reverts, the user switches back to autonomous.
    lp = plan_lifecycle(_with(s, _target("autonomous")), 60.0, lp.state)
    assert not _resized(lp.actions) and not lp.state.jobs


def test_a_workload_restarted_to_revert_gets_no_in_place_resizes_too() -> None:
    """web-a carries a CPU limit its template does not declare (the API refuses removing it
    in place): the workload is restarted, which recreates web-b too, so web-b's plain value
    revert is not also sent in place."""
    s = _with(
        _revert_snapshot(template_cpu=250),
        _target("recommendation", update_mode="in_place_or_recreate"),
    )
    a = next(p for p in s.pods if p.name == "web-a")
    a.containers = [
        Container(
            "app", ResourceRequirements(dict(a.containers[0].resources.requests), {"cpu": 400})
        )
    ]
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert [a.name for a in lp.actions if isinstance(a, RestartWorkload)] == ["web"]
    assert _resized(lp.actions) == []


def test_a_terminating_pod_is_not_reverted() -> None:
    from dataclasses import replace

    s = _with(_revert_snapshot(template_cpu=250), _target("recommendation"))
    s.pods = [replace(p, deletion_time=1.0) if p.name == "web-b" else p for p in s.pods]
    s._by_node = s._by_owner = None
    assert _resized(plan_lifecycle(s, 0.0, LifecycleState()).actions) == ["web-a"]


def test_a_pod_reverts_to_the_template_of_the_replicaset_that_made_it() -> None:
    """A pod of an older revision goes back to its ReplicaSet's template, not to the
    Deployment's newer one."""
    from foresize.core.cluster.model import PodTemplate

    s = _with(_revert_snapshot(template_cpu=250), _target("recommendation"))
    dep = s.workloads["Deployment/default/web"]
    newer = [Container("app", ResourceRequirements({"cpu": 300, "memory": 100 * 2**20}))]
    s.workloads[dep.key] = type(dep)(
        dep.kind, dep.namespace, dep.name, replicas=2, template=PodTemplate(containers=newer)
    )
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    cpus = {a.name: a.containers[0].requests["cpu"] for a in lp.actions if isinstance(a, ResizePod)}
    assert cpus == {"web-a": 250, "web-b": 250}


def test_a_pod_left_unreverted_is_announced_once() -> None:
    from foresize.core.cluster.actions import EmitEvent

    s = _with(_revert_snapshot(template_cpu=250), _target("recommendation"))
    a = next(p for p in s.pods if p.name == "web-a")
    requests = dict(a.containers[0].resources.requests)
    a.containers = [Container("app", ResourceRequirements(requests, {"cpu": 400}))]
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    left = [e for e in lp.actions if isinstance(e, EmitEvent) and e.reason == "RevertNotInPlace"]
    assert [e.name for e in left] == ["web-a"]
    lp = plan_lifecycle(s, 60.0, lp.state)
    assert not [
        e for e in lp.actions if isinstance(e, EmitEvent) and e.reason == "RevertNotInPlace"
    ]


def test_no_status_is_written_to_a_target_whose_finalizer_is_released() -> None:
    """The object is going away: the pass that finishes its revert releases the finalizer
    and writes no status (not even the end of `reverting`)."""
    from foresize.core.cluster.actions import WriteTargetStatus

    t = _target("autonomous", deleting=True)
    reverting = {"reason": "TargetDeleted", "since": "2026-12-01T00:00:00Z"}
    t.status = t.status.model_validate(
        {
            **t.status.model_dump(),
            "lifecycle": {"observed_mode": "autonomous", "reverting": reverting},
        }
    )
    s = _with(_revert_snapshot(template_cpu=250), t)
    s.pods = []
    s._by_node = s._by_owner = None
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert lp.finalizers_done == ["AIScaleTarget/default/web"]
    assert not [a for a in lp.actions if isinstance(a, WriteTargetStatus)]


def test_a_revert_in_progress_is_resumed_after_an_operator_restart() -> None:
    """The revert job is read back from status.lifecycle.reverting: a fresh operator whose
    target already says observed_mode recommendation still finishes the revert."""
    s = _with(_revert_snapshot(template_cpu=250), _target("recommendation"))
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    writes = [a for a in lp.actions if type(a).__name__ == "WriteTargetStatus"]
    status = next(w.status["lifecycle"] for w in writes if "lifecycle" in w.status)
    assert status["observed_mode"] == "recommendation" and "reverting" in status
    restarted = _target("recommendation")
    restarted.status = restarted.status.model_validate(
        {**restarted.status.model_dump(), "lifecycle": status}
    )
    lp = plan_lifecycle(_with(s, restarted), 60.0, LifecycleState())
    assert _resized(lp.actions) == ["web-a", "web-b"]


def test_a_daemonset_pod_the_api_would_refuse_to_resize_is_skipped_and_said_why() -> None:
    """A pod with pod-level resources cannot be resized in place (the API server answers
    422): the DaemonSetAutoscaler does not send the resize and records the reason."""
    from foresize.core.lifecycle.daemonset import plan_dsa
    from support.guard import _dsa, _dsa_snapshot, _sugg_all

    s = _dsa_snapshot()
    roomy = next(p for p in s.pods if p.name == "agent-roomy")
    roomy.resources = ResourceRequirements({"cpu": 1000}, {})
    dp = plan_dsa(s, _dsa(), _sugg_all(150), 0.0)
    assert "agent-roomy" not in _resized(dp.actions) and "agent-full" in _resized(dp.actions)
    assert "pod-level resources" in dp.skipped["mon/agent-roomy"]
