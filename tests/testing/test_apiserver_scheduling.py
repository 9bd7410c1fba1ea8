"""PriorityClasses in the strict API server (`testing/apiserver/scheduling`): validation,
immutability, and the Priority admission plugin on pod creation, as kube-apiserver."""

from __future__ import annotations

import pytest

from foresize.shells.kube.api import JSON, KubeApi
from foresize.testing.apiserver import ADMIN_TOKEN

PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
MERGE = "application/merge-patch+json"
IMAGE = "registry.k8s.io/pause:3.10"


@pytest.fixture
async def admin(apiserver):
    apiserver.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    client = KubeApi.from_url(apiserver.url, token=ADMIN_TOKEN)
    yield client
    await client.close()


def pod(name: str, **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"containers": [{"name": "app", "image": IMAGE}], **spec},
    }


def priority_class(name: str, value: int, **more) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **more,
    }


async def test_a_pods_class_becomes_its_priority_and_an_unknown_class_is_forbidden(admin):
    pods = "/api/v1/namespaces/shop/pods"
    refused = await admin.request("POST", pods, pod("a", priorityClassName="nope"), JSON)
    assert refused.code == 403
    assert refused.body["message"] == (
        'pods "a" is forbidden: no PriorityClass with name nope was found'
    )
    low = priority_class("low", -1, preemptionPolicy="Never")
    assert (await admin.request("POST", PCS, low, JSON)).ok
    made = await admin.request("POST", pods, pod("b", priorityClassName="low"), JSON)
    assert (made.body["spec"]["priority"], made.body["spec"]["preemptionPolicy"]) == (-1, "Never")
    plain = await admin.request("POST", pods, pod("c"), JSON)
    assert plain.body["spec"]["priority"] == 0
    own = await admin.request("POST", pods, pod("d", priorityClassName="low", priority=7), JSON)
    assert own.code == 403 and "must not be provided in pod spec" in own.body["message"]


async def test_priority_classes_are_validated_and_immutable(admin):
    too_high = await admin.request("POST", PCS, priority_class("big", 2_000_000_000), JSON)
    assert (
        too_high.code == 422
        and "value: Forbidden: maximum allowed value" in (too_high.body["message"])
    )
    odd = await admin.request("POST", PCS, priority_class("odd", 1, preemptionPolicy="Some"), JSON)
    assert odd.code == 422 and 'preemptionPolicy: Unsupported value: "Some"' in odd.body["message"]
    assert (await admin.request("POST", PCS, priority_class("five", 5), JSON)).ok
    changed = await admin.request("PATCH", f"{PCS}/five", {"value": 6}, MERGE)
    assert changed.code == 422
    assert "value: Forbidden: may not be changed in an update." in changed.body["message"]
    policy = await admin.request("PATCH", f"{PCS}/five", {"preemptionPolicy": "Never"}, MERGE)
    assert policy.code == 422 and "preemptionPolicy" in policy.body["message"]
