"""One read-model of an AIScaleTarget: admission, the vertical worker and the recommender
read a target through the same `TargetView`, so they cannot disagree about it."""

from __future__ import annotations

import pytest

from foresize.core.api.hysteresis import Threshold
from foresize.core.api.types import parse_target
from foresize.core.cluster.target import target_view
from foresize.core.errors import ForesizeError
from foresize.core.recommend.params import RecommendParams
from foresize.core.vertical.policy import policy_of


def _manifest(**vertical: object) -> dict[str, object]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "labels": {"t": "1"}},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "vertical": {
                "mode": "auto",
                "update_policy": {"update_mode": "in_place_or_recreate"},
                "containers": [{"name": "app", "cpu": {"lowerbound": "100m"}}],
                "disruption": {"max_disrupted": 2, "interval": "2m"},
                "scaling_behavior": {"scale_up": {"type": "absolute", "absolute": {"cpu": "50m"}}},
                **vertical,
            },
        },
    }


def test_the_worker_and_the_recommender_read_the_admission_view() -> None:
    target = parse_target(_manifest())
    view = target_view(target)
    assert policy_of(target) is view
    assert (view.ref_kind, view.vertical_mode, view.update_mode) == (
        "Deployment",
        "autonomous",
        "in_place_or_recreate",
    )
    assert view.permits_recreation and view.labels == {"t": "1"}
    assert (view.max_disrupted, view.disruption_interval) == (2, 120.0)
    assert view.scale_up == Threshold("absolute", 0.0, (("cpu", 50),))
    params = RecommendParams.from_target(target)
    assert params.containers == view.containers
    assert params.bounds("app").cpu is not None and params.bounds("app").cpu.lower == 100
    assert dict(params.scale_up["cpu"].absolute) == {"cpu": 50}


def test_a_bad_field_is_reported_by_name_to_the_worker_and_tolerated_by_admission() -> None:
    manifest = _manifest(disruption={"max_disrupted": "150%"})
    view = target_view(manifest)
    assert view.errors and "spec.vertical.disruption.max_disrupted" in view.errors[0]
    assert view.max_disrupted == "20%"  # the rest of the view reads on, with the default
    assert view.ref_name == "web" and view.vertical_autonomous
    with pytest.raises(ForesizeError, match="max_disrupted"):
        policy_of(manifest)


def test_a_selector_with_an_unknown_operator_selects_nothing() -> None:
    manifest = _manifest()
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    del spec["scaleTargetRef"]
    spec["selector"] = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "Maybe", "values": ["x"]}],
    }
    view = target_view(manifest)
    assert view.has_selector
    assert "matchExpressions[0].operator" in view.errors[0]
    assert not view.selects({"app": "web", "tier": "x"})
    spec["selector"] = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}],
    }
    view = target_view(manifest)
    assert not view.errors
    assert view.selects({"app": "web", "tier": "y"}) and not view.selects(
        {"app": "web", "tier": "x"}
    )


def test_a_bad_disruption_duration_is_reported_by_its_field() -> None:
    view = target_view(_manifest(disruption={"interval": "90", "stall_timeout": "1h 5m"}))
    assert view.errors == (
        "AIScaleTarget shop/web: spec.vertical.disruption.interval: not a duration: '90' "
        "(expected e.g. 60s, 15m, 1h30m, 8d or 1w)",
        "AIScaleTarget shop/web: spec.vertical.disruption.stall_timeout: not a duration: "
        "'1h 5m' (expected e.g. 60s, 15m, 1h30m, 8d or 1w)",
    )
    # Unset: the API's default (1m, fitting), as the pydantic model has it.
    assert view.release_deferred_after == 60.0 and view.release_deferred == "fit"
