"""The named presets (`core/api/presets.py`): each is a valid policy and sets what the
issue asks of a preset: the mode, the headroom, bounds and the disruption settings."""

from __future__ import annotations

import pytest

from foresize.core.api.cluster_policy import ClusterAIScalePolicySpec
from foresize.core.api.presets import PRESET_NAMES, PRESETS
from foresize.core.api.types import parse_object
from foresize.core.errors import ForesizeError


def test_the_four_named_presets_exist():
    assert set(PRESET_NAMES) >= {"cost", "balanced", "performance", "batch"}


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_each_preset_is_a_valid_policy_setting_mode_headroom_bounds_and_disruption(name):
    spec = ClusterAIScalePolicySpec.model_validate(PRESETS[name])
    assert {"mode", "forecast_buffer_percentage"} <= spec.model.model_fields_set
    assert spec.vertical is not None
    (floor,) = spec.vertical.containers
    assert floor.name == "*" and floor.cpu and floor.cpu.lowerbound and floor.memory
    assert {"update_policy", "disruption"} <= spec.vertical.model_fields_set
    assert "update_mode" in spec.vertical.update_policy.model_fields_set
    assert "max_disrupted" in spec.vertical.disruption.model_fields_set
    # A preset never turns autonomy on by itself: that is the policy's own choice.
    assert "mode" not in spec.vertical.model_fields_set


def test_presets_order_their_risk_cost_cheapest_performance_safest():
    def buffer(name: str) -> float:
        return float(
            ClusterAIScalePolicySpec.model_validate(PRESETS[name]).model.forecast_buffer_percentage
        )

    assert buffer("cost") <= buffer("balanced") < buffer("performance")
    modes = {
        n: ClusterAIScalePolicySpec.model_validate(PRESETS[n]).model.mode for n in PRESET_NAMES
    }
    assert modes["performance"] == "assurance_optimized" and modes["cost"] == "cost_optimized"


def test_an_unknown_preset_is_refused_naming_the_field():
    obj = {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScalePolicy",
        "metadata": {"name": "team"},
        "spec": {"preset": "cheapest"},
    }
    with pytest.raises(ForesizeError) as exc:
        parse_object(obj, "p.yaml")
    assert "p.yaml: spec.preset: must be one of cost, balanced, performance, batch" in str(
        exc.value
    )
