"""The replicas an HPA is forecast to add are room the capacity guard keeps free (issue 27
part 3, seed 004): an upsize of a pod of equal or lower priority that would take that room
is not sent, so the scale-out at the peak neither preempts the application's own
lower-priority pods nor waits Pending."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import EmitEvent, ResizePod
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    ContainerSuggestion,
    HorizontalPodAutoscaler,
    HPAMetric,
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
from foresize.core.history import TOTAL_CONTAINER, SeriesKey
from foresize.core.horizontal.coming import COMING_WINDOW, coming_replicas, forecast_hpa_replicas
from foresize.core.reconcile import ReconcileState, coming_pods, plan_pass
from foresize.shells.sim.runner import simulate
from foresize.shells.sim.scenario import load_scenario

GIB = 1024 * MIB
NOW = 1_780_000_000.0
WEB_MEMORY = 1402 * MIB  # what the recommender asks for web's memory (peak use 1.17 GiB)


def running(name: str, owner: str, priority: int, memory: int = GIB) -> Pod:
    req = {"cpu": 500, "memory": memory}
    lim = {"memory": 2 * GIB}
    return Pod(
        namespace="pay",
        name=name,
        uid=f"uid-{name}",
        owner=OwnerRef("ReplicaSet", f"{owner}-rs"),
        node_name="worker",
        priority=priority,
        containers=[Container("app", ResourceRequirements(dict(req), dict(lim)))],
        phase="Running",
        conditions=[PodCondition("Ready", "True")],
        container_statuses=[
            ContainerStatus("app", allocated=dict(req), resources=ResourceRequirements(req, lim))
        ],
    )


def deployment(name: str, replicas: int, priority: int) -> tuple[Workload, Workload]:
    tmpl = PodTemplate(
        containers=[
            Container("app", ResourceRequirements({"cpu": 500, "memory": GIB}, {"memory": 2 * GIB}))
        ],
        priority=priority,
    )
    dep = Workload("Deployment", "pay", name, replicas=replicas, template=tmpl)
    rs = Workload(
        "ReplicaSet",
        "pay",
        f"{name}-rs",
        replicas=replicas,
        template=tmpl,
        owner=OwnerRef("Deployment", name),
    )
    return dep, rs


def target() -> object:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "pay", "uid": "t-web"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "autonomous",
                    "update_policy": {"update_mode": "in_place"},
                    "disruption": {"max_disrupted": "100%"},
                    "containers": [{"name": "*", "memory": {"lowerbound": "64Mi"}}],
                },
            },
        }
    )


def seed_004(web_replicas: int = 3) -> ClusterSnapshot:
    """Seed 004's shape: one 4-core, 8 GiB node; web (priority 1000) at 500m / 1 GiB with
    an HPA on CPU at 60% (3 to 6 replicas); web-worker, the same application at priority
    0, two pods of 500m / 1 GiB. 3 GiB free now."""
    web, web_rs = deployment("web", web_replicas, 1000)
    worker, worker_rs = deployment("web-worker", 2, 0)
    pods = [running(f"web-{i}", "web", 1000) for i in range(web_replicas)]
    pods += [running(f"web-worker-{i}", "web-worker", 0) for i in range(2)]
    return ClusterSnapshot(
        now=NOW,
        nodes={"worker": Node("worker", allocatable={"cpu": 4000, "memory": 8 * GIB})},
        pods=pods,
        workloads={w.key: w for w in (web, web_rs, worker, worker_rs)},
        hpas=[
            HorizontalPodAutoscaler(
                "pay",
                "web",
                "Deployment",
                "web",
                min_replicas=3,
                max_replicas=6,
                metrics=[HPAMetric("Resource", "cpu", target_utilization=60)],
                current_replicas=web_replicas,
                desired_replicas=web_replicas,
            )
        ],
        targets=[target()],
    )


def web_total(peak_cores: float) -> UsageHistory:
    """A day of web's summed usage, CPU rising from 0.75 cores at night to `peak_cores`
    at noon (memory 3.5 GiB), ending now."""
    history = UsageHistory(step=60.0)
    key = SeriesKey("pay", "web", TOTAL_CONTAINER, "Deployment")
    (col,) = history.indices([key])
    n = int(COMING_WINDOW // 60)
    for i in range(n):
        t = NOW - (n - 1 - i) * 60.0
        day = np.sin(np.pi * i / n)
        cpu = 0.75 + (peak_cores - 0.75) * day
        history.append(t, np.array([col]), cpu=np.array([cpu]), memory=np.array([3.5 * GIB]))
    return history


SUGGESTION = {
    "pay/web": Suggestion(
        "s", NOW, {"*": ContainerSuggestion("*", {"cpu": 500, "memory": WEB_MEMORY})}
    )
}


def web_resizes(
    history: UsageHistory, s: ClusterSnapshot | None = None
) -> tuple[list[str], list[str]]:
    s = s if s is not None else seed_004()
    pp = plan_pass(s, NOW, ReconcileState(), history, suggestions=SUGGESTION)
    resized = [a.name for a in pp.actions if isinstance(a, ResizePod)]
    held = [
        a.message
        for a in pp.actions
        if isinstance(a, EmitEvent) and a.kind == "Pod" and a.reason == "ResizeWaitingForCapacity"
    ]
    return resized, held


def test_the_hpas_arithmetic_on_yesterdays_peak_is_the_coming_replica_count():
    """1.35 cores at the peak over 300m a replica (500m x 60%) -> 5 replicas: 2 to come."""
    s = seed_004()
    web = s.workload("Deployment", "pay", "web")
    assert web is not None
    coming = coming_replicas(s.hpas[0], web, web_total(1.35), NOW)
    assert coming is not None and (coming.replicas, coming.added) == (5, 2)
    # bounded by maxReplicas, and nothing to come once the HPA runs that many
    assert coming_replicas(s.hpas[0], web, web_total(3.0), NOW).replicas == 6  # type: ignore[union-attr]
    running5 = seed_004(5).workload("Deployment", "pay", "web")
    assert coming_replicas(s.hpas[0], running5, web_total(1.35), NOW).added == 0  # type: ignore[union-attr,arg-type]


def test_coming_replicas_are_sized_as_admission_would_create_them():
    """The pod webhook gives web's new replicas the suggestion's memory (CPU, the HPA's
    resource, stays at the template's 500m under hpa_resource_policy: leave)."""
    pods = coming_pods(seed_004(), web_total(1.35), NOW, SUGGESTION)
    assert [(p.name, p.priority) for p in pods] == [("web#0", 1000), ("web#1", 1000)]
    assert {c.resources.requests["memory"] for p in pods for c in p.containers} == {WEB_MEMORY}
    assert {c.resources.requests["cpu"] for p in pods for c in p.containers} == {500}


def coordinating_target() -> object:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "pay", "uid": "t-web"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "autonomous",
                    "update_policy": {"update_mode": "in_place"},
                    "hpa_resource_policy": "coordinate",
                },
            },
        }
    )


def test_a_coordinated_workloads_coming_count_is_the_pairs_at_the_peak():
    """Seed 004 under the coordinated mode (bench hpa's collision, measured): the pair
    published at the morning's rising forecast keeps 3 replicas at 602m, so the HPA's
    count at that request at the day's peak is 4 (1.35 cores / (602m x 60%)): one to come,
    and the memory upsizes took the room of the second. At the peak the pair lowers the
    request again and the HPA runs 5 (the pair at 1.35 cores: ceil(1350 / (500m x 63%))),
    so the guard keeps room for 2, and the preemption of web-worker never comes."""
    s = seed_004()
    s.targets = [coordinating_target()]
    published = {
        "pay/web": Suggestion(
            "s", NOW, {"*": ContainerSuggestion("*", {"cpu": 602, "memory": WEB_MEMORY})}
        )
    }
    pods = coming_pods(s, web_total(1.35), NOW, published)
    assert [p.name for p in pods] == ["web#0", "web#1"]
    assert {c.resources.requests["cpu"] for p in pods for c in p.containers} == {602}
    # the HPA's count at the request published now: 4, one to come
    web = s.workload("Deployment", "pay", "web")
    assert web is not None
    assert forecast_hpa_replicas(s.hpas[0], web, {"cpu": 1350.0}, {"cpu": 602}) == 4


def test_upsizes_that_would_take_the_scale_outs_room_are_not_sent():
    """Seed 004: with 3 GiB free, the two replicas the HPA will add at the peak need
    2 x 1402 MiB; upsizing the three running web pods by 378 MiB each ahead of the peak
    would leave them short, and the scheduler would preempt web-worker for them. The
    upsizes wait; the message names the HPA's forecast replica."""
    resized, held = web_resizes(web_total(1.35))
    assert resized == []
    assert len(held) == 3
    assert "HorizontalPodAutoscaler of pay/web is forecast to add a replica" in held[0]


def test_without_a_coming_scale_out_the_upsizes_go():
    """A flat day (0.75 cores: the HPA stays at 3) leaves the room to the upsizes."""
    resized, held = web_resizes(web_total(0.75))
    assert sorted(resized) == ["web-0", "web-1", "web-2"] and held == []


def test_the_room_left_beside_the_coming_replicas_is_still_used():
    """One replica to come (0.95 cores -> 4): 3072 - 1402 MiB left, room for four 378 MiB
    upsizes; all three go."""
    resized, _ = web_resizes(web_total(0.95))
    assert sorted(resized) == ["web-0", "web-1", "web-2"]
    # two to come (1.35 cores) with one web replica already upsized: nothing more fits
    s = seed_004()
    s.pods[0] = running("web-0", "web", 1000, memory=WEB_MEMORY)
    assert web_resizes(web_total(1.35), s)[0] == []


def test_a_coming_replica_holds_upsizes_back_but_makes_none_yield():
    """A forecast replica that fits nowhere keeps upsizes off the room it lacks; an
    upsize already applied stays (only a pod really waiting makes one yield)."""
    s = seed_004()
    ledger = NodeLedger(s, coming_pods(s, web_total(3.0), NOW, SUGGESTION))
    # 3 replicas to come at 1402 MiB: two placed in the 3 GiB free, the third waits.
    assert [p.node for p in ledger.pending()] == ["worker", "worker", None]
    assert all(p.expected for p in ledger.pending())
    assert ledger.why_not("worker", {"memory": MIB}, 0) is not None  # worker's upsize
    from foresize.core.vertical.yielding import lacking_room

    assert lacking_room(ledger, "worker", 1000) == set()


@pytest.mark.slow
def test_seed_004_scenario_ends_without_preemptions_or_pending_replicas():
    """The built-in seed-004 scenario (`foresize simulate -s hpa-collision`) under
    Foresize, through the second day's peak (the first preemption came at 35.5 h before
    the guard kept the HPA's coming replicas' room): no pod preempted, none Pending."""
    _, summary = simulate(load_scenario("hpa-collision"), duration=36.5 * 3600, policy="foresize")
    totals = summary["totals"]
    assert totals["resizes"] > 0  # Foresize did act on the node
    assert (totals["preemptions"], totals["pending_pod_hours"]) == (0, 0.0)
