"""The simulated scheduler charges what Kubernetes charges and preempts only when needed."""

from __future__ import annotations

from foresize.core.cluster.actions import ContainerResize, PatchScale, ResizePod
from foresize.core.cluster.model import (
    POD_RESIZE_PENDING,
    REASON_DEFERRED,
    Container,
    Pod,
    ResourceRequirements,
)
from support.sim import container, make_sim, pods_of, workload


def small(cpu: str) -> list[dict]:
    return [container(req={"cpu": cpu, "memory": "64Mi"}, lim={})]


def test_deferred_upsize_is_charged_at_its_larger_request():
    sim = make_sim([workload("a", containers=small("500m")), workload("b", containers=small("1"))])
    a = pods_of(sim, "a")[0]
    assert sim.node_free("n")[0] == 2000 - 500 - 1000
    sim.apply(ResizePod("default", a.name, (ContainerResize("app", {"cpu": 1200}),)))
    # Charged at the larger request as soon as the spec changes (before the kubelet acts).
    assert sim.node_free("n")[0] == 2000 - 1200 - 1000
    sim.run(5)
    a = sim.pod("default", a.name)
    assert a.condition(POD_RESIZE_PENDING).reason == REASON_DEFERRED
    assert a.status_of("app").allocated["cpu"] == 500
    # A 400m pod would fit the old allocation (500m free) but not the charge: it stays Pending.
    assert sim.apply(PatchScale("default", "Deployment", "c", 1)).code == 404
    extra = Pod(
        "default",
        "extra",
        containers=[Container("x", ResourceRequirements({"cpu": 400, "memory": 2**20}))],
    )
    sim.create_pod(extra)
    sim.run(120)
    extra = sim.pod("default", "extra")
    assert extra.phase == "Pending" and extra.node_name is None
    assert extra.condition("PodScheduled").reason == "Unschedulable"
    assert sim.events.count("FailedScheduling", object="Pod/default/extra") == 1
    assert "Insufficient cpu" in sim.events.query("FailedScheduling")[0].message
    # Unschedulable pods are retried: when b goes away, both the resize and the pod land.
    sim.apply(PatchScale("default", "Deployment", "b", 0))
    sim.run(120)
    assert sim.pod("default", a.name).status_of("app").allocated["cpu"] == 1200
    assert sim.pod("default", "extra").phase == "Running"
    assert sim.summary()["workloads"][1]["pending_pod_hours"] == 0  # b never waited
    assert sim.summary()["workloads"][0]["name"] == "Deployment/default/a"


def test_high_priority_pod_preempts_only_when_needed():
    sim = make_sim(
        [
            workload("low0", containers=small("800m"), priority=0),
            workload("low10", containers=small("800m"), priority=10),
        ]
    )

    # 400m free: a high-priority 300m pod fits without preempting anybody.
    def pod(name: str, cpu: int, prio: int) -> Pod:
        return Pod(
            "default",
            name,
            priority=prio,
            containers=[Container("x", ResourceRequirements({"cpu": cpu, "memory": 2**20}))],
        )

    sim.create_pod(pod("fits", 300, 1000))
    sim.run(5)
    assert sim.pod("default", "fits").phase == "Running"
    assert sim.events.count("Preempted") == 0
    # 100m free: a 900m high-priority pod needs one victim; the lowest priority one goes.
    sim.create_pod(pod("needs-room", 900, 1000))
    sim.run(5)
    preempted = sim.events.query("Preempted")
    assert len(preempted) == 1
    victim = preempted[0]
    assert victim.object.startswith("Pod/default/low0-")
    assert victim.details["victim_priority"] == 0 and victim.details["preemptor"] == (
        "default/needs-room"
    )
    assert sim.pod("default", "needs-room").phase == "Pending"  # waits for the grace period
    sim.run(30)
    assert sim.pod("default", "needs-room").phase == "Running"
    assert all(p.phase == "Running" for p in pods_of(sim, "low10"))
    # The controller's replacement for the victim cannot preempt (equal/higher priority
    # pods only): it stays Pending.
    low0 = [p for p in pods_of(sim, "low0") if p.deletion_time is None]
    assert len(low0) == 1 and low0[0].phase == "Pending"
    assert sim.events.count("Preempted") == 1
    assert sim.summary()["workloads"][0]["preemptions"] == 1


def test_equal_priority_pods_never_preempt():
    sim = make_sim([workload("a", 2, containers=small("900m"))])
    sim.apply(PatchScale("default", "Deployment", "a", 3))
    sim.run(60)
    pods = pods_of(sim, "a")
    assert sorted(p.phase for p in pods) == ["Pending", "Running", "Running"]
    assert sim.events.count("Preempted") == 0


def test_a_pod_that_fits_but_for_a_nominated_pods_room_waits_without_preempting():
    """The room held for a pod nominated after a preemption is not free for a later one of
    lower priority; it must not "preempt" nobody (it waits, as kube-scheduler's pod would
    behind the nominated one)."""
    sim = make_sim(
        [
            workload("l1", containers=small("500m"), priority=-1),
            workload("l2", containers=small("100m"), priority=0),
        ]
    )

    def pod(name: str, cpu: int, prio: int) -> Pod:
        return Pod(
            "default",
            name,
            priority=prio,
            containers=[Container("x", ResourceRequirements({"cpu": cpu, "memory": 2**20}))],
        )

    sim.create_pod(pod("a", 1800, 10))  # preempts l1 (l2 reprieved), nominated, waits
    sim.run(1)
    sim.create_pod(pod("b", 1000, 5))  # fits the node's free room, not with a's held
    sim.run(1)
    assert [e.object.split("/")[2][:2] for e in sim.events.query("Preempted")] == ["l1"]
    assert sim.pod("default", "b").phase == "Pending"
    sim.run(40)
    assert sim.pod("default", "a").phase == "Running"


def test_pods_of_one_priority_are_scheduled_in_the_order_they_were_created():
    """kube-scheduler's queue sort (`PrioritySort.Less`, pkg/scheduler/framework/plugins/
    queuesort/priority_sort.go): priority, then the time the pod was queued. `zeta` is
    created first (its Deployment comes first) and takes the only room, though `alpha`'s
    name sorts first."""
    sim = make_sim(
        [workload("zeta", containers=small("1200m")), workload("alpha", containers=small("1200m"))],
        settle=5.0,
    )
    zeta, alpha = pods_of(sim, "zeta")[0], pods_of(sim, "alpha")[0]
    assert zeta.creation_time == alpha.creation_time and zeta.uid < alpha.uid
    assert zeta.node_name == "n"
    assert alpha.phase == "Pending"
