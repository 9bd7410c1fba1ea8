"""Resize validation refuses exactly what the API server refuses, with its messages (422)."""

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import ContainerResize, ResizePod
from foresize.core.cluster.model import Container, Pod, ResourceRequirements
from foresize.core.cluster.validation import check_resize, validate_resize


def pod(req=None, lim=None, inits=(), **kw) -> Pod:
    return Pod(
        "default",
        "p",
        containers=[Container("app", ResourceRequirements(dict(req or {}), dict(lim or {})))],
        init_containers=list(inits),
        **kw,
    )


def resize(*containers: ContainerResize) -> ResizePod:
    return ResizePod("default", "p", containers)


BURSTABLE = dict(req={"cpu": 100, "memory": 64 * MIB}, lim={"cpu": 200, "memory": 128 * MIB})
GUARANTEED = dict(req={"cpu": 100, "memory": 64 * MIB}, lim={"cpu": 100, "memory": 64 * MIB})


def test_valid_resize_is_accepted():
    p = pod(**BURSTABLE)
    assert check_resize(p, resize(ContainerResize("app", {"cpu": 150}, {"cpu": 300}))) is None


def test_qos_change_refused_with_api_server_message():
    p = pod(**BURSTABLE)
    # Raising requests to the limits would make the pod Guaranteed.
    r = resize(ContainerResize("app", {"cpu": 200, "memory": 128 * MIB}))
    res = check_resize(p, r)
    assert res is not None and not res.ok and res.code == 422 and res.reason == "Invalid"
    assert res.message == (
        'Pod "p" is invalid: spec: Invalid value: "Burstable": '
        "Pod QOS Class may not change as a result of resizing"
    )
    assert res.causes[0]["field"] == "spec"
    # Guaranteed must move requests and limits together.
    g = pod(**GUARANTEED)
    res = check_resize(g, resize(ContainerResize("app", {"cpu": 50})))
    assert res is not None and "Pod QOS Class may not change as a result of resizing" in (
        res.message
    )
    assert check_resize(g, resize(ContainerResize("app", {"cpu": 50}, {"cpu": 50}))) is None
    # BestEffort may not gain a request.
    be = pod()
    res = check_resize(be, resize(ContainerResize("app", {"memory": 40 * MIB})))
    assert res is not None and '"BestEffort": Pod QOS Class may not change' in res.message


def test_removed_request_and_limit_refused():
    p = pod(**BURSTABLE)
    res = check_resize(p, resize(ContainerResize("app", {"memory": None})))  # type: ignore[dict-item]
    assert res is not None and res.code == 422
    assert (
        "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed"
        in res.message
    )
    res = check_resize(p, resize(ContainerResize("app", limits={"memory": None})))  # type: ignore[dict-item]
    assert res is not None
    assert "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed" in (
        res.message
    )


def test_other_resource_refused():
    p = pod(**BURSTABLE)
    res = check_resize(p, resize(ContainerResize("app", limits={"ephemeral-storage": 2**30})))
    assert res is not None and res.code == 422
    assert (
        res.message
        == 'Pod "p" is invalid: spec: Forbidden: only cpu and memory resources are mutable'
    )
    assert res.causes == (
        {
            "type": "FieldValueForbidden",
            "message": "Forbidden: only cpu and memory resources are mutable",
            "field": "spec",
        },
    )


def test_request_above_limit_refused():
    p = pod(**BURSTABLE)
    errs = validate_resize(p, resize(ContainerResize("app", {"cpu": 500})))
    assert [str(e) for e in errs] == [
        'spec.containers[0].resources.requests: Invalid value: "500m": '
        "must be less than or equal to cpu limit of 200m"
    ]


def test_init_containers_static_windows_and_unknown_containers():
    init = Container("init", ResourceRequirements({"cpu": 10}, {"cpu": 10}))
    sidecar = Container("side", ResourceRequirements({"cpu": 10}, {"cpu": 20}), {}, "Always")
    p = pod(**BURSTABLE, inits=[init, sidecar])
    res = check_resize(p, resize(ContainerResize("init", {"cpu": 5})))
    assert (
        res is not None
        and (
            "spec.initContainers[0].resources: Forbidden: "
            "resources for non-sidecar init containers are immutable"
        )
        in res.message
    )
    assert check_resize(p, resize(ContainerResize("side", {"cpu": 15}))) is None

    static = pod(**BURSTABLE, static=True)
    res = check_resize(static, resize(ContainerResize("app", {"cpu": 150})))
    assert res is not None and "static pods cannot be resized" in res.message
    win = pod(**BURSTABLE, os="windows")
    res = check_resize(win, resize(ContainerResize("app", {"cpu": 150})))
    assert res is not None and "windows pods cannot be resized" in res.message
    res = check_resize(p, resize(ContainerResize("nope", {"cpu": 1})))
    assert res is not None and "containers may not be added or removed on resize" in res.message


def test_several_errors_are_listed_in_brackets():
    p = pod(**BURSTABLE)
    r = resize(ContainerResize("app", {"memory": None, "cpu": 500}))  # type: ignore[dict-item]
    res = check_resize(p, r)
    assert res is not None
    assert res.message.startswith('Pod "p" is invalid: [') and res.message.endswith("]")
    assert len(res.causes) == 2


def test_resize_policy_and_container_renames_are_refused():
    from foresize.core.cluster.validation import validate_resize_spec

    p = pod(**BURSTABLE)
    changed = Container("app", p.containers[0].resources.copy(), {"memory": "RestartContainer"})
    errs = validate_resize_spec(p, [changed], [])
    assert [str(e) for e in errs] == ["spec: Forbidden: only cpu and memory resources are mutable"]
    renamed = Container("other", p.containers[0].resources.copy())
    assert [str(e) for e in validate_resize_spec(p, [renamed], [])] == [
        "spec: Forbidden: only cpu and memory resources are mutable"
    ]


# Upstream: pkg/apis/core/validation/validation.go ValidatePodResize.


def test_pods_with_pod_level_resources_cannot_be_resized():
    p = pod(**BURSTABLE, resources=ResourceRequirements({"cpu": 500}, {}))
    res = check_resize(p, resize(ContainerResize("app", {"cpu": 150}, {"cpu": 300})))
    assert res is not None and res.code == 422
    assert "spec: Forbidden: pods with pod-level resources cannot be resized" in res.message
    # Kubernetes 1.35's IsPodLevelResourcesSet counts hugepages too: hugepages alone make a
    # pod "pod-level" (so it is refused); a resource outside the supported set does not.
    p.resources = ResourceRequirements({"hugepages-2Mi": 2 * MIB}, {})
    res = check_resize(p, resize(ContainerResize("app", {"cpu": 150}, {"cpu": 300})))
    assert res is not None and res.code == 422
    p.resources = ResourceRequirements({"ephemeral-storage": 2 * MIB}, {})
    assert check_resize(p, resize(ContainerResize("app", {"cpu": 150}, {"cpu": 300}))) is None


def test_memory_limit_decrease_refused_on_1_33_for_containers_and_sidecars():
    sidecar = Container(
        "side", ResourceRequirements({"memory": 32 * MIB}, {"memory": 64 * MIB}), {}, "Always"
    )
    p = pod(**BURSTABLE, inits=[sidecar])
    down_app = resize(ContainerResize("app", limits={"memory": 100 * MIB}))
    down_side = resize(ContainerResize("side", limits={"memory": 48 * MIB}))
    for r, path in ((down_app, "spec.containers[0]"), (down_side, "spec.initContainers[0]")):
        res = check_resize(p, r, (1, 33))
        assert res is not None and res.code == 422, path
        assert (
            f"{path}.resources.limits[memory]: Forbidden: memory limits cannot be decreased "
            "unless resizePolicy is RestartContainer"
        ) in res.message
        # 1.34 and later accept it.
        assert check_resize(p, r, (1, 34)) is None
    # An increase is fine on 1.33, and so is a decrease with RestartContainer.
    assert (
        check_resize(p, resize(ContainerResize("side", limits={"memory": 96 * MIB})), (1, 33))
        is None
    )
    sidecar.resize_policy["memory"] = "RestartContainer"
    assert check_resize(p, down_side, (1, 33)) is None


def test_kube_executor_rule_covers_sidecars_on_1_33():
    # The executor refuses before sending (kube/version.py), sidecars included.
    from foresize.core.cluster.server_version import memory_limit_change_refused

    sidecar = Container(
        "side", ResourceRequirements({"memory": 32 * MIB}, {"memory": 64 * MIB}), {}, "Always"
    )
    p = pod(**BURSTABLE, inits=[sidecar])
    shrink = ContainerResize("side", limits={"memory": 48 * MIB})
    why = memory_limit_change_refused((1, 33), p, shrink)
    assert why is not None and "'side'" in why and "RestartContainer" in why
    assert memory_limit_change_refused((1, 34), p, shrink) is None
