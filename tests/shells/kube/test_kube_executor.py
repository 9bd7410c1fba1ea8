"""Every API call the kube executor makes, against the strict API server: method, path,
content type, body, and that the server accepts it (or refuses it as a real one would)."""

from __future__ import annotations

import copy
from dataclasses import replace as dataclasses_replace

import pytest

from foresize.core.cluster.actions import (
    ContainerResize,
    EmitEvent,
    EvictPod,
    PatchPodMetadata,
    PatchScale,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from support.clocks import Clock
from support.kube_objects import IMAGE, deployment, namespace, node, target
from support.kube_objects import pod as make_pod

POD = make_pod(
    "web-1",
    owner=None,
    containers=[
        {"name": "sidecar", "image": IMAGE, "resources": {"requests": {"cpu": "10m"}}},
        {
            "name": "app",
            "image": IMAGE,
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"memory": "512Mi"},
            },
        },
    ],
)
RESIZE = "/api/v1/namespaces/shop/pods/web-1/resize"


@pytest.fixture
async def api(apiserver):
    apiserver.seed(namespace("shop"))
    apiserver.seed(node())
    client = KubeApi.from_url(apiserver.url)
    yield client
    await client.close()


def seed_pod(apiserver, body: dict | None = None) -> str:
    return apiserver.seed(copy.deepcopy(body or POD))["metadata"]["uid"]


async def test_resize_is_a_json_patch_on_the_resize_subresource(apiserver, api):
    uid = seed_pod(apiserver)
    executor = KubeExecutor(api, server_version=(1, 34))
    action = ResizePod(
        "shop",
        "web-1",
        (
            ContainerResize(
                "app", requests={"cpu": 500, "memory": 384 * 2**20}, limits={"memory": 768 * 2**20}
            ),
        ),
        uid=uid,
    )
    result = await executor.apply(action)
    assert result.ok, result
    (req,) = apiserver.calls("PATCH", RESIZE)
    assert req.content_type == "application/json-patch+json"
    assert req.body == [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/spec/containers/1/name", "value": "app"},
        {"op": "add", "path": "/spec/containers/1/resources/requests/cpu", "value": "500m"},
        {"op": "add", "path": "/spec/containers/1/resources/requests/memory", "value": "384Mi"},
        {"op": "add", "path": "/spec/containers/1/resources/limits/memory", "value": "768Mi"},
    ]
    # The server applied the patch: the right container changed, the other did not.
    stored = apiserver.get("Pod", "shop", "web-1")
    assert stored["spec"]["containers"][1]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "384Mi",
    }
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "10m"}


async def test_resize_creates_missing_requests_map_and_pins_sidecar_index(apiserver, api):
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][1]["resources"] = {"limits": {"memory": "512Mi"}}
    pod["status"]["containerStatuses"][1]["resources"] = {"limits": {"memory": "512Mi"}}
    seed_pod(apiserver, pod)
    executor = KubeExecutor(api, server_version=(1, 35))
    result = await executor.apply(
        ResizePod("shop", "web-1", (ContainerResize("app", requests={"cpu": 1500}),))
    )
    assert result.ok, result
    (req,) = apiserver.calls("PATCH", RESIZE)
    assert req.body == [
        {"op": "test", "path": "/spec/containers/1/name", "value": "app"},
        {"op": "add", "path": "/spec/containers/1/resources/requests", "value": {"cpu": "1500m"}},
    ]


async def test_resize_refusals_map_to_action_results(apiserver, api):
    seed_pod(apiserver)
    apiserver.kube_version = (1, 36)  # resizes larger than the node refused at admission
    executor = KubeExecutor(api, server_version=(1, 36))
    result = await executor.apply(
        ResizePod("shop", "web-1", (ContainerResize("app", requests={"cpu": 64000}),))
    )
    assert not result.ok and result.code == 403 and result.has_cause("NodeCapacity")
    # A QoS change is the API server's 422: a refusal the planner remembers.
    guaranteed = ResizePod(
        "shop",
        "web-1",
        (
            ContainerResize("sidecar", limits={"cpu": 10, "memory": 2**26}),
            ContainerResize("app", limits={"cpu": 250, "memory": 256 * 2**20}),
        ),
    )
    refused = await executor.apply(guaranteed)
    assert refused.code == 422 and "QOS" in refused.message


async def test_a_resize_or_eviction_planned_for_a_pod_since_recreated_is_a_conflict(apiserver, api):
    """kube.md GAP 19: a StatefulSet pod recreated under the same name is another pod: the
    uid preconditions make the server refuse, and the executor reports a stale plan (409),
    not a refused resize (422, which leads to an eviction)."""
    old_uid = seed_pod(apiserver)
    apiserver.delete("Pod", "shop", "web-1")
    seed_pod(apiserver)  # same name, new uid
    executor = KubeExecutor(api, server_version=(1, 34))
    resize = ResizePod(
        "shop", "web-1", (ContainerResize("app", requests={"cpu": 300}),), uid=old_uid
    )
    result = await executor.apply(resize)
    assert result.code == 409 and result.reason == "Conflict", result
    (sent,) = apiserver.calls("PATCH", RESIZE)
    assert sent.code == 422  # the server's answer to the failed `test` of /metadata/uid
    live = apiserver.get("Pod", "shop", "web-1")
    assert live["spec"]["containers"][1]["resources"]["requests"]["cpu"] == "250m"
    evict = await executor.apply(EvictPod("shop", "web-1", target="shop/web", uid=old_uid))
    assert evict.code == 409 and "Precondition failed: UID" in evict.message
    assert apiserver.get("Pod", "shop", "web-1") is not None
    # The planner does not treat a conflict as a refusal.
    from foresize.core.vertical.results import on_result
    from foresize.core.vertical.state import TargetState, WorkerState

    state = WorkerState()
    state.targets["shop/web"] = TargetState()
    state.targets["shop/web"].inflight["web-1"] = old_uid
    after = on_result(state, dataclasses_replace(resize, target="shop/web"), result, 0.0)
    assert after.targets["shop/web"].refused == {}


async def test_server_version_gates_in_place_and_memory_limit_decrease(apiserver, api):
    seed_pod(apiserver)
    apiserver.kube_version = (1, 33)
    executor = KubeExecutor(api)
    assert await executor.detect_server_version() == (1, 33)
    shrink = ResizePod("shop", "web-1", (ContainerResize("app", limits={"memory": 300 * 2**20}),))
    refused = await executor.apply(shrink)
    assert refused.code == 422 and "RestartContainer" in refused.message
    grow = ResizePod("shop", "web-1", (ContainerResize("app", limits={"memory": 600 * 2**20}),))
    assert (await executor.apply(grow)).ok
    apiserver.kube_version = executor.server_version = (1, 34)  # 1.34 accepts the decrease
    assert (await executor.apply(shrink)).ok
    executor.server_version = (1, 32)  # no resize subresource at all
    old = await executor.apply(grow)
    assert not old.ok and "1.33" in old.message
    sent = apiserver.calls("PATCH", RESIZE)
    assert [r.code for r in sent] == [200, 200]  # only the grow on 1.33 and the shrink on 1.34


async def test_metadata_patch_is_a_separate_merge_patch_on_the_pod(apiserver, api):
    seed_pod(apiserver)
    executor = KubeExecutor(api)
    result = await executor.apply(
        PatchPodMetadata(
            "shop", "web-1", annotations={"foresize.io/stall-since": "1780000000", "old": None}
        )
    )
    assert result.ok
    (req,) = apiserver.calls("PATCH", "^/api/v1/namespaces/shop/pods/web-1$")
    assert req.content_type == "application/merge-patch+json"
    assert req.body == {
        "metadata": {"annotations": {"foresize.io/stall-since": "1780000000", "old": None}}
    }
    stored = apiserver.get("Pod", "shop", "web-1")
    assert stored["metadata"]["annotations"] == {"foresize.io/stall-since": "1780000000"}


async def test_eviction_201_and_429_with_deferral_honoured(apiserver, api):
    base = "/api/v1/namespaces/shop/pods"
    dep = apiserver.seed(deployment(replicas=3))
    owner = ("Deployment", "web", dep["metadata"]["uid"])  # expected pods: its replicas
    uids = {}
    for name in ("web-1", "web-2", "web-3"):
        uids[name] = apiserver.seed(make_pod(name, owner=owner))["metadata"]["uid"]
    apiserver.seed(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    clock = Clock()
    executor = KubeExecutor(api, clock=clock)
    actions = [
        EvictPod("shop", "web-1", target="shop/web", grace_period_seconds=30, uid=uids["web-1"]),
        EvictPod("shop", "web-2", target="shop/web"),
        EvictPod("shop", "web-3", target="shop/web"),
    ]
    results = await executor.apply_all(actions)
    assert [r.code for _, r in results] == [201, 429, 429]
    assert results[0][1].ok
    refused = results[1][1]
    # A PDB refusal carries no retryAfterSeconds: the executor's default wait applies.
    assert refused.has_cause("DisruptionBudget") and refused.retry_after_seconds is None
    assert "deferred" in results[2][1].message  # not sent: the target is deferred
    (first,) = apiserver.calls("POST", f"{base}/web-1/eviction")
    assert first.content_type == "application/json"
    assert first.body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "shop"},
        "deleteOptions": {"gracePeriodSeconds": 30, "preconditions": {"uid": uids["web-1"]}},
    }
    assert len(apiserver.calls("POST", f"{base}/web-2/eviction")) == 1
    assert apiserver.calls("POST", f"{base}/web-3/eviction") == []
    # The replacement becomes ready: the budget allows one more.
    apiserver.seed(make_pod("web-4", owner=owner))
    clock.now += 11  # the default wait has passed: evictions resume
    ((_, later),) = await executor.apply_all([EvictPod("shop", "web-3", target="shop/web")])
    assert later.ok and len(apiserver.calls("POST", f"{base}/web-3/eviction")) == 1


async def test_eviction_500_for_multiple_pdbs(apiserver, api):
    seed_pod(apiserver)
    for name in ("a", "b"):
        apiserver.seed(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
    result = await KubeExecutor(api).apply(EvictPod("shop", "web-1", target="shop/web"))
    assert not result.ok and result.code == 500 and "more than one" in result.message


async def test_scale_patch(apiserver, api):
    apiserver.seed(deployment())
    result = await KubeExecutor(api).apply(PatchScale("shop", "Deployment", "web", 5))
    assert result.ok
    (req,) = apiserver.calls("PATCH", "/apis/apps/v1/namespaces/shop/deployments/web/scale")
    assert req.content_type == "application/merge-patch+json"
    assert req.body == {"spec": {"replicas": 5}}
    assert apiserver.get("Deployment", "shop", "web")["spec"]["replicas"] == 5


async def test_restart_workload_sets_restarted_at(apiserver, api):
    apiserver.seed(deployment())
    result = await KubeExecutor(api).apply(
        RestartWorkload("shop", "Deployment", "web", restarted_at=1_780_000_000.0)
    )
    assert result.ok, result
    (req,) = apiserver.calls("PATCH", "^/apis/apps/v1/namespaces/shop/deployments/web$")
    assert req.content_type == "application/merge-patch+json"
    assert req.body == {
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-05-28T20:26:40Z"}
                }
            }
        }
    }


async def test_status_patch_on_status_subresource(apiserver, api):
    apiserver.seed(target())
    status = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ok", "message": ""}],
        "hasEnoughDataToScale": False,
    }
    result = await KubeExecutor(api).apply(WriteTargetStatus("shop", "web", status))
    assert result.ok, result
    (req,) = apiserver.calls(
        "PATCH", "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status"
    )
    assert req.content_type == "application/merge-patch+json"
    assert req.body == {"status": status}
    assert apiserver.get("AIScaleTarget", "shop", "web")["status"]["hasEnoughDataToScale"] is False


async def test_event_is_a_core_v1_event(apiserver, api):
    executor = KubeExecutor(api, clock=Clock(1_780_000_000.0), instance="foresize-0")
    result = await executor.apply(
        EmitEvent("shop", "Pod", "web-1", "Resized", "cpu 250m -> 500m", uid="u-1")
    )
    assert result.ok and result.code == 202, result  # queued for the Events' own task
    await executor.events.flush()
    (req,) = apiserver.calls("POST", "/api/v1/namespaces/shop/events")
    assert req.content_type == "application/json"
    assert req.body == {
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


async def test_a_retry_is_not_sent_once_the_shard_s_lease_is_lost(apiserver, api):
    """A resize passed the gate, was answered 429 (Retry-After 1 s), and the Lease was lost
    meanwhile: the retry is not sent (another replica may hold the shard by then)."""
    import asyncio

    from foresize.shells.kube.gate import GatedExecutor, api_veto

    uid = seed_pod(apiserver)

    class Shards:
        held = True

        def owns(self, target: str) -> bool:
            return self.held

    shards = Shards()

    def refuse_and_lose(record) -> bool:
        if record.subresource != "resize":
            return False
        shards.held = False  # the renewals failed while the 429 was answered
        return True

    apiserver.error_rate, apiserver.error_codes = 1.0, (429,)
    apiserver.error_retry_after, apiserver.error_filter = 1, refuse_and_lose
    api.veto = api_veto(asyncio.Event())
    gated = GatedExecutor(KubeExecutor(api, server_version=(1, 34)), shards, asyncio.Event())
    action = ResizePod(
        "shop",
        "web-1",
        (ContainerResize("app", requests={"cpu": 500}),),
        uid=uid,
        target="shop/web",
    )
    result = await gated.apply(action)
    assert len(apiserver.calls("PATCH", RESIZE)) == 1  # the first; no retry
    assert not result.ok and result.reason == "NotLeader", result
    assert "shard not held" in result.message
