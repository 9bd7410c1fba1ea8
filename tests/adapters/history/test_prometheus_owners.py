"""Which workload a pod's history is read under, from kube-state-metrics' owner series,
against a real Prometheus and a real VictoriaMetrics loaded by remote write:

- an Argo Rollout's ReplicaSets are named `<rollout>-<hash>` as a Deployment's are; the
  ReplicaSet's own owner (`kube_replicaset_owner`) tells them apart, so the Rollout's pods
  are read as the Rollout's, keyed as the kube shell keys them (`history_workload_of`);
- a pod without an owner has one `kube_pod_owner` series with `owner_kind="<none>"`
  (kube-state-metrics' mark for no owner): it is keyed as the kube shell keys a pod
  without an owner, not put in one workload named `<none>` holding every bare pod of
  the namespace.
"""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.prometheus_series import Scope
from foresize.adapters.history.remote_write import RemoteWriter
from foresize.core.cluster.model import Pod
from foresize.core.history import (
    UNKNOWN_KIND,
    HistoryWorkload,
    SeriesKey,
    history_workload_of,
)
from foresize.testing.stores import real_store, store_missing

pytestmark = pytest.mark.prometheus

SCRAPE = 60.0
STEP = 300.0
SPAN = 2 * 3600.0
NONE = ("<none>", "<none>")
# pod, its owner as kube_pod_owner writes it; the ReplicaSets' owners after.
PODS = {
    "checkout-6d4f9b7c8-abcde": ("ReplicaSet", "checkout-6d4f9b7c8"),
    "web-5d8f7c9b4-fghij": ("ReplicaSet", "web-5d8f7c9b4"),
    "toolbox": NONE,
    "scratch": NONE,
}
REPLICASETS = {
    "checkout-6d4f9b7c8": ("Rollout", "checkout"),
    "web-5d8f7c9b4": ("Deployment", "web"),
}


def _series(end: float) -> list:
    times = end - SPAN + np.arange(int(SPAN / SCRAPE)) * SCRAPE
    ms = [int(t * 1000) for t in times]
    out = []
    for k, (pod, (kind, name)) in enumerate(PODS.items()):
        base = {"namespace": "shop", "pod": pod}
        ctr = {**base, "container": "app", "image": "app:1"}
        cores = 0.1 * (k + 1)
        out.append(
            (
                {"__name__": "container_cpu_usage_seconds_total", **ctr},
                [(m, cores * (t - times[0])) for m, t in zip(ms, times, strict=True)],
            )
        )
        out.append(
            ({"__name__": "container_memory_working_set_bytes", **ctr}, [(m, 1e8) for m in ms])
        )
        owner = {"owner_kind": kind, "owner_name": name, "owner_is_controller": "true"}
        if (kind, name) == NONE:
            owner["owner_is_controller"] = "<none>"
        out.append(({"__name__": "kube_pod_owner", **base, **owner}, [(m, 1.0) for m in ms]))
    for rs, (kind, name) in REPLICASETS.items():
        labels = {
            "namespace": "shop",
            "replicaset": rs,
            "owner_kind": kind,
            "owner_name": name,
            "owner_is_controller": "true",
        }
        out.append(({"__name__": "kube_replicaset_owner", **labels}, [(m, 1.0) for m in ms]))
    return out


def bare_pod(name: str) -> Pod:
    return Pod(namespace="shop", name=name)


@pytest.fixture(scope="module", params=["prometheus", "victoria-metrics"])
def store(request, tmp_path_factory):
    why = store_missing(request.param)
    if why:
        pytest.skip(why)
    end = math.floor(time.time() / STEP) * STEP - STEP
    with real_store(request.param, tmp_path_factory.mktemp("owners")) as s:
        asyncio.run(RemoteWriter(s.write_url).write(_series(end)))
        s.flush()
        yield s.url, end


def test_rollout_pods_and_bare_pods_are_read_under_their_own_workloads(store) -> None:
    url, end = store
    history = asyncio.run(
        PrometheusReader(url).read(end - SPAN + STEP, end, STEP, scope=Scope(("shop",)))
    )
    # No owner: each bare pod is its own workload, keyed as the kube shell keys it.
    bare = [history_workload_of(bare_pod(pod), None) for pod in ("toolbox", "scratch")]
    assert bare == [
        HistoryWorkload(UNKNOWN_KIND, "toolbox"),
        HistoryWorkload(UNKNOWN_KIND, "scratch"),
    ]
    assert {s.key for s in history.series} == {
        SeriesKey("shop", "checkout", "app", "Rollout"),
        SeriesKey("shop", "web", "app", "Deployment"),
        *(SeriesKey("shop", w.name, "app", w.kind) for w in bare),
    }
    assert history.kinds[("shop", "checkout")] == "Rollout"
