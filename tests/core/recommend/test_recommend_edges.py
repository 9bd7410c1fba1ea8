"""Edges of the recommender's rules (OOM floor, QoS kept, hysteresis) that a one-line
mutation of the code changed without any other test noticing (session 7 mutation round)."""

from __future__ import annotations

import numpy as np

from foresize.core.api.hysteresis import Threshold
from foresize.core.api.quantity import MIB
from foresize.core.cluster.model import Container, ResourceRequirements
from foresize.core.cluster.qos import qos_class_of
from foresize.core.recommend.oom import OOMArrays, OOMState, apply_ooms, oom_bump
from foresize.core.recommend.params import RecommendParams
from foresize.core.recommend.target import recommend_target
from support.recommend import GIB, NOW, flat_history, qos, res, suggested


def _bumped(n: int) -> int:
    """The floor after n bumps from a 1 GiB request: x1.2 each, rounded up to 1Mi."""
    v = GIB
    for _ in range(n):
        v = int(np.ceil(v * 1.2 / MIB)) * MIB
    return v


def test_a_kill_exactly_two_minutes_after_the_last_bump_compounds() -> None:
    """OOM kills compound every 2 minutes: one 120 s after the bump is a new step."""
    st = apply_ooms(OOMState(), [NOW - 600], [], GIB, NOW, 3600.0)
    assert st.floor == _bumped(1)
    st = apply_ooms(st, [NOW - 600, NOW - 480], [], GIB, NOW, 3600.0)
    assert st.floor == _bumped(2)


def test_the_oom_floor_is_gone_at_the_end_of_its_hold() -> None:
    """The floor holds until `until`, not at it: at that instant it no longer applies."""
    st = apply_ooms(OOMState(), [NOW - 600], [], GIB, NOW, 3600.0)
    assert st.active(st.until - 1) == st.floor
    assert st.active(st.until) == 0


def test_a_guaranteed_container_follows_its_forecast_with_its_limits() -> None:
    """Guaranteed stays Guaranteed by moving each limit with its request, not by leaving
    the container at its old size: 1 core / 2 GiB used at 0.3 core / 1 GiB comes down."""
    cur = {"app": res(1000, 2 * GIB, lcpu=1000, lmem=2 * GIB)}
    s = recommend_target(RecommendParams(), {"app": flat_history(0.3, GIB)}, cur, None, NOW)
    c = s.suggestion.containers["app"]
    assert qos(suggested(s.suggestion)) == "Guaranteed"
    assert c.requests["cpu"] < 1000 and c.requests["memory"] < 2 * GIB
    assert c.limits == c.requests


def test_a_resource_the_container_does_not_declare_is_never_suggested() -> None:
    """A container with a CPU request only gets no memory request: the set of resource
    keys never changes (a revert to the template must stay possible in place)."""
    cur = {"app": ResourceRequirements({"cpu": 500}, {})}
    s = recommend_target(RecommendParams(), {"app": flat_history(0.3, GIB)}, cur, None, NOW)
    c = s.suggestion.containers["app"]
    assert "memory" not in c.requests and "memory" not in c.limits


def test_a_zero_request_with_a_limit_is_burstable() -> None:
    """Kubernetes (ComputePodQOS) skips zero requests: an explicit cpu request of 0 under a
    cpu limit leaves fewer requests than limits, so the pod is Burstable, not Guaranteed."""
    c = Container(
        "app", ResourceRequirements({"cpu": 0, "memory": GIB}, {"cpu": 1000, "memory": GIB})
    )
    assert qos_class_of([c]) == "Burstable"


def test_an_absolute_threshold_applies_to_a_change_from_zero_too() -> None:
    """Only a percentage threshold lets any change from nothing through (no base to take a
    percentage of); an absolute one still needs its amount."""
    th = Threshold("absolute", absolute=(("cpu", 50),))
    assert not th.significant("cpu", 0, 10)
    assert th.significant("cpu", 0, 50)
    assert Threshold("percent", 10.0).significant("cpu", 0, 1)


def test_a_kill_at_the_end_of_the_hold_starts_again_from_the_request() -> None:
    """The fleet form (`oom_bump`, what the replay scores): a floor whose hold ended at
    this instant no longer compounds; the kill bumps 1.2 x the request again."""
    st = OOMArrays.empty(1)
    st = oom_bump(
        st, np.array([True]), 0.0, np.array([GIB]), None, stabilization=600.0, kill_memory=600.0
    )
    assert st.floor[0] == _bumped(1) and st.until[0] == 600.0
    st = oom_bump(
        st, np.array([True]), 600.0, np.array([GIB]), None, stabilization=600.0, kill_memory=600.0
    )
    assert st.floor[0] == _bumped(1)


def test_the_memory_ratchet_forgets_a_target_exactly_one_window_old() -> None:
    """The scale-down ratchet holds the highest target of the last `window` seconds: one
    decided exactly `window` ago is out of it."""
    from foresize.core.recommend.core import MEMORY_HEADROOM, memory_request

    old = ((0.0, np.array([2.0 * GIB])),)
    peak = np.array([0.0])
    held, _ = memory_request(np.array([GIB]), old, 3599.0, 3600.0, peak)
    assert held[0] == 2.0 * GIB
    gone, _ = memory_request(np.array([GIB]), old, 3600.0, 3600.0, peak)
    assert gone[0] == GIB * (1 + MEMORY_HEADROOM)


def test_the_recommender_uses_the_scale_down_threshold_for_a_decrease() -> None:
    """Default hysteresis: up 5%, down 10%. A 7% decrease is not a change; a 7% increase
    is."""
    from foresize.core.recommend.finish import significant_changes

    p = RecommendParams()
    cur = ResourceRequirements({"cpu": 1000, "memory": GIB})
    down = ResourceRequirements({"cpu": 930, "memory": GIB})
    up = ResourceRequirements({"cpu": 1070, "memory": GIB})
    assert significant_changes(p, cur, down) == {"cpu": False, "memory": False}
    assert significant_changes(p, cur, up) == {"cpu": True, "memory": False}


def test_the_recommenders_absolute_threshold_applies_from_zero_too() -> None:
    from foresize.core.api.hysteresis import Threshold

    th = Threshold("absolute", absolute=(("cpu", 50),))
    assert not th.significant("cpu", 0, 10) and th.significant("cpu", 0, 50)


def test_a_request_rounded_up_never_exceeds_the_upper_bound() -> None:
    """Memory is rounded up to whole MiB; an upper bound of 1G (not a whole MiB) caps the
    rounded request at the bound itself."""
    from foresize.core.cluster.target_fields import ContainerPolicy, ResourcePolicy

    b = ContainerPolicy("*", ResourcePolicy(), ResourcePolicy(upper=1_000_000_000))
    cur = {"app": res(500, GIB)}
    h = flat_history(0.3, 3 * GIB)
    s = recommend_target(RecommendParams(containers=(b,)), {"app": h}, cur, None, NOW)
    assert s.suggestion.containers["app"].requests["memory"] == 1_000_000_000
