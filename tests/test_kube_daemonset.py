"""DaemonSetAutoscaler in the kube shell (kmock): per-pod usage of a DaemonSet collected
into its usage window -> percentile suggestion in the DSA's status -> in-place resizes."""

from __future__ import annotations

import numpy as np

from foresize.history.memory import UsageHistory
from foresize.history.metrics_server import DaemonSetSink, Sample
from foresize.kube.api import KubeApi
from foresize.kube.executor import KubeExecutor
from foresize.kube.handlers import parse_foresize
from foresize.kube.shell import KubeShell
from foresize.kube.state import ClusterState
from foresize.lifecycle.daemonset import UsageWindow

NOW = 1_780_000_000.0


def agent_pod(node: str) -> dict:
    return {
        "metadata": {
            "name": f"agent-{node}",
            "namespace": "ops",
            "uid": f"uid-{node}",
            "labels": {"app": "agent"},
            "ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "agent", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "agent",
                    "ready": True,
                    "allocatedResources": {"cpu": "500m", "memory": "512Mi"},
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                }
            ],
        },
    }


async def test_daemonset_autoscaler_suggests_and_resizes(kmock):
    state = ClusterState(target_parser=parse_foresize)
    for node in ("n1", "n2"):
        state.apply_event(
            "Node",
            "ADDED",
            {"metadata": {"name": node}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}},
        )
        state.apply_event("Pod", "ADDED", agent_pod(node))
        kmock.objects[kmock.resource("v1/pods"), "ops", f"agent-{node}"] = agent_pod(node)
    state.apply_event(
        "DaemonSet",
        "ADDED",
        {
            "metadata": {"name": "agent", "namespace": "ops"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "agent",
                                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                            }
                        ]
                    }
                },
            },
            "status": {"desiredNumberScheduled": 2},
        },
    )
    dsa = {
        "apiVersion": "foresize.io/v1",
        "kind": "DaemonSetAutoscaler",
        "metadata": {
            "name": "agent",
            "namespace": "ops",
            "uid": "d-1",
            "finalizers": ["foresize.io/revert"],
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "scaleMode": "autonomous",
            "containers": [
                {"name": "agent", "cpu": {"lowerbound": "20m"}, "memory": {"lowerbound": "64Mi"}}
            ],
        },
    }
    state.apply_event("DaemonSetAutoscaler", "ADDED", dsa)
    window = UsageWindow()
    sink = DaemonSetSink(window, state)
    rng = np.random.default_rng(7)
    samples = []
    for i in range(4 * 60):  # 4 hours of 1-minute polls (> minObservationWindow 3h)
        t = NOW - (4 * 60 - i) * 60.0
        for node in ("n1", "n2"):
            cpu = 0.08 + 0.02 * rng.random()
            samples.append(
                Sample(
                    t,
                    "ops",
                    "agent",
                    f"agent-{node}",
                    "agent",
                    cpu,
                    150 * 2**20 + rng.integers(0, 10) * 2**20,
                )
            )
    samples.append(Sample(NOW, "shop", "web", "web-x", "app", 1.0, 2**30))  # not a DaemonSet
    sink.add_samples(samples)
    assert set(window.samples("ops", "agent")) == {"agent"} and window.samples("shop", "web") == {}
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        shell = KubeShell(
            state,
            KubeExecutor(api, pod_lookup=state.pod),
            clock=lambda: NOW,
            history=UsageHistory(),
        )
        shell.dsa_window = window
        await shell.run_pass()
    finally:
        await api.close()
    path = "/apis/foresize.io/v1/namespaces/ops/daemonsetautoscalers/agent/status"
    (status,) = [
        r.data["status"]
        for r in kmock["patch"]
        if r.url.path == path and "suggestion" in r.data["status"]
    ]
    (entry,) = status["suggestion"]["containers"]
    all_cpu = np.concatenate([s.cpu_cores for s in window.samples("ops", "agent").values()])
    assert entry["requests"]["cpu"] == f"{int(np.ceil(np.percentile(all_cpu, 90) * 1000))}m"
    assert status["hasEnoughDataToScale"] is True
    resized = sorted(r.url.path for r in kmock["patch"] if r.url.path.endswith("/resize"))
    assert resized == [
        "/api/v1/namespaces/ops/pods/agent-n1/resize",
        "/api/v1/namespaces/ops/pods/agent-n2/resize",
    ]
