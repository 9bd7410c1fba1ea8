"""Edges of the predictive horizontal rule (never below the HPA's or the target's
minimum, never a scale-down, the highest metric wins, a stale prediction is not
applied) that a one-line mutation of the code changed without any other test noticing
(session 7 mutation round)."""

from __future__ import annotations

from typing import Any

from foresize.core.admission.review import review_scale
from foresize.core.api.quantity import MIB
from foresize.core.api.types import format_timestamp, parse_target
from foresize.core.cluster.actions import PatchScale
from foresize.core.cluster.model import (
    Container,
    HorizontalPodAutoscaler,
    HPAMetric,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.replicas import round_replicas
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.horizontal.planner import plan_horizontal
from support.admission import apply_patch, decode_patch, idx, scale_review, target_manifest


def _snapshot(replicas: int, *, target_min: int | None = None, metrics: Any = None) -> Any:
    """front: 500m / 256Mi per replica; its HPA keeps 3..20 replicas at 60% CPU."""
    template = PodTemplate(
        containers=[Container("app", ResourceRequirements({"cpu": 500, "memory": 256 * MIB}))]
    )
    wl = Workload("Deployment", "shop", "front", replicas=replicas, template=template)
    hpa = HorizontalPodAutoscaler(
        "shop",
        "front",
        "Deployment",
        "front",
        min_replicas=3,
        max_replicas=20,
        metrics=metrics or [HPAMetric("Resource", "cpu", 60)],
    )
    target = parse_target(
        target_manifest(
            "front", ref="front", vmode=None, hmode="autonomous", min_replicas=target_min
        )
    )
    return ClusterSnapshot(
        now=0.0, nodes={}, pods=[], workloads={wl.key: wl}, hpas=[hpa], targets=[target]
    )


def test_the_prediction_is_never_below_the_hpas_minimum() -> None:
    # 300m of forecast needs 1 replica (300m each); the HPA keeps at least 3.
    plan = plan_horizontal(_snapshot(1), {"shop/front": {"cpu": 300.0}}, 0.0)
    assert plan.predictions == {"shop/front": 3}
    assert PatchScale("shop", "Deployment", "front", 3, target="shop/front") in plan.actions


def test_a_forecast_below_the_running_replicas_never_scales_down() -> None:
    plan = plan_horizontal(_snapshot(8), {"shop/front": {"cpu": 1500.0}}, 0.0)
    assert plan.predictions == {"shop/front": 5}
    assert not [a for a in plan.actions if isinstance(a, PatchScale)]


def test_the_busiest_metric_decides_the_replicas() -> None:
    """As the HPA takes the highest of its metrics: CPU needs 2 replicas, memory 7."""
    metrics = [HPAMetric("Resource", "cpu", 60), HPAMetric("Resource", "memory", 50)]
    forecast = {"cpu": 600.0, "memory": 7 * 128.0 * MIB}
    plan = plan_horizontal(_snapshot(1, metrics=metrics), {"shop/front": forecast}, 0.0)
    assert plan.predictions == {"shop/front": 7}


def test_rounding_never_goes_below_min_replicas() -> None:
    # No allowed count is at or above the minimum: the minimum itself, not the largest below.
    assert round_replicas(1, min_replicas=3, allowed=[1, 2]) == 3
    # A maximum below the minimum (target's min, HPA's max): the minimum wins.
    assert round_replicas(2, min_replicas=5, max_replicas=3) == 5


def _scale_index(predicted: int, *, min_replicas: int | None = None, end: float | None = None):
    manifest = target_manifest(
        "front",
        ref="front",
        vmode=None,
        hmode="autonomous",
        predicted=predicted,
        min_replicas=min_replicas,
        max_replicas=20,
    )
    if end is not None:
        manifest["status"]["horizontal_suggestion"]["forecast_window"] = {
            "start": format_timestamp(end - 900.0),
            "end": format_timestamp(end),
        }
    return idx(manifest)


def _written(out: dict, replicas: int) -> int | None:
    ops = decode_patch(out)
    if ops is None:
        return None
    return apply_patch(scale_review("front", replicas)["request"]["object"], ops)["spec"][
        "replicas"
    ]


def test_a_scale_write_is_raised_to_the_targets_minimum() -> None:
    """The prediction (2) is below the target's minReplicas (4): an HPA write of 3 becomes
    4, the prediction kept within the target's bounds."""
    index = _scale_index(2, min_replicas=4)
    assert _written(review_scale(scale_review("front", 3), index, 0.0), 3) == 4


def test_a_stale_prediction_leaves_the_scale_write_as_it_is() -> None:
    index = _scale_index(9, end=1000.0)
    assert _written(review_scale(scale_review("front", 3), index, 900.0), 3) == 9
    out = review_scale(scale_review("front", 3), index, 1001.0)
    assert decode_patch(out) is None
    assert any("stale" in w for w in out["response"]["warnings"])


def test_the_prediction_is_capped_at_the_hpas_maximum() -> None:
    plan = plan_horizontal(_snapshot(3), {"shop/front": {"cpu": 100_000.0}}, 0.0)
    assert plan.predictions == {"shop/front": 20}


def test_a_target_being_deleted_no_longer_raises_scale_writes() -> None:
    manifest = target_manifest("front", ref="front", vmode=None, hmode="autonomous", predicted=9)
    assert _written(review_scale(scale_review("front", 3), idx(manifest), 0.0), 3) == 9
    manifest["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    assert decode_patch(review_scale(scale_review("front", 3), idx(manifest), 0.0)) is None
