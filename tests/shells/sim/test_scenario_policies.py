"""The sizing policies of `foresize simulate` (vpa reference, savings vs static)."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from foresize.core.api.quantity import MIB
from foresize.front.cli import app
from foresize.shells.sim.policies import savings_vs
from foresize.shells.sim.recommenders import VPARecommender


def test_vpa_reference_follows_its_documented_defaults() -> None:
    vpa = VPARecommender()
    rng = np.random.default_rng(3)
    # One container, a day of 1-minute samples: CPU uniform 100..200m, memory 300Mi flat.
    for i in range(1440):
        t = 60.0 * i
        vpa.observe(t, np.array([0]), np.array([rng.uniform(100, 200)]), np.array([300 * MIB]))
    cpu, mem = vpa.recommend(86400.0, [0])[0]
    # p90 of U(100, 200) is 190m; bucket end (5% buckets) then x1.15.
    assert 190 * 1.15 <= cpu <= 190 * 1.05 * 1.15 * 1.05
    assert 300 * MIB * 1.15 <= mem <= 300 * MIB * 1.05 * 1.15 * 1.05
    # Minimums 25m / 250Mi.
    small = VPARecommender()
    small.observe(0.0, np.array([0]), np.array([1.0]), np.array([10 * MIB]))
    assert small.recommend(60.0, [0])[0] == (25.0, 250.0 * MIB)
    # OOM bump: max(usage + 100Mi, usage x 1.2).
    small.on_oom(60.0, 0, 10 * MIB, 1000 * MIB)
    assert small.recommend(120.0, [0])[0][1] == 1200 * MIB


def test_savings_against_static() -> None:
    base = {
        "policy": "static",
        "totals": {"cpu_requested_core_hours": 100.0, "memory_requested_gib_hours": 50.0},
    }
    run = {
        "totals": {
            "cpu_requested_core_hours": 75.0,
            "memory_requested_gib_hours": 40.0,
            "oom_kills": 1,
        }
    }
    sv = savings_vs(run, base)
    assert sv["cpu_requested_saved"] == 0.25 and sv["memory_requested_saved"] == 0.2
    assert sv["oom_kills"] == {"policy": 1, "baseline": 0}


def test_simulate_vpa_policy_json_has_worker_counts_and_savings() -> None:
    result = CliRunner().invoke(
        app, ["simulate", "--policy", "vpa", "--duration", "2h", "--json", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["policy"] == "vpa"
    for key in ("resizes", "evictions", "stalls", "breaker_openings", "preemptions"):
        assert key in out["totals"]
    assert out["savings_vs_static"]["baseline"] == "static"
