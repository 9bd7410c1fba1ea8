"""Predictive replicas (pure) and the */scale decision on the simulated cluster: an HPA
write below the prediction is raised to it, a write above it is kept."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import PatchScale, WriteTargetStatus
from foresize.core.cluster.replicas import (
    effective_replicas,
    predict_replicas,
    predict_replicas_many,
    round_replicas,
)
from foresize.core.horizontal.planner import plan_horizontal
from foresize.shells.sim.admission import install
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.scenario import parse_scenario
from support.admission import target_manifest


def test_predicted_is_ceil_of_forecast_over_per_replica_target():
    assert predict_replicas(1000, 250) == 4
    assert predict_replicas(1001, 250) == 5
    assert predict_replicas(0.3 * 3, 0.3) == 3  # float noise does not add a replica
    assert predict_replicas(100, 250, min_replicas=2) == 2
    assert predict_replicas(10_000, 250, max_replicas=12) == 12
    with pytest.raises(ValueError):
        predict_replicas(1, 0)


def test_rounding_multiple_of_and_allowed_replicas():
    assert round_replicas(5, multiple_of=4) == 8
    assert round_replicas(9, multiple_of=4, max_replicas=10) == 8  # on the grid within bounds
    assert round_replicas(5, allowed=[2, 6, 12]) == 6
    assert round_replicas(13, allowed=[2, 6, 12]) == 12
    assert round_replicas(1, allowed=[2, 6, 12], min_replicas=3) == 6


def test_effective_is_max_of_hpa_and_prediction():
    assert effective_replicas(3, 6) == 6
    assert effective_replicas(9, 6) == 9
    assert effective_replicas(3, None) == 3
    assert effective_replicas(3, 50, max_replicas=10) == 10


def test_vectorised_matches_scalar():
    rng = np.random.default_rng(1)
    f = rng.uniform(0, 5000, 500)
    t = rng.uniform(50, 500, 500)
    lo = rng.integers(1, 4, 500)
    hi = lo + rng.integers(0, 30, 500)
    m = rng.integers(1, 5, 500)
    many = predict_replicas_many(f, t, lo, hi, m)
    one = [
        predict_replicas(
            f[i], t[i], min_replicas=int(lo[i]), max_replicas=int(hi[i]), multiple_of=int(m[i])
        )
        for i in range(500)
    ]
    assert many.tolist() == one


def scenario(cpu_base: str):
    return parse_scenario(
        {
            "name": "hpa",
            "seed": 5,
            "hpa_sync_period": "15s",
            "nodes": [{"name": "n", "count": 3, "cpu": "8", "memory": "32Gi"}],
            "workloads": [
                {
                    "kind": "Deployment",
                    "name": "front",
                    "namespace": "shop",
                    "replicas": 2,
                    "readiness_delay": "5s",
                    "containers": [
                        {
                            "name": "app",
                            "requests": {"cpu": "500m", "memory": "256Mi"},
                            "usage": {
                                "cpu": {"generator": "constant", "base": cpu_base},
                                "memory": {"generator": "constant", "base": "100Mi"},
                            },
                        }
                    ],
                }
            ],
            "hpas": [
                {
                    "name": "front",
                    "namespace": "shop",
                    "target": {"kind": "Deployment", "name": "front"},
                    "min_replicas": 2,
                    "max_replicas": 20,
                    "metrics": [{"resource": "cpu", "target_utilization": 60}],
                }
            ],
        },
        "test",
    )


def front_target(predicted: int | None):
    return parse_target(
        target_manifest(
            "front",
            ref="front",
            vmode=None,
            hmode="autonomous",
            predicted=predicted,
            min_replicas=2,
            max_replicas=20,
        )
    )


def scaled(sim):
    return [
        (e.details["source"], e.details["replicas"])
        for e in sim.events.query("Scaled", object="Deployment/shop/front")
    ]


def test_hpa_write_below_prediction_is_raised_to_it():
    sim = SimCluster(scenario("50m"), seed=5)  # idle: the HPA wants its minimum (2)
    install(sim)
    sim.targets = [front_target(predicted=5)]
    sim.apply(PatchScale("shop", "Deployment", "front", 2, target="kubectl"))
    sim.run_until(120)
    assert sim.workloads["Deployment/shop/front"].replicas == 5
    assert scaled(sim)[0] == ("kubectl", 5)


def test_hpa_write_above_prediction_is_kept():
    sim = SimCluster(scenario("900m"), seed=5)  # busy: 2 x 900m at 60% of 500m -> 6+
    install(sim)
    sim.targets = [front_target(predicted=3)]
    sim.run_until(120)
    writes = [r for src, r in scaled(sim) if src.startswith("HorizontalPodAutoscaler")]
    # Without `behavior` the HPA's first step is at most max(2 x 2, 4) = 4 (upstream's
    # calculateScaleUpLimit), above the prediction: kept as written.
    assert writes and writes[0] == 4
    assert all(r >= 3 for r in writes)


def test_without_a_prediction_the_hpa_write_is_untouched():
    sim = SimCluster(scenario("50m"), seed=5)
    install(sim)
    sim.targets = [front_target(predicted=None)]
    sim.apply(PatchScale("shop", "Deployment", "front", 3, target="kubectl"))
    sim.run_until(60)
    assert scaled(sim)[0] == ("kubectl", 3)


def test_plan_scales_up_ahead_of_the_forecast_and_publishes_the_prediction():
    sim = SimCluster(scenario("50m"), seed=5)
    sim.targets = [front_target(predicted=None)]
    sim.run_until(30)
    # Forecast peak: 2700m of CPU; one replica carries 500m x 60% = 300m -> 9 replicas.
    plan = plan_horizontal(sim.snapshot(), {"shop/front": {"cpu": 2700.0}}, 30.0)
    assert plan.predictions == {"shop/front": 9}
    assert PatchScale("shop", "Deployment", "front", 9, target="shop/front") in plan.actions
    status = next(a for a in plan.actions if isinstance(a, WriteTargetStatus))
    assert status.status["horizontal_suggestion"]["replicas"] == 9
    # A forecast below the current count never scales down.
    low = plan_horizontal(sim.snapshot(), {"shop/front": {"cpu": 100.0}}, 30.0)
    assert not [a for a in low.actions if isinstance(a, PatchScale)]
