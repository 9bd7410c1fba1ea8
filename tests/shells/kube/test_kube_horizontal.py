"""Horizontal in the kube shell: collected workload totals -> forecast -> the horizontal
planner -> a */scale patch ahead of the peak and the prediction in status (strict API
server)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink
from foresize.core.history import TOTAL_CONTAINER, SeriesKey, trace_series
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell
from support.kube import base_state, pod, seed_base
from support.kube_objects import hpa, load_state
from support.traces import crane_samples

NOW = 1_780_000_000.0


async def test_scale_up_ahead_of_forecast(apiserver):
    rs_uid = seed_base(apiserver)
    apiserver.seed(hpa(max_replicas=20, cpu_utilization=50))
    apiserver.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop", "finalizers": ["foresize.io/revert"]},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "vertical": {"mode": "recommendation"},
                "horizontal": {"mode": "autonomous", "minReplicas": 2, "maxReplicas": 20},
            },
        }
    )
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "200m", rs_uid))
    state = base_state()
    load_state(apiserver, state)
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(crane_samples(2.0))  # two pods of one workload
    total = trace_series(
        history, SeriesKey("shop", "web", TOTAL_CONTAINER), NOW - 3 * 86400, NOW + 1
    )
    peak = float(max(total.cpu))
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(
            state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: NOW, history=history
        )
        await shell.run_pass()
    finally:
        await api.close()
    (scale,) = apiserver.calls("PATCH", "^/apis/apps/v1/namespaces/shop/deployments/web/scale$")
    assert scale.code == 200
    replicas = scale.body["spec"]["replicas"]
    assert apiserver.get("Deployment", "shop", "web")["spec"]["replicas"] == replicas
    # 50% of a 200m request per replica = 100m each; the forecast of the workload's total
    # CPU over the horizon (balanced: p90 of its peak) needs ceil(forecast / 100m) replicas.
    from foresize.core.recommend.series import recommend_series

    (row,) = recommend_series([total])
    assert replicas == min(max(math.ceil(row.cpu_millicores / 100), 2), 20)  # min/maxReplicas
    assert replicas > 2
    assert row.cpu_millicores <= peak * 1000 * 1.01
    statuses = [
        r.body["status"] for r in apiserver.calls("PATCH", "/aiscaletargets/web/status$", code=200)
    ]
    assert any(s.get("horizontal_suggestion", {}).get("replicas") == replicas for s in statuses)
    # foresize_provisioning_ratio: 2 x 200m requested over the latest summed usage.
    _, used = history.series(SeriesKey("shop", "web", TOTAL_CONTAINER), "cpu", NOW - 300, NOW + 1)
    latest = float(used[~np.isnan(used)][-1])
    ratio = shell.metrics.provisioning.labels("shop/web", "cpu")._value.get()
    assert ratio == pytest.approx(0.4 / latest, rel=1e-6)


def _coordinating_target() -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop", "finalizers": ["foresize.io/revert"]},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "vertical": {
                "mode": "autonomous",
                "update_policy": {"update_mode": "in_place"},
                "hpa_resource_policy": "coordinate",
            },
        },
    }


def _two_triggers(obj: dict) -> dict:
    """A KEDA HPA with a CPU trigger and an external one (a ScaledObject's queue length)."""
    obj["metadata"]["name"] = "keda-hpa-web"
    obj["spec"]["metrics"].append(
        {
            "type": "External",
            "external": {
                "metric": {"name": "s0-queue-length"},
                "target": {"type": "AverageValue", "averageValue": "5"},
            },
        }
    )
    return obj


def _min_above_max(obj: dict) -> dict:
    obj["spec"]["minReplicas"] = 12
    return obj


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (_two_triggers, "ScaledObject shop/web has 2 triggers"),
        (_min_above_max, "minReplicas 12 > maxReplicas 10"),
    ],
)
async def test_a_bad_hpa_is_reported_in_status_and_never_written(apiserver, bad, says):
    """Bad input (issue 27): a ScaledObject with several triggers, min > max: the target's
    status says what was ignored and why, the pass goes on, and no request writes an HPA
    (the strict API server's log)."""
    rs_uid = seed_base(apiserver)
    apiserver.seed(bad(hpa(max_replicas=10, cpu_utilization=60)))
    apiserver.seed(_coordinating_target())
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "200m", rs_uid))
    state = base_state()
    load_state(apiserver, state)
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(crane_samples(2.0))
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(
            state, KubeExecutor(api, pod_lookup=state.pod), clock=lambda: NOW, history=history
        )
        await shell.run_pass()
    finally:
        await api.close()
    records = [
        r.body["status"]["coordination"]
        for r in apiserver.calls("PATCH", "/aiscaletargets/web/status$", code=200)
        if "coordination" in r.body.get("status", {})
    ]
    assert records and records[-1]["state"] == "Ignored"
    assert says in records[-1]["reason"] and "left alone" in records[-1]["reason"]
    assert not apiserver.calls("PATCH", "/scale$")  # no replica floor either
    writes = [
        r for r in apiserver.requests if r.method != "GET" and "horizontalpodautoscalers" in r.path
    ]
    assert writes == []
