"""seed.md N2: a resize that restarts a container (resizePolicy RestartContainer) is a
disruption on every path, paced like the disruption worker's (`cluster.disruption`): the
DaemonSetAutoscaler's resizes and the revert on leaving autonomous mode send at most
`max_disrupted` (20% by default, rounded up) restarting resizes at once, count the pods
already disrupted (not Ready, terminating, a restarting resize not yet actuated) against
it, and leave `interval` (60 s) between batches; the rest wait, and say so in status.
Resizes that restart nothing are not paced (as before). The simulator and the kube shell
run the same pass: tests/core/lifecycle/test_dsa.py and
tests/shells/kube/test_kube_daemonset.py check it there."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_daemonset_autoscaler, parse_target
from foresize.core.cluster.actions import ContainerResize, ResizePod, WriteTargetStatus
from foresize.core.cluster.disruption import batch_size, disrupted, resize_restarts, restart_batch
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
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.lifecycle.daemonset import plan_dsa
from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle

MEMORY_RESTARTS = {"memory": RESTART_CONTAINER}


def _pod(
    name: str,
    owner: OwnerRef,
    labels: dict[str, str],
    ns: str,
    *,
    mem: int = 100 * MIB,
    policy: dict[str, str] | None = None,
    ready: bool = True,
) -> Pod:
    req = {"cpu": 200, "memory": mem}
    return Pod(
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        labels=labels,
        owner=owner,
        node_name=f"node-{name}",
        containers=[
            Container("app", ResourceRequirements(dict(req), {}), resize_policy=dict(policy or {}))
        ],
        phase="Running",
        conditions=[PodCondition("Ready", "True" if ready else "False")],
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


# ----------------------------------------------------------------------- the shared rule


def test_a_resize_restarts_a_container_only_where_a_changed_resource_says_restart():
    p = _pod("p", OwnerRef("DaemonSet", "agent"), {}, "mon", policy=MEMORY_RESTARTS)
    assert resize_restarts(p, [ContainerResize("app", requests={"memory": 300 * MIB})])
    assert resize_restarts(p, [ContainerResize("app", limits={"memory": 300 * MIB})])
    # cpu is NotRequired (the default): changing only cpu restarts nothing.
    assert not resize_restarts(p, [ContainerResize("app", requests={"cpu": 400})])
    # The same memory value is no change.
    assert not resize_restarts(p, [ContainerResize("app", requests={"memory": 100 * MIB})])
    plain = _pod("q", OwnerRef("DaemonSet", "agent"), {}, "mon")
    assert not resize_restarts(plain, [ContainerResize("app", requests={"memory": 300 * MIB})])


def test_the_batch_counts_pods_already_disrupted_and_waits_for_the_interval():
    ds = OwnerRef("DaemonSet", "agent")
    pods = [_pod(f"a{i}", ds, {}, "mon") for i in range(10)]
    assert batch_size("20%", 10) == 2 and restart_batch(pods, "20%", 60.0, None, 0.0).left == 2
    pods[0].conditions = [PodCondition("Ready", "False")]
    # A restarting resize sent, not actuated yet: the container will restart when it lands.
    pods[1].containers[0].resize_policy = dict(MEMORY_RESTARTS)
    pods[1].containers[0].resources.requests["memory"] = 300 * MIB
    assert disrupted(pods[0]) and disrupted(pods[1]) and not disrupted(pods[2])
    assert restart_batch(pods, "20%", 60.0, None, 0.0).left == 0
    fresh = [_pod(f"b{i}", ds, {}, "mon") for i in range(10)]
    assert restart_batch(fresh, "20%", 60.0, 0.0, 59.0).left == 0  # paced
    assert restart_batch(fresh, "20%", 60.0, 0.0, 60.0).left == 2


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
        workloads={"DaemonSet/mon/agent": Workload("DaemonSet", "mon", "agent", replicas=10)},
        daemonset_autoscalers=[_dsa()],
    )


def _agents(policy: dict[str, str] | None = MEMORY_RESTARTS) -> list[Pod]:
    ds = OwnerRef("DaemonSet", "agent")
    return [_pod(f"agent-{i}", ds, {"app": "agent"}, "mon", policy=policy) for i in range(10)]


def _suggest(cpu: int, mem: int) -> Suggestion:
    return Suggestion("s", 0.0, {"*": ContainerSuggestion("*", {"cpu": cpu, "memory": mem})})


def _resized(actions: list) -> list[str]:
    return sorted(a.name for a in actions if isinstance(a, ResizePod))


def test_restarting_daemonset_resizes_go_out_in_batches_an_interval_apart():
    """R2 of the audit: 10 DaemonSet pods, memory RestartContainer, a memory change. Before:
    10 of 10 restarting resizes in one pass; now the default batch, 2."""
    pods = _agents()
    dp = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(200, 300 * MIB), 0.0)
    assert _resized(dp.actions) == ["agent-0", "agent-1"] and dp.batch_sent
    assert dp.paced == [f"mon/agent-{i}" for i in range(2, 10)]
    (status,) = [a for a in dp.actions if isinstance(a, WriteTargetStatus)]
    assert status.status["pods_waiting_for_disruption_batch"] == 8
    # 30 s later: the interval has not passed, nothing more goes out.
    later = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(200, 300 * MIB), 30.0, None, 0.0)
    assert _resized(later.actions) == [] and not later.batch_sent and len(later.paced) == 10
    # Past the interval, with the first two still restarting (sent, not actuated): they
    # count against the batch, so nothing more either.
    for p in pods[:2]:
        p.containers[0].resources.requests["memory"] = 300 * MIB
    held = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(200, 300 * MIB), 61.0, None, 0.0)
    assert _resized(held.actions) == []
    # Landed: the next two.
    for p in pods[:2]:
        p.container_statuses[0].allocated["memory"] = 300 * MIB
    nxt = plan_dsa(_dsa_snapshot(pods), _dsa(), _suggest(200, 300 * MIB), 61.0, None, 0.0)
    assert _resized(nxt.actions) == ["agent-2", "agent-3"]


def test_daemonset_resizes_that_restart_nothing_are_not_paced():
    # cpu only changes (NotRequired): every pod in one pass, as before.
    dp = plan_dsa(_dsa_snapshot(_agents()), _dsa(), _suggest(400, 100 * MIB), 0.0)
    assert len(_resized(dp.actions)) == 10 and not dp.paced and not dp.batch_sent
    # No resizePolicy at all: a memory change restarts nothing either.
    dp = plan_dsa(_dsa_snapshot(_agents(None)), _dsa(), _suggest(200, 300 * MIB), 0.0)
    assert len(_resized(dp.actions)) == 10 and not dp.paced


# ----------------------------------------------------------------------- revert


def _revert_snapshot(pods: list[Pod], max_disrupted: Any = None) -> ClusterSnapshot:
    template = [Container("app", ResourceRequirements({"cpu": 200, "memory": 100 * MIB}))]
    rs = Workload(
        "ReplicaSet",
        "shop",
        "web-abc",
        replicas=10,
        owner=OwnerRef("Deployment", "web"),
        template=PodTemplate(containers=template),
    )
    dep = Workload("Deployment", "shop", "web", replicas=10, template=PodTemplate(template))
    vertical: dict[str, Any] = {"mode": "recommendation"}
    if max_disrupted is not None:
        vertical["disruption"] = {"max_disrupted": max_disrupted, "interval": "5m"}
    target = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop", "uid": "t-web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "vertical": vertical},
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


def _web(policy: dict[str, str] | None = MEMORY_RESTARTS) -> list[Pod]:
    rs = OwnerRef("ReplicaSet", "web-abc")
    return [
        _pod(f"web-{i}", rs, {"app": "web"}, "shop", mem=300 * MIB, policy=policy)
        for i in range(10)
    ]


def test_restarting_revert_resizes_go_out_in_batches_and_the_revert_stays_open():
    """R2 of the audit: 10 pods of a Deployment leaving autonomous mode, 300Mi back to the
    template's 100Mi, memory RestartContainer. Before: 10 of 10 in one pass."""
    pods = _web()
    lp = plan_lifecycle(_revert_snapshot(pods), 0.0, LifecycleState())
    assert _resized(lp.actions) == ["web-0", "web-1"]
    (job,) = lp.state.jobs.values()
    assert job.last_batch_at == 0.0  # the revert is still open, its batch remembered
    (status,) = [a for a in lp.actions if isinstance(a, WriteTargetStatus) and "revert" in a.status]
    assert status.status["revert"]["pods_waiting_for_disruption_batch"] == [
        f"shop/web-{i}" for i in range(2, 10)
    ]
    assert "8 restarting resize(s) waiting for a next batch" in status.status["revert"]["message"]
    # The first two landed; 30 s later the interval has not passed.
    for p in pods[:2]:
        p.containers[0].resources.requests["memory"] = 100 * MIB
        p.container_statuses[0].allocated["memory"] = 100 * MIB
    lp = plan_lifecycle(_revert_snapshot(pods), 30.0, lp.state)
    assert _resized(lp.actions) == []
    lp = plan_lifecycle(_revert_snapshot(pods), 60.0, lp.state)
    assert _resized(lp.actions) == ["web-2", "web-3"]


def test_the_revert_batch_is_the_targets_disruption_policy_and_survives_a_restart():
    pods = _web()
    # max_disrupted 3, interval 5m, from the target's spec.vertical.disruption.
    lp = plan_lifecycle(_revert_snapshot(pods, max_disrupted=3), 100.0, LifecycleState())
    assert _resized(lp.actions) == ["web-0", "web-1", "web-2"]
    # The operator restarts: a fresh state reads the revert (and its batch time) from status.
    (written,) = [
        a for a in lp.actions if isinstance(a, WriteTargetStatus) and "lifecycle" in a.status
    ]
    restarted = _revert_snapshot(pods, max_disrupted=3)
    restarted.targets[0].status = restarted.targets[0].status.model_validate(
        {**restarted.targets[0].status.model_dump(), **written.status}
    )
    lp = plan_lifecycle(restarted, 200.0, LifecycleState())
    assert _resized(lp.actions) == []  # 100 s after the batch: within its 5m interval


def test_revert_resizes_that_restart_nothing_are_not_paced():
    lp = plan_lifecycle(_revert_snapshot(_web(None)), 0.0, LifecycleState())
    assert len(_resized(lp.actions)) == 10
