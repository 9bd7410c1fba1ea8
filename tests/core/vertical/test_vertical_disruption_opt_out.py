"""Node autoscalers' disruption opt-outs (Karpenter's `karpenter.sh/do-not-disrupt: "true"`,
Cluster Autoscaler's `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`): Foresize
never evicts or restarts such a pod, resizes it in place only, and its status says why a
stalled pod is left."""

from __future__ import annotations

from typing import Any

import pytest

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod, WriteTargetStatus
from foresize.core.cluster.model import Pod
from foresize.core.vertical import WorkerState, plan
from foresize.core.vertical.admit import DISRUPTION_SKIPPED_OPT_OUT
from foresize.core.vertical.guards import ODD_ANNOTATION_CONDITION
from support.vertical import error, names, of, pod, snap, sugg, target

DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
NOT_SAFE_TO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
BIG = {"max_disrupted": 10, "interval": "1s"}


def annotated(p: Pod, annotations: dict[str, str]) -> Pod:
    p.annotations = dict(annotations)
    return p


def stuck(name: str, annotations: dict[str, str]) -> Pod:
    p = pod(name, cpu=200, mem=200 * MIB, alloc={"cpu": 200, "memory": 300 * MIB})
    p.conditions.append(error())
    return annotated(p, annotations)


def last_status(actions: list[Any]) -> dict[str, Any]:
    return of(actions, WriteTargetStatus)[-1].status


def run(pods: list[Pod], tgt: Any, times: tuple[float, ...], **kw: Any) -> list[Any]:
    s = snap(pods, [tgt], **kw)
    state = WorkerState()
    seen: list[Any] = []
    for t in times:
        actions, state = plan(s, t, state, suggestions=sugg())
        seen += actions
    return seen


@pytest.mark.parametrize("annotations", [DO_NOT_DISRUPT, NOT_SAFE_TO_EVICT])
def test_a_stalled_opted_out_pod_is_left_and_the_status_says_why(
    annotations: dict[str, str],
) -> None:
    pods = [stuck("keep", annotations), stuck("other", {})]
    tgt = target("in_place_or_recreate", min_replicas=1, disruption=BIG)
    seen = run(pods, tgt, (0.0, 130.0, 400.0))
    assert {a.name for a in of(seen, EvictPod)} == {"other"}
    held = last_status(seen)["pods_held_by_disruption_opt_out"]
    ((key, value),) = annotations.items()
    assert held == [
        {
            "pod": "keep",
            "annotation": f'{key}="{value}"',
            "not_done": "evicting (resize stalled past stall_timeout)",
        }
    ]
    skipped = [e for e in of(seen, EmitEvent) if e.reason == DISRUPTION_SKIPPED_OPT_OUT]
    assert {(e.kind, e.name) for e in skipped} == {("Pod", "keep"), ("AIScaleTarget", "web")}
    assert len(skipped) == 2  # said once


def test_recreate_mode_never_evicts_an_opted_out_pod() -> None:
    pods = [annotated(pod("p0"), DO_NOT_DISRUPT), pod("p1")]
    seen = run(pods, target("recreate", min_replicas=1, disruption=BIG), (0.0,))
    assert names(seen, EvictPod) == ["p1"]
    assert [h["pod"] for h in last_status(seen)["pods_held_by_disruption_opt_out"]] == ["p0"]


def test_an_upsize_that_cannot_fit_waits_in_place_instead_of_evicting() -> None:
    # in_place_or_recreate would evict a pod whose upsize cannot fit its node (the
    # capacity guard); an opted-out pod waits for room, as under in_place.
    p = annotated(pod("big", cpu=900), DO_NOT_DISRUPT)
    s = snap([p], [target("in_place_or_recreate", min_replicas=1)], nodes={"n1": 1000, "n2": 4000})
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=1500))
    assert not of(actions, EvictPod) and not of(actions, ResizePod)
    assert last_status(actions)["pods_waiting_for_capacity"] == 1
    # Without the annotation the same pod is evicted to land elsewhere.
    p2 = pod("big", cpu=900)
    s = snap([p2], [target("in_place_or_recreate", min_replicas=1)], nodes={"n1": 1000, "n2": 4000})
    actions, _ = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=1500))
    assert names(actions, EvictPod) == ["big"]


def test_an_opted_out_pod_is_still_resized_in_place() -> None:
    p = annotated(pod("p0"), DO_NOT_DISRUPT)
    seen = run([p], target("in_place_or_recreate", min_replicas=1, disruption=BIG), (0.0,))
    assert names(seen, ResizePod) == ["p0"] and not of(seen, EvictPod)


def test_a_resize_that_would_restart_a_container_is_not_sent() -> None:
    p = annotated(pod("p0", resize_policy={"cpu": "RestartContainer"}), NOT_SAFE_TO_EVICT)
    seen = run([p], target("in_place", disruption=BIG), (0.0,))
    assert not of(seen, ResizePod)
    (held,) = last_status(seen)["pods_held_by_disruption_opt_out"]
    assert held["not_done"] == "resizing (the resize would restart a container)"
    plain = pod("p0", resize_policy={"cpu": "RestartContainer"})
    assert names(run([plain], target("in_place", disruption=BIG), (0.0,)), ResizePod) == ["p0"]


def test_values_node_autoscalers_would_ignore_are_honoured_and_reported() -> None:
    odd = [
        annotated(pod("p0"), {"karpenter.sh/do-not-disrupt": "True"}),
        annotated(pod("p1"), {"cluster-autoscaler.kubernetes.io/safe-to-evict": "no"}),
        annotated(pod("p2"), {"karpenter.sh/do-not-disrupt": "false"}),  # opts nothing out
    ]
    seen = run(odd, target("recreate", min_replicas=1, disruption=BIG), (0.0,))
    assert names(seen, EvictPod) == ["p2"]
    (cond,) = [c for c in last_status(seen)["conditions"] if c["type"] == ODD_ANNOTATION_CONDITION]
    assert cond["status"] == "True"
    assert "p0 (karpenter.sh/do-not-disrupt='True')" in cond["message"]
    assert "p1 (cluster-autoscaler.kubernetes.io/safe-to-evict='no')" in cond["message"]


def test_a_revert_never_restarts_a_workload_with_an_opted_out_pod() -> None:
    """Leaving autonomous mode restarts a workload whose revert would change the QoS class
    (`test_lifecycle_edges`'s web-a); not when one of its pods (here web-b) opted out."""
    from foresize.core.cluster.actions import RestartWorkload
    from foresize.core.cluster.model import Container, ResourceRequirements
    from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle
    from support.guard import _revert_snapshot
    from support.lifecycle import _target, _with

    def lifecycle(opt_out: bool) -> Any:
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
        if opt_out:
            annotated(next(p for p in s.pods if p.name == "web-b"), DO_NOT_DISRUPT)
        return plan_lifecycle(s, 0.0, LifecycleState())

    restarts = [a.name for a in lifecycle(False).actions if isinstance(a, RestartWorkload)]
    assert restarts == ["web"]
    lp = lifecycle(True)
    assert not [a for a in lp.actions if isinstance(a, RestartWorkload)]
    left = [e for e in lp.actions if isinstance(e, EmitEvent) and e.name == "web-a"]
    assert any("opts out of voluntary disruption" in e.message for e in left)
