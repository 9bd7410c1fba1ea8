"""The two shells run the same pass: a differential test.

Over seeded random simulated clusters (workloads, replicas, requests and limits, usage
that grows past its requests, update modes, server versions), the simulator is run for a
while under the Foresize operator, then its state is taken two ways:

- the simulator shell's snapshot (`SimCluster.snapshot()`, the objects as the simulator
  holds them, targets carrying the status the operator wrote);
- the kube shell's snapshot: every object written out as the Kubernetes JSON an API
  server would serve, fed through the kube shell's watch cache (`kube.state.ClusterState`,
  i.e. `cluster.kubejson` conversion and `api.types` parsing of the targets).

`reconcile.plan_pass` on each, with the same pass state, the same usage history and the
same DaemonSet usage window, must give the same actions (recommendations, DaemonSet
suggestions and resizes, in-place gate, vertical resizes, evictions, status writes). Both
shells call `plan_pass`; the test pins down that the inputs they build are equivalent and
that the pass depends on nothing else.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from foresize.core.api.fields import format_timestamp
from foresize.core.api.quantity import MIB, format_quantity
from foresize.core.api.types import parse_daemonset_autoscaler, parse_object
from foresize.core.cluster.actions import ResizePod
from foresize.core.cluster.model import Container, ContainerStatus, Node, Pod, Workload
from foresize.core.reconcile import ReconcileState, plan_pass
from foresize.core.vertical import WorkerConfig
from foresize.shells.kube.state import ClusterState
from foresize.shells.sim.operator import OperatorOptions, SimOperator
from foresize.shells.sim.recommenders import FixedRecommender, ForesizeRecommender
from support.sim import container, make_sim, workload

SEEDS = range(8)


def _quantities(values: dict[str, int]) -> dict[str, str]:
    return {r: format_quantity(r, v) for r, v in values.items()}


def _time(value: float | None) -> str | None:
    if value is None:
        return None
    assert value == int(value), f"sub-second time {value} would not survive RFC 3339"
    return format_timestamp(value)


def _container_json(c: Container) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "resources": {
            "requests": _quantities(c.resources.requests),
            "limits": _quantities(c.resources.limits),
        },
        "resizePolicy": [
            {"resourceName": r, "restartPolicy": p} for r, p in c.resize_policy.items()
        ],
    }
    if c.restart_policy is not None:
        out["restartPolicy"] = c.restart_policy
    return out


def _status_json(s: ContainerStatus) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": s.name,
        "allocatedResources": _quantities(s.allocated),
        "resources": {
            "requests": _quantities(s.resources.requests),
            "limits": _quantities(s.resources.limits),
        },
        "ready": s.ready,
        "restartCount": s.restart_count,
    }
    if s.last_termination_reason is not None:
        out["lastState"] = {
            "terminated": {
                "reason": s.last_termination_reason,
                "finishedAt": _time(s.last_termination_time),
            }
        }
    return out


def pod_json(p: Pod) -> dict[str, Any]:
    """The Pod as the API server serves it (what `kubejson.pod_from` reads)."""
    meta: dict[str, Any] = {
        "namespace": p.namespace,
        "name": p.name,
        "uid": p.uid,
        "labels": dict(p.labels),
        "annotations": dict(p.annotations),
        "generation": p.generation,
        "creationTimestamp": _time(p.creation_time),
    }
    if p.owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": p.owner.api_version or "apps/v1",
                "kind": p.owner.kind,
                "name": p.owner.name,
                "uid": p.owner.uid,
                "controller": p.owner.controller,
            }
        ]
    if p.deletion_time is not None:
        meta["deletionTimestamp"] = _time(p.deletion_time)
    spec: dict[str, Any] = {
        "priority": p.priority,
        "containers": [_container_json(c) for c in p.containers],
        "initContainers": [_container_json(c) for c in p.init_containers],
        "restartPolicy": p.restart_policy,
        "os": {"name": p.os},
    }
    if p.node_name is not None:
        spec["nodeName"] = p.node_name
    if p.resources is not None:
        spec["resources"] = {
            "requests": _quantities(p.resources.requests),
            "limits": _quantities(p.resources.limits),
        }
    if p.overhead:
        spec["overhead"] = _quantities(p.overhead)
    status: dict[str, Any] = {
        "phase": p.phase,
        "observedGeneration": p.observed_generation,
        "conditions": [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": _time(c.last_transition_time),
            }
            for c in p.conditions
        ],
        "containerStatuses": [_status_json(s) for s in p.container_statuses],
        "initContainerStatuses": [_status_json(s) for s in p.init_container_statuses],
    }
    if p.start_time is not None:
        status["startTime"] = _time(p.start_time)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def node_json(n: Node) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n.name, "labels": dict(n.labels)},
        "spec": {"unschedulable": n.unschedulable},
        "status": {
            "allocatable": _quantities(n.allocatable),
            "capacity": _quantities(n.capacity),
            "conditions": [{"type": "Ready", "status": "True" if n.ready else "False"}],
        },
    }


def workload_json(w: Workload) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": w.namespace,
        "name": w.name,
        "uid": w.uid,
        "labels": dict(w.labels),
    }
    if w.owner is not None:
        meta["ownerReferences"] = [
            {"kind": w.owner.kind, "name": w.owner.name, "uid": w.owner.uid, "controller": True}
        ]
    template_spec: dict[str, Any] = {
        "containers": [_container_json(c) for c in w.template.containers],
        "initContainers": [_container_json(c) for c in w.template.init_containers],
        "priority": w.template.priority,
    }
    spec = {
        "replicas": w.replicas,
        "paused": w.paused,
        "selector": {"matchLabels": dict(w.selector)},
        "template": {
            "metadata": {
                "labels": dict(w.template.labels),
                "annotations": dict(w.template.annotations),
            },
            "spec": template_spec,
        },
    }
    status = {"desiredNumberScheduled": w.replicas} if w.kind == "DaemonSet" else {}
    return {"kind": w.kind, "metadata": meta, "spec": spec, "status": status}


def kube_snapshot(sim: Any, now: float) -> Any:
    """The simulator's objects through the kube shell's watch cache."""
    state = ClusterState(target_parser=lambda kind, obj: parse_object(obj, kind))
    snap = sim.snapshot()
    state.replace("Node", [node_json(n) for n in snap.nodes.values()])
    state.replace("Pod", [pod_json(p) for p in snap.pods])
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for w in snap.workloads.values():
        by_kind.setdefault(w.kind, []).append(workload_json(w))
    for kind, items in by_kind.items():
        state.replace(kind, items)
    state.replace("AIScaleTarget", [t.to_kube() for t in snap.targets])
    state.replace("DaemonSetAutoscaler", [d.to_kube() for d in snap.daemonset_autoscalers])
    state.server_version = snap.server_version
    return state.snapshot(now)


class Differential:
    """Before every pass of the simulated operator: the pass on the simulator's snapshot
    and on the kube shell's snapshot of the same objects, with the operator's own pass
    state and history, must decide the same actions."""

    def __init__(self) -> None:
        self.compared = 0
        self.kinds: set[str] = set()

    @staticmethod
    def inputs(op: SimOperator) -> tuple[Any, Any]:
        """(history, suggestion overrides) as the simulated operator passes them."""
        if isinstance(op.rec, ForesizeRecommender):
            return op.rec.history, None
        return None, dict(op.suggestions)

    def check(self, sim: Any, op: SimOperator, now: float) -> None:
        sim_snap = sim.snapshot()
        kube_snap = kube_snapshot(sim, now)
        history, overrides = self.inputs(op)
        plans = [
            plan_pass(
                snap,
                now,
                copy.deepcopy(op.pass_state),
                history,
                op.config,
                dsa_usage=op.dsa_usage,
                suggestions=overrides,
            )
            for snap in (sim_snap, kube_snap)
        ]
        sim_plan, kube_plan = plans
        assert kube_plan.actions == sim_plan.actions, f"at t={now}"
        self.compared += 1
        for a in sim_plan.actions:
            self.kinds.add(type(a).__name__)
            if getattr(a, "kind", None) == "DaemonSetAutoscaler":
                self.kinds.add("DaemonSetAutoscaler status")
            if isinstance(a, ResizePod) and a.reason == "DaemonSetAutoscaler":
                self.kinds.add("DaemonSet resize")


def random_cluster(seed: int, differential: Differential) -> tuple[Any, SimOperator]:
    """A seeded random cluster run under the simulated operator, `differential` checking
    every pass. Even seeds run Foresize itself (recommendations from the usage history, 3 h
    lookback, memory that may outgrow its limit: OOM floors); odd seeds a fixed-size
    baseline (suggestions from the start: resizes, deferrals, stalls, evictions)."""
    rng = random.Random(seed)
    foresize = seed % 2 == 0
    workloads = []
    for i in range(rng.randint(1, 3)):
        req_mem = rng.choice([128, 256, 512])
        lim_mem = req_mem * rng.choice([2, 4])
        workloads.append(
            workload(
                f"w{i}",
                rng.randint(1, 3),
                kind=rng.choice(["Deployment", "StatefulSet"]),
                containers=[
                    container(
                        req={"cpu": f"{rng.choice([100, 200, 400])}m", "memory": f"{req_mem}Mi"},
                        lim={"cpu": "2", "memory": f"{lim_mem}Mi"},
                        cpu={
                            "generator": "spiky",
                            "base": f"{rng.choice([50, 150, 600])}m",
                            "noise": 0.2,
                        },
                        memory={
                            "generator": "constant",
                            "base": f"{int(lim_mem * rng.uniform(0.2, 1.2))}Mi",
                            "noise": 0.1,
                        },
                    )
                ],
            )
        )
    daemonset = rng.random() < 0.75
    if daemonset:
        # A node agent under a DaemonSetAutoscaler: the pass's DaemonSet step (percentile
        # suggestion into the DSA's status, in-place resizes of its pods).
        workloads.append(
            workload(
                "agent",
                kind="DaemonSet",
                containers=[
                    container(
                        name="agent",
                        req={"cpu": "300m", "memory": "256Mi"},
                        lim={"memory": "512Mi"},
                        cpu={"generator": "spiky", "base": "80m", "noise": 0.3},
                        memory={"generator": "constant", "base": "90Mi", "noise": 0.05},
                    )
                ],
            )
        )
    sim = make_sim(workloads, nodes=rng.randint(1, 2), cpu="4", memory="6Gi", seed=seed)
    if daemonset:
        sim.daemonset_autoscalers = [
            parse_daemonset_autoscaler(
                {
                    "apiVersion": "foresize.io/v1",
                    "kind": "DaemonSetAutoscaler",
                    "metadata": {"name": "agent", "namespace": "default", "uid": "dsa-agent"},
                    "spec": {
                        "scaleTargetRef": {"name": "agent"},
                        "scaleMode": rng.choice(["autonomous", "autonomous", "recommendation"]),
                        "minObservationWindow": "15m",
                        "scaleInterval": rng.choice(["5m", "10m"]),
                    },
                }
            )
        ]
    sim.server_version = rng.choice([(1, 32), (1, 34), (1, 35), (1, 35)])
    options = OperatorOptions(
        update_mode=rng.choice(["recreate", "in_place", "in_place_or_recreate"]),
        loop_interval=15.0,
        recommend_interval=600.0,
        min_lookback=0.0,
        min_lookback_to_scale="3h",
        # Without the capacity guard, upsizes that do not fit are sent and stall
        # (PodResizePending Deferred/Infeasible), and in_place_or_recreate evicts.
        worker=WorkerConfig(capacity_guard=rng.random() < 0.5),
    )
    if foresize:
        recommender: Any = ForesizeRecommender()
    else:
        size = (rng.choice([50, 300, 1500, 3500]), rng.choice([64, 384, 1536, 5120]) * MIB)
        recommender = FixedRecommender({"*": size})
    op = SimOperator(sim, recommender, options)
    tick = op._tick

    def checked_tick(sim_: Any, now: float) -> None:
        differential.check(sim_, op, now)
        tick(sim_, now)

    op._tick = checked_tick  # type: ignore[method-assign]
    op.install()
    sim.run((rng.choice([185, 200]) if foresize else rng.choice([30, 45])) * 60.0)
    return sim, op


# What each seed's run is known to decide, so every case is checked for it. Together they
# cover every kind of action the pass sends (`test_the_seeds_cover_every_kind_of_action`):
# one seed a case lets pytest-xdist spread the cases over the workers (in one test they
# took 45 s on one).
SEED_DECIDES: dict[int, set[str]] = {
    0: {"EvictPod", "WriteTargetStatus", "DaemonSetAutoscaler status"},
    1: {"ResizePod", "DaemonSet resize", "DaemonSetAutoscaler status"},
    2: {"ResizePod", "WriteTargetStatus"},
    3: {"ResizePod", "DaemonSet resize"},
    4: {"ResizePod", "DaemonSet resize", "DaemonSetAutoscaler status"},
    5: {"WriteTargetStatus"},
    6: {"WriteTargetStatus"},
    7: {"WriteTargetStatus", "DaemonSetAutoscaler status"},
}


def test_the_seeds_cover_every_kind_of_action() -> None:
    assert set(SEED_DECIDES) == set(SEEDS)
    # Not vacuous: the compared passes resize, evict and publish, DaemonSets too.
    assert {
        "ResizePod",
        "EvictPod",
        "WriteTargetStatus",
        "DaemonSetAutoscaler status",
        "DaemonSet resize",
    } <= set().union(*SEED_DECIDES.values())


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_kube_and_sim_shells_build_equivalent_input_for_the_same_pass(seed: int) -> None:
    diff = Differential()
    sim, op = random_cluster(seed, diff)
    assert diff.compared >= 100  # every pass of the run, at 15 s
    assert SEED_DECIDES[seed] <= diff.kinds, diff.kinds
    # After a restart (no pass state: the worker reads its memory back from status,
    # and every target is due for a recommendation) the inputs decide alike too.
    now = sim.now
    history, overrides = diff.inputs(op)
    sim_plan, kube_plan = (
        plan_pass(
            snap,
            now,
            ReconcileState(),
            history,
            op.config,
            dsa_usage=op.dsa_usage,
            suggestions=overrides,
        )
        for snap in (sim.snapshot(), kube_snapshot(sim, now))
    )
    assert kube_plan.actions == sim_plan.actions
