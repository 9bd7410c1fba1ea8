"""Every API call the kube executor makes, against kmock: method, path, content type, body.

kmock gaps worked around here (not in product code): it does not check resourceVersion, has
no eviction/scale semantics (explicit reactions below), and its emulator applies every
PATCH to the parent object, which is good enough to see what a JSON patch would do.
"""

from __future__ import annotations

import copy

import kmock
import pytest

from foresize.cluster.actions import (
    ContainerResize,
    EmitEvent,
    EvictPod,
    PatchPodMetadata,
    PatchScale,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.kube.api import KubeApi
from foresize.kube.executor import KubeExecutor

PODS = kmock.resource("v1/pods")
DEPLOYMENTS = kmock.resource("apps/v1/deployments")
TARGETS = kmock.resource("foresize.io/v1/aiscaletargets")

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "generation": 1},
    "spec": {
        "containers": [
            {"name": "sidecar", "resources": {"requests": {"cpu": "10m"}}},
            {
                "name": "app",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "256Mi"},
                    "limits": {"memory": "512Mi"},
                },
            },
        ]
    },
}


def _requests(handler: kmock.KubernetesEmulator, method: str, path: str) -> list:
    return [r for r in handler[method] if r.url.path == path]


class Clock:
    def __init__(self, now: float = 1_780_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api(kmock: kmock.KubernetesEmulator):
    client = KubeApi.from_url(str(kmock.url).rstrip("/"))
    yield client
    await client.close()


async def test_resize_is_a_json_patch_on_the_resize_subresource(kmock, api):
    kmock.objects[PODS, "shop", "web-1"] = copy.deepcopy(POD)
    executor = KubeExecutor(api, server_version=(1, 34))
    action = ResizePod(
        "shop",
        "web-1",
        (
            ContainerResize(
                "app", requests={"cpu": 500, "memory": 384 * 2**20}, limits={"memory": 768 * 2**20}
            ),
        ),
    )
    result = await executor.apply(action)
    assert result.ok, result
    (req,) = _requests(kmock, "patch", "/api/v1/namespaces/shop/pods/web-1/resize")
    assert req.headers["Content-Type"] == "application/json-patch+json"
    assert req.data == [
        {"op": "test", "path": "/spec/containers/1/name", "value": "app"},
        {"op": "add", "path": "/spec/containers/1/resources/requests/cpu", "value": "500m"},
        {"op": "add", "path": "/spec/containers/1/resources/requests/memory", "value": "384Mi"},
        {"op": "add", "path": "/spec/containers/1/resources/limits/memory", "value": "768Mi"},
    ]
    # The emulator applied the patch: the right container changed, the other did not.
    stored = kmock.objects[PODS, "shop", "web-1"]
    assert stored["spec"]["containers"][1]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "384Mi",
    }
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "10m"}


async def test_resize_creates_missing_requests_map_and_pins_sidecar_index(kmock, api):
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][1]["resources"] = {}
    kmock.objects[PODS, "shop", "web-1"] = pod
    executor = KubeExecutor(api, server_version=(1, 35))
    result = await executor.apply(
        ResizePod("shop", "web-1", (ContainerResize("app", requests={"cpu": 1500}),))
    )
    assert result.ok
    (req,) = _requests(kmock, "patch", "/api/v1/namespaces/shop/pods/web-1/resize")
    assert req.data == [
        {"op": "test", "path": "/spec/containers/1/name", "value": "app"},
        {"op": "add", "path": "/spec/containers/1/resources/requests", "value": {"cpu": "1500m"}},
    ]


async def test_resize_refusals_map_to_action_results(kmock, api):
    kmock.objects[PODS, "shop", "web-1"] = copy.deepcopy(POD)
    path = "/api/v1/namespaces/shop/pods/web-1/resize"
    (
        kmock[f"patch {path}"]
        << 403
        << {
            "kind": "Status",
            "code": 403,
            "reason": "Forbidden",
            "message": "Node didn't have enough capacity",
            "details": {"causes": [{"reason": "NodeCapacity", "message": "cpu"}]},
        }
    )
    executor = KubeExecutor(api, server_version=(1, 36))
    result = await executor.apply(
        ResizePod("shop", "web-1", (ContainerResize("app", requests={"cpu": 64000}),))
    )
    assert not result.ok and result.code == 403 and result.has_cause("NodeCapacity")


async def test_server_version_gates_in_place_and_memory_limit_decrease(kmock, api):
    kmock.objects[PODS, "shop", "web-1"] = copy.deepcopy(POD)
    kmock["get /version"] << {"major": "1", "minor": "33+", "gitVersion": "v1.33.2-eks"}
    executor = KubeExecutor(api)
    assert await executor.detect_server_version() == (1, 33)
    shrink = ResizePod("shop", "web-1", (ContainerResize("app", limits={"memory": 300 * 2**20}),))
    refused = await executor.apply(shrink)
    assert refused.code == 422 and "RestartContainer" in refused.message
    grow = ResizePod("shop", "web-1", (ContainerResize("app", limits={"memory": 600 * 2**20}),))
    assert (await executor.apply(grow)).ok
    executor.server_version = (1, 34)  # 1.34 accepts the decrease
    assert (await executor.apply(shrink)).ok
    executor.server_version = (1, 32)  # no resize subresource at all
    old = await executor.apply(grow)
    assert not old.ok and "1.33" in old.message
    sent = _requests(kmock, "patch", "/api/v1/namespaces/shop/pods/web-1/resize")
    assert len(sent) == 2  # only the grow on 1.33 and the shrink on 1.34 reached the server


async def test_metadata_patch_is_a_separate_merge_patch_on_the_pod(kmock, api):
    kmock.objects[PODS, "shop", "web-1"] = copy.deepcopy(POD)
    executor = KubeExecutor(api)
    result = await executor.apply(
        PatchPodMetadata(
            "shop", "web-1", annotations={"foresize.io/stall-since": "1780000000", "old": None}
        )
    )
    assert result.ok
    (req,) = _requests(kmock, "patch", "/api/v1/namespaces/shop/pods/web-1")
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert req.data == {
        "metadata": {"annotations": {"foresize.io/stall-since": "1780000000", "old": None}}
    }
    stored = kmock.objects[PODS, "shop", "web-1"]
    assert stored["metadata"]["annotations"] == {"foresize.io/stall-since": "1780000000"}


async def test_eviction_201_and_429_with_deferral_honoured(kmock, api):
    base = "/api/v1/namespaces/shop/pods"
    (
        kmock[f"post {base}/web-1/eviction"]
        << 201
        << {"kind": "Status", "status": "Success", "code": 201}
    )
    budget = {
        "kind": "Status",
        "status": "Failure",
        "code": 429,
        "reason": "TooManyRequests",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
                }
            ],
            "retryAfterSeconds": 30,
        },
    }
    kmock[f"post {base}/web-2/eviction"] << 429 << budget
    kmock[f"post {base}/web-3/eviction"] << 201 << {"kind": "Status", "code": 201}
    clock = Clock()
    executor = KubeExecutor(api, clock=clock)
    actions = [
        EvictPod("shop", "web-1", target="shop/web", grace_period_seconds=30),
        EvictPod("shop", "web-2", target="shop/web"),
        EvictPod("shop", "web-3", target="shop/web"),
    ]
    results = await executor.apply_all(actions)
    assert [r.code for _, r in results] == [201, 429, 429]
    assert results[0][1].ok
    refused = results[1][1]
    assert refused.has_cause("DisruptionBudget") and refused.retry_after_seconds == 30
    assert "deferred" in results[2][1].message  # not sent: the target is deferred
    (first,) = _requests(kmock, "post", f"{base}/web-1/eviction")
    assert first.headers["Content-Type"] == "application/json"
    assert first.data == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "shop"},
        "deleteOptions": {"gracePeriodSeconds": 30},
    }
    assert len(_requests(kmock, "post", f"{base}/web-2/eviction")) == 1
    assert _requests(kmock, "post", f"{base}/web-3/eviction") == []
    clock.now += 31  # retryAfterSeconds has passed: evictions resume
    ((_, later),) = await executor.apply_all([EvictPod("shop", "web-3", target="shop/web")])
    assert later.ok and len(_requests(kmock, "post", f"{base}/web-3/eviction")) == 1


async def test_eviction_500_for_multiple_pdbs(kmock, api):
    (
        kmock["post /api/v1/namespaces/shop/pods/web-1/eviction"]
        << 500
        << {
            "kind": "Status",
            "code": 500,
            "reason": "InternalError",
            "message": "This pod has more than one PodDisruptionBudget, which the "
            "eviction subresource does not support.",
        }
    )
    result = await KubeExecutor(api).apply(EvictPod("shop", "web-1", target="shop/web"))
    assert not result.ok and result.code == 500 and "more than one" in result.message


async def test_scale_patch(kmock, api):
    kmock.objects[DEPLOYMENTS, "shop", "web"] = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 2},
    }
    result = await KubeExecutor(api).apply(PatchScale("shop", "Deployment", "web", 5))
    assert result.ok
    (req,) = _requests(kmock, "patch", "/apis/apps/v1/namespaces/shop/deployments/web/scale")
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert req.data == {"spec": {"replicas": 5}}


async def test_restart_workload_sets_restarted_at(kmock, api):
    kmock.objects[DEPLOYMENTS, "shop", "web"] = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 2},
    }
    result = await KubeExecutor(api).apply(
        RestartWorkload("shop", "Deployment", "web", restarted_at=1_780_000_000.0)
    )
    assert result.ok
    (req,) = _requests(kmock, "patch", "/apis/apps/v1/namespaces/shop/deployments/web")
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert req.data == {
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-05-28T20:26:40Z"}
                }
            }
        }
    }


async def test_status_patch_on_status_subresource(kmock, api):
    kmock.objects[TARGETS, "shop", "web"] = {"metadata": {"name": "web"}, "spec": {}}
    status = {"conditions": [{"type": "Ready", "status": "True"}], "hasEnoughDataToScale": False}
    result = await KubeExecutor(api).apply(WriteTargetStatus("shop", "web", status))
    assert result.ok
    (req,) = _requests(
        kmock, "patch", "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status"
    )
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert req.data == {"status": status}
    assert kmock.objects[TARGETS, "shop", "web"]["status"]["hasEnoughDataToScale"] is False


async def test_event_is_a_core_v1_event(kmock, api):
    executor = KubeExecutor(api, clock=Clock(1_780_000_000.0), instance="foresize-0")
    result = await executor.apply(
        EmitEvent("shop", "Pod", "web-1", "Resized", "cpu 250m -> 500m", uid="u-1")
    )
    assert result.ok
    (req,) = _requests(kmock, "post", "/api/v1/namespaces/shop/events")
    assert req.headers["Content-Type"] == "application/json"
    assert req.data == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "web-1.", "namespace": "shop"},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "web-1",
            "namespace": "shop",
            "uid": "u-1",
        },
        "reason": "Resized",
        "message": "cpu 250m -> 500m",
        "type": "Normal",
        "source": {"component": "foresize"},
        "reportingComponent": "foresize.io/operator",
        "reportingInstance": "foresize-0",
        "firstTimestamp": "2026-05-28T20:26:40Z",
        "lastTimestamp": "2026-05-28T20:26:40Z",
        "count": 1,
    }
