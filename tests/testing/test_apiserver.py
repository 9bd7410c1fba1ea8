"""The strict test API server refuses what kube-apiserver refuses, for each rule it claims
(`foresize.testing.apiserver`). Each test drives the rule through HTTP, the way the
operator meets it."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from foresize.shells.kube.api import JSON_PATCH, MERGE_PATCH, KubeApi
from foresize.testing.apiserver import ADMIN_TOKEN, StrictApiServer
from support.kube_objects import container, deployment, namespace, node, pod, target

SMP = "application/strategic-merge-patch+json"
PODS = "/api/v1/namespaces/shop/pods"
TARGETS = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets"


@pytest.fixture
async def api(apiserver):
    apiserver.seed(namespace("shop"))
    # A cluster admin: these tests check the server's rules for writes, not the operator's
    # rights (test_rbac_* below).
    client = KubeApi.from_url(apiserver.url, token=ADMIN_TOKEN)
    yield client
    await client.close()


def bare_pod(name: str = "web-1", **kw) -> dict:
    p = pod(name, owner=None, **kw)
    p.pop("status")
    return p


async def test_create_sets_server_fields_and_refuses_duplicates_and_client_versions(api):
    first = await api.request("POST", PODS, bare_pod())
    assert first.code == 201
    meta = first.body["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1 and int(meta["resourceVersion"]) > 0
    assert first.body["status"] == {"phase": "Pending", "qosClass": "Burstable"}
    again = await api.request("POST", PODS, bare_pod())
    assert again.code == 409 and again.body["reason"] == "AlreadyExists"
    assert again.body["message"] == 'pods "web-1" already exists'
    with_rv = bare_pod("web-2")
    with_rv["metadata"]["resourceVersion"] = "1"
    refused = await api.request("POST", PODS, with_rv)
    assert refused.code == 500
    assert refused.body["message"] == "resourceVersion should not be set on objects to be created"
    elsewhere = await api.request(
        "POST", "/api/v1/namespaces/nowhere/pods", bare_pod("x", namespace="nowhere")
    )
    assert elsewhere.code == 404 and elsewhere.body["message"] == 'namespaces "nowhere" not found'
    named = bare_pod()
    named["metadata"] = {"generateName": "web-", "namespace": "shop", "labels": {"app": "web"}}
    generated = await api.request("POST", PODS, named)
    assert generated.code == 201 and generated.body["metadata"]["name"].startswith("web-")


async def test_resource_versions_increase_and_stale_writes_conflict(api):
    created = (await api.request("POST", PODS, bare_pod())).body
    rv = created["metadata"]["resourceVersion"]
    patch = {"metadata": {"resourceVersion": rv, "labels": {"app": "web", "x": "1"}}}
    ok = await api.request("PATCH", f"{PODS}/web-1", patch, MERGE_PATCH)
    assert ok.code == 200 and int(ok.body["metadata"]["resourceVersion"]) > int(rv)
    stale = await api.request("PATCH", f"{PODS}/web-1", patch, MERGE_PATCH)
    assert stale.code == 409 and stale.body["reason"] == "Conflict"
    assert "the object has been modified" in stale.body["message"]
    # A failed JSON-patch test is 422, not 409 or 500.
    ops = [{"op": "test", "path": "/metadata/uid", "value": "someone-else"}]
    failed = await api.request("PATCH", f"{PODS}/web-1", ops, JSON_PATCH)
    assert failed.code == 422 and failed.body["reason"] == "Invalid"
    # A no-op patch leaves the resourceVersion alone.
    same = await api.request("PATCH", f"{PODS}/web-1", {"metadata": {}}, MERGE_PATCH)
    assert same.body["metadata"]["resourceVersion"] == ok.body["metadata"]["resourceVersion"]


async def test_put_of_a_custom_resource_needs_a_resource_version_and_bumps_generation(api):
    created = (await api.request("POST", TARGETS, target())).body
    assert created["metadata"]["generation"] == 1
    body = dict(created)
    body["metadata"] = {k: v for k, v in created["metadata"].items() if k != "resourceVersion"}
    refused = await api.request("PUT", f"{TARGETS}/web", body)
    assert refused.code == 422
    assert refused.body["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    created["spec"]["vertical"]["mode"] = "recommendation"
    put = await api.request("PUT", f"{TARGETS}/web", created)
    assert put.code == 200 and put.body["metadata"]["generation"] == 2
    # Metadata-only and status writes do not change the generation.
    meta = await api.request(
        "PATCH", f"{TARGETS}/web", {"metadata": {"labels": {"a": "b"}}}, MERGE_PATCH
    )
    status = await api.request(
        "PATCH", f"{TARGETS}/web/status", {"status": {"pods_resized": 1}}, MERGE_PATCH
    )
    assert meta.body["metadata"]["generation"] == status.body["metadata"]["generation"] == 2
    # Writes to the object ignore status; writes to /status ignore the rest.
    ignored = await api.request(
        "PATCH",
        f"{TARGETS}/web",
        {"status": {"pods_resized": 9}, "metadata": {"labels": {"a": "c"}}},
        MERGE_PATCH,
    )
    assert ignored.body["status"]["pods_resized"] == 1
    dropped = await api.request(
        "PATCH",
        f"{TARGETS}/web/status",
        {"status": {"pods_resized": 2}, "metadata": {"labels": {"a": "d"}}},
        MERGE_PATCH,
    )
    assert dropped.body["metadata"]["labels"] == {"a": "c"}
    assert dropped.body["status"]["pods_resized"] == 2
    # Custom resources take no strategic merge patch.
    smp = await api.request("PATCH", f"{TARGETS}/web", {"metadata": {}}, SMP)
    assert smp.code == 415


async def test_the_crd_schema_refuses_the_old_breaker_status_and_takes_the_typed_one(api):
    """kube.md BUG 5: numbers where the CRD says date-time and duration strings."""
    await api.request("POST", TARGETS, target())
    old = {
        "status": {
            "circuit_breaker": {
                "state": "open",
                "opened_at": 30.0,
                "retry_at": 90.0,
                "backoff": 60.0,
            }
        }
    }
    refused = await api.request("PATCH", f"{TARGETS}/web/status", old, MERGE_PATCH)
    assert refused.code == 422, refused.body
    fields = {c["field"] for c in refused.body["details"]["causes"]}
    assert fields == {
        "status.circuit_breaker.opened_at",
        "status.circuit_breaker.retry_at",
        "status.circuit_breaker.backoff",
    }
    bad_date = {"status": {"circuit_breaker": {"state": "open", "opened_at": "yesterday"}}}
    assert (await api.request("PATCH", f"{TARGETS}/web/status", bad_date, MERGE_PATCH)).code == 422
    typed = {
        "status": {
            "circuit_breaker": {
                "state": "open",
                "opened_at": "2026-05-28T20:26:40Z",
                "retry_at": "2026-05-28T20:27:40Z",
                "backoff": "1m",
            }
        }
    }
    assert (await api.request("PATCH", f"{TARGETS}/web/status", typed, MERGE_PATCH)).code == 200
    # What the planner writes for an open breaker now lands (it used to be the numbers above).
    from foresize.core.vertical.state import BreakerState, TargetState

    state = TargetState(
        breaker=BreakerState("s-1", "open", 3, 1, 1_780_000_090.0, 1, 1_780_000_030.0, 60.0)
    )
    written = {
        "status": {"circuit_breaker": state.breaker.to_status(), "disruption": state.to_status()}
    }
    answer = await api.request("PATCH", f"{TARGETS}/web/status", written, MERGE_PATCH)
    assert answer.code == 200, answer.body
    stored = answer.body["status"]["circuit_breaker"]
    assert (stored["retry_at"], stored["backoff"]) == ("2026-05-28T20:28:10Z", "1m")
    assert BreakerState.from_status(stored) == state.breaker


async def test_custom_resources_are_checked_against_schema_cel_and_undeclared_fields(api):
    bad_mode = target(mode="sometimes")
    answer = await api.request("POST", TARGETS, bad_mode)
    assert answer.code == 422 and "spec.vertical.mode" in answer.body["message"]
    unknown = target()
    unknown["spec"]["vertical"]["colour"] = "blue"
    answer = await api.request("POST", TARGETS, unknown)
    assert answer.code == 400 and 'unknown field "spec.vertical.colour"' in answer.body["message"]
    # A CEL rule (x-kubernetes-validations), with the rule's message.
    both = target()
    both["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    answer = await api.request("POST", TARGETS, both)
    assert answer.code == 422, answer.body
    assert "exactly one of scaleTargetRef or selector must be set" in answer.body["message"]


async def test_built_in_kinds_are_checked_against_the_1_34_schema_and_rules(api):
    no_image = bare_pod()
    no_image["spec"]["containers"][0].pop("image")
    answer = await api.request("POST", PODS, no_image)
    assert answer.code == 422
    assert answer.body["details"]["causes"][0]["field"] == "spec.containers[0].image"
    typo = bare_pod()
    typo["spec"]["containers"][0]["resource"] = {}
    assert (await api.request("POST", PODS, typo)).code == 400
    over = bare_pod(containers=[container(requests={"cpu": "2"}, limits={"cpu": "1"})])
    assert (await api.request("POST", PODS, over)).code == 422
    wrong_type = bare_pod()
    wrong_type["spec"]["nodeName"] = 7
    assert (await api.request("POST", PODS, wrong_type)).code == 422
    unmatched = deployment()
    unmatched["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    answer = await api.request("POST", "/apis/apps/v1/namespaces/shop/deployments", unmatched)
    assert answer.code == 422 and "selector" in answer.body["message"]


async def test_a_core_event_lives_in_its_objects_namespace_or_default(api):
    """legacyValidateEvent: an Event without eventTime is in its involved object's
    namespace; one about a cluster-scoped object (a Node) only in "default"."""
    apiserver_events = "/api/v1/namespaces/{}/events"

    def event(namespace: str, involved: dict) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": "x.", "namespace": namespace},
            "involvedObject": involved,
            "reason": "Test",
            "message": "m",
            "type": "Normal",
        }

    node_ref = {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    pod_ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "shop"}
    await api.request("POST", "/api/v1/namespaces", namespace("default"))
    ok = await api.request("POST", apiserver_events.format("default"), event("default", node_ref))
    assert ok.code == 201, ok.body
    elsewhere = await api.request("POST", apiserver_events.format("shop"), event("shop", node_ref))
    assert elsewhere.code == 422
    assert elsewhere.body["details"]["causes"][0]["field"] == "involvedObject.namespace"
    assert (await api.request("POST", apiserver_events.format("shop"), event("shop", pod_ref))).ok
    moved = event("default", pod_ref)
    assert (await api.request("POST", apiserver_events.format("default"), moved)).code == 422


async def test_lease_times_are_micro_times_with_six_fractional_digits(api):
    """metav1.MicroTime is decoded with RFC3339Micro: a whole-second or millisecond
    renewTime is a 400 from the API server, though the schema says `date-time`."""
    leases = "/apis/coordination.k8s.io/v1/namespaces/shop/leases"

    def lease(name: str, renew: str) -> dict:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": renew},
        }

    for bad in ("2026-12-01T05:00:00Z", "2026-12-01T05:00:00.123Z"):
        answer = await api.request("POST", leases, lease("l", bad))
        assert answer.code == 400 and "renewTime" in answer.body["message"], answer.body
    assert (await api.request("POST", leases, lease("l", "2026-12-01T05:00:00.123456Z"))).ok
    patch = {"spec": {"acquireTime": "2026-12-01T05:00:01Z"}}
    answer = await api.request("PATCH", f"{leases}/l", patch, MERGE_PATCH)
    assert answer.code == 400 and "acquireTime" in answer.body["message"]


async def test_strategic_merge_patch_merges_containers_by_name(api):
    two = bare_pod(
        containers=[container("app", {"cpu": "1"}), container("sidecar", {"cpu": "10m"})]
    )
    await api.request("POST", PODS, two)
    patch = {"spec": {"containers": [{"name": "sidecar", "image": "registry.example/app:2"}]}}
    answer = await api.request("PATCH", f"{PODS}/web-1", patch, SMP)
    assert answer.code == 200, answer.body
    names = [(c["name"], c["image"]) for c in answer.body["spec"]["containers"]]
    assert names == [("app", "registry.example/app:1"), ("sidecar", "registry.example/app:2")]
    # The same body as a merge patch replaces the list (and the pod spec change is refused).
    merge = await api.request("PATCH", f"{PODS}/web-1", patch, MERGE_PATCH)
    assert merge.code == 422


async def test_resize_takes_only_resources_and_enforces_the_resize_rules(apiserver, api):
    apiserver.seed(node())
    apiserver.seed(pod("web-1", owner=None))
    path = f"{PODS}/web-1/resize"
    ops = [
        {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "300m"},
        {"op": "add", "path": "/metadata/labels/dropped", "value": "yes"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "dropped:2"},
    ]
    answer = await api.request("PATCH", path, ops, JSON_PATCH)
    assert answer.code == 200, answer.body
    live = apiserver.get("Pod", "shop", "web-1")
    assert live["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "300m"
    assert live["spec"]["containers"][0]["image"] == "registry.example/app:1"
    assert "dropped" not in live["metadata"]["labels"]
    assert live["metadata"]["generation"] == 2
    # The resize subresource only changes cpu and memory, never removes, never changes QoS.
    for bad in (
        [
            {
                "op": "add",
                "path": "/spec/containers/0/resources/requests/ephemeral-storage",
                "value": "1Gi",
            }
        ],
        [{"op": "remove", "path": "/spec/containers/0/resources/requests/memory"}],
        [
            {
                "op": "add",
                "path": "/spec/containers/0/resources/limits",
                "value": {"cpu": "300m", "memory": "256Mi"},
            }
        ],
    ):
        refused = await api.request("PATCH", path, bad, JSON_PATCH)
        assert refused.code == 422, (bad, refused.body)
    # A main-resource patch may not change resources at all.
    main = [{"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "1"}]
    assert (await api.request("PATCH", f"{PODS}/web-1", main, JSON_PATCH)).code == 422


async def test_scale_subresource(apiserver, api):
    apiserver.seed(deployment())
    path = "/apis/apps/v1/namespaces/shop/deployments/web/scale"
    scale = await api.request("GET", path)
    assert scale.body["kind"] == "Scale" and scale.body["spec"]["replicas"] == 2
    assert scale.body["status"]["selector"] == "app=web"
    answer = await api.request("PATCH", path, {"spec": {"replicas": 4}}, MERGE_PATCH)
    assert answer.code == 200 and answer.body["spec"]["replicas"] == 4
    live = apiserver.get("Deployment", "shop", "web")
    assert live["spec"]["replicas"] == 4 and live["metadata"]["generation"] == 2
    negative = await api.request("PATCH", path, {"spec": {"replicas": -1}}, MERGE_PATCH)
    assert negative.code == 422
    stale = {"metadata": {"resourceVersion": scale.body["metadata"]["resourceVersion"]}}
    assert (await api.request("PATCH", path, stale, MERGE_PATCH)).code == 409


def eviction(name: str, uid: str | None = None) -> dict:
    body: dict = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "shop"},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    return body


async def test_eviction_honours_pdbs_and_uid_preconditions(apiserver, api):
    dep = apiserver.seed(deployment(replicas=3))
    rs = apiserver.seed(
        {
            **deployment("web-abc", replicas=3, labels={"app": "web"}),
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-abc",
                "namespace": "shop",
                "labels": {"app": "web"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                        "uid": dep["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
        }
    )
    owner = ("ReplicaSet", "web-abc", rs["metadata"]["uid"])
    for i in (1, 2, 3):
        apiserver.seed(pod(f"web-{i}", owner=owner))
    apiserver.seed(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    wrong_uid = await api.request(
        "POST", f"{PODS}/web-1/eviction", eviction("web-1", "not-this-pod")
    )
    assert wrong_uid.code == 409 and "Precondition failed: UID" in wrong_uid.body["message"]
    uid = apiserver.get("Pod", "shop", "web-1")["metadata"]["uid"]
    first = await api.request("POST", f"{PODS}/web-1/eviction", eviction("web-1", uid))
    assert first.code == 201 and apiserver.get("Pod", "shop", "web-1") is None
    # Two healthy of three expected; the budget needs two.
    second = await api.request("POST", f"{PODS}/web-2/eviction", eviction("web-2"))
    assert second.code == 429 and second.body["reason"] == "TooManyRequests"
    (cause,) = second.body["details"]["causes"]
    assert cause["reason"] == "DisruptionBudget"
    assert cause["message"] == "The disruption budget web needs 2 healthy pods and has 2 currently"
    apiserver.seed(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web-too", "namespace": "shop"},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    two_pdbs = await api.request("POST", f"{PODS}/web-2/eviction", eviction("web-2"))
    assert two_pdbs.code == 500
    mismatch = await api.request("POST", f"{PODS}/web-2/eviction", eviction("web-3"))
    assert mismatch.code == 400


async def test_list_and_watch_with_selectors_bookmarks_and_410(apiserver, api):
    apiserver.seed(pod("web-1"))
    apiserver.seed(pod("db-1", labels={"app": "db"}, node_name="n2"))
    listed = await api.request("GET", PODS, params={"labelSelector": "app=web"})
    assert [i["metadata"]["name"] for i in listed.body["items"]] == ["web-1"]
    by_node = await api.request("GET", "/api/v1/pods", params={"fieldSelector": "spec.nodeName=n2"})
    assert [i["metadata"]["name"] for i in by_node.body["items"]] == ["db-1"]
    not_in = await api.request("GET", PODS, params={"labelSelector": "app notin (web)"})
    assert [i["metadata"]["name"] for i in not_in.body["items"]] == ["db-1"]
    unsupported = await api.request("GET", PODS, params={"fieldSelector": "spec.colour=x"})
    assert unsupported.code == 400
    paged = await api.request("GET", "/api/v1/pods", params={"limit": "1"})
    assert len(paged.body["items"]) == 1 and paged.body["metadata"]["continue"]
    rest = await api.request(
        "GET", "/api/v1/pods", params={"limit": "1", "continue": paged.body["metadata"]["continue"]}
    )
    assert [i["metadata"]["name"] for i in rest.body["items"]] == ["web-1"]

    since = listed.body["metadata"]["resourceVersion"]
    apiserver.update("Pod", "shop", "web-1", lambda p: p["metadata"]["labels"].update(app="db"))
    apiserver.update("Pod", "shop", "db-1", lambda p: p["metadata"]["labels"].update(app="web"))
    events = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{apiserver.url}{PODS}",
            params={
                "watch": "true",
                "labelSelector": "app=web",
                "resourceVersion": since,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "2",
            },
        ) as resp,
    ):
        async for line in resp.content:
            events.append(json.loads(line))
            if events[-1]["type"] == "BOOKMARK":
                break
    kinds = [(e["type"], e["object"]["metadata"].get("name")) for e in events]
    # web-1 left the selection (DELETED), db-1 entered it (ADDED), then a bookmark.
    assert kinds == [("DELETED", "web-1"), ("ADDED", "db-1"), ("BOOKMARK", None)], kinds
    apiserver.expire_resource_versions()
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{apiserver.url}{PODS}", params={"watch": "1", "resourceVersion": since}
        ) as resp,
    ):
        (line,) = [json.loads(x) async for x in resp.content]
    assert line["type"] == "ERROR" and line["object"]["code"] == 410


async def test_finalizers_hold_deletion_and_no_new_ones_while_deleting(api):
    body = target()
    body["metadata"]["finalizers"] = ["foresize.io/revert"]
    await api.request("POST", TARGETS, body)
    deleting = await api.request("DELETE", f"{TARGETS}/web")
    assert deleting.code == 200 and deleting.body["metadata"]["deletionTimestamp"]
    more = [{"op": "add", "path": "/metadata/finalizers/-", "value": "x.io/more"}]
    assert (await api.request("PATCH", f"{TARGETS}/web", more, JSON_PATCH)).code == 422
    done = [{"op": "remove", "path": "/metadata/finalizers/0"}]
    assert (await api.request("PATCH", f"{TARGETS}/web", done, JSON_PATCH)).code == 200
    assert (await api.request("GET", f"{TARGETS}/web")).code == 404


async def test_faults_tokens_errors_and_outages():
    server = StrictApiServer(token="old-token")
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:

            async def get(token: str) -> aiohttp.ClientResponse:
                async with session.get(
                    f"{server.url}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"}
                ) as r:
                    await r.read()
                    return r

            assert (await get("old-token")).status == 200
            server.rotate_token("new-token")
            assert (await get("old-token")).status == 401
            assert (await get("new-token")).status == 200
            server.fail(0.5, codes=(429,), retry_after=3)
            answers = [await get("new-token") for _ in range(40)]
            throttled = [r for r in answers if r.status == 429]
            assert 8 < len(throttled) < 32
            assert all(r.headers["Retry-After"] == "3" for r in throttled)
            server.stop_failing()
            await server.go_down()
            with pytest.raises(aiohttp.ClientConnectionError):
                await get("new-token")
            await server.come_back()
            assert (await get("new-token")).status == 200
    finally:
        await server.stop()


async def test_discovery_lists_subresources_for_kopf(apiserver, api):
    core = await api.request("GET", "/api/v1")
    names = {r["name"] for r in core.body["resources"]}
    assert {"pods", "pods/status", "pods/resize", "pods/eviction", "nodes"} <= names
    groups = await api.request("GET", "/apis")
    assert "foresize.io" in {g["name"] for g in groups.body["groups"]}
    assert (await api.request("GET", "/version")).body["minor"] == "34"
    await asyncio.sleep(0)


async def test_updates_refuse_identity_changes_in_the_api_servers_order(api):
    created = (await api.request("POST", PODS, bare_pod())).body
    rv = created["metadata"]["resourceVersion"]
    no_meta = await api.request("PATCH", f"{PODS}/web-1", {"metadata": None}, MERGE_PATCH)
    assert no_meta.code == 422 and no_meta.body["details"]["causes"][0]["field"] == "metadata"
    renamed = {"metadata": {"name": "web-2"}}
    answer = await api.request("PATCH", f"{PODS}/web-1", renamed, MERGE_PATCH)
    assert answer.code == 422
    assert answer.body["details"]["causes"][0]["field"] == "metadata.name"
    other_uid = {"metadata": {"uid": "someone-else"}}
    answer = await api.request("PATCH", f"{PODS}/web-1", other_uid, MERGE_PATCH)
    assert answer.code == 422
    assert answer.body["details"]["causes"][0]["field"] == "metadata.uid"
    other_kind = await api.request("PATCH", f"{PODS}/web-1", {"kind": "Service"}, MERGE_PATCH)
    assert other_kind.code == 400 and "kind or apiVersion" in other_kind.body["message"]
    # A stale resourceVersion is checked before the name: 409, not 422.
    (await api.request("PATCH", f"{PODS}/web-1", {"metadata": {"labels": {"x": "1"}}}, MERGE_PATCH))
    stale_rename = {"metadata": {"resourceVersion": rv, "name": "web-2"}}
    answer = await api.request("PATCH", f"{PODS}/web-1", stale_rename, MERGE_PATCH)
    assert answer.code == 409
    # Server-owned metadata keeps the stored values; managedFields are dropped.
    owned = {
        "metadata": {
            "creationTimestamp": "2000-01-01T00:00:00Z",
            "generation": 9,
            "managedFields": [{"manager": "me"}],
            "labels": {"x": "2"},
        }
    }
    answer = await api.request("PATCH", f"{PODS}/web-1", owned, MERGE_PATCH)
    assert answer.code == 200, answer.body
    meta = answer.body["metadata"]
    assert meta["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert meta["generation"] == 1 and "managedFields" not in meta
    assert meta["labels"]["x"] == "2"


async def test_workload_selectors_are_immutable(apiserver, api):
    apiserver.seed(deployment())
    path = "/apis/apps/v1/namespaces/shop/deployments/web"
    wider = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "front"}}}}
    answer = await api.request("PATCH", path, wider, MERGE_PATCH)
    assert answer.code == 422
    (cause,) = answer.body["details"]["causes"]
    assert cause["field"] == "spec.selector" and "immutable" in cause["message"]


async def test_a_status_write_without_status_clears_it(api):
    await api.request("POST", TARGETS, target())
    path = f"{TARGETS}/web/status"
    await api.request("PATCH", path, {"status": {"pods_resized": 1}}, MERGE_PATCH)
    cleared = await api.request("PATCH", path, [{"op": "remove", "path": "/status"}], JSON_PATCH)
    assert cleared.code == 200, cleared.body
    assert "status" not in cleared.body
    assert "status" not in (await api.request("GET", f"{TARGETS}/web")).body


async def test_a_dry_run_update_answers_the_result_and_stores_nothing(apiserver, api):
    created = (await api.request("POST", PODS, bare_pod())).body
    labels = {"metadata": {"labels": {"app": "web", "x": "1"}}}
    answer = await api.request(
        "PATCH", f"{PODS}/web-1", labels, MERGE_PATCH, params={"dryRun": "All"}
    )
    assert answer.code == 200 and answer.body["metadata"]["labels"]["x"] == "1"
    live = apiserver.get("Pod", "shop", "web-1")
    assert "x" not in live["metadata"]["labels"]
    assert live["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert answer.body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_an_updated_crd_serves_its_new_versions(apiserver, api):
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    apiserver.seed(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.io"},
            "spec": {
                "group": "example.io",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                "scope": "Namespaced",
                "versions": [version],
            },
        }
    )
    v2 = "/apis/example.io/v2/namespaces/shop/widgets"
    assert (await api.request("GET", v2)).code == 404
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.io"
    add = [
        {
            "op": "add",
            "path": "/spec/versions/-",
            "value": {**version, "name": "v2", "storage": False},
        }
    ]
    answer = await api.request("PATCH", crd, add, JSON_PATCH)
    assert answer.code == 200, answer.body
    assert (await api.request("GET", v2)).code == 200


async def watch_events(apiserver, path: str, params: dict[str, str], *, until=None) -> list:
    """Open a watch on `path`, run `until` (if given) once the stream is open, and collect
    its events until the server ends the stream."""
    events = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{apiserver.url}{path}", params={"watch": "true", **params}) as resp,
    ):
        assert resp.status == 200
        if until is not None:
            await asyncio.sleep(0.1)
            until()
        async for line in resp.content:
            events.append(json.loads(line))
    return events


async def test_a_watch_without_a_resource_version_starts_with_the_current_objects(apiserver, api):
    apiserver.seed(pod("web-1"))
    apiserver.seed(pod("db-1", labels={"app": "db"}))

    for value, since in (("a", {}), ("b", {"resourceVersion": "0"})):

        def relabel(x: str = value) -> None:
            apiserver.update("Pod", "shop", "web-1", lambda p: p["metadata"]["labels"].update(x=x))
            apiserver.drop_watches()

        events = await watch_events(
            apiserver,
            PODS,
            {"labelSelector": "app=web", "timeoutSeconds": "5", **since},
            until=relabel,
        )
        kinds = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
        # The current objects as ADDED, then the live change; drop_watches ends the stream.
        assert kinds == [("ADDED", "web-1"), ("MODIFIED", "web-1")], (since, kinds)


async def test_send_initial_events_ends_the_replay_with_a_bookmark(apiserver, api):
    apiserver.seed(pod("web-1"))
    apiserver.seed(pod("web-2"))
    rv = str(apiserver.rv)
    params = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "5",
    }
    events = await watch_events(apiserver, PODS, params, until=apiserver.drop_watches)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "web-1"),
        ("ADDED", "web-2"),
        ("BOOKMARK", None),
    ]
    end = events[-1]["object"]
    assert end["kind"] == "Pod" and end["apiVersion"] == "v1"
    assert end["metadata"] == {
        "resourceVersion": rv,
        "annotations": {"k8s.io/initial-events-end": "true"},
    }
    wrong_match = {"sendInitialEvents": "true", "watch": "true"}
    answer = await api.request("GET", PODS, params=wrong_match)
    assert answer.code == 422
    assert answer.body["details"]["causes"][0]["field"] == "resourceVersionMatch"


async def test_a_watch_refuses_bad_selectors_and_resource_versions_before_streaming(api):
    bad_selector = await api.request(
        "GET", PODS, params={"watch": "true", "labelSelector": "app in (web"}
    )
    assert bad_selector.code == 400
    bad_rv = await api.request("GET", PODS, params={"watch": "true", "resourceVersion": "abc"})
    assert bad_rv.code == 400 and bad_rv.body["message"] == "invalid resource version 'abc'"
    for timeout in ("soon", "1.5"):
        bad_timeout = await api.request(
            "GET", PODS, params={"watch": "true", "timeoutSeconds": timeout}
        )
        assert bad_timeout.code == 400, timeout
        assert "timeoutSeconds" in bad_timeout.body["message"]


async def test_a_watch_ends_at_its_timeout_on_close_and_after_a_410(apiserver, api):
    apiserver.seed(pod("web-1"))
    rv = str(apiserver.rv)
    loop = asyncio.get_running_loop()
    started = loop.time()
    quiet = await watch_events(apiserver, PODS, {"resourceVersion": rv, "timeoutSeconds": "1"})
    assert quiet == [] and 0.9 < loop.time() - started < 3
    # The server's 410 while the watch is open: the ERROR event, then the end of the stream.
    started = loop.time()
    events = await watch_events(
        apiserver,
        PODS,
        {"resourceVersion": rv, "timeoutSeconds": "30"},
        until=apiserver.expire_resource_versions,
    )
    assert [(e["type"], e["object"].get("code")) for e in events] == [("ERROR", 410)]
    assert loop.time() - started < 5


async def test_a_resumed_watch_replays_each_version_as_it_was_written(apiserver, api):
    """The history shares the stored objects (no copy each): that holds only while every
    write stores a new object, so a replay must still show each version as written, and
    an answer the client changes must not change what is stored."""
    apiserver.seed(pod("web-1"))
    listed = await api.request("GET", PODS)
    since = listed.body["metadata"]["resourceVersion"]
    for value in ("a", "b", "c"):
        apiserver.update(
            "Pod", "shop", "web-1", lambda p, v=value: p["metadata"]["labels"].update(v=v)
        )
    got = await api.request("GET", f"{PODS}/web-1")
    got.body["metadata"]["labels"]["v"] = "changed by the client"
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{apiserver.url}{PODS}",
            params={"watch": "true", "resourceVersion": since, "timeoutSeconds": "1"},
        ) as resp,
    ):
        events = [json.loads(line) async for line in resp.content]
    labels = [e["object"]["metadata"]["labels"]["v"] for e in events]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert labels == ["a", "b", "c"] and versions == sorted(versions), events
    assert apiserver.get("Pod", "shop", "web-1")["metadata"]["labels"]["v"] == "c"
