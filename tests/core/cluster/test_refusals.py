"""Resizes the API server refuses outright (`cluster.refusals`): Kubernetes 1.36+'s
admission refusal (403, cause NodeCapacity: the ask exceeds the node's allocatable,
kubernetes #136043) and 422. Every resize path honours it: the disruption worker (its
own tests: tests/core/vertical), the DaemonSetAutoscaler and the revert (here): the same
change is not sent again, the fallback is the one of an Infeasible resize, and the
status says why. Opt-outs of voluntary disruption (`karpenter.sh/do-not-disrupt`,
`cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`) also hold the restarting
resizes of those two paths."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_daemonset_autoscaler, parse_target
from foresize.core.cluster.actions import (
    ActionResult,
    ContainerResize,
    EmitEvent,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.core.cluster.model import (
    RESTART_CONTAINER,
    Container,
    ContainerStatus,
    ContainerSuggestion,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    PodTemplate,
    ResourceRequirements,
    Suggestion,
    Workload,
)
from foresize.core.cluster.refusals import prune, record_refusal, refusal_of
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.lifecycle.daemonset import plan_dsa
from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle
from foresize.core.reconcile import ActionQueue, ReconcileState, plan_pass
from foresize.core.vertical import WorkerState

NODE_CAPACITY_403 = ActionResult(
    ok=False,
    code=403,
    reason="Forbidden",
    message="Node didn't have enough capacity: cpu, requested: 9000, capacity: 8000",
    causes=({"type": "NodeCapacity", "message": "cpu"},),
)
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


def _pod(name: str, owner: OwnerRef, ns: str, *, mem: int = 100 * MIB, **kw: Any) -> Pod:
    req = {"cpu": 200, "memory": mem}
    return Pod(
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        labels={"app": owner.name},
        owner=owner,
        node_name=f"node-{name}",
        containers=[Container("app", ResourceRequirements(dict(req), {}), **kw)],
        phase="Running",
        conditions=[PodCondition("Ready", "True")],
        container_statuses=[
            ContainerStatus("app", allocated=dict(req), resources=ResourceRequirements(req, {}))
        ],
    )


def _nodes(pods: list[Pod]) -> dict[str, Node]:
    return {
        p.node_name: Node(p.node_name, allocatable={"cpu": 8000, "memory": 64 * 1024 * MIB})
        for p in pods
        if p.node_name
    }


def _resize(pod: str, cpu: int, uid: str | None = None) -> ResizePod:
    return ResizePod(
        "mon", pod, (ContainerResize("app", {"cpu": cpu}),), "mon/agent", uid=uid or f"uid-{pod}"
    )


# ----------------------------------------------------------------------- the flag


def test_the_flag_is_a_node_capacity_403_or_a_422_and_nothing_else() -> None:
    assert NODE_CAPACITY_403.resize_refused and NODE_CAPACITY_403.node_capacity_refused
    rbac = ActionResult(ok=False, code=403, reason="Forbidden", message="cannot patch pods")
    assert not rbac.resize_refused and not rbac.node_capacity_refused
    invalid = ActionResult(ok=False, code=422, reason="Invalid")
    assert invalid.resize_refused and not invalid.node_capacity_refused
    for other in (
        ActionResult(ok=True),
        ActionResult(ok=False, code=409),
        ActionResult(False, 500),
    ):
        assert not other.resize_refused


def test_a_refusal_is_of_one_change_of_one_pod() -> None:
    refusals: dict[str, Any] = {}
    assert not record_refusal(refusals, _resize("a", 9000), ActionResult(ok=False, code=409), 1.0)
    assert record_refusal(refusals, _resize("a", 9000), NODE_CAPACITY_403, 5.0)
    got = refusal_of(refusals, _resize("a", 9000))
    assert got is not None and got.pod == "mon/a" and got.at == 5.0
    assert "403 NodeCapacity" in got.describe() and "capacity: 8000" in got.describe()
    assert refusal_of(refusals, _resize("a", 7000)) is None  # another change: may land
    assert refusal_of(refusals, _resize("a", 9000, uid="uid-new")) is None  # another pod
    assert prune(refusals, {"uid-b"}) == {}
    assert prune(refusals, {"uid-a"}) == refusals


# ----------------------------------------------------------------------- DaemonSetAutoscaler


def _dsa() -> Any:
    return parse_daemonset_autoscaler(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "mon", "uid": "dsa-uid"},
            "spec": {
                "scaleTargetRef": {"name": "agent"},
                "scaleMode": "autonomous",
                "containers": [{"name": "*"}],
            },
        }
    )


def _dsa_snapshot(pods: list[Pod]) -> ClusterSnapshot:
    return ClusterSnapshot(
        now=0.0,
        nodes=_nodes(pods),
        pods=pods,
        workloads={"DaemonSet/mon/agent": Workload("DaemonSet", "mon", "agent", replicas=2)},
        daemonset_autoscalers=[_dsa()],
    )


def _agents(**kw: Any) -> list[Pod]:
    return [_pod(f"agent-{i}", OwnerRef("DaemonSet", "agent"), "mon", **kw) for i in range(2)]


def _suggest(cpu: int, mem: int = 100 * MIB) -> Suggestion:
    return Suggestion("s", 0.0, {"*": ContainerSuggestion("*", {"cpu": cpu, "memory": mem})})


def _resized(actions: list[Any]) -> list[str]:
    return sorted(a.name for a in actions if isinstance(a, ResizePod))


def _dsa_status(actions: list[Any]) -> dict[str, Any]:
    (status,) = [a for a in actions if isinstance(a, WriteTargetStatus)]
    return status.status


def test_a_refused_daemonset_resize_is_not_sent_again_until_the_suggestion_changes() -> None:
    pods = _agents()
    first = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(400), 0.0)
    sent = [a for a in first.actions if isinstance(a, ResizePod)]
    assert _resized(sent) == ["agent-0", "agent-1"]
    refusals: dict[str, Any] = {}
    record_refusal(refusals, sent[0], NODE_CAPACITY_403, 0.0)
    again = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(400), 900.0, refusals=refusals)
    assert _resized(again.actions) == ["agent-1"]
    skipped = _dsa_status(again.actions)["pods_skipped"]
    assert "403 NodeCapacity" in skipped["mon/agent-0"]
    assert "not sent again" in skipped["mon/agent-0"]
    # A new suggestion is a new change: it is tried.
    moved = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(300), 1800.0, refusals=refusals)
    assert _resized(moved.actions) == ["agent-0", "agent-1"]


def test_an_opted_out_daemonset_pod_gets_no_restarting_resize() -> None:
    pods = _agents(resize_policy={"memory": RESTART_CONTAINER})
    pods[0].annotations = dict(DO_NOT_DISRUPT)
    dp = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(200, 300 * MIB), 0.0)
    assert _resized(dp.actions) == ["agent-1"]
    why = _dsa_status(dp.actions)["pods_skipped"]["mon/agent-0"]
    assert "RestartContainer" in why and 'karpenter.sh/do-not-disrupt="true"' in why
    # A resize that restarts nothing still goes in place.
    dp = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(400), 0.0)
    assert _resized(dp.actions) == ["agent-0", "agent-1"]


def test_the_pass_remembers_a_daemonset_refusal_from_the_answer_to_the_next_interval() -> None:
    """Through the shells' loop (`plan_pass`, `ActionQueue.feed`): the 403 of one agent's
    resize is kept in the worker state, which has no AIScaleTarget for the DSA."""
    from foresize.core.lifecycle.daemonset import UsageWindow

    pods = _agents()
    usage = UsageWindow()
    for t in range(0, 4 * 3600, 300):
        for c in ("app",):
            usage.add("mon", "agent", c, float(t), [0.4, 0.4], [100.0 * MIB, 100.0 * MIB])
    state = ReconcileState()
    sent: list[str] = []
    for now in (4 * 3600.0, 4 * 3600.0 + 900):
        decided = plan_pass(_dsa_snapshot(pods), now, state, None, dsa_usage=usage)
        queue = ActionQueue(decided.actions, decided.state.worker, now)
        while (action := queue.next()) is not None:
            if isinstance(action, ResizePod):
                sent.append(action.name)
                queue.feed(action, NODE_CAPACITY_403 if action.name == "agent-0" else OK)
            else:
                queue.feed(action, OK)
        state = decided.state
        state.worker = queue.state
        pods[1].containers[0].resources.requests["cpu"] = 400  # agent-1's resize landed
        pods[1].container_statuses[0].allocated["cpu"] = 400
    assert sent.count("agent-0") == 1 and sent.count("agent-1") == 1
    assert "uid-agent-0" in state.worker.refusals


OK = ActionResult(ok=True)


# ----------------------------------------------------------------------- revert


def _revert_snapshot(pods: list[Pod], update_mode: str) -> ClusterSnapshot:
    template = [Container("app", ResourceRequirements({"cpu": 200, "memory": 100 * MIB}))]
    rs = Workload(
        "ReplicaSet",
        "shop",
        "web-abc",
        replicas=2,
        owner=OwnerRef("Deployment", "web"),
        template=PodTemplate(containers=template),
    )
    dep = Workload("Deployment", "shop", "web", replicas=2, template=PodTemplate(template))
    target = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop", "uid": "t-web"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "recommendation",
                    "update_policy": {"update_mode": update_mode},
                },
            },
            "status": {"lifecycle": {"observed_mode": "autonomous"}},
        }
    )
    return ClusterSnapshot(
        now=0.0,
        nodes=_nodes(pods),
        pods=pods,
        workloads={rs.key: rs, dep.key: dep},
        targets=[target],
    )


def _web(**kw: Any) -> list[Pod]:
    rs = OwnerRef("ReplicaSet", "web-abc")
    return [_pod(f"web-{i}", rs, "shop", mem=300 * MIB, **kw) for i in range(2)]


def _revert_of(pod: Pod) -> ResizePod:
    return ResizePod(
        pod.namespace,
        pod.name,
        (ContainerResize("app", {"memory": 100 * MIB}, {}),),
        "shop/web",
        uid=pod.uid,
    )


def _revert(actions: list[Any]) -> dict[str, Any]:
    (status,) = [a for a in actions if isinstance(a, WriteTargetStatus) and "revert" in a.status]
    return status.status["revert"]


def test_a_refused_revert_restarts_the_workload_where_the_mode_recreates() -> None:
    pods = _web()
    refusals: dict[str, Any] = {}
    record_refusal(refusals, _revert_of(pods[0]), NODE_CAPACITY_403, 0.0)
    snap = _revert_snapshot(pods, "in_place_or_recreate")
    lp = plan_lifecycle(snap, 10.0, LifecycleState(), refusals=refusals)
    assert [a.name for a in lp.actions if isinstance(a, RestartWorkload)] == ["web"]
    assert _resized(lp.actions) == []  # the restart recreates both pods anyway


def test_a_refused_revert_is_left_and_said_where_the_mode_does_not_recreate() -> None:
    pods = _web()
    refusals: dict[str, Any] = {}
    record_refusal(refusals, _revert_of(pods[0]), NODE_CAPACITY_403, 0.0)
    lp = plan_lifecycle(
        _revert_snapshot(pods, "in_place"), 10.0, LifecycleState(), refusals=refusals
    )
    assert _resized(lp.actions) == ["web-1"]  # the other pod's revert still goes
    assert not [a for a in lp.actions if isinstance(a, RestartWorkload)]
    (left,) = _revert(lp.actions)["pods_left"]
    assert left["pod"] == "shop/web-0" and "403 NodeCapacity" in left["reason"]
    assert [e.reason for e in lp.actions if isinstance(e, EmitEvent) and e.name == "web-0"] == [
        "RevertNotInPlace"
    ]
    # web-1's revert landed: the next pass resends nothing and the revert is done.
    pods[1].containers[0].resources.requests["memory"] = 100 * MIB
    pods[1].container_statuses[0].allocated["memory"] = 100 * MIB
    nxt = plan_lifecycle(_revert_snapshot(pods, "in_place"), 20.0, lp.state, refusals=refusals)
    assert _resized(nxt.actions) == [] and not nxt.state.jobs


def test_a_revert_resize_that_restarts_an_opted_out_pod_is_not_sent() -> None:
    pods = _web(resize_policy={"memory": RESTART_CONTAINER})
    pods[1].annotations = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    lp = plan_lifecycle(_revert_snapshot(pods, "in_place"), 0.0, LifecycleState())
    assert _resized(lp.actions) == ["web-0"]
    (left,) = _revert(lp.actions)["pods_left"]
    assert left["pod"] == "shop/web-1" and "RestartContainer" in left["reason"]
    assert 'safe-to-evict="false"' in left["reason"]


def test_a_copy_of_the_worker_state_has_its_own_refusals() -> None:
    state = WorkerState()
    record_refusal(state.refusals, _resize("a", 9000), NODE_CAPACITY_403, 0.0)
    copy = state.copy()
    copy.refusals.clear()
    assert list(state.refusals) == ["uid-a"]
