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
