"""Builders shared by the tests (moved out of test_vertical_planner.py)."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import (
    ActionResult,
    EvictPod,
)
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    ContainerSuggestion,
    HorizontalPodAutoscaler,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    ResourceRequirements,
    Suggestion,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.vertical.policy import policy_of

KEY = "default/web"


def target(
    update_mode: str = "in_place",
    name: str = "web",
    min_replicas: int | None = None,
    **vertical: Any,
) -> Any:
    disruption = vertical.pop("disruption", {})
    update_policy: dict[str, Any] = {"update_mode": update_mode}
    if min_replicas is not None:
        update_policy["min_replicas"] = min_replicas
    spec: dict[str, Any] = {
        "mode": vertical.pop("mode", "autonomous"),
        "update_policy": update_policy,
        "disruption": disruption,
        **vertical,
    }
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": name, "namespace": "default", "uid": f"t-{name}"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": name}, "vertical": spec},
        }
    )


def pod(
    name: str,
    node: str = "n1",
    cpu: int = 100,
    mem: int = 100 * MIB,
    *,
    owner: str = "web",
    limits: dict[str, int] | None = None,
    alloc: dict[str, int] | None = None,
    priority: int = 0,
    ready: bool = True,
    conditions: list[PodCondition] | None = None,
    generation: int = 1,
    observed: int = 1,
    created: float = 0.0,
    resize_policy: dict[str, str] | None = None,
    terminating: bool = False,
    oom_at: float | None = None,
) -> Pod:
    req = {"cpu": cpu, "memory": mem}
    allocated = dict(alloc or req)
    lim = dict(limits or {})
    conds = [PodCondition("Ready", "True" if ready else "False"), *(conditions or [])]
    return Pod(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        labels={"app": owner},
        owner=OwnerRef("Deployment", owner),
        node_name=node,
        priority=priority,
        containers=[
            Container("app", ResourceRequirements(req, lim), resize_policy=resize_policy or {})
        ],
        phase="Running",
        conditions=conds,
        container_statuses=[
            ContainerStatus(
                "app",
                allocated=allocated,
                resources=ResourceRequirements(dict(allocated), lim),
                last_termination_reason="OOMKilled" if oom_at is not None else None,
                last_termination_time=oom_at,
            )
        ],
        generation=generation,
        observed_generation=observed,
        creation_time=created,
        deletion_time=5.0 if terminating else None,
    )


def deferred(msg: str = "") -> PodCondition:
    return PodCondition("PodResizePending", "True", "Deferred", msg)


def error() -> PodCondition:
    return PodCondition("PodResizeInProgress", "True", "Error", "memory limit below usage")


def snap(
    pods: list[Pod],
    targets: list[Any],
    *,
    replicas: dict[str, int] | None = None,
    nodes: dict[str, int] | None = None,
    hpas: list[HorizontalPodAutoscaler] | None = None,
    labels: dict[str, dict[str, str]] | None = None,
) -> ClusterSnapshot:
    owners = {p.owner.name for p in pods if p.owner} | {policy_of(t).ref_name for t in targets}
    replicas = replicas or {}
    labels = labels or {}
    wls = {
        f"Deployment/default/{o}": Workload(
            "Deployment",
            "default",
            o,
            replicas=replicas.get(o, sum(1 for p in pods if p.owner and p.owner.name == o)),
            labels=labels.get(o, {}),
        )
        for o in owners
    }
    node_cpu = nodes or {"n1": 64000, "n2": 64000}
    return ClusterSnapshot(
        now=0.0,
        nodes={
            n: Node(n, allocatable={"cpu": c, "memory": 256 * 1024 * MIB})
            for n, c in node_cpu.items()
        },
        pods=pods,
        workloads=wls,
        hpas=hpas or [],
        targets=targets,
    )


def sugg(cpu: int = 200, mem: int = 200 * MIB, uid: str = "s1", limits: dict | None = None) -> dict:
    return {
        KEY: Suggestion(
            uid, 0.0, {"*": ContainerSuggestion("*", {"cpu": cpu, "memory": mem}, limits or {})}
        )
    }


def of(actions: list, kind: type) -> list:
    return [a for a in actions if isinstance(a, kind)]


def names(actions: list, kind: type) -> list[str]:
    return sorted(a.name for a in of(actions, kind))


def apply_ok(action: Any) -> ActionResult:
    return ActionResult(ok=True, code=201 if isinstance(action, EvictPod) else 200)


def selector_target(update_mode: str, min_replicas: int = 2, **disruption: Any) -> Any:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "default", "uid": "t-sel"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "vertical": {
                    "mode": "autonomous",
                    "update_policy": {"update_mode": update_mode, "min_replicas": min_replicas},
                    "disruption": {"max_disrupted": 5, **disruption},
                },
            },
        }
    )
