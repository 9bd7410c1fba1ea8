"""The simulated kubelet's in-place resize follows Kubernetes (KEP-1287, 1.34/1.35)."""

from __future__ import annotations

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import ContainerResize, PatchScale, ResizePod
from foresize.core.cluster.model import (
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    REASON_DEFERRED,
    REASON_ERROR,
    REASON_INFEASIBLE,
)
from support.sim import container, make_sim, pods_of, workload


def resize(pod, cpu=None, cpu_lim=None, mem=None, mem_lim=None) -> ResizePod:
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    lim = {k: v for k, v in (("cpu", cpu_lim), ("memory", mem_lim)) if v is not None}
    return ResizePod(pod.namespace, pod.name, (ContainerResize("app", req, lim),))


def test_resize_that_fits_now_is_applied():
    sim = make_sim([workload("a")])
    pod = pods_of(sim, "a")[0]
    assert pod.generation == 1
    res = sim.apply(resize(pod, cpu=800, cpu_lim=1500))
    assert res.ok and res.code == 200
    # Spec and generation change at once; the kubelet acts on its next sync.
    pod = sim.pod("default", pod.name)
    assert pod.generation == 2 and pod.containers[0].resources.requests["cpu"] == 800
    sim.run(5)
    pod = sim.pod("default", pod.name)
    st = pod.status_of("app")
    assert st.allocated["cpu"] == 800
    assert st.resources.requests["cpu"] == 800 and st.resources.limits["cpu"] == 1500
    assert pod.condition(POD_RESIZE_PENDING) is None
    assert pod.condition(POD_RESIZE_IN_PROGRESS) is None
    assert pod.observed_generation == pod.generation == 2
    assert st.restart_count == 0
    assert sim.events.count("ResizeApplied", object=f"Pod/default/{pod.name}") == 1
    # The usage arrays enforce the new limit.
    sim.set_usage("default", pod.name, "app", cpu=5.0)
    sim.run(60)
    assert sim.container_usage("default", pod.name, "app")[0] == 1.5


def test_deferred_resize_is_applied_once_capacity_frees():
    sim = make_sim(
        [
            workload("a"),
            workload("b", containers=[container(req={"cpu": "1200m", "memory": "512Mi"}, lim={})]),
        ]
    )
    pod = pods_of(sim, "a")[0]
    assert sim.apply(resize(pod, cpu=1000)).ok
    sim.run(5)
    pod = sim.pod("default", pod.name)
    cond = pod.condition(POD_RESIZE_PENDING)
    assert cond is not None and cond.reason == REASON_DEFERRED and cond.status == "True"
    assert cond.message == (
        "Node didn't have enough resource: cpu, requested: 1000, used: 1200, capacity: 2000"
    )
    assert pod.status_of("app").allocated["cpu"] == 500  # keeps running on the old one
    assert pod.status_of("app").resources.requests["cpu"] == 500
    assert pod.phase == "Running" and pod.ready
    # Retried each sync: still deferred a few minutes later.
    sim.run(180)
    assert sim.pod("default", pod.name).condition(POD_RESIZE_PENDING).reason == REASON_DEFERRED
    # Free capacity: scale b to zero; once its pod is gone the resize lands.
    assert sim.apply(PatchScale("default", "Deployment", "b", 0)).ok
    sim.run(30)
    pod = sim.pod("default", pod.name)
    assert pod.condition(POD_RESIZE_PENDING) is None
    assert pod.status_of("app").allocated["cpu"] == 1000
    assert pod.status_of("app").resources.requests["cpu"] == 1000
    applied = sim.events.query("ResizeApplied", object=f"Pod/default/{pod.name}")
    assert len(applied) == 1 and applied[0].details["waited_seconds"] > 180
    assert sim.summary()["workloads"][0]["stalls"] == 1


def test_resize_larger_than_the_node_is_infeasible():
    sim = make_sim([workload("a")])
    pod = pods_of(sim, "a")[0]
    assert sim.apply(resize(pod, cpu=5000, cpu_lim=6000)).ok  # the API accepts it
    sim.run(5)
    pod = sim.pod("default", pod.name)
    cond = pod.condition(POD_RESIZE_PENDING)
    assert cond is not None and cond.reason == REASON_INFEASIBLE
    assert cond.message == "Node didn't have enough capacity: cpu, requested: 5000, capacity: 2000"
    # The scheduler leaves an Infeasible spec out of the charge.
    assert sim.node_free("n") == (2000 - 500, 8 * 1024 * MIB - 512 * MIB)
    # Memory is reported first when both are too big.
    sim.apply(resize(pod, cpu=5000, cpu_lim=6000, mem=20 * 1024 * MIB, mem_lim=20 * 1024 * MIB))
    sim.run(5)
    msg = sim.pod("default", pod.name).condition(POD_RESIZE_PENDING).message
    assert msg.startswith("Node didn't have enough capacity: memory, requested: 21474836480")


def test_memory_limit_below_usage_is_in_progress_error_and_pod_keeps_running():
    sim = make_sim([workload("a")])
    pod = pods_of(sim, "a")[0]
    sim.set_usage("default", pod.name, "app", memory=700 * MIB)
    sim.run(60)
    res = sim.apply(resize(pod, mem_lim=600 * MIB))
    assert res.ok  # 1.34+: the API server accepts it
    sim.run(5)
    pod = sim.pod("default", pod.name)
    cond = pod.condition(POD_RESIZE_IN_PROGRESS)
    assert cond is not None and cond.reason == REASON_ERROR
    assert "below current usage" in cond.message and str(600 * MIB) in cond.message
    st = pod.status_of("app")
    assert st.resources.limits["memory"] == 1024 * MIB  # the old limit stays in force
    assert pod.containers[0].resources.limits["memory"] == 600 * MIB  # desired is recorded
    assert pod.observed_generation == pod.generation
    # It keeps running on the old limit: no OOM kill, no restart.
    sim.run(600)
    pod = sim.pod("default", pod.name)
    assert pod.phase == "Running" and pod.ready
    assert pod.status_of("app").restart_count == 0
    assert sim.events.count("OOMKilled") == 0
    assert sim.events.count("ResizeError") == 1  # one stall per generation
    # Once usage drops below the new limit the kubelet's retry succeeds.
    sim.set_usage("default", pod.name, "app", memory=300 * MIB)
    sim.run(120)
    pod = sim.pod("default", pod.name)
    assert pod.condition(POD_RESIZE_IN_PROGRESS) is None
    assert pod.status_of("app").resources.limits["memory"] == 600 * MIB


def test_api_refusal_leaves_the_pod_untouched():
    sim = make_sim([workload("a")])
    pod = pods_of(sim, "a")[0]
    res = sim.apply(resize(pod, cpu=1000, mem=1024 * MIB))  # would become Guaranteed
    assert not res.ok and res.code == 422
    assert "Pod QOS Class may not change as a result of resizing" in res.message
    res = sim.apply(
        ResizePod("default", pod.name, (ContainerResize("app", {"nvidia.com/gpu": 1}),))
    )
    assert res.code == 422 and "only cpu and memory resources are mutable" in res.message
    res = sim.apply(ResizePod("default", pod.name, (ContainerResize("app", {"memory": None}),)))  # type: ignore[dict-item]
    assert res.code == 422 and "resource requests cannot be removed" in res.message
    pod = sim.pod("default", pod.name)
    assert pod.generation == 1
    assert pod.containers[0].resources.requests == {"cpu": 500, "memory": 512 * MIB}
    assert sim.apply(ResizePod("default", "nope", ())).code == 404


def test_restart_container_policy_restarts_on_resize():
    sim = make_sim(
        [workload("a", containers=[container(resize_policy={"memory": "RestartContainer"})])]
    )
    pod = pods_of(sim, "a")[0]
    sim.apply(resize(pod, cpu=600, cpu_lim=1200))  # cpu: NotRequired
    sim.run(5)
    assert sim.pod("default", pod.name).status_of("app").restart_count == 0
    sim.apply(resize(pod, mem=600 * MIB, mem_lim=1200 * MIB))
    sim.run(5)
    pod = sim.pod("default", pod.name)
    assert pod.status_of("app").restart_count == 1
    assert pod.status_of("app").resources.limits["memory"] == 1200 * MIB
    assert sim.events.count("ContainerRestarted", object=f"Pod/default/{pod.name}") == 1


def test_deferred_retries_prefer_downsizes_then_priority():
    sim = make_sim(
        [
            workload("low", containers=[container(req={"cpu": "500m", "memory": "64Mi"}, lim={})]),
            workload(
                "high",
                priority=100,
                containers=[container(req={"cpu": "500m", "memory": "64Mi"}, lim={})],
            ),
            workload("big", containers=[container(req={"cpu": "900m", "memory": "64Mi"}, lim={})]),
        ]
    )
    low, high, big = (pods_of(sim, n)[0] for n in ("low", "high", "big"))
    # Both upsizes are deferred (100m free).
    sim.apply(resize(low, cpu=800))
    sim.run(1)
    sim.apply(resize(high, cpu=800))
    sim.run(5)
    for p in (low, high):
        assert sim.pod("default", p.name).condition(POD_RESIZE_PENDING).reason == REASON_DEFERRED
    # A downsize of `big` frees 300m: it goes first, then the higher-priority upsize wins
    # although `low` asked earlier.
    sim.apply(resize(big, cpu=600))
    sim.run(65)
    assert sim.pod("default", high.name).status_of("app").allocated["cpu"] == 800
    assert sim.pod("default", low.name).condition(POD_RESIZE_PENDING) is not None


def test_from_1_36_a_resize_beyond_allocatable_is_refused_with_node_capacity():
    sim = make_sim([workload("a")])
    sim.server_version = (1, 36)
    pod = pods_of(sim, "a")[0]
    res = sim.apply(resize(pod, cpu=5000, cpu_lim=6000))
    assert not res.ok and res.code == 403 and res.has_cause("NodeCapacity")
    assert "Node didn't have enough capacity: cpu, requested: 5000, capacity: 2000" in res.message
    assert sim.pod("default", pod.name).generation == 1  # nothing stored
    assert sim.snapshot().server_version == (1, 36)
    assert sim.apply(resize(pod, cpu=800, cpu_lim=1500)).ok


def test_optional_actuation_delay_shows_in_progress_without_reason():
    sim = make_sim([workload("a")])
    sim.actuation_delay = 30.0
    pod = pods_of(sim, "a")[0]
    sim.apply(resize(pod, cpu=800, cpu_lim=1500))
    sim.run(5)
    p = sim.pod("default", pod.name)
    cond = p.condition(POD_RESIZE_IN_PROGRESS)
    assert cond is not None and cond.reason == "" and cond.status == "True"
    assert p.status_of("app").allocated["cpu"] == 800  # allocated ...
    assert p.status_of("app").resources.requests["cpu"] == 500  # ... not yet actuated
    sim.run(30)
    p = sim.pod("default", pod.name)
    assert p.condition(POD_RESIZE_IN_PROGRESS) is None
    assert p.status_of("app").resources.requests["cpu"] == 800
