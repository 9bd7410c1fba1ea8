"""Builders shared by the tests (moved out of test_capacity_guard.py)."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_daemonset_autoscaler, parse_target
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    ContainerSuggestion,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    ResourceRequirements,
    Suggestion,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot

GIB = 1024 * MIB


def _pod(
    name: str, node: str, cpu: int, *, owner: OwnerRef, labels: dict[str, str], ns: str
) -> Pod:
    req = {"cpu": cpu, "memory": 100 * MIB}
    return Pod(
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        labels=labels,
        owner=owner,
        node_name=node,
        containers=[Container("app", ResourceRequirements(dict(req), {}))],
        phase="Running",
        conditions=[PodCondition("Ready", "True")],
        container_statuses=[
            ContainerStatus("app", allocated=dict(req), resources=ResourceRequirements(req, {}))
        ],
    )


def _node(name: str, cpu: int) -> Node:
    return Node(name, allocatable={"cpu": cpu, "memory": 64 * GIB})


def _dsa() -> Any:
    return parse_daemonset_autoscaler(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "mon", "uid": "dsa-uid"},
            "spec": {
                "scaleTargetRef": {"name": "agent"},
                "scaleMode": "autonomous",
                "containers": [
                    {"name": "*", "cpu": {"lowerbound": "10m"}, "memory": {"lowerbound": "32Mi"}}
                ],
            },
        }
    )


def _dsa_snapshot(full_cpu: int = 1000) -> ClusterSnapshot:
    ds = OwnerRef("DaemonSet", "agent")
    agents = [
        _pod("agent-full", "full", 200, owner=ds, labels={"app": "agent"}, ns="mon"),
        _pod("agent-roomy", "roomy", 200, owner=ds, labels={"app": "agent"}, ns="mon"),
    ]
    # The "full" node: an unrelated pod takes what the agent leaves (100m free).
    filler = _pod("filler", "full", full_cpu - 300, owner=None, labels={}, ns="default")
    return ClusterSnapshot(
        now=0.0,
        nodes={"full": _node("full", full_cpu), "roomy": _node("roomy", 8000)},
        pods=[*agents, filler],
        workloads={"DaemonSet/mon/agent": Workload("DaemonSet", "mon", "agent", replicas=2)},
        daemonset_autoscalers=[_dsa()],
    )


def _in_place_target(namespace: str, name: str) -> Any:
    """An autonomous AIScaleTarget resizing its Deployment `name` in place."""
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": name, "namespace": namespace, "uid": f"t-{name}"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": name},
                "vertical": {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}},
            },
        }
    )


def _sugg_all(cpu: int) -> Suggestion:
    return Suggestion("s", 0.0, {"*": ContainerSuggestion("*", {"cpu": cpu, "memory": 100 * MIB})})


def _revert_snapshot(template_cpu: int) -> ClusterSnapshot:
    rs = OwnerRef("ReplicaSet", "web-abc")
    pods = [
        _pod("web-a", "full", 200, owner=rs, labels={"app": "web"}, ns="default"),
        _pod("web-b", "roomy", 200, owner=rs, labels={"app": "web"}, ns="default"),
        _pod("filler", "full", 700, owner=None, labels={}, ns="default"),
    ]
    template = [Container("app", ResourceRequirements({"cpu": template_cpu, "memory": 100 * MIB}))]
    from foresize.core.cluster.model import PodTemplate

    dep = Workload(
        "Deployment", "default", "web", replicas=2, template=PodTemplate(containers=template)
    )
    rs_wl = Workload(
        "ReplicaSet",
        "default",
        "web-abc",
        replicas=2,
        owner=OwnerRef("Deployment", "web"),
        template=PodTemplate(containers=template),
    )
    target = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "default", "uid": "t-web"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {"mode": "recommendation"},
            },
            "status": {"lifecycle": {"observed_mode": "autonomous"}},
        }
    )
    return ClusterSnapshot(
        now=0.0,
        nodes={"full": _node("full", 1000), "roomy": _node("roomy", 8000)},
        pods=pods,
        workloads={dep.key: dep, rs_wl.key: rs_wl},
        targets=[target],
    )
