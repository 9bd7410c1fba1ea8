"""Watch-driven: the informers list and watch kmock's Kubernetes emulator; a target and
its pods appear; the shell issues the expected resize through pods/{name}/resize.

kmock gaps worked around in this test: resources are declared explicitly for discovery,
and its watch streams replay existing objects (harmless for a state store keyed by name).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import kmock

from foresize.kube.api import KubeApi
from foresize.kube.executor import KubeExecutor
from foresize.kube.handlers import WATCHED, parse_foresize
from foresize.kube.informer import Informer, Informers
from foresize.kube.shell import KubeShell
from foresize.kube.state import ClusterState

R = kmock.resource
INFO = kmock.ResourceInfo
VERBS = {"list", "watch", "get", "patch", "create"}

TARGET = {
    "apiVersion": "foresize.io/v1",
    "kind": "AIScaleTarget",
    # kmock assigns no resourceVersion (a known gap); Kopf's JSON patches test for one.
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "uid": "t-1",
        "generation": 1,
        "resourceVersion": "1",
    },
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "vertical": {
            "mode": "autonomous",
            "containers": [
                {"name": "app", "cpu": {"lowerbound": "50m"}, "memory": {"lowerbound": "64Mi"}}
            ],
            "update_policy": {"update_mode": "in_place"},
            "disruption": {"max_disrupted": "100%", "interval": "1s"},
        },
    },
    "status": {
        "hasEnoughDataToScale": True,
        "vertical_suggestion": {
            "uid": "sugg-1",
            "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": "256Mi"}}],
        },
    },
}


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc",
                    "controller": True,
                    "uid": "rs-1",
                }
            ],
            "generation": 1,
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}
            ],
        },
        "status": {
            "phase": "Running",
            "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "allocatedResources": {"cpu": "200m", "memory": "256Mi"},
                    "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
                }
            ],
        },
    }


def declare(handler: kmock.KubernetesEmulator) -> None:
    handler.resources["v1/pods"] = INFO(
        kind="Pod", namespaced=True, verbs=VERBS, subresources={"resize", "eviction", "status"}
    )
    # Kopf waits for namespaces and CRDs to be discoverable before it starts any watch.
    handler.resources["v1/namespaces"] = INFO(kind="Namespace", namespaced=False, verbs=VERBS)
    handler.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = INFO(
        kind="CustomResourceDefinition", namespaced=False, verbs=VERBS
    )
    handler.resources["v1/nodes"] = INFO(kind="Node", namespaced=False, verbs=VERBS)
    handler.resources["v1/configmaps"] = INFO(kind="ConfigMap", namespaced=True, verbs=VERBS)
    handler.resources["v1/events"] = INFO(kind="Event", namespaced=True, verbs=VERBS)
    handler.resources["policy/v1/poddisruptionbudgets"] = INFO(
        kind="PodDisruptionBudget", namespaced=True, verbs=VERBS
    )
    handler.resources["autoscaling/v2/horizontalpodautoscalers"] = INFO(
        kind="HorizontalPodAutoscaler", namespaced=True, verbs=VERBS
    )
    for plural, kind in (
        ("deployments", "Deployment"),
        ("statefulsets", "StatefulSet"),
        ("daemonsets", "DaemonSet"),
        ("replicasets", "ReplicaSet"),
    ):
        handler.resources[f"apps/v1/{plural}"] = INFO(
            kind=kind, namespaced=True, verbs=VERBS, subresources={"scale", "status"}
        )
    for plural, kind, namespaced in (
        ("aiscaletargets", "AIScaleTarget", True),
        ("daemonsetautoscalers", "DaemonSetAutoscaler", True),
        ("clusteraiscaletemplates", "ClusterAIScaleTemplate", False),
    ):
        handler.resources[f"foresize.io/v1/{plural}"] = INFO(
            kind=kind, namespaced=namespaced, verbs=VERBS, subresources={"status"}
        )


async def test_target_and_pods_appear_and_the_shell_resizes(kmock, caplog):
    caplog.set_level(logging.DEBUG)
    declare(kmock)
    kmock.objects[R("v1/nodes"), None, "n1"] = {
        "metadata": {"name": "n1"},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    kmock.objects[R("apps/v1/deployments"), "shop", "web"] = {
        "metadata": {"name": "web", "namespace": "shop", "uid": "d-1"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    kmock.objects[R("apps/v1/replicasets"), "shop", "web-abc"] = {
        "metadata": {
            "name": "web-abc",
            "namespace": "shop",
            "uid": "rs-1",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True}
            ],
        },
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    url = str(kmock.url).rstrip("/")
    state = ClusterState(target_parser=parse_foresize)
    api = KubeApi.from_url(url)
    executor = KubeExecutor(api, server_version=(1, 35), pod_lookup=state.pod)
    shell = KubeShell(state, executor)
    informers = Informers([Informer(api, state, w) for w in WATCHED if not w.optional])
    stop = asyncio.Event()
    watching = informers.tasks(stop)
    loop_stop = asyncio.Event()
    loop = None
    try:
        assert await asyncio.wait_for(informers.wait_synced(stop), 10)
        loop = asyncio.create_task(shell.run(loop_stop, interval=0.1))
        # Nothing to do yet: no target, no pods.
        await asyncio.sleep(0.3)
        assert [r for r in kmock["patch"] if r.url.path.endswith("/resize")] == []
        # The target appears, then the controller creates the pods.
        await kmock.post("/apis/foresize.io/v1/namespaces/shop/aiscaletargets", json=TARGET)
        for name in ("web-1", "web-2"):
            await kmock.post("/api/v1/namespaces/shop/pods", json=pod(name))
        resized = []
        for _ in range(100):
            await asyncio.sleep(0.1)
            resized = [r for r in kmock["patch"] if r.url.path.endswith("/resize")]
            if len(resized) >= 2:
                break
        diag = (
            f"pods={sorted(state.pods)} targets={state.foresize['AIScaleTarget']} "
            f"workloads={sorted(state.workloads)} passes={shell.passes} "
            f"requests={[(r.method, str(r.url)) for r in kmock['get']][:25]} "
            f"log={caplog.text[-3000:]}"
        )
        assert {r.url.path for r in resized} == {
            "/api/v1/namespaces/shop/pods/web-1/resize",
            "/api/v1/namespaces/shop/pods/web-2/resize",
        }, diag
        for r in resized:
            assert r.headers["Content-Type"] == "application/json-patch+json"
            assert r.data == [
                {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
                {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "600m"},
                {
                    "op": "add",
                    "path": "/spec/containers/0/resources/requests/memory",
                    "value": "256Mi",
                },
            ]
        # The watches saw the target.
        assert state.foresize["AIScaleTarget"][("shop", "web")] is not None
        status_path = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status"
        status_patches, events = [], []
        for _ in range(50):  # the rest of the pass: status write, then the outcome events
            status_patches = [r for r in kmock["patch"] if r.url.path == status_path]
            events = [
                r.data for r in kmock["post"] if r.url.path == "/api/v1/namespaces/shop/events"
            ]
            if status_patches and any(e["reason"] == "Resized" for e in events):
                break
            await asyncio.sleep(0.1)
        assert status_patches, "the planner writes the target's status"
        assert any(
            e["reason"] == "Resized" and e["involvedObject"]["name"] == "web-1" for e in events
        ), [(e["reason"], e["involvedObject"]["name"], e["message"]) for e in events]
    finally:
        loop_stop.set()
        if loop is not None:
            await asyncio.wait_for(loop, 5)
        stop.set()
        for task in watching:
            task.cancel()  # an idle watch stream is not worth waiting for
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()
