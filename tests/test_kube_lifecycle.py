"""The shell's lifecycle duties against kmock: it puts the `foresize.io/revert` finalizer on
targets, reverts the pods of a target being deleted to their template values in place, and
releases the finalizer once the revert is done (kmock then deletes the object)."""

from __future__ import annotations

import copy

import kmock

from foresize.kube.api import KubeApi
from foresize.kube.executor import KubeExecutor
from foresize.kube.handlers import parse_foresize
from foresize.kube.shell import KubeShell
from foresize.kube.state import ClusterState

R = kmock.resource
PODS = R("v1/pods")
TARGETS = R("foresize.io/v1/aiscaletargets")
TPATH = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets"


def target(name: str, **meta) -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"t-{name}",
            "resourceVersion": "5",
            **meta,
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "vertical": {
                "mode": "autonomous",
                "containers": [
                    {"name": "app", "cpu": {"lowerbound": "50m"}, "memory": {"lowerbound": "64Mi"}}
                ],
                "update_policy": {"update_mode": "in_place"},
            },
        },
    }


def pod(name: str, cpu: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc", "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "allocatedResources": {"cpu": cpu, "memory": "256Mi"},
                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
                }
            ],
        },
    }


def base_state() -> ClusterState:
    state = ClusterState(target_parser=parse_foresize)
    state.apply_event(
        "Node",
        "ADDED",
        {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}},
    )
    state.apply_event(
        "Deployment",
        "ADDED",
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
                            }
                        ]
                    },
                },
            },
        },
    )
    state.apply_event(
        "ReplicaSet",
        "ADDED",
        {
            "metadata": {
                "name": "web-abc",
                "namespace": "shop",
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
            },
            "spec": {
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
                            }
                        ]
                    },
                },
            },
        },
    )
    return state


async def test_finalizer_added_then_deletion_reverts_pods_and_releases_it(kmock):
    state = base_state()
    live = target("web")
    kmock.objects[TARGETS, "shop", "web"] = copy.deepcopy(live)
    for name in ("web-1", "web-2"):
        kmock.objects[PODS, "shop", name] = pod(name, "600m")  # resized up by Foresize earlier
        state.apply_event("Pod", "ADDED", pod(name, "600m"))
    state.apply_event("AIScaleTarget", "ADDED", live)
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        shell = KubeShell(
            state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: 1_780_000_000.0
        )
        await shell.run_pass()
        (add,) = [r for r in kmock["patch"] if r.url.path == f"{TPATH}/web"]
        assert add.headers["Content-Type"] == "application/json-patch+json"
        assert add.data == [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
            {"op": "add", "path": "/metadata/finalizers", "value": ["foresize.io/revert"]},
        ]
        assert kmock.objects[TARGETS, "shop", "web"]["metadata"]["finalizers"] == [
            "foresize.io/revert"
        ]

        # The user deletes the target: the API server sets deletionTimestamp (finalizer holds it).
        await kmock.delete(f"{TPATH}/web")
        state.apply_event("AIScaleTarget", "MODIFIED", dict(kmock.objects[TARGETS, "shop", "web"]))
        await shell.run_pass()
        reverts = [r for r in kmock["patch"] if r.url.path.endswith("/resize")]
        assert {r.url.path.split("/")[-2] for r in reverts} == {"web-1", "web-2"}
        for r in reverts:
            assert {
                "op": "add",
                "path": "/spec/containers/0/resources/requests/cpu",
                "value": "200m",
            } in r.data
        assert not kmock.objects[TARGETS, "shop", "web"].deleted  # still held by the finalizer

        # The kubelet actuated the reverts: the watches bring the pods at template values.
        for name in ("web-1", "web-2"):
            state.apply_event("Pod", "MODIFIED", pod(name, "200m"))
        await shell.run_pass()
        remove = [r for r in kmock["patch"] if r.url.path == f"{TPATH}/web"][-1]
        assert remove.data == [
            {"op": "test", "path": "/metadata/finalizers/0", "value": "foresize.io/revert"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ]
        assert kmock.objects[TARGETS, "shop", "web"].deleted  # released: the API server removed it
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


async def test_in_place_modes_refused_with_a_condition_before_1_33(kmock):
    state = base_state()
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
    kmock.objects[TARGETS, "shop", "web"] = copy.deepcopy(live)
    for name in ("web-1", "web-2"):
        kmock.objects[PODS, "shop", name] = pod(name, "200m")
        state.apply_event("Pod", "ADDED", pod(name, "200m"))
    state.apply_event("AIScaleTarget", "ADDED", live)
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        executor = KubeExecutor(api, pod_lookup=state.pod, server_version=(1, 32))
        shell = KubeShell(state, executor, clock=lambda: 1_780_000_000.0)
        await shell.run_pass()
        await shell.run_pass()  # reported once, not on every pass
    finally:
        await api.close()
    assert [r for r in kmock["patch"] if r.url.path.endswith("/resize")] == []
    conditions = [
        r.data["status"]["conditions"]
        for r in kmock["patch"]
        if r.url.path == f"{TPATH}/web/status" and "conditions" in r.data.get("status", {})
    ]
    assert len(conditions) == 1
    accepted, cond = conditions[0]  # the merge patch writes the other conditions back
    assert accepted == live["status"]["conditions"][0]
    assert cond["type"] == "InPlaceResizeUnsupported" and cond["status"] == "True"
    assert "1.33" in cond["message"] and "in_place" in cond["message"]
    events = [r.data for r in kmock["post"] if r.url.path == "/api/v1/namespaces/shop/events"]
    assert [e["reason"] for e in events].count("InPlaceUnsupported") == 1
    # After an upgrade (a restart detects 1.34) the stale refusal is cleared, once.
    state.apply_event(
        "AIScaleTarget",
        "MODIFIED",
        {**live, "status": {**live["status"], "conditions": [cond]}},
    )
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
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
        for r in kmock["patch"]
        if r.url.path == f"{TPATH}/web/status"
        for c in r.data.get("status", {}).get("conditions", [])
        if c["type"] == "InPlaceResizeUnsupported" and c["status"] == "False"
    ]
    assert [c["reason"] for c in cleared] == ["Supported"]
    assert [r for r in kmock["patch"] if r.url.path.endswith("/resize")]  # now it acts


async def test_cluster_template_creates_then_updates_its_targets(kmock):
    """ClusterAIScaleTemplate through the shell: POST the AIScaleTarget it wants, later
    replace its spec by JSON patch (no PUT; removed fields do not linger), status written."""
    state = base_state()
    state.apply_event(
        "Deployment",
        "MODIFIED",
        {
            "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "front"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    template = {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScaleTemplate",
        "metadata": {"name": "fleet", "uid": "tpl-1"},
        "spec": {
            "selector": {"matchLabels": {"tier": "front"}},
            "template": {
                "metadata": {"labels": {"team": "platform"}},
                "spec": {"vertical": {"mode": "recommendation"}},
            },
        },
    }
    state.apply_event("ClusterAIScaleTemplate", "ADDED", template)
    kmock.objects[R("foresize.io/v1/clusteraiscaletemplates"), None, "fleet"] = copy.deepcopy(
        template
    )
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        shell = KubeShell(
            state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: 1_780_000_000.0
        )
        await shell.run_pass()
        (create,) = [r for r in kmock["post"] if r.url.path == TPATH]
        assert create.headers["Content-Type"] == "application/json"
        made = create.data
        assert made["metadata"]["name"] == "web" and made["metadata"]["namespace"] == "shop"
        assert made["metadata"]["labels"]["foresize.io/template"] == "fleet"
        assert "foresize.io/revert" in made["metadata"]["finalizers"]
        assert made["spec"]["scaleTargetRef"]["name"] == "web"
        tstatus = [
            r.data["status"]
            for r in kmock["patch"]
            if r.url.path == "/apis/foresize.io/v1/clusteraiscaletemplates/fleet/status"
        ]
        assert tstatus and "shop/web" in str(tstatus[-1])

        # The watch brings the created target back; then the template changes its spec.
        live = dict(kmock.objects[TARGETS, "shop", "web"])
        live["metadata"] = {**live["metadata"], "resourceVersion": "9"}
        kmock.objects[TARGETS, "shop", "web"].patch({"metadata": {"resourceVersion": "9"}})
        state.apply_event("AIScaleTarget", "ADDED", live)
        template["spec"]["template"]["spec"] = {"vertical": {"mode": "autonomous"}}
        state.apply_event("ClusterAIScaleTemplate", "MODIFIED", template)
        await shell.run_pass()
    finally:
        await api.close()
    (update,) = [
        r
        for r in kmock["patch"]
        if r.url.path == f"{TPATH}/web" and any(op["path"] == "/spec" for op in r.data)
    ]
    assert update.headers["Content-Type"] == "application/json-patch+json"
    assert update.data[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "9"}
    spec = next(op["value"] for op in update.data if op["path"] == "/spec")
    assert spec["vertical"]["mode"] == "autonomous"
    assert kmock.objects[TARGETS, "shop", "web"]["spec"]["vertical"]["mode"] == "autonomous"
