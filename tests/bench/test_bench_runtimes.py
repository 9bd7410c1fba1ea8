"""`foresize bench runtimes` (issue 25): the start-up section run for real (2 s), the JVM
scenario's and the nightly CronJob's demand models, and the JSON keys the issue names (the
CronJob's path through the simulator: tests/shells/sim/test_sim_cronjob.py)."""

from __future__ import annotations

import numpy as np

from foresize.bench import runtimes
from foresize.core.api.quantity import MIB


def test_startup_boost_shortens_time_to_ready_at_equal_steady_requests() -> None:
    out = runtimes.run_startup()
    assert out["ready_p50_boost_s"] <= 0.7 * out["ready_p50_noboost_s"]  # >= 30% shorter
    assert out["qos_changes"] == 0
    assert out["steady_cpu_requests_equal"]
    # The unboost lands within one pass (+ the kubelet's second) of Ready.
    assert out["unboost_after_ready_max_s"] <= runtimes.STARTUP_LOOP + 1.0
    assert set(out["policies"]) == {"static", "vpa", "foresize", "foresize+boost"}


def test_the_jvm_heap_fills_and_its_non_heap_falls() -> None:
    t = np.array([0.0, runtimes.HEAP_FILLS_AT - 1, runtimes.HEAP_FILLS_AT, 5 * 86400])
    demand = runtimes._jvm_demand(t)
    assert demand[0] == 512 * MIB + 300 * MIB
    assert demand[2] > runtimes.HEAP and demand[3] == runtimes.HEAP + 150 * MIB


def test_the_nightly_cronjobs_demand_grows_with_a_spread_and_its_scoring_band() -> None:
    cpu, memory = runtimes.cron_demand()
    assert cpu.shape == memory.shape == (runtimes.CRON_RUNS,)
    # 1% a night: the second week's mean is above the first's; a 4% spread night to night.
    assert memory[7:].mean() > memory[:7].mean()
    assert 0.01 < np.std(memory / (2 * runtimes.GIB * (1 + 0.01 * np.arange(14)))) < 0.08
    assert runtimes._within(110, 100) and runtimes._within(120, 100)
    assert not runtimes._within(121, 100) and not runtimes._within(99, 100)


def test_the_json_has_the_keys_the_issue_names(monkeypatch) -> None:
    monkeypatch.setattr(runtimes, "run_jvm", lambda progress: {"vpa_oom_kills": 1})
    got = {
        "oom_kills": 0,
        "memory_vs_optimum": 1.1,
        "heap_capped_hours": 2.0,
        "pods_heap_rewritten": 2,
    }
    heap = {"policies": {"foresize": dict(got), "foresize+heap": dict(got)}}
    monkeypatch.setattr(runtimes, "run_jvm_heap", lambda progress: heap)
    cron = {"share_within_20pct_from_run4": 0.9, "oom_kills": 0}
    seeds: list[int] = []
    monkeypatch.setattr(
        runtimes, "run_cronjob", lambda progress, seed, policies=None: seeds.append(seed) or cron
    )
    out = runtimes.run_bench(seed=3)
    assert {"jvm", "startup", "cronjob"} <= set(out)
    assert {"ready_p50_boost_s", "ready_p50_noboost_s", "qos_changes"} <= set(out["startup"])
    assert out["cronjob"] is cron and seeds == [3]
    # The heap rewrite side by side: its own scenario, and its figures at the top level.
    assert out["jvm"]["heap_too_small"] is heap
    assert out["jvm"]["foresize_heap_pods_heap_rewritten"] == 2
    assert out["jvm"]["heap_scenario_foresize_oom_kills"] == 0
    assert out["jvm"]["vpa_oom_kills"] == 1


def test_the_cronjobs_nights_differ_by_seed_and_the_default_is_the_benchs() -> None:
    assert np.array_equal(runtimes.cron_demand()[0], runtimes.cron_demand(7)[0])
    assert not np.array_equal(runtimes.cron_demand(7)[0], runtimes.cron_demand(8)[0])


def test_cronjob_seeds_reports_each_seed_and_how_many_had_every_run_in_the_band(
    monkeypatch,
) -> None:
    shares = {1: 1.0, 2: 0.5}

    def fake(progress, seed, policies):
        assert policies == ("foresize",)
        row = {
            "share_within_20pct_from_run4": shares[seed],
            "memory_share_within_20pct_from_run4": 1.0,
            "cpu_share_within_20pct_from_run4": shares[seed],
            "oom_kills": seed - 1,
        }
        return {"policies": {"foresize": row}}

    monkeypatch.setattr(runtimes, "run_cronjob", fake)
    out = runtimes.cronjob_seeds([1, 2])
    assert out["per_seed"]["2"]["cpu_share_within_20pct_from_run4"] == 0.5
    assert out["seeds_all_within"] == 1 and out["mean_share"] == 0.75 and out["oom_kills"] == 1
