"""DaemonSetAutoscaler in the kube shell (strict API server): per-pod usage of a DaemonSet collected
into its usage window -> percentile suggestion in the DSA's status -> in-place resizes."""

from __future__ import annotations

import numpy as np

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import DaemonSetSink, Sample
from foresize.core.lifecycle.daemonset import UsageWindow
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.handlers import parse_foresize
from foresize.shells.kube.shell import KubeShell
from foresize.shells.kube.state import ClusterState
from support.kube_objects import container, load_state, node, workload
from support.kube_objects import pod as make_pod

NOW = 1_780_000_000.0


def agent_pod(node_name: str, ds_uid: str) -> dict:
    return make_pod(
        f"agent-{node_name}",
        "ops",
        owner=("DaemonSet", "agent", ds_uid),
        labels={"app": "agent"},
        node_name=node_name,
        containers=[container("agent", {"cpu": "500m", "memory": "512Mi"})],
    )


async def test_daemonset_autoscaler_suggests_and_resizes(apiserver):
    ds = workload(
        "DaemonSet",
        "agent",
        "ops",
        labels={"app": "agent"},
        containers=[container("agent", {"cpu": "500m", "memory": "512Mi"})],
    )
    ds["status"] = {
        "desiredNumberScheduled": 2,
        "currentNumberScheduled": 2,
        "numberMisscheduled": 0,
        "numberReady": 2,
    }
    ds_uid = apiserver.seed(ds)["metadata"]["uid"]
    for name in ("n1", "n2"):
        apiserver.seed(node(name))
        apiserver.seed(agent_pod(name, ds_uid))
    dsa = {
        "apiVersion": "foresize.io/v1",
        "kind": "DaemonSetAutoscaler",
        "metadata": {
            "name": "agent",
            "namespace": "ops",
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
    apiserver.seed(dsa)
    state = ClusterState(target_parser=parse_foresize)
    load_state(apiserver, state)
    window = UsageWindow()
    sink = DaemonSetSink(window, state)
    rng = np.random.default_rng(7)
    samples = []
    for i in range(4 * 60):  # 4 hours of 1-minute polls (> minObservationWindow 3h)
        t = NOW - (4 * 60 - i) * 60.0
        for node_name in ("n1", "n2"):
            cpu = 0.08 + 0.02 * rng.random()
            samples.append(
                Sample(
                    t,
                    "ops",
                    "agent",
                    f"agent-{node_name}",
                    "agent",
                    cpu,
                    150 * 2**20 + rng.integers(0, 10) * 2**20,
                )
            )
    samples.append(Sample(NOW, "shop", "web", "web-x", "app", 1.0, 2**30))  # not a DaemonSet
    sink.add_samples(samples)
    assert set(window.samples("ops", "agent")) == {"agent"} and window.samples("shop", "web") == {}
    api = KubeApi.from_url(apiserver.url)
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
        r.body["status"]
        for r in apiserver.calls("PATCH", f"^{path}$", code=200)
        if "suggestion" in r.body["status"]
    ]
    (entry,) = status["suggestion"]["containers"]
    all_cpu = np.concatenate([s.cpu_cores for s in window.samples("ops", "agent").values()])
    assert entry["requests"]["cpu"] == f"{int(np.ceil(np.percentile(all_cpu, 90) * 1000))}m"
    assert status["hasEnoughDataToScale"] is True
    resized = sorted(r.path for r in apiserver.calls("PATCH", "/resize$", code=200))
    assert resized == [
        "/api/v1/namespaces/ops/pods/agent-n1/resize",
        "/api/v1/namespaces/ops/pods/agent-n2/resize",
    ]


async def test_restarting_daemonset_resizes_are_sent_in_batches(apiserver):
    """seed.md N2 in the kube shell: 5 agents whose memory resizePolicy is RestartContainer
    get a lower memory suggestion: one pass sends 1 restarting resize (20% of 5 rounded up);
    61 s later that pod's resize has not landed (the API server keeps the old allocation),
    so it still counts as disrupted and nothing more goes out."""
    restart = {"resourceName": "memory", "restartPolicy": "RestartContainer"}
    agent = container("agent", {"cpu": "500m", "memory": "512Mi"})
    agent["resizePolicy"] = [restart]
    ds = workload("DaemonSet", "agent", "ops", labels={"app": "agent"}, containers=[agent])
    ds_uid = apiserver.seed(ds)["metadata"]["uid"]
    names = [f"n{i}" for i in range(5)]
    for name in names:
        apiserver.seed(node(name))
        pod = agent_pod(name, ds_uid)
        pod["spec"]["containers"][0]["resizePolicy"] = [restart]
        apiserver.seed(pod)
    apiserver.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "ops"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                "scaleMode": "autonomous",
                "containers": [{"name": "agent"}],
            },
        }
    )
    state = ClusterState(target_parser=parse_foresize)
    load_state(apiserver, state)
    window = UsageWindow()
    for i in range(4 * 60):  # 4 hours of 1-minute polls: 100m, 150Mi on every agent
        window.add("ops", "agent", "agent", NOW - (4 * 60 - i) * 60.0, [0.1] * 5, [150 * 2**20] * 5)
    clock = [NOW]
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(
            state,
            KubeExecutor(api, pod_lookup=state.pod),
            clock=lambda: clock[0],
            history=UsageHistory(),
        )
        shell.dsa_window = window
        await shell.run_pass()
        first = [r.path for r in apiserver.calls("PATCH", "/resize$", code=200)]
        assert len(first) == 1, first
        load_state(apiserver, state)  # the watch brings the resized pod (spec changed)
        clock[0] = NOW + 61.0
        await shell.run_pass()
        assert [r.path for r in apiserver.calls("PATCH", "/resize$", code=200)] == first
    finally:
        await api.close()
