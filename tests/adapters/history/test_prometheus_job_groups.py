"""Bare Jobs grouped by `foresize.io/job-group` when read from Prometheus (issue 25): the
reader reads the label from kube-state-metrics' `kube_pod_labels` (exported only when
allow-listed, as `label_foresize_io_job_group`) and keys the Jobs' pods under their group,
as the kube collector does; without the series it says so, and each Job is its own
workload. Against a real Prometheus started here, loaded by remote write."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.prometheus_series import JOB_GROUP_METRIC_LABEL, Scope
from foresize.adapters.history.remote_write import RemoteWriter
from foresize.core.cluster.jobs import JOB_GROUP
from foresize.core.history import SeriesKey
from foresize.testing.stores import real_store, store_missing

pytestmark = pytest.mark.prometheus

GIB = 2**30
SCRAPE = 60.0
STEP = 300.0
RUN = 3600.0  # each Job runs an hour
# namespace, pod, its Job, the group label kube-state-metrics exports (None: not the
# label), its peak memory, its CPU cores.
PODS = [
    ("batch", "etl-a-x7k2p", "etl-a", "etl", 1 * GIB, 0.5),
    ("batch", "etl-b-q9w8e", "etl-b", "etl", 2 * GIB, 1.0),
    ("batch", "migrate-v2-z5z5z", "migrate-v2", None, 0.5 * GIB, 0.25),
    # kube-state-metrics without the allow-list: pod labels carry no job group.
    ("legacy", "etl-a-x7k2p", "etl-a", None, 1 * GIB, 0.5),
    ("legacy", "etl-b-q9w8e", "etl-b", None, 2 * GIB, 1.0),
]


def _series(end: float) -> list:
    """cAdvisor and kube-state-metrics series of PODS, one Job after the other, every
    SCRAPE seconds, ending before `end`."""
    out = []
    for i, (ns, pod, job, group, peak, cores) in enumerate(PODS):
        start = end - (len(PODS) - i) * RUN
        times = start + np.arange(int(RUN / SCRAPE)) * SCRAPE
        base = {"namespace": ns, "pod": pod}
        ms = [int(t * 1000) for t in times]
        ctr = {**base, "container": "etl", "image": "etl:1"}
        memory = [peak if k == len(times) // 2 else peak / 2 for k in range(len(times))]
        out.append(
            (
                {"__name__": "container_cpu_usage_seconds_total", **ctr},
                [(m, 10.0 + cores * (t - start)) for m, t in zip(ms, times, strict=True)],
            )
        )
        out.append(
            (
                {"__name__": "container_memory_working_set_bytes", **ctr},
                list(zip(ms, memory, strict=True)),
            )
        )
        owner = {"owner_kind": "Job", "owner_name": job, "owner_is_controller": "true"}
        out.append(({"__name__": "kube_pod_owner", **base, **owner}, [(m, 1.0) for m in ms]))
        labels = {"label_app": "etl", **({JOB_GROUP_METRIC_LABEL: group} if group else {})}
        out.append(({"__name__": "kube_pod_labels", **base, **labels}, [(m, 1.0) for m in ms]))
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    why = store_missing("prometheus")
    if why:
        pytest.skip(why)
    end = math.floor(time.time() / STEP) * STEP - STEP
    with real_store("prometheus", tmp_path_factory.mktemp("jobs")) as store:
        asyncio.run(RemoteWriter(store.write_url).write(_series(end)))
        store.flush()
        yield store.url, end


def _read(url: str, end: float, namespace: str):
    start = end - (len(PODS) + 1) * RUN
    return asyncio.run(PrometheusReader(url).read(start, end, STEP, scope=Scope((namespace,))))


def test_bare_jobs_labelled_with_a_group_are_read_as_the_group(prom) -> None:
    url, end = prom
    history = _read(url, end, "batch")
    keys = {s.key for s in history.series}
    group = SeriesKey("batch", "jobgroup:etl", "etl", JOB_GROUP)
    # Both Jobs of the group are one workload, as the kube collector keys them; the Job
    # with no group label is its own.
    assert keys == {group, SeriesKey("batch", "migrate-v2", "etl", "Job")}
    (series,) = [s for s in history.series if s.key == group]
    assert np.nanmax(series.memory) == 2 * GIB  # the group's peak: etl-b's run
    assert np.nanmin(series.memory[np.isfinite(series.memory)]) == 0.5 * GIB  # etl-a's
    assert history.kinds[("batch", "jobgroup:etl")] == JOB_GROUP
    assert history.notes == []  # the label is exported: nothing to say


def test_without_the_label_series_each_job_is_its_own_workload_and_it_says_why(prom) -> None:
    url, end = prom
    history = _read(url, end, "legacy")
    keys = {s.key for s in history.series}
    assert keys == {
        SeriesKey("legacy", "etl-a", "etl", "Job"),
        SeriesKey("legacy", "etl-b", "etl", "Job"),
    }
    (note,) = history.notes
    assert note.startswith("2 bare Jobs (first: legacy/etl-a) read as their own workloads")
    assert JOB_GROUP_METRIC_LABEL in note
    assert "--metric-labels-allowlist=pods=[foresize.io/job-group]" in note
