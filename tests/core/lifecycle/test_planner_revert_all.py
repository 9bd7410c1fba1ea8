"""The cluster-wide pause's "revert everything now" (`snapshot.revert_all`, the pause
ConfigMap's `revert: "true"`): every autonomous target's pods go back to their
templates, as leaving autonomous mode does; a pause alone still changes nothing."""

from __future__ import annotations

from foresize.core.cluster.actions import ResizePod, RestartWorkload, WriteTargetStatus
from foresize.core.cluster.model import Container, ResourceRequirements
from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle
from support.guard import _revert_snapshot
from support.lifecycle import _target, _with


def _resized(actions: list) -> list[str]:
    return sorted(a.name for a in actions if isinstance(a, ResizePod))


def _autonomous(**policy: str):
    return _target("autonomous", **policy)


def test_a_pause_alone_reverts_nothing() -> None:
    s = _with(_revert_snapshot(template_cpu=150), _autonomous())
    s.paused = True
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert lp.actions == [] and not lp.state.jobs


def test_revert_all_brings_autonomous_targets_back_to_their_templates() -> None:
    s = _with(_revert_snapshot(template_cpu=150), _autonomous())
    s.paused = s.revert_all = True
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert _resized(lp.actions) == ["web-a", "web-b"]
    (resize,) = [a for a in lp.actions if isinstance(a, ResizePod) and a.name == "web-a"]
    assert resize.containers[0].requests == {"cpu": 150}
    lifecycle = [
        a.status["lifecycle"]
        for a in lp.actions
        if isinstance(a, WriteTargetStatus) and "lifecycle" in a.status
    ]
    assert lifecycle[0]["reverting"]["reason"] == "ClusterRevert"
    # Without the flag the same autonomous target is left alone.
    s.revert_all = False
    assert _resized(plan_lifecycle(s, 0.0, LifecycleState()).actions) == []


def test_a_restart_is_issued_once_while_the_flag_stays() -> None:
    s = _with(_revert_snapshot(template_cpu=150), _autonomous(update_mode="recreate"))
    s.paused = s.revert_all = True
    a = next(p for p in s.pods if p.name == "web-a")
    a.containers = [
        Container(
            "app", ResourceRequirements(dict(a.containers[0].resources.requests), {"cpu": 400})
        )
    ]
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert [x.name for x in lp.actions if isinstance(x, RestartWorkload)] == ["web"]
    # The old pods are still there while the rollout rolls: no second restart.
    lp = plan_lifecycle(s, 60.0, lp.state)
    assert not [x for x in lp.actions if isinstance(x, RestartWorkload)]
    assert lp.state.jobs["AIScaleTarget/default/web"].restarted == {"Deployment/default/web"}


def test_the_flag_gone_and_the_pause_lifted_the_target_is_autonomous_again() -> None:
    s = _with(_revert_snapshot(template_cpu=150), _autonomous())
    s.paused = s.revert_all = True
    lp = plan_lifecycle(s, 0.0, LifecycleState())
    assert lp.state.jobs
    s.paused = s.revert_all = False
    lp = plan_lifecycle(s, 60.0, lp.state)
    assert not lp.state.jobs and _resized(lp.actions) == []
