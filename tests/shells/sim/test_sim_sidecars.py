"""Sidecars, pod-level resources and pod overhead in the simulated kubelet and scheduler.

Each test names the upstream rule it follows:
- kubelet resize admission: `pkg/kubelet/allocation/allocation_manager.go`
  (handlePodResourcesResize, canAdmitPod over getAllocatedPods; IsResizableContainer makes
  sidecars resizable; isResizeIncreasingRequests for the retry order);
- pod requests: `staging/src/k8s.io/component-helpers/resource/helpers.go` (PodRequests,
  AggregateContainerRequests: sidecars add, init containers peak, pod-level requests
  replace, overhead adds);
- resize validation: `pkg/apis/core/validation/validation.go` (ValidatePodResize).
"""

from __future__ import annotations

import pytest

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import ContainerResize, ResizePod
from foresize.core.cluster.model import POD_RESIZE_PENDING, REASON_DEFERRED, REASON_INFEASIBLE
from foresize.core.cluster.qos import allocated_requests
from foresize.core.errors import ForesizeError
from foresize.shells.sim.scenario import parse_scenario
from support.sim import container, make_sim, pods_of, workload


def sidecar(name="proxy", req=None, lim=None, **kw):
    return container(
        name,
        req=req if req is not None else {"cpu": "100m", "memory": "64Mi"},
        lim=lim if lim is not None else {"cpu": "200m", "memory": "128Mi"},
        restart_policy="Always",
        **kw,
    )


def no_node_overcommitted(sim) -> None:
    """Neither the scheduler's charge nor the kubelet's allocations exceed any node."""
    for name, node in sim.nodes.items():
        free_cpu, free_mem = sim.node_free(name)
        assert free_cpu >= 0 and free_mem >= 0, (name, free_cpu, free_mem)
        on_node = [p for p in sim.pods.values() if p.node_name == name and p.phase == "Running"]
        for r in ("cpu", "memory"):
            used = sum(allocated_requests(p).get(r, 0) for p in on_node)
            assert used <= node.allocatable[r], (name, r, used)


def test_a_sidecar_is_resized_in_place_like_a_container():
    sim = make_sim([workload("s", init_containers=[sidecar()])])
    pod = pods_of(sim, "s")[0]
    # Sidecars report under status.initContainerStatuses, as the kubelet writes them.
    assert [s.name for s in pod.container_statuses] == ["app"]
    assert [s.name for s in pod.init_container_statuses] == ["proxy"]
    st = pod.status_of("proxy")
    assert st is not None and st.allocated == {"cpu": 100, "memory": 64 * MIB}
    res = sim.apply(
        ResizePod(pod.namespace, pod.name, (ContainerResize("proxy", {"cpu": 300}, {"cpu": 400}),))
    )
    assert res.ok
    sim.run(5)
    pod = sim.pod("default", pod.name)
    st = pod.status_of("proxy")
    assert st.allocated["cpu"] == 300
    assert st.resources.requests["cpu"] == 300 and st.resources.limits["cpu"] == 400
    assert pod.condition(POD_RESIZE_PENDING) is None
    applied = sim.events.query("ResizeApplied", object=f"Pod/default/{pod.name}")
    assert len(applied) == 1 and set(applied[0].details["containers"]) == {"proxy"}
    # The scheduler charges the sidecar at its new size, and its usage is capped by its limit.
    assert sim.node_free(pod.node_name)[0] == 2000 - 500 - 300
    sim.set_usage("default", pod.name, "proxy", cpu=5.0)
    sim.run(60)
    assert sim.container_usage("default", pod.name, "proxy")[0] == pytest.approx(0.4)


def test_resize_admission_counts_other_pods_sidecars():
    # b: 200m app + 800m sidecar. a's upsize to 1100m fits only if b's sidecar is ignored.
    sim = make_sim(
        [
            workload("a", containers=[container(lim={})]),
            workload(
                "b",
                containers=[container(req={"cpu": "200m", "memory": "64Mi"}, lim={})],
                init_containers=[sidecar(req={"cpu": "800m", "memory": "64Mi"}, lim={})],
            ),
        ]
    )
    pod = pods_of(sim, "a")[0]
    assert sim.apply(
        ResizePod(pod.namespace, pod.name, (ContainerResize("app", {"cpu": 1100}),))
    ).ok
    sim.run(5)
    pod = sim.pod("default", pod.name)
    cond = pod.condition(POD_RESIZE_PENDING)
    assert cond is not None and cond.reason == REASON_DEFERRED
    assert cond.message == (
        "Node didn't have enough resource: cpu, requested: 1100, used: 1000, capacity: 2000"
    )
    assert pod.status_of("app").allocated["cpu"] == 500
    no_node_overcommitted_allocations(sim)


def no_node_overcommitted_allocations(sim) -> None:
    for name, node in sim.nodes.items():
        on_node = [p for p in sim.pods.values() if p.node_name == name and p.phase == "Running"]
        used = sum(allocated_requests(p).get("cpu", 0) for p in on_node)
        assert used <= node.allocatable["cpu"], (name, used)


def test_a_pods_resize_is_all_or_nothing_across_container_and_sidecar():
    sim = make_sim(
        [
            workload("fill", containers=[container(req={"cpu": "1", "memory": "64Mi"}, lim={})]),
            workload("s", containers=[container(lim={})], init_containers=[sidecar(lim={})]),
        ]
    )
    pod = pods_of(sim, "s")[0]
    both = ResizePod(
        pod.namespace,
        pod.name,
        (ContainerResize("app", {"cpu": 600}), ContainerResize("proxy", {"cpu": 500})),
    )
    assert sim.apply(both).ok
    sim.run(5)
    pod = sim.pod("default", pod.name)
    assert pod.condition(POD_RESIZE_PENDING).reason == REASON_DEFERRED
    # Neither part is allocated: 600 + 500 does not fit the 1000m left.
    assert pod.status_of("app").allocated["cpu"] == 500
    assert pod.status_of("proxy").allocated["cpu"] == 100
    no_node_overcommitted_allocations(sim)


def test_a_sidecar_resize_beyond_the_node_is_infeasible():
    sim = make_sim(
        [workload("s", containers=[container(lim={})], init_containers=[sidecar(lim={})])]
    )
    pod = pods_of(sim, "s")[0]
    r = ResizePod(pod.namespace, pod.name, (ContainerResize("proxy", {"cpu": 1800}),))
    assert sim.apply(r).ok
    sim.run(5)
    cond = sim.pod("default", pod.name).condition(POD_RESIZE_PENDING)
    assert cond.reason == REASON_INFEASIBLE
    assert cond.message == "Node didn't have enough capacity: cpu, requested: 2300, capacity: 2000"
    # The Infeasible spec is not charged: the node keeps its room.
    assert sim.node_free(pod.node_name)[0] == 2000 - 600


def test_scheduler_charges_overhead_and_pod_level_requests():
    sim = make_sim(
        [
            workload(
                "o",
                replicas=3,
                containers=[container(lim={})],
                overhead={"cpu": "600m", "memory": "64Mi"},
            ),
        ],
        nodes=2,
    )
    # 500m + 600m overhead per pod: one per 2-CPU node, the third stays Pending.
    pods = pods_of(sim, "o")
    assert sorted(p.phase for p in pods) == ["Pending", "Running", "Running"]
    assert sim.events.count("FailedScheduling") >= 1
    no_node_overcommitted(sim)

    sim = make_sim(
        [
            workload(
                "pl",
                replicas=3,
                containers=[container(req={"cpu": "100m", "memory": "64Mi"}, lim={})],
                resources={"requests": {"cpu": "1500m"}},
            ),
        ],
        nodes=2,
    )
    assert sorted(p.phase for p in pods_of(sim, "pl")) == ["Pending", "Running", "Running"]
    no_node_overcommitted(sim)


def test_resizing_a_pod_with_pod_level_resources_is_refused_with_422():
    sim = make_sim(
        [workload("pl", containers=[container(lim={})], resources={"limits": {"cpu": "1"}})]
    )
    pod = pods_of(sim, "pl")[0]
    res = sim.apply(ResizePod(pod.namespace, pod.name, (ContainerResize("app", {"cpu": 600}),)))
    assert res.code == 422
    assert "pods with pod-level resources cannot be resized" in res.message
    assert sim.pod("default", pod.name).generation == 1
    assert sim.events.count("ResizeRefused") == 1


def test_scenario_rejects_bad_sidecars_and_pod_level_resources():
    base = {"name": "t", "nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}]}
    bad_init = workload("a", init_containers=[container("i", restart_policy="Never")])
    with pytest.raises(ForesizeError, match=r"init_containers\[0\]\.restart_policy"):
        parse_scenario({**base, "workloads": [bad_init]}, "<t>")
    bad_pod_level = workload("a", resources={"requests": {"ephemeral-storage": "1Gi"}})
    with pytest.raises(ForesizeError, match=r"workloads\[0\]\.resources"):
        parse_scenario({**base, "workloads": [bad_pod_level]}, "<t>")


def test_retry_order_judges_a_resize_by_the_whole_pods_requests():
    # isResizeIncreasingRequests: PodRequests of the spec against the allocated pod. The app
    # grows by 100m while the sidecar shrinks by 300m: the pod's requests go down, so the
    # kubelet retries it with the downsizes (first), although one container grows.
    from foresize.core.cluster.model import Container, ContainerStatus, Pod, ResourceRequirements

    sim = make_sim([workload("a")], settle=0)
    app = Container("app", ResourceRequirements({"cpu": 600}))
    side = Container("proxy", ResourceRequirements({"cpu": 100}), {}, "Always")
    pod = Pod("default", "p", containers=[app], init_containers=[side], phase="Running")
    pod.container_statuses = [ContainerStatus("app", {"cpu": 500}, ResourceRequirements())]
    pod.init_container_statuses = [ContainerStatus("proxy", {"cpu": 400}, ResourceRequirements())]
    assert sim.kubelet.is_downsize(pod)
    side.resources.requests["cpu"] = 400  # now only the app grows
    assert not sim.kubelet.is_downsize(pod)
