"""Headroom on a real API server (issue 23 item 4), against the strict one with the shipped
RBAC enforced: the executor creates the PriorityClass and the placeholder Deployment,
updates it, refuses a PriorityClass it cannot use naming the field, releases a
placeholder by uid (the operator's roles allow exactly these calls: the rest 403)."""

from __future__ import annotations

import pytest

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EnsureHeadroom, ReleaseHeadroom
from foresize.core.cluster.headroom import HEADROOM_LABEL, PAUSE_IMAGE
from foresize.shells.kube.api import JSON, KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.rbac import HEADROOM_NAMESPACE
from foresize.testing.apiserver import ADMIN_TOKEN
from support.kube_objects import namespace, node

NS = HEADROOM_NAMESPACE


def ensure(replicas: int, pool: str = "general", name: str = "foresize-headroom-general"):
    return EnsureHeadroom(
        NS,
        name,
        pool,
        "karpenter.sh/nodepool",
        replicas,
        {"cpu": 250, "memory": 512 * MIB},
        "foresize-headroom",
        -1,
        demand={"cpu": 700},
    )


@pytest.fixture
async def api(apiserver):
    apiserver.seed(node())
    client = KubeApi.from_url(apiserver.url)
    yield client
    await client.close()


async def test_ensure_creates_the_priority_class_and_the_pause_deployment(apiserver, api):
    apiserver.seed(namespace(NS))
    executor = KubeExecutor(api, server_version=(1, 34))
    result = await executor.apply(ensure(3))
    assert result.ok, result
    pc = apiserver.get("PriorityClass", None, "foresize-headroom")
    assert (pc["value"], pc["preemptionPolicy"], pc["globalDefault"]) == (-1, "Never", False)
    dep = apiserver.get("Deployment", NS, "foresize-headroom-general")
    spec = dep["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"]["matchLabels"] == {HEADROOM_LABEL: "general"}
    pod_spec = spec["template"]["spec"]
    assert pod_spec["priorityClassName"] == "foresize-headroom"
    assert pod_spec["nodeSelector"] == {"karpenter.sh/nodepool": "general"}
    (pause,) = pod_spec["containers"]
    assert pause["image"] == PAUSE_IMAGE
    assert pause["resources"]["requests"] == {"cpu": "250m", "memory": "512Mi"}
    assert dep["metadata"]["annotations"]["foresize.io/headroom-demand"] == "cpu=700m"
    # Again with another size: the class is read (not made again), the Deployment patched.
    assert (await executor.apply(ensure(5))).ok
    assert apiserver.get("Deployment", NS, "foresize-headroom-general")["spec"]["replicas"] == 5
    assert len(apiserver.calls("POST", "priorityclasses")) == 1
    # The cluster-wide pool: no node selector.
    assert (await executor.apply(ensure(1, pool="", name="foresize-headroom"))).ok
    whole = apiserver.get("Deployment", NS, "foresize-headroom")["spec"]["template"]["spec"]
    assert "nodeSelector" not in whole


async def test_a_priority_class_of_another_value_is_refused_naming_the_field(apiserver, api):
    apiserver.seed(namespace(NS))
    apiserver.seed(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "foresize-headroom"},
            "value": 100,
        }
    )
    result = await KubeExecutor(api, server_version=(1, 34)).apply(ensure(2))
    assert not result.ok and result.code == 409
    assert "PriorityClass foresize-headroom: value is 100, headroom needs -1" in result.message
    assert apiserver.get("Deployment", NS, "foresize-headroom-general") is None


async def test_a_missing_namespace_says_what_to_do(apiserver, api):
    result = await KubeExecutor(api, server_version=(1, 34)).apply(ensure(2))
    assert not result.ok and result.code == 404
    assert "namespace 'foresize-headroom' not found" in result.message
    assert "--headroom-namespace" in result.message


async def test_release_deletes_the_placeholder_by_uid(apiserver, api):
    apiserver.seed(namespace(NS))
    executor = KubeExecutor(api, server_version=(1, 34))
    assert (await executor.apply(ensure(1))).ok
    # The pod the ReplicaSet would make, created through the API: Priority admission
    # resolves its class (the placeholders' priority comes from the class, not the spec).
    template = apiserver.get("Deployment", NS, "foresize-headroom-general")["spec"]["template"]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ph-1", "namespace": NS, **template["metadata"]},
        "spec": {**template["spec"], "nodeName": "n1"},
    }
    admin = KubeApi.from_url(apiserver.url, token=ADMIN_TOKEN)  # the ReplicaSet's part
    try:
        made = await admin.request("POST", f"/api/v1/namespaces/{NS}/pods", body, JSON)
    finally:
        await admin.close()
    assert made.ok, made.body
    assert (made.body["spec"]["priority"], made.body["spec"]["preemptionPolicy"]) == (-1, "Never")
    uid = made.body["metadata"]["uid"]
    stale = await executor.apply(ReleaseHeadroom(NS, "ph-1", "n1", uid="someone-else"))
    assert not stale.ok and stale.code == 409
    assert (await executor.apply(ReleaseHeadroom(NS, "ph-1", "n1", uid=uid))).ok
    assert apiserver.get("Pod", NS, "ph-1") is None
    (delete,) = apiserver.calls("DELETE", "/pods/ph-1$", code=200)
    assert delete.body["gracePeriodSeconds"] == 0


async def test_the_operator_with_headroom_sizes_the_placeholders_from_the_pass(
    apiserver, operator_options
):
    """The real operator (`--headroom`): a target whose suggestion is 400m above each of
    its two pods' requests, in `initial` mode (nothing resized in place: the upsize is all
    still to come), gets 800m of headroom: four 250m placeholders in the headroom
    namespace, sized in the pass both shells run."""
    import asyncio

    from foresize.core.cluster.headroom import HeadroomConfig
    from foresize.shells.kube.operator import run_operator
    from support.kube_objects import SUGGESTION, seed_workload, target, web_pod

    apiserver.seed(namespace("foresize"))
    apiserver.seed(namespace(NS))
    seed_workload(apiserver)
    apiserver.seed(target(suggestion=SUGGESTION, update_mode="initial"))
    for name in ("web-1", "web-2"):
        apiserver.seed(web_pod(apiserver, name))
    opts = operator_options(server=apiserver.url, suggest_interval=3600)
    opts.headroom = HeadroomConfig()
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    try:
        dep = None
        for _ in range(300):
            dep = apiserver.get("Deployment", NS, "foresize-headroom")
            if dep is not None:
                break
            await asyncio.sleep(0.1)
        assert dep is not None, "no placeholder Deployment"
        assert dep["spec"]["replicas"] == 4
        assert dep["metadata"]["annotations"]["foresize.io/headroom-demand"] == "cpu=800m"
        assert apiserver.get("PriorityClass", None, "foresize-headroom")["value"] == -1
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
