"""QoS class and scheduler charge follow qos.go and component-helpers exactly."""

import pytest

from foresize.core.api.quantity import GIB, MIB
from foresize.core.cluster.model import (
    POD_RESIZE_PENDING,
    REASON_DEFERRED,
    REASON_INFEASIBLE,
    Container,
    ContainerStatus,
    Pod,
    PodCondition,
    ResourceRequirements,
)
from foresize.core.cluster.qos import (
    allocated_requests,
    has_pod_level_resources,
    is_supported_pod_level_resource,
    pod_charge,
    pod_qos_class,
    qos_class_of,
    spec_requests,
)


def c(name="app", req=None, lim=None, restart_policy=None) -> Container:
    return Container(
        name, ResourceRequirements(dict(req or {}), dict(lim or {})), {}, restart_policy
    )


def test_best_effort_when_nothing_set():
    assert qos_class_of([c()]) == "BestEffort"
    # Non-compute resources do not count.
    assert qos_class_of([c(req={"ephemeral-storage": 1})]) == "BestEffort"


def test_guaranteed_needs_cpu_and_memory_limits_equal_to_requests_everywhere():
    g = {"cpu": 500, "memory": GIB}
    assert qos_class_of([c(req=g, lim=g)]) == "Guaranteed"
    # Requests default to limits.
    assert qos_class_of([c(lim=g)]) == "Guaranteed"
    # An init container without limits makes the pod Burstable.
    assert qos_class_of([c(req=g, lim=g), c("init", req={"cpu": 100})]) == "Burstable"
    # Only a CPU limit: Burstable.
    assert qos_class_of([c(req={"cpu": 500}, lim={"cpu": 500})]) == "Burstable"
    # Requests below limits: Burstable.
    assert qos_class_of([c(req={"cpu": 250, "memory": GIB}, lim=g)]) == "Burstable"


def test_guaranteed_compares_pod_wide_sums_like_qos_go():
    # Per container unequal but sums equal: qos.go still says Guaranteed.
    a = c("a", req={"cpu": 300, "memory": GIB}, lim={"cpu": 200, "memory": GIB})
    b = c("b", req={"cpu": 100, "memory": GIB}, lim={"cpu": 200, "memory": GIB})
    assert qos_class_of([a, b]) == "Guaranteed"


def _running(containers, statuses, conditions=()):
    return Pod(
        "ns",
        "p",
        containers=containers,
        container_statuses=statuses,
        phase="Running",
        conditions=list(conditions),
        node_name="n1",
    )


def test_charge_is_max_of_spec_allocated_actual():
    spec = c(req={"cpu": 800, "memory": 512 * MIB})
    st = ContainerStatus(
        "app",
        allocated={"cpu": 500, "memory": 1024 * MIB},
        resources=ResourceRequirements({"cpu": 500, "memory": 768 * MIB}),
    )
    deferred = PodCondition(POD_RESIZE_PENDING, reason=REASON_DEFERRED)
    pod = _running([spec], [st], [deferred])
    assert pod_charge(pod) == {"cpu": 800, "memory": 1024 * MIB}


def test_charge_leaves_spec_out_when_infeasible():
    spec = c(req={"cpu": 8000})
    st = ContainerStatus(
        "app", allocated={"cpu": 500}, resources=ResourceRequirements({"cpu": 500})
    )
    pod = _running([spec], [st], [PodCondition(POD_RESIZE_PENDING, reason=REASON_INFEASIBLE)])
    assert pod_charge(pod) == {"cpu": 500}


def test_charge_init_containers_peak_and_sidecars_add():
    app = c("app", req={"cpu": 100})
    sidecar = c("side", req={"cpu": 50}, restart_policy="Always")
    init = c("init", req={"cpu": 1000})
    pod = Pod("ns", "p", containers=[app], init_containers=[sidecar, init], phase="Running")
    # max(100 + 50, 1000 + 50)
    assert pod_charge(pod) == {"cpu": 1050}
    pod.init_containers = [init, sidecar]
    # init runs before the sidecar: max(150, 1000)
    assert pod_charge(pod) == {"cpu": 1000}


def test_terminal_pods_are_not_charged():
    pod = _running([c(req={"cpu": 100})], [])
    pod.phase = "Succeeded"
    assert pod_charge(pod) == {}
    assert pod_qos_class(pod) == "Burstable"


# --- pod-level resources and overhead -------------------------------------------------
# Upstream: pkg/apis/core/helper/qos/qos.go ComputePodQOS (pod-level branch) and
# component-helpers/resource/helpers.go PodRequests (applyPodLevelResources, overhead).


def _pod_level(containers, requests=None, limits=None, **kw) -> Pod:
    return Pod(
        "ns",
        "p",
        containers=containers,
        phase="Running",
        resources=ResourceRequirements(dict(requests or {}), dict(limits or {})),
        **kw,
    )


def test_pod_level_resources_decide_the_qos_class():
    g = {"cpu": 500, "memory": GIB}
    # Containers alone would be BestEffort; pod-level requests == limits make it Guaranteed.
    assert pod_qos_class(_pod_level([c()], requests=g, limits=g)) == "Guaranteed"
    # A pod-level limit defaults the pod-level request (defaultPodRequests).
    assert pod_qos_class(_pod_level([c()], limits=g)) == "Guaranteed"
    # Guaranteed containers but only pod-level requests: Burstable (pod-level decides).
    assert pod_qos_class(_pod_level([c(req=g, lim=g)], requests=g)) == "Burstable"
    # A pod-level cpu limit only: never Guaranteed.
    assert pod_qos_class(_pod_level([c()], limits={"cpu": 500})) == "Burstable"
    # spec.resources present with only unsupported entries: the containers decide.
    assert pod_qos_class(_pod_level([c(req=g, lim=g)], requests={"ephemeral-storage": 1})) == (
        "Guaranteed"
    )
    # Pod-level hugepages alone make the pod pod-level (IsPodLevelResourcesSet) and qos.go's
    # pod-level branch counts only cpu and memory: BestEffort whatever the containers say.
    hp = {"hugepages-2Mi": 2 * MIB}
    assert pod_qos_class(_pod_level([c(req=g, lim=g)], requests=hp, limits=hp)) == "BestEffort"


def test_pod_level_requests_replace_the_container_sum_and_overhead_is_added():
    app = c("app", req={"cpu": 100, "memory": 100 * MIB})
    side = c("side", req={"cpu": 50, "memory": 50 * MIB}, restart_policy="Always")
    pod = _pod_level([app], requests={"cpu": 400}, init_containers=[side])
    # cpu from the pod level; memory from the containers (100 + 50 Mi).
    assert pod_charge(pod) == {"cpu": 400, "memory": 150 * MIB}
    pod.overhead = {"cpu": 250, "memory": 120 * MIB}
    assert pod_charge(pod) == {"cpu": 650, "memory": 270 * MIB}
    assert spec_requests(pod) == pod_charge(pod)


def test_charge_counts_a_sidecars_allocation_like_a_container():
    # A sidecar resized down in spec keeps charging its allocation until actuated.
    app = c("app", req={"cpu": 100})
    side = c("side", req={"cpu": 50}, restart_policy="Always")
    pod = Pod("ns", "p", containers=[app], init_containers=[side], phase="Running")
    pod.container_statuses = [ContainerStatus("app", {"cpu": 100}, ResourceRequirements())]
    pod.init_container_statuses = [
        ContainerStatus("side", {"cpu": 300}, ResourceRequirements({"cpu": 300}))
    ]
    assert pod_charge(pod) == {"cpu": 400}
    assert spec_requests(pod) == {"cpu": 150}
    # The kubelet admits other pods' resizes against what is allocated.
    assert allocated_requests(pod) == {"cpu": 400}


def test_the_charge_counts_overhead_and_pod_level_requests():
    st = ContainerStatus("app", {"cpu": 100}, ResourceRequirements({"cpu": 100}))
    with_overhead = _running([c(req={"cpu": 100})], [st])
    with_overhead.overhead = {"cpu": 250}
    pod_level = _running([c(req={"cpu": 100})], [st])
    pod_level.resources = ResourceRequirements({"cpu": 700}, {})
    assert pod_charge(with_overhead) == {"cpu": 350} and pod_charge(pod_level) == {"cpu": 700}


# --- upstream test tables: component-helpers/resource/helpers_test.go (Kubernetes 1.35) ---


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cpu", True),
        ("memory", True),
        ("ephemeral-storage", False),
        ("hugepages-2Mi", True),
        ("hugepages-1Gi", True),
    ],
)
def test_is_supported_pod_level_resource(name, expected):
    """TestIsSupportedPodLevelResource, each case named by its resource."""
    assert is_supported_pod_level_resource(name) is expected


_STORAGE = {"ephemeral-storage": MIB}


@pytest.mark.parametrize(
    ("case", "resources", "expected"),
    [
        ("nil resources struct", None, False),
        ("empty resources struct", ResourceRequirements(), False),
        ("only unsupported resource requests set", ResourceRequirements(_STORAGE, {}), False),
        ("only unsupported resource limits set", ResourceRequirements({}, _STORAGE), False),
        (
            "unsupported and suported resources requests set",
            ResourceRequirements({**_STORAGE, "cpu": 1}, {}),
            True,
        ),
        (
            "unsupported and suported resources limits set",
            ResourceRequirements({}, {**_STORAGE, "cpu": 1}),
            True,
        ),
        # Not in upstream's table; the same rule (SupportedPodLevelResources has hugepages-*).
        ("only hugepages requests set", ResourceRequirements({"hugepages-2Mi": 2 * MIB}, {}), True),
        ("only hugepages limits set", ResourceRequirements({}, {"hugepages-1Gi": GIB}), True),
    ],
)
def test_is_pod_level_resources_set(case, resources, expected):
    """TestIsPodLevelResourcesSet (upstream case names, typos included)."""
    assert has_pod_level_resources(Pod("ns", "p", resources=resources)) is expected


def _mi(n):
    return n * MIB


HP2, HP1G = "hugepages-2Mi", "hugepages-1Gi"
SIDECAR = "Always"


@pytest.mark.parametrize(
    ("case", "pod_requests", "pod_limits", "containers", "init_containers", "expected"),
    [
        ("nil", None, None, [], [], {}),
        (
            "pod level memory resource with SkipPodLevelResources false",
            {"memory": _mi(2)},
            None,
            [],
            [],
            {"memory": _mi(2)},
        ),
        (
            "pod level memory and container level cpu resources with SkipPodLevelResources false",
            {"memory": _mi(2)},
            None,
            [c(req={"cpu": 2})],
            [],
            {"memory": _mi(2), "cpu": 2},
        ),
        (
            "pod level unsupported resources set at both pod-level and container-level with "
            "SkipPodLevelResources false",
            {"storage": _mi(2)},
            None,
            [c(req={"storage": _mi(3)})],
            [],
            {"storage": _mi(3)},
        ),
        (
            "pod level unsupported resources set at pod-level with SkipPodLevelResources false",
            {"storage": _mi(2)},
            None,
            [c(req={"memory": _mi(3)})],
            [],
            {"memory": _mi(3)},
        ),
        (
            "only container level resources set with SkipPodLevelResources false",
            None,
            None,
            [c(req={"memory": _mi(3), "cpu": 2})],
            [],
            {"memory": _mi(3), "cpu": 2},
        ),
        (
            "both container-level and pod-level resources set with SkipPodLevelResources false",
            {"memory": _mi(6), "cpu": 8},
            None,
            [c(req={"memory": _mi(3), "cpu": 2})],
            [],
            {"memory": _mi(6), "cpu": 8},
        ),
        (
            "container-level resources and init container set with SkipPodLevelResources false",
            None,
            None,
            [c(req={"memory": _mi(3), "cpu": 2})],
            [c("init", req={"memory": _mi(5), "cpu": 4})],
            {"memory": _mi(5), "cpu": 4},
        ),
        (
            "container-level resources and sidecar container set with SkipPodLevelResources false",
            None,
            None,
            [c(req={"memory": _mi(3), "cpu": 2})],
            [c("side", req={"memory": _mi(5), "cpu": 4}, restart_policy=SIDECAR)],
            {"memory": _mi(8), "cpu": 6},
        ),
        (
            "container-level resources, init and sidecar container set with "
            "SkipPodLevelResources false",
            None,
            None,
            [c(req={"memory": _mi(3), "cpu": 2})],
            [
                c("side", req={"memory": _mi(5), "cpu": 4}, restart_policy=SIDECAR),
                c("init", req={"memory": _mi(6), "cpu": 8}),
            ],
            {"memory": _mi(11), "cpu": 12},
        ),
        (
            "pod-level resources, container-level resources, init and sidecar container set "
            "with SkipPodLevelResources false",
            {"memory": _mi(15), "cpu": 18},
            None,
            [c(req={"memory": _mi(3), "cpu": 2})],
            [
                c("side", req={"memory": _mi(5), "cpu": 4}, restart_policy=SIDECAR),
                c("init", req={"memory": _mi(6), "cpu": 8}),
            ],
            {"memory": _mi(15), "cpu": 18},
        ),
        (
            "pod-level resources, hugepage request/limit single page size",
            {"memory": _mi(10), HP2: _mi(2)},
            {HP2: _mi(2)},
            [],
            [],
            {"memory": _mi(10), HP2: _mi(2)},
        ),
        (
            "pod-level resources, hugepage request/limit multiple page sizes",
            {"cpu": 1000, HP2: _mi(2), HP1G: GIB},
            {HP2: _mi(2), HP1G: GIB},
            [],
            [],
            {"cpu": 1000, HP2: _mi(2), HP1G: GIB},
        ),
        (
            "pod-level resources, container-level resources, hugepage request/limit single "
            "page size",
            {"cpu": 1000, HP2: _mi(10)},
            {HP2: _mi(10)},
            [c(req={HP2: _mi(6)}, lim={HP2: _mi(6)})],
            [],
            {"cpu": 1000, HP2: _mi(10)},
        ),
        (
            "pod-level resources, container-level resources, hugepage request/limit multiple "
            "page sizes",
            {"cpu": 1000, HP2: _mi(10), HP1G: 2 * GIB},
            {HP2: _mi(10), HP1G: 2 * GIB},
            [c(req={"cpu": 1000, HP1G: 2 * GIB}, lim={HP1G: 2 * GIB})],
            [],
            {"cpu": 1000, HP2: _mi(10), HP1G: 2 * GIB},
        ),
        (
            "pod-level resources, container-level resources, hugepage request/limit multiple "
            "page sizes between pod-level and container-level",
            {"cpu": 1000, HP2: _mi(10)},
            {HP2: _mi(10)},
            [c(req={"memory": _mi(4), HP1G: GIB}, lim={HP1G: GIB})],
            [],
            {"cpu": 1000, "memory": _mi(4), HP2: _mi(10), HP1G: GIB},
        ),
    ],
)
def test_pod_level_resource_requests(
    case, pod_requests, pod_limits, containers, init_containers, expected
):
    """TestPodLevelResourceRequests (PodRequests without overhead; the cases run with
    SkipPodLevelResources false, the only mode the scheduler and the kubelet use)."""
    resources = None
    if pod_requests is not None or pod_limits is not None:
        resources = ResourceRequirements(dict(pod_requests or {}), dict(pod_limits or {}))
    pod = Pod(
        "ns",
        "p",
        containers=containers,
        init_containers=init_containers,
        resources=resources,
        phase="Running",
    )
    assert spec_requests(pod) == expected
