"""The shell's lifecycle duties against the strict API server: it puts the
`foresize.io/revert` finalizer on targets, reverts the pods of a target being deleted to
their template values in place, and releases the finalizer once the revert is done (the
server then deletes the object)."""

from __future__ import annotations

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell
from foresize.shells.kube.state import ClusterState
from support.kube import TPATH, base_state, pod, seed_base, target
from support.kube_objects import load_state

NOW = 1_780_000_000.0


def kubelet_resized(server, name: str) -> None:
    """The kubelet actuated the pod's resize: allocated and actual follow the spec."""

    def actuate(p: dict) -> None:
        for c, st in zip(p["spec"]["containers"], p["status"]["containerStatuses"], strict=True):
            st["allocatedResources"] = dict(c["resources"].get("requests") or {})
            st["resources"] = dict(c["resources"])
        p["status"]["observedGeneration"] = p["metadata"]["generation"]

    server.update("Pod", "shop", name, actuate)


async def test_finalizer_added_then_deletion_reverts_pods_and_releases_it(apiserver):
    rs_uid = seed_base(apiserver)
    rv = apiserver.seed(target("web"))["metadata"]["resourceVersion"]
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "600m", rs_uid))  # resized up by Foresize earlier
    state = base_state()
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: NOW)
        await shell.run_pass()
        (add,) = apiserver.calls("PATCH", f"^{TPATH}/web$")
        assert add.code == 200 and add.content_type == "application/json-patch+json"
        assert add.body == [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/metadata/finalizers", "value": ["foresize.io/revert"]},
        ]
        assert apiserver.get("AIScaleTarget", "shop", "web")["metadata"]["finalizers"] == [
            "foresize.io/revert"
        ]

        # The user deletes the target: the API server sets deletionTimestamp (finalizer holds it).
        answer = await api.request("DELETE", f"{TPATH}/web")
        assert answer.code == 200 and answer.body["metadata"]["deletionTimestamp"]
        load_state(apiserver, state)
        await shell.run_pass()
        reverts = apiserver.calls("PATCH", "/resize$", code=200)
        assert {r.path.split("/")[-2] for r in reverts} == {"web-1", "web-2"}
        for r in reverts:
            assert {
                "op": "add",
                "path": "/spec/containers/0/resources/requests/cpu",
                "value": "200m",
            } in r.body
        assert apiserver.get("AIScaleTarget", "shop", "web") is not None  # held by the finalizer

        # The kubelet actuated the reverts: the watches bring the pods at template values.
        for name in ("web-1", "web-2"):
            kubelet_resized(apiserver, name)
        load_state(apiserver, state)
        await shell.run_pass()
        remove = apiserver.calls("PATCH", f"^{TPATH}/web$")[-1]
        assert remove.code == 200
        assert remove.body == [
            {"op": "test", "path": "/metadata/finalizers/0", "value": "foresize.io/revert"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ]
        assert apiserver.get("AIScaleTarget", "shop", "web") is None  # released: deleted
    finally:
        await api.close()


def test_pause_configmap_counts_only_in_the_operator_namespace():
    state = ClusterState(pause_namespace="foresize-system")
    cm = {
        "metadata": {"name": "foresize-pause", "namespace": "default"},
        "data": {"paused": "true"},
    }
    state.apply_event("ConfigMap", "ADDED", cm)
    assert not state.snapshot(0.0).paused
    cm["metadata"]["namespace"] = "foresize-system"
    state.apply_event("ConfigMap", "ADDED", cm)
    assert state.snapshot(0.0).paused
    state.apply_event("ConfigMap", "DELETED", cm)
    assert not state.snapshot(0.0).paused


async def test_in_place_modes_refused_with_a_condition_before_1_33(apiserver):
    apiserver.kube_version = (1, 32)
    rs_uid = seed_base(apiserver)
    live = target("web", finalizers=["foresize.io/revert"])
    live["status"] = {
        "hasEnoughDataToScale": True,
        "vertical_suggestion": {
            "uid": "s1",
            "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": "256Mi"}}],
        },
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Valid", "message": "spec accepted"}
        ],
    }
    live = apiserver.seed(live)
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "200m", rs_uid))
    state = base_state()
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    try:
        executor = KubeExecutor(api, pod_lookup=state.pod, server_version=(1, 32))
        shell = KubeShell(state, executor, clock=lambda: 1_780_000_000.0)
        await shell.run_pass()
        await shell.run_pass()  # reported once, not on every pass
        await executor.events.flush()  # Events go out on their own task
    finally:
        await api.close()
    assert apiserver.calls("PATCH", "/resize$") == []
    conditions = [
        r.body["status"]["conditions"]
        for r in apiserver.calls("PATCH", f"^{TPATH}/web/status$", code=200)
        if "conditions" in r.body.get("status", {})
    ]
    assert len(conditions) == 1
    accepted, cond = conditions[0]  # the merge patch writes the other conditions back
    assert accepted == live["status"]["conditions"][0]
    assert cond["type"] == "InPlaceResizeUnsupported" and cond["status"] == "True"
    assert "1.33" in cond["message"] and "in_place" in cond["message"]
    events = [r.body for r in apiserver.calls("POST", "^/api/v1/namespaces/shop/events$")]
    assert [e["reason"] for e in events].count("InPlaceUnsupported") == 1
    # After an upgrade (a restart detects 1.34) the stale refusal is cleared, once.
    apiserver.kube_version = (1, 34)
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    try:
        upgraded = KubeShell(
            state,
            KubeExecutor(api, pod_lookup=state.pod, server_version=(1, 34)),
            clock=lambda: 1_780_000_000.0,
        )
        await upgraded.run_pass()
        await upgraded.run_pass()
    finally:
        await api.close()
    cleared = [
        c
        for r in apiserver.calls("PATCH", f"^{TPATH}/web/status$", code=200)
        for c in r.body.get("status", {}).get("conditions", [])
        if c["type"] == "InPlaceResizeUnsupported" and c["status"] == "False"
    ]
    assert [c["reason"] for c in cleared] == ["Supported"]
    assert apiserver.calls("PATCH", "/resize$", code=200)  # now it acts


async def test_cluster_template_creates_then_updates_its_targets(apiserver):
    """ClusterAIScaleTemplate through the shell: POST the AIScaleTarget it wants, later
    replace its spec by JSON patch (no PUT; removed fields do not linger), status written."""
    seed_base(apiserver)
    apiserver.update(
        "Deployment", "shop", "web", lambda d: d["metadata"]["labels"].update(tier="front")
    )
    template = {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScaleTemplate",
        "metadata": {"name": "fleet"},
        "spec": {
            "selector": {"matchLabels": {"tier": "front"}},
            "template": {
                "metadata": {"labels": {"team": "platform"}},
                "spec": {"vertical": {"mode": "recommendation"}},
            },
        },
    }
    apiserver.seed(template)
    state = base_state()
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: NOW)
        await shell.run_pass()
        (create,) = apiserver.calls("POST", f"^{TPATH}$")
        assert create.code == 201 and create.content_type == "application/json"
        made = create.body
        assert made["metadata"]["name"] == "web" and made["metadata"]["namespace"] == "shop"
        assert made["metadata"]["labels"]["foresize.io/template"] == "fleet"
        assert "foresize.io/revert" in made["metadata"]["finalizers"]
        assert made["spec"]["scaleTargetRef"]["name"] == "web"
        tstatus = [
            r.body["status"]
            for r in apiserver.calls(
                "PATCH", "^/apis/foresize.io/v1/clusteraiscaletemplates/fleet/status$", code=200
            )
        ]
        assert tstatus and "shop/web" in str(tstatus[-1])

        # The watch brings the created target back; then the template changes its spec.
        load_state(apiserver, state)
        rv = apiserver.get("AIScaleTarget", "shop", "web")["metadata"]["resourceVersion"]
        apiserver.update(
            "ClusterAIScaleTemplate",
            None,
            "fleet",
            lambda t: t["spec"]["template"].update(spec={"vertical": {"mode": "autonomous"}}),
        )
        load_state(apiserver, state)
        await shell.run_pass()
    finally:
        await api.close()
    (update,) = [
        r
        for r in apiserver.calls("PATCH", f"^{TPATH}/web$")
        if any(op["path"] == "/spec" for op in r.body)
    ]
    assert update.code == 200 and update.content_type == "application/json-patch+json"
    assert update.body[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": rv}
    spec = next(op["value"] for op in update.body if op["path"] == "/spec")
    assert spec["vertical"]["mode"] == "autonomous"
    assert apiserver.get("AIScaleTarget", "shop", "web")["spec"]["vertical"]["mode"] == "autonomous"


def test_pause_configmap_revert_pauses_and_reverts():
    state = ClusterState()
    cm = {
        "metadata": {"name": "foresize-pause", "namespace": "foresize"},
        "data": {"revert": "true"},
    }
    state.apply_event("ConfigMap", "ADDED", cm)
    snapshot = state.snapshot(0.0)
    assert snapshot.paused and snapshot.revert_all
    cm["data"] = {"paused": "true", "revert": "false"}
    state.apply_event("ConfigMap", "MODIFIED", cm)
    snapshot = state.snapshot(0.0)
    assert snapshot.paused and not snapshot.revert_all


async def test_revert_everything_now_resizes_autonomous_pods_back_to_the_template(apiserver):
    """`data.revert: "true"` in the pause ConfigMap: the pods of a target that stays
    autonomous go back to their template's requests in place, as on leaving the mode."""
    rs_uid = seed_base(apiserver)
    apiserver.seed(target("web", finalizers=["foresize.io/revert"]))
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "600m", rs_uid))  # resized up by Foresize earlier
    state = base_state()
    load_state(apiserver, state)
    cm = {
        "metadata": {"name": "foresize-pause", "namespace": "foresize"},
        "data": {"revert": "true"},
    }
    state.apply_event("ConfigMap", "ADDED", cm)
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: NOW)
        await shell.run_pass()
        reverts = apiserver.calls("PATCH", "/resize$", code=200)
        assert {r.path.split("/")[-2] for r in reverts} == {"web-1", "web-2"}
        for r in reverts:
            assert {
                "op": "add",
                "path": "/spec/containers/0/resources/requests/cpu",
                "value": "200m",
            } in r.body
        status = apiserver.get("AIScaleTarget", "shop", "web")["status"]
        assert status["lifecycle"]["reverting"]["reason"] == "ClusterRevert"
    finally:
        await api.close()


async def test_a_maintenance_window_in_a_time_zone_holds_evictions_outside_it(apiserver):
    """The kube shell reads the windows with the machine's zone database: at 12:00 UTC
    (14:00 in Berlin) a nightly Berlin window is closed, so recreate evicts nothing and
    the target's status says why; at 00:30 UTC (02:30 CEST) it evicts."""
    rs_uid = seed_base(apiserver)
    window = {"schedule": "0 2 * * *", "duration": "2h", "timeZone": "Europe/Berlin"}
    suggestion = {
        "uid": "s1",
        "containers": [{"name": "app", "requests": {"cpu": "200m", "memory": "512Mi"}}],
    }
    live = target("web", finalizers=["foresize.io/revert"])
    live["spec"]["vertical"]["update_policy"] = {"update_mode": "recreate", "min_replicas": 1}
    live["spec"]["vertical"]["maintenance"] = {"windows": [window]}
    live["status"] = {"hasEnoughDataToScale": True, "vertical_suggestion": suggestion}
    apiserver.seed(live)
    apiserver.seed(pod("web-1", "200m", rs_uid))
    state = base_state()
    load_state(apiserver, state)
    api = KubeApi.from_url(apiserver.url)
    noon = 1_782_907_200.0  # 2026-07-01T12:00:00Z
    try:
        shell = KubeShell(state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: noon)
        await shell.run_pass()
        assert apiserver.calls("POST", "/eviction$") == []
        status = apiserver.get("AIScaleTarget", "shop", "web")["status"]
        (held,) = status["held_back"]
        assert held["rule"] == "maintenance_window" and held["pods"] == ["web-1"]
        load_state(apiserver, state)
        shell.clock = lambda: noon + 12.5 * 3600  # 2026-07-02T00:30:00Z
        await shell.run_pass()
        assert len(apiserver.calls("POST", "/eviction$", code=201)) == 1
    finally:
        await api.close()
