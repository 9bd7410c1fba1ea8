"""Pods with pod-level resources (`spec.resources`, PodLevelResources, beta and on by default
since 1.34): parsed from JSON, left alone by the webhook and by the disruption worker, who
say so (admission warning; Event and target condition).

Upstream: `pkg/apis/core/validation/validation.go` (ValidatePodResize refuses to resize
them, 1.33-1.35), and the API server's pod validation, which refuses container requests
above the pod-level requests (so a webhook raising them could block the pod's creation).
"""

from __future__ import annotations

from foresize.core.admission.pod import decide_pod
from foresize.core.admission.review import pod_from_json
from foresize.core.api.quantity import MIB
from foresize.core.cluster.kubejson import pod_from
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    Pod,
    ResourceRequirements,
)
from foresize.core.cluster.qos import has_pod_level_resources
from foresize.core.vertical.guards import POD_LEVEL_CONDITION, pod_level_conditions
from support.admission import SUG, idx, target_manifest
from support.sim import make_sim, pods_of, workload

POD_JSON = {
    "metadata": {"name": "p", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {
        "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}},
        "overhead": {"cpu": "250m", "memory": "160Mi"},
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}],
    },
}


def test_pod_level_resources_and_overhead_are_read_from_pod_json():
    p = pod_from(POD_JSON)
    assert p.resources is not None and p.resources.requests == {"cpu": 500}
    assert p.resources.limits == {"memory": 1024 * MIB}
    assert p.overhead == {"cpu": 250, "memory": 160 * MIB}
    assert has_pod_level_resources(p)
    # The webhook's own reading of an AdmissionReview's pod sees them too.
    assert has_pod_level_resources(pod_from_json(POD_JSON))


def _webhook_pod(resources: ResourceRequirements | None) -> Pod:
    return Pod(
        namespace="shop",
        name="web-5d9f8-abcde",
        labels={"app": "web", "pod-template-hash": "5d9f8"},
        owner=OwnerRef("ReplicaSet", "web-5d9f8"),
        containers=[Container("app", ResourceRequirements({"cpu": 100, "memory": 128 * MIB}))],
        resources=resources,
    )


def test_the_webhook_leaves_pods_with_pod_level_resources_alone_and_warns():
    index = idx(target_manifest(suggestion=SUG))
    plain = decide_pod(_webhook_pod(None), None, index, 0.0)
    assert plain.changed  # the same pod without pod-level resources is resized
    d = decide_pod(_webhook_pod(ResourceRequirements({"cpu": 200}, {})), None, index, 0.0)
    assert not d.changed
    assert any("pod-level resources" in w for w in d.warnings)


def test_usage_accounting_reserves_pod_level_requests():
    sim = make_sim(
        [
            workload(
                "pl",
                containers=[
                    {
                        "name": "a",
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "usage": {"cpu": "10m", "memory": "10Mi"},
                    },
                    {
                        "name": "b",
                        "requests": {"cpu": "300m", "memory": "64Mi"},
                        "usage": {"cpu": "10m", "memory": "10Mi"},
                    },
                ],
                resources={"requests": {"cpu": "1", "memory": "1Gi"}},
            )
        ],
        settle=0,
    )
    sim.run(3600)
    row = sim.summary()["workloads"][0]
    # The pod reserves its pod-level 1 CPU / 1 GiB, not the containers' 400m / 128Mi.
    assert abs(row["cpu_requested_core_hours"] - 1.0) < 0.01
    assert abs(row["memory_requested_gib_hours"] - 1.0) < 0.01
    assert pods_of(sim, "pl")[0].resources.requests == {"cpu": 1000, "memory": 1024 * MIB}


def test_the_target_condition_turns_false_once_no_pod_sets_pod_level_resources():
    from foresize.core.cluster.target import TargetView
    from foresize.core.vertical.run import TargetRun
    from foresize.core.vertical.state import TargetState

    pol = TargetView(kind="AIScaleTarget", namespace="shop", name="web")
    run = TargetRun(pol, TargetState(), None)
    run.pod_level_left = ["web-1", "web-2"]
    written = pod_level_conditions(run)
    assert written is not None
    (cond,) = written
    assert cond["type"] == POD_LEVEL_CONDITION and cond["status"] == "True"
    assert "web-1, web-2" in cond["message"]
    # Already in status: nothing to write.
    run.target_conditions = written
    assert pod_level_conditions(run) is None
    # The pods are gone: the condition is set False, other conditions kept.
    other = {"type": "InPlaceResizeUnsupported", "status": "False"}
    run.target_conditions = [other, *written]
    run.pod_level_left = []
    after = pod_level_conditions(run)
    assert after is not None and after[0] == other and after[1]["status"] == "False"


# Kubernetes 1.35 counts pod-level hugepages as pod-level resources (component-helpers
# IsPodLevelResourcesSet: cpu, memory, hugepages-*): such a pod is pod-level, with nothing
# but hugepages at the pod level.
HUGEPAGES_ONLY = ResourceRequirements({"hugepages-2Mi": 4 * MIB}, {"hugepages-2Mi": 4 * MIB})


def test_a_pod_with_only_pod_level_hugepages_is_refused_a_resize_like_the_api_server():
    from foresize.core.cluster.actions import ContainerResize, ResizePod
    from foresize.core.cluster.validation import MSG_POD_LEVEL, check_resize

    p = _webhook_pod(HUGEPAGES_ONLY)
    resize = ResizePod("shop", p.name, (ContainerResize("app", requests={"cpu": 200}),))
    refused = check_resize(p, resize)
    assert refused is not None and refused.code == 422 and MSG_POD_LEVEL in refused.message
    # ephemeral-storage is not a pod-level resource: that pod is resized like any other.
    storage = _webhook_pod(ResourceRequirements({"ephemeral-storage": MIB}, {}))
    assert check_resize(storage, resize) is None


def test_the_webhook_and_the_worker_leave_a_pod_with_only_pod_level_hugepages_alone():
    from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod
    from foresize.core.vertical import WorkerState, plan
    from support.vertical import pod, snap, sugg, target

    index = idx(target_manifest(suggestion=SUG))
    d = decide_pod(_webhook_pod(HUGEPAGES_ONLY), None, index, 0.0)
    assert not d.changed and any("pod-level resources" in w for w in d.warnings)

    hp, plain = pod("hp", cpu=100), pod("plain", cpu=100)
    hp.resources = HUGEPAGES_ONLY
    for mode in ("in_place", "in_place_or_recreate"):
        actions, _ = plan(
            snap([hp, plain], [target(mode)]), 0.0, WorkerState(), suggestions=sugg(cpu=300)
        )
        touched = {a.name for a in actions if isinstance(a, ResizePod | EvictPod)}
        assert touched == {"plain"}, mode
        said = [a for a in actions if isinstance(a, EmitEvent) and a.name == "hp"]
        assert [e.reason for e in said] == [POD_LEVEL_CONDITION], mode
