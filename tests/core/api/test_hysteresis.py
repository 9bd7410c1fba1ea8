"""One hysteresis rule: the planner's `Threshold.significant`, the API types'
`is_significant`, the recommender's scalar check and its array form
(`passes_hysteresis`) decide every change the same way."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from foresize.core.api.hysteresis import Threshold, clears
from foresize.core.api.types import VerticalScalingBehavior, VerticalThreshold
from foresize.core.recommend.core import passes_hysteresis

amounts = st.integers(min_value=1, max_value=2**40)
percents = st.sampled_from([0.0, 1.0, 5.0, 10.0, 12.5, 20.0, 33.0, 100.0])


def _decisions(
    planner: Threshold,
    api: VerticalScalingBehavior,
    r_up: Threshold,
    r_down: Threshold,
    current: int,
    desired: int,
) -> set[bool]:
    """What every form of the rule decides for one change: one element when they agree."""
    rec = r_up if desired > current else r_down
    return {
        planner.significant("cpu", current, desired),
        api.is_significant("cpu", current, desired),
        rec.significant("cpu", current, desired),
        bool(
            passes_hysteresis(np.array([current]), np.array([desired]), r_up, r_down)[0]
            and desired != current
        ),
    }


@settings(max_examples=300, deadline=None, derandomize=True)
@given(current=amounts, desired=amounts, up=percents, down=percents)
def test_every_form_of_the_percent_rule_agrees(
    current: int, desired: int, up: float, down: float
) -> None:
    planner = Threshold("percent", up) if desired > current else Threshold("percent", down)
    api = VerticalScalingBehavior(
        scale_up=VerticalThreshold(type="percent", percent=up),
        scale_down=VerticalThreshold(type="percent", percent=down),
    )
    r_up, r_down = Threshold("percent", up), Threshold("percent", down)
    assert len(_decisions(planner, api, r_up, r_down, current, desired)) == 1


def test_a_change_of_exactly_the_threshold_clears_it() -> None:
    # 7% of 100 is 7, but 7 / 100 x 100 is 7.000000000000001 in floats: the array form
    # used to refuse this change while the scalar forms made it.
    assert clears("percent", 7.0, None, 100, 7)
    assert not clears("percent", 7.0, None, 100, 6)
    seven = Threshold("percent", 7.0)
    assert passes_hysteresis(np.array([100.0]), np.array([107.0]), seven, seven)[0]
    assert Threshold("percent", 7.0).significant("cpu", 100, 107)


def test_absolute_thresholds_and_absent_amounts() -> None:
    th = Threshold("absolute", absolute=(("cpu", 50),))
    assert not th.significant("cpu", 1000, 1049) and th.significant("cpu", 1000, 1050)
    assert th.significant("memory", 1000, 1001)  # no amount for memory: any change
    assert not th.significant("memory", 1000, 1000)
    assert clears("absolute", 0.0, None, 10, 1)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    current=st.integers(min_value=0, max_value=2**20),
    desired=st.integers(min_value=0, max_value=2**20),
    up=st.integers(min_value=1, max_value=2**12),
    down=st.integers(min_value=1, max_value=2**12),
)
def test_every_form_of_the_absolute_rule_agrees_from_zero_too(
    current: int, desired: int, up: int, down: int
) -> None:
    """Absolute thresholds, a current value of 0 included: a change from nothing still
    needs the amount (a percent threshold is what any change from 0 clears)."""
    planner = Threshold("absolute", absolute=(("cpu", up if desired > current else down),))
    api = VerticalScalingBehavior(
        scale_up=VerticalThreshold(type="absolute", absolute={"cpu": f"{up}m"}),
        scale_down=VerticalThreshold(type="absolute", absolute={"cpu": f"{down}m"}),
    )
    r_up = Threshold("absolute", absolute=(("cpu", up),))
    r_down = Threshold("absolute", absolute=(("cpu", down),))
    assert len(_decisions(planner, api, r_up, r_down, current, desired)) == 1
