"""Both shells feed the recommender the same per-container history from the same per-pod
usage: the kube shell's metrics-server collector (PodMetrics -> samples -> HistorySink ->
load_histories) and the simulated operator (usage observer -> ForesizeRecommender's
UsageHistory -> load_histories) fold
a workload's replicas with `foresize.adapters.history.aggregate` — CPU the median across
replicas, memory the maximum (architecture §3.1: history per container of a workload, one
recommendation per container applied to every replica)."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.adapters.history.aggregate import (
    Grouping,
    group_max,
    group_median,
    per_container,
    workload_totals,
)
from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, samples_from_pod_metrics
from foresize.adapters.history.prometheus_series import PodSeries, fold_to_workloads
from foresize.core.api.fields import format_timestamp
from foresize.core.history import HistoryWorkload, SeriesKey
from foresize.core.recommend.histories import MODEL_STEP, load_histories
from foresize.shells.sim.operator import OperatorOptions, SimOperator
from foresize.shells.sim.recommenders import ForesizeRecommender
from support.sim import container, make_sim, workload


def test_fold_median_cpu_max_memory_and_totals():
    groups = np.array([7, 3, 7, 7, 3, 9])
    cpu = np.array([0.5, 0.2, 0.1, 0.9, 0.4, np.nan])
    mem = np.array([10.0, 40.0, 30.0, 20.0, 5.0, 8.0])
    ids, c, m = per_container(groups, cpu, mem)
    assert ids.tolist() == [3, 7, 9]
    # 3: median of (0.2, 0.4) = 0.3; 7: median of (0.5, 0.1, 0.9) = 0.5; 9: no cpu reading.
    np.testing.assert_allclose(c, [0.3, 0.5, np.nan])
    assert m.tolist() == [40.0, 30.0, 8.0]
    assert group_median(np.array([1]), np.array([np.nan]))[0].size == 0
    assert group_max(np.array([], dtype=int), np.array([]))[0].size == 0
    tid, tc, tm = workload_totals(groups, cpu, mem)
    assert tid.tolist() == [3, 7, 9]
    np.testing.assert_allclose(tc, [0.6, 1.5, 0.0])
    np.testing.assert_allclose(tm, [45.0, 60.0, 8.0])


def test_prometheus_fold_uses_the_same_rule():
    t = np.array([60.0, 120.0])
    pods = [
        PodSeries("shop", f"web-7d9f8-{p}", "app", t, np.array([v, v * 2]))
        for p, v in (("aaaaa", 0.1), ("bbbbb", 0.3), ("ccccc", 0.9))
    ]
    (series,) = fold_to_workloads(pods, pods)
    np.testing.assert_allclose(series.cpu, [0.3, 0.6])  # the median replica
    np.testing.assert_allclose(series.memory, [0.9, 1.8])  # the largest replica


def test_kube_collector_and_sim_operator_produce_the_same_series():
    # Three replicas whose usage differs (per-replica jitter, noise, spikes): the max
    # across replicas and the median differ at most steps.
    sim = make_sim(
        [
            workload(
                "web",
                3,
                jitter=0.6,
                containers=[
                    container(
                        cpu={"generator": "spiky", "base": "200m", "noise": 0.3},
                        memory={"generator": "constant", "base": "200Mi", "noise": 0.2},
                    )
                ],
            )
        ],
        nodes=2,
        cpu="8",
        settle=0,
        seed=11,
    )
    rec = ForesizeRecommender()
    op = SimOperator(
        sim, rec, OperatorOptions(recommend_interval=1e12, admission=False, min_lookback=0.0)
    ).install()

    # The kube shell's path: metrics-server PodMetrics of the same pods at the same
    # instants -> the collector's samples (start-up exclusion by pod start) -> history.
    history = UsageHistory(step=60.0)
    sink = HistorySink(history)
    max_fold: dict[float, float] = {}

    def collect(now, keys, cpu, mem):
        items = {}
        for k, c, m in zip(keys, cpu, mem, strict=True):
            if k.workload != "Deployment/web" or m <= 0:
                continue
            item = items.setdefault(
                k.pod,
                {
                    "metadata": {"namespace": k.namespace, "name": k.pod},
                    "timestamp": format_timestamp(now),
                    "containers": [],
                },
            )
            item["containers"].append(
                {"name": k.container, "usage": {"cpu": f"{round(c * 1e9)}n", "memory": str(m)}}
            )

        def started(ns, name):
            pod = sim.pods.get(f"{ns}/{name}")
            return pod.start_time if pod is not None else None

        samples, _ = samples_from_pod_metrics(
            list(items.values()),
            pod_started=started,
            workload_of=lambda ns, name: HistoryWorkload("Deployment", "web"),
            now=now,
        )
        sink.add_samples(samples)
        if samples:
            max_fold[now] = max(s.cpu_cores for s in samples)

    sim.on_usage(collect)
    sim.run(4 * 3600)

    now = sim.now
    length = 40  # the last 40 model buckets (200 minutes)
    # Both key it under its kind (a CronJob named `web` would keep its own history).
    kinds = ("Deployment",)
    (kube,) = load_histories(
        history, "default", "web", ["app"], now, kinds=kinds, window=length * MODEL_STEP
    ).values()
    (sim_side,) = load_histories(
        rec.history, "default", "web", ["app"], now, kinds=kinds, window=length * MODEL_STEP
    ).values()
    sim_cpu, sim_mem = sim_side.cpu, sim_side.memory
    assert np.isfinite(sim_cpu).all() and np.isfinite(kube.cpu).all()
    np.testing.assert_allclose(kube.cpu, sim_cpu, rtol=1e-6)
    np.testing.assert_allclose(kube.memory, sim_mem, rtol=1e-6)
    # And it is the median replica, not the busiest one: the per-step max is higher.
    times = np.array(sorted(max_fold))
    web = SeriesKey("default", "web", "app", "Deployment")
    stored_t, stored = history.series(web, "cpu", times[0], now + 1)
    busiest = np.array([max_fold[t] for t in stored_t if t in max_fold])
    kept = np.asarray(stored)[np.isin(stored_t, times)]
    assert (busiest > kept * 1.05).mean() > 0.5
    assert op.rec is rec and pytest.approx(kube.first_seen) == sim_side.first_seen


def test_precomputed_grouping_folds_exactly_like_the_free_functions():
    """The simulated operator folds with a `Grouping` worked out once per set of pods: it
    must give bit-identical results, and steps with a missing reading (NaN) too."""
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(1, 30))
        groups = rng.integers(0, 8, n) * 3 + 1
        grouping = Grouping(groups)
        cpu = rng.gamma(2.0, 0.3, n)
        mem = rng.gamma(2.0, 1e8, n)
        if trial % 4 == 0:
            cpu[rng.integers(0, n)] = np.nan
            mem[rng.integers(0, n)] = np.nan
        for got, want in zip(
            grouping.per_container(cpu, mem), per_container(groups, cpu, mem), strict=True
        ):
            np.testing.assert_array_equal(got, want)
        for got, want in zip(
            grouping.totals(cpu, mem), workload_totals(groups, cpu, mem), strict=True
        ):
            np.testing.assert_array_equal(got, want)
