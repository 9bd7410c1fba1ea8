"""Recommendation rules: modes, buffer, bounds, limits, rounding, hysteresis, lookback,
OOM remediation and QoS preservation (pure functions)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foresize.core.api.quantity import MIB
from foresize.core.cluster.model import ResourceRequirements
from foresize.core.cluster.target_fields import ContainerPolicy, ResourcePolicy
from foresize.core.recommend.core import (
    CPU_DROP_FACTOR,
    CPU_DROP_HOURS,
    CPU_RAISE_SHARE,
    DEFAULT_MEMORY_STABILIZATION,
    KILL_MEMORY,
    MEMORY_HEADROOM,
    MEMORY_RISK_LEVELS,
    MODE_CPU_QUANTILES,
    Threshold,
    allocate_risk,
    interval_range,
    memory_holds,
    memory_request,
    mode_quantile,
    passes_hysteresis,
    recent_peak,
    risk_levels,
    round_up,
    scheduled_cpu,
)
from foresize.core.recommend.histories import ContainerHistory
from foresize.core.recommend.oom import OOMArrays, OOMState, apply_ooms, oom_bump
from foresize.core.recommend.params import RecommendParams, ResourceModel
from foresize.core.recommend.request import TargetRequest
from foresize.core.recommend.target import recommend_batch, recommend_target
from support.recommend import DAY_POINTS, GIB, NOW, flat_history, qos, res, suggested

# --- modes -------------------------------------------------------------------------------


def test_mode_quantiles_are_ordered_and_memory_is_stricter():
    modes = ["undershoot", "cost_optimized", "balanced", "assurance_optimized", "overshoot"]
    cpu = [mode_quantile(m, "cpu") for m in modes]
    mem = [mode_quantile(m, "memory") for m in modes]
    assert cpu == sorted(cpu) and mem == sorted(mem)
    for c, m in zip(cpu, mem, strict=True):
        assert 1 - m == pytest.approx((1 - c) / 20)
    assert set(MODE_CPU_QUANTILES) == set(modes)
    assert mode_quantile("percentile", "memory", 95) == 0.95
    assert mode_quantile("percentile", "cpu", 0.8) == 0.8
    with pytest.raises(ValueError):
        mode_quantile("percentile", "cpu")
    with pytest.raises(ValueError):
        mode_quantile("bogus", "cpu")


def test_higher_mode_gives_higher_request():
    rng = np.random.default_rng(1)
    n = 3 * DAY_POINTS
    h = ContainerHistory(
        rng.gamma(2.0, 0.25, n), rng.gamma(4.0, GIB / 8, n), first_seen=NOW - 3 * 86400
    )
    cur = {"app": res(500, GIB)}
    out = {}
    for mode in ("undershoot", "balanced", "overshoot"):
        p = RecommendParams(cpu=ResourceModel(mode), memory=ResourceModel(mode))
        s = recommend_target(p, {"app": h}, cur, None, NOW).suggestion
        out[mode] = s.containers["app"].requests
    # (Each mode's model is selected for its own quantile, so neighbouring modes may pick
    # different models; the far ends are ordered.)
    assert out["undershoot"]["cpu"] < out["overshoot"]["cpu"]
    assert out["balanced"]["cpu"] < out["overshoot"]["cpu"]
    # Memory quantiles are all high (>= 0.99): they may meet at the observed maximum.
    assert out["undershoot"]["memory"] <= out["overshoot"]["memory"]


# --- buffer, bounds, limits, rounding -----------------------------------------------------


def test_buffer_rounding_and_units():
    h = flat_history(cpu=0.2501, mem=300 * MIB + 5)
    p = RecommendParams(cpu=ResourceModel(buffer_percentage=20.0))
    r = recommend_target(p, {"app": h}, {"app": res(100, 100 * MIB)}, None, NOW)
    req = r.suggestion.containers["app"].requests
    assert req["cpu"] == 301  # 250.1m x 1.2 = 300.12m, rounded up to 1m
    # 300Mi + 5 bytes with the memory headroom, rounded up to 1Mi.
    assert req["memory"] == int(np.ceil((300 * MIB + 5) * (1 + MEMORY_HEADROOM) / MIB)) * MIB
    assert r.forecasts["app"]["cpu"] == pytest.approx(250.1)


def test_round_up_never_rounds_down():
    assert round_up("cpu", np.array([100.0, 100.2]))[1] == 101
    assert round_up("memory", np.array([MIB + 1.0]))[0] == 2 * MIB


def test_bounds_clamp():
    h = flat_history(cpu=2.0, mem=4 * GIB)
    b = ContainerPolicy("*", ResourcePolicy(100, 1000), ResourcePolicy(256 * MIB, 2 * GIB))
    p = RecommendParams(containers=(b,))
    s = recommend_target(p, {"app": h}, {"app": res(500, GIB)}, None, NOW).suggestion
    assert s.containers["app"].requests == {"cpu": 1000, "memory": 2 * GIB}
    low = flat_history(cpu=0.001, mem=10 * MIB)
    s = recommend_target(p, {"app": low}, {"app": res(500, GIB)}, None, NOW).suggestion
    assert s.containers["app"].requests == {"cpu": 100, "memory": 256 * MIB}


def test_without_limit_ratio_limits_stay_and_cap_the_request():
    h = flat_history(cpu=3.0, mem=GIB)
    cur = {"app": res(500, GIB, lcpu=2000, lmem=4 * GIB)}
    s = recommend_target(RecommendParams(), {"app": h}, cur, None, NOW).suggestion
    c = s.containers["app"]
    assert c.limits == {"cpu": 2000, "memory": 4 * GIB}
    assert c.requests["cpu"] == 2000  # would be 3000, capped at the existing limit


def test_limit_ratio_keeps_limits_proportional():
    h = flat_history(cpu=0.4, mem=GIB)
    b = ContainerPolicy("app", ResourcePolicy(limit_ratio=2.0), ResourcePolicy(limit_ratio=1.5))
    cur = {"app": res(500, GIB, lcpu=1000, lmem=2 * GIB)}
    s = recommend_target(RecommendParams(containers=(b,)), {"app": h}, cur, None, NOW)
    c = s.suggestion.containers["app"]
    assert c.requests["cpu"] == 400 and c.limits["cpu"] == 800
    assert c.limits["memory"] == int(np.ceil(c.requests["memory"] * 1.5 / MIB)) * MIB


# --- QoS ---------------------------------------------------------------------------------


def test_guaranteed_stays_guaranteed():
    h = flat_history(cpu=0.3, mem=GIB)
    cur = {"app": res(1000, 2 * GIB, lcpu=1000, lmem=2 * GIB)}
    b = ContainerPolicy("*", ResourcePolicy(limit_ratio=2.0), ResourcePolicy(limit_ratio=2.0))
    for params in (RecommendParams(), RecommendParams(containers=(b,))):
        s = recommend_target(params, {"app": h}, cur, None, NOW).suggestion
        assert qos(suggested(s)) == "Guaranteed"
        c = s.containers["app"]
        assert c.requests["cpu"] == c.limits["cpu"]


def test_burstable_never_becomes_guaranteed():
    # Usage above the limits: requests are capped at the limits, which would make the pod
    # Guaranteed; one request is kept just under its limit instead.
    h = flat_history(cpu=5.0, mem=8 * GIB)
    cur = {"app": res(500, GIB, lcpu=1000, lmem=2 * GIB)}
    assert qos(cur) == "Burstable"
    s = recommend_target(RecommendParams(), {"app": h}, cur, None, NOW).suggestion
    assert qos(suggested(s)) == "Burstable"
    assert s.containers["app"].requests["cpu"] == 999


def test_best_effort_gets_no_requests():
    h = flat_history()
    cur = {"app": ResourceRequirements()}
    s = recommend_target(RecommendParams(), {"app": h}, cur, None, NOW).suggestion
    assert s.containers["app"].requests == {} and s.containers["app"].limits == {}


# --- hysteresis and lookback --------------------------------------------------------------


def test_hysteresis_thresholds():
    cur = np.array([1000.0, 1000.0, 1000.0, 1000.0, np.nan])
    tgt = np.array([1040.0, 1060.0, 950.0, 880.0, 5.0])
    ok = passes_hysteresis(cur, tgt)  # defaults: up 5%, down 10%
    assert ok.tolist() == [False, True, False, True, True]
    ok = passes_hysteresis(
        cur, tgt, Threshold("absolute", absolute=(("cpu", 50),)), Threshold("percent", 4)
    )
    assert ok.tolist() == [False, True, True, True, True]


def test_changed_flags_follow_scaling_behavior():
    h = flat_history(cpu=0.52, mem=GIB)
    cur = {"app": res(500, GIB)}
    r = recommend_target(RecommendParams(), {"app": h}, cur, None, NOW)
    assert r.changed["app"]["cpu"] is False  # +4%: below the 5% scale-up threshold
    p = RecommendParams(scale_up={"cpu": Threshold("percent", 1.0), "memory": Threshold()})
    r = recommend_target(p, {"app": h}, cur, None, NOW)
    assert r.changed["app"]["cpu"] is True


def test_min_lookback_holds_current_resources():
    h = flat_history(cpu=2.0, mem=2 * GIB, days=1)
    h.first_seen = NOW - 3 * 3600.0  # 3 hours of data
    cur = {"app": res(500, GIB)}
    r = recommend_target(RecommendParams(), {"app": h}, cur, None, NOW)
    assert r.has_enough_data is False
    assert r.suggestion.containers["app"].requests == {"cpu": 500, "memory": GIB}
    p = RecommendParams(min_lookback_to_scale=3 * 3600.0)
    r = recommend_target(p, {"app": h}, cur, None, NOW)
    assert r.has_enough_data is True
    assert r.suggestion.containers["app"].requests["cpu"] == 2000


# --- OOM remediation ----------------------------------------------------------------------


def test_oom_bump_compounds_every_two_minutes_and_holds():
    st = apply_ooms(OOMState(), [NOW - 600], [], GIB, NOW, 3600.0)
    assert st.floor == int(np.ceil(GIB * 1.2 / MIB)) * MIB
    # Another kill 60 s later: too soon to bump again, but the hold is extended.
    st2 = apply_ooms(st, [NOW - 600, NOW - 540], [], GIB, NOW, 3600.0)
    assert st2.floor == st.floor and st2.until == NOW - 540 + KILL_MEMORY and st2.count == 2
    # Kills continuing 2+ minutes later compound on the active floor.
    st3 = apply_ooms(st2, [NOW - 400], [], GIB, NOW, 3600.0)
    assert st3.floor == int(np.ceil(st.floor * 1.2 / MIB)) * MIB
    # Already-seen kills are not applied twice.
    assert apply_ooms(st3, [NOW - 600, NOW - 400], [], GIB, NOW, 3600.0) == st3
    assert st3.active(NOW) == st3.floor
    assert st3.active(NOW - 400 + KILL_MEMORY) == 0  # the hold expires


def test_oom_floor_raises_memory_and_forecasts_may_raise_it_further():
    cur = {"app": res(500, GIB)}
    low = flat_history(cpu=0.5, mem=400 * MIB, oom_times=[NOW - 60])
    r = recommend_target(RecommendParams(), {"app": low}, cur, None, NOW)
    floor = r.oom_state["app"].floor
    assert floor == int(np.ceil(GIB * 1.2 / MIB)) * MIB
    assert r.suggestion.containers["app"].requests["memory"] == floor  # not 400Mi
    # The bump is not usage: the forecast itself did not move.
    plain = recommend_target(
        RecommendParams(), {"app": flat_history(0.5, 400 * MIB)}, cur, None, NOW
    )
    assert r.forecasts["app"]["memory"] == plain.forecasts["app"]["memory"]
    # Next call, same state: the floor holds within the window...
    r2 = recommend_target(RecommendParams(), {"app": low}, cur, r.oom_state, NOW + 1800)
    assert r2.suggestion.containers["app"].requests["memory"] == floor
    assert r2.oom_state["app"].count == 1
    # ...and is gone after it.
    r3 = recommend_target(RecommendParams(), {"app": low}, cur, r.oom_state, NOW + KILL_MEMORY)
    assert r3.suggestion.containers["app"].requests["memory"] < floor
    # A forecast above the floor wins.
    high = flat_history(cpu=0.5, mem=3 * GIB, oom_times=[NOW - 60])
    r4 = recommend_target(RecommendParams(), {"app": high}, cur, None, NOW)
    assert r4.suggestion.containers["app"].requests["memory"] >= 3 * GIB


def test_oom_remediation_can_be_disabled_and_uses_usage_at_kill():
    cur = {"app": res(500, GIB)}
    h = flat_history(cpu=0.5, mem=400 * MIB, oom_times=[NOW - 60], oom_usage=[2 * GIB])
    r = recommend_target(RecommendParams(), {"app": h}, cur, None, NOW)
    assert r.oom_state["app"].floor == int(np.ceil(2 * GIB * 1.2 / MIB)) * MIB
    off = RecommendParams(oom_enabled=False)
    r = recommend_target(off, {"app": h}, cur, None, NOW)
    assert r.oom_state["app"].floor == 0


def test_vectorised_oom_bump():
    st = OOMArrays.empty(3)
    mask = np.array([True, False, True])
    req = np.full(3, 100.0 * MIB)
    st = oom_bump(st, mask, 100.0, req, np.array([150.0, 0, 50]) * MIB)
    assert st.floor.tolist() == [180.0 * MIB, 0.0, 120.0 * MIB]
    st2 = oom_bump(st, mask, 160.0, req, None)  # < 2 min later
    assert st2.floor.tolist() == [180.0 * MIB, 0.0, 120.0 * MIB]
    st3 = oom_bump(st2, mask, 230.0, req, None)
    assert st3.floor[0] == np.ceil(216.0) * MIB and st3.floor[2] == 144.0 * MIB
    assert st3.active_floor(230.0 + KILL_MEMORY + 1).tolist() == [0.0, 0.0, 0.0]
    # The floor is rounded up to 1Mi: a request at the floor is never below the bump.
    odd = oom_bump(OOMArrays.empty(1), [True], 0.0, np.array([1000.0 * MIB + 1]), None)
    assert odd.floor[0] % MIB == 0 and odd.floor[0] >= (1000.0 * MIB + 1) * 1.2


def test_one_oom_rule_scalar_is_the_vector_of_one():
    """`apply_ooms` (operator, simulator) and `oom_bump` (replay benchmark) are one rule:
    a random sequence of kills gives the same floors, holds and counts either way."""
    rng = np.random.default_rng(7)
    times = np.cumsum(rng.choice([30.0, 90.0, 150.0, 900.0, 5000.0], size=40))
    usage = rng.uniform(0.5, 3.0, size=40) * GIB
    safest = rng.uniform(0.0, 4.0, size=40) * GIB
    request = GIB
    scalar = OOMState()
    vector = OOMArrays.empty(1)
    for t, u, sf in zip(times, usage, safest, strict=True):
        scalar = apply_ooms(scalar, [t], [u], request, t, 3600.0, safest=sf)
        vector = oom_bump(
            vector, [True], t, np.array([request]), np.array([u]), 3600.0, np.array([sf])
        )
        assert scalar.floor == vector.floor[0]
        assert scalar.until == vector.until[0] and scalar.last_bump == vector.last_bump[0]
        assert scalar.count == vector.count[0]
        assert scalar.active(t + 1) == vector.active_floor(t + 1)[0]


# --- entry points ------------------------------------------------------------------------


def test_batch_equals_single_calls_and_state_round_trips():
    ha = {"a": flat_history(0.3, GIB, noise=0.1, seed=1)}
    hb = {"b": flat_history(1.5, 2 * GIB, noise=0.1, seed=2)}
    ca, cb = {"a": res(100, GIB)}, {"b": res(100, GIB)}
    pa = RecommendParams(uid="ua")
    pb = RecommendParams(uid="ub", cpu=ResourceModel("overshoot"))
    batch = recommend_batch([TargetRequest(pa, ha, ca), TargetRequest(pb, hb, cb)], NOW)
    one = recommend_target(pa, ha, ca, None, NOW)
    two = recommend_target(pb, hb, cb, None, NOW)
    assert batch[0].suggestion.containers == one.suggestion.containers
    assert batch[1].suggestion.containers == two.suggestion.containers
    assert batch[1].suggestion.uid == "ub"
    sug, oom = one  # unpacks as (suggestion, oom_state)
    assert sug is one.suggestion and oom is one.oom_state
    # Rolling forecast state: carried between calls.
    st: dict = {}
    r1 = recommend_target(pa, ha, ca, None, NOW, forecast_state=st)
    r2 = recommend_target(pa, ha, ca, r1.oom_state, NOW + 900, forecast_state=r1.forecast_state)
    assert set(r2.forecast_state) == {"a/cpu", "a/memory"}
    assert r2.forecast_state["a/cpu"].last_origin > r1.forecast_state["a/cpu"].last_origin


def test_params_from_aiscaletarget():
    from foresize.core.api.types import parse_target

    ast = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "model": {
                    "mode": "cost_optimized",
                    "forecast_buffer_percentage": 10,
                    "min_lookback_to_scale": "3h",
                    "metrics": {"memory": {"mode": "overshoot"}},
                },
                "vertical": {
                    "mode": "auto",
                    "containers": [
                        {
                            "name": "app",
                            "cpu": {"lowerbound": "100m", "upperbound": "2", "limit": {"ratio": 2}},
                            "memory": {"lowerbound": "128Mi"},
                        }
                    ],
                    "scaling_behavior": {"scale_down": {"type": "percent", "percent": 20}},
                    "oom_remediation": {"stabilization_window": "30m"},
                },
            },
        }
    )
    p = RecommendParams.from_target(ast)
    assert p.uid == "u-1"
    assert p.cpu.mode == "cost_optimized" and p.cpu.buffer_percentage == 10
    assert p.memory.mode == "overshoot"
    assert p.min_lookback_to_scale == 3 * 3600
    b = p.bounds("app")
    assert b.cpu == ResourcePolicy(100, 2000, 2.0)
    assert b.memory == ResourcePolicy(128 * MIB, None, None)
    assert p.scale_down["cpu"] == Threshold("percent", 20.0)
    assert p.stabilization_window == 1800
    # Memory at overshoot (a twentieth of the default's misses) remembers a level twenty
    # times as long: the ratchet 5 days instead of 6 hours, a kill the 14 days of history.
    assert p.memory_holds() == pytest.approx((20 * 6 * 3600, 14 * 86400))
    # The target itself is accepted too.
    h = {"app": flat_history(0.5, GIB)}
    r = recommend_target(ast, h, {"app": res(500, GIB, lcpu=1000)}, None, NOW)
    assert r.suggestion.uid == "u-1"
    assert (
        r.suggestion.containers["app"].limits["cpu"]
        == 2 * r.suggestion.containers["app"].requests["cpu"]
    )


def test_memory_scale_down_stabilization():
    """Memory goes down only to the highest target of the last 6 hours; CPU at the next
    segment start (`scheduled_cpu`; a flat day is cut at midnight)."""
    cur = {"app": res(500, GIB)}
    high = flat_history(cpu=2.0, mem=3 * GIB)
    low = flat_history(cpu=0.2, mem=500 * MIB)
    r1 = recommend_target(RecommendParams(), {"app": high}, cur, None, NOW)
    high_mem = r1.suggestion.containers["app"].requests["memory"]
    assert high_mem >= 3 * GIB
    r2 = recommend_target(RecommendParams(), {"app": low}, cur, r1.oom_state, NOW + 900)
    c2 = r2.suggestion.containers["app"].requests
    assert c2["memory"] == high_mem  # held
    assert c2["cpu"] == 500  # CPU mid-segment: a downsize waits for the segment start
    at_block = recommend_target(RecommendParams(), {"app": low}, cur, None, NOW + 86400.0)
    assert at_block.suggestion.containers["app"].requests["cpu"] == 200
    # Still held hours later (a lull between bursts is not a reason to release memory).
    mid = recommend_target(RecommendParams(), {"app": low}, cur, r2.oom_state, NOW + 5 * 3600)
    assert mid.suggestion.containers["app"].requests["memory"] == high_mem
    r3 = recommend_target(RecommendParams(), {"app": low}, cur, r2.oom_state, NOW + 6 * 3600 + 60)
    with_headroom = int(np.ceil(500 * (1 + MEMORY_HEADROOM))) * MIB
    assert r3.suggestion.containers["app"].requests["memory"] == with_headroom
    off = RecommendParams(memory_stabilization=0.0)
    r4 = recommend_target(off, {"app": low}, cur, r1.oom_state, NOW + 900)
    assert r4.suggestion.containers["app"].requests["memory"] == with_headroom


def test_load_histories_from_a_store_feeds_recommend_target(tmp_path):
    """The shells' path: samples and OOM events in a history store -> recommendation."""
    from foresize.adapters.history.memory import UsageHistory
    from foresize.adapters.history.sqlite import HistoryStore
    from foresize.core.history import SeriesKey
    from foresize.core.recommend.histories import load_histories

    key = SeriesKey("shop", "web", "app")
    start = NOW - 2 * 86400.0
    n = 2 * 1440
    cpu = np.full((1, n), 0.3)
    mem = np.full((1, n), 800.0 * MIB)
    mh = UsageHistory(step=60.0)
    idx = mh.indices([key])
    for k in range(n):
        mh.append(start + 60 * k, idx, cpu=cpu[:, k], memory=mem[:, k])
    mh.record_event(key, "oom", NOW - 120, 900.0 * MIB)
    with HistoryStore(tmp_path / "h.db", step=60.0) as st:
        st.write_matrix([key], "cpu", start, cpu)
        st.write_matrix([key], "memory", start, mem)
        st.record_event(key, "oom", NOW - 120, 900.0 * MIB)
        for reader in (mh, st):
            h = load_histories(reader, "shop", "web", ["app"], NOW - 60)["app"]
            assert h.first_seen == start
            assert list(h.oom_times) == [NOW - 120]
            r = recommend_target(RecommendParams(), {"app": h}, {"app": res(100, GIB)}, None, NOW)
            req = r.suggestion.containers["app"].requests
            assert req["cpu"] == 300
            assert req["memory"] == int(np.ceil(GIB * 1.2 / MIB)) * MIB  # OOM floor over 800Mi


def test_hysteresis_defaults_are_the_apis_rule():
    """One rule: recommend/'s thresholds for a target without scaling_behavior (or with
    one direction only) decide exactly as the API's VerticalScalingBehavior.is_significant."""
    from foresize.core.api.types import VerticalScalingBehavior

    rng = np.random.default_rng(3)
    cur = rng.integers(1, 4000, 400)
    prop = (cur * rng.uniform(0.8, 1.2, 400)).astype(np.int64)
    for behaviour, params in (
        (VerticalScalingBehavior(), RecommendParams()),
        (
            VerticalScalingBehavior.model_validate({"scale_down": {"percent": 20}}),
            RecommendParams(scale_down={"cpu": Threshold("percent", 20.0)}),
        ),
    ):
        api = np.array(
            [
                behaviour.is_significant("cpu", int(c), int(p))
                for c, p in zip(cur, prop, strict=True)
            ]
        )
        ours = passes_hysteresis(cur, prop, params.scale_up["cpu"], params.scale_down["cpu"])
        ours &= prop != cur
        assert (api == ours).all()
    # The documented defaults themselves: up 5%, down 10%.
    empty = VerticalScalingBehavior()
    assert not empty.is_significant("memory", 1000, 1040) and empty.is_significant("cpu", 100, 105)
    assert not empty.is_significant("cpu", 1000, 910) and empty.is_significant("cpu", 1000, 900)


def test_memory_risk_goes_where_protection_is_expensive():
    """A batch of flat containers and one idling at 300 MiB that has just spiked to 12 GiB
    once (its high quantiles are far apart): under a named mode the flat ones are sized at
    a safer level than the mode's (nearly free for them) and the spiky one at a cheaper
    one; `percentile` keeps the user's number for everyone."""
    rng = np.random.default_rng(3)
    n = 288 * 8
    flat = [GIB * (1.0 + 0.05 * k) * (1 + 0.03 * rng.random(n)) for k in range(8)]
    burst = 300 * MIB * (1 + 0.05 * rng.random(n))
    burst[-1] = 12 * GIB
    series = [*flat, burst]

    def batch(mode: str, pv: float | None = None):
        reqs = []
        for mem in series:
            h = ContainerHistory(cpu=np.full(n, 0.5), memory=mem, first_seen=NOW - n * 300.0)
            model = ResourceModel(mode, pv)
            reqs.append(
                TargetRequest(
                    RecommendParams(cpu=model, memory=model),
                    {"app": h},
                    {"app": res(500, GIB)},
                    forecast_state={},  # a fresh rolling backtest: the `recent` model
                )
            )
        return recommend_batch(reqs, NOW)

    out = batch("balanced")
    levels = [r.quantiles["app"]["memory"] for r in out]
    assert all(q > 0.999 for q in levels[:-1])  # flat: safer than the mode, nearly free
    assert levels[-1] < 0.999  # the bursty one takes more risk, and frees memory
    assert all(r.quantiles["app"]["cpu"] == 0.98 for r in out)  # CPU: the mode's own
    uniform = batch("percentile", 99.9)
    assert all(r.quantiles["app"]["memory"] == pytest.approx(0.999) for r in uniform)
    bursty, bursty_uniform = out[-1], uniform[-1]
    assert bursty.forecasts["app"]["memory"] < bursty_uniform.forecasts["app"]["memory"]
    for a, b in zip(out[:-1], uniform[:-1], strict=True):
        assert a.forecasts["app"]["memory"] >= b.forecasts["app"]["memory"]


def test_allocate_risk_prices_protection_against_the_fleet_average():
    levels = np.array(MEMORY_RISK_LEVELS)  # 0.995 ... 0.99995
    mode = np.full(3, 0.999)
    gib = float(GIB)
    values = np.array(
        [
            [1.00, 1.00, 1.01, 1.01, 1.02],  # flat: ten times safer for 1%
            [2.00, 2.10, 2.20, 2.30, 2.60],  # about the fleet's cost of coverage
            [0.30, 3.00, 9.00, 12.0, 20.0],  # bursty: protection costs whole bursts
        ]
    )
    pick = allocate_risk(values * gib, levels, mode)
    assert levels[pick[0]] == levels[-1]  # the cheap one buys the safest level
    assert levels[pick[2]] == levels[0]  # the expensive one takes the cheapest
    assert levels[0] <= levels[pick[1]] <= levels[-1]
    # Scale free: the same fleet in other units decides alike.
    assert (allocate_risk(values * 1e3, levels, mode) == pick).all()
    # A price of zero takes the cheapest level everywhere; a huge one the safest.
    assert (allocate_risk(values, levels, mode, price=0.0) == 0).all()
    assert (allocate_risk(values, levels, mode, price=1e6) == len(levels) - 1).all()
    # Levels a row may not use are NaN; a row with no forecast keeps its mode's level.
    only_own = np.full_like(values, np.nan)
    only_own[:, 2] = values[:, 2]
    assert (allocate_risk(only_own, levels, mode) == 2).all()
    none = np.full_like(values, np.nan)
    assert (allocate_risk(none, levels, mode) == 2).all()


def test_risk_levels_are_the_named_memory_levels():
    assert risk_levels("balanced", "memory") == MEMORY_RISK_LEVELS
    assert (
        tuple(sorted(mode_quantile(m, "memory") for m in MODE_CPU_QUANTILES)) == MEMORY_RISK_LEVELS
    )
    assert risk_levels("balanced", "cpu") == (mode_quantile("balanced", "cpu"),)
    assert risk_levels("percentile", "memory", 99.0) == (0.99,)
    with pytest.raises(ValueError):
        risk_levels("nonsense", "memory")


def test_a_kill_ends_the_risk_taken_floor_at_the_safest_level():
    """`oom_bump` / `apply_ooms` with the forecast at the safest level: after a kill the
    floor is at least that forecast (the burst the history knows), not only 1.2 x what
    was seen; containers without a kill keep their state."""
    st = OOMArrays.empty(3)
    mask = np.array([True, True, False])
    req = np.array([1.0, 1.0, 1.0]) * GIB
    usage = np.array([1.1, 1.1, 0.5]) * GIB
    safest = np.array([12.0, 0.5, 12.0]) * GIB
    out = oom_bump(st, mask, 1000.0, req, usage, safest=safest)
    assert out.floor[0] == 12 * GIB  # the known burst, above 1.2 x 1.1 GiB
    assert out.floor[1] == np.ceil(1.1 * 1.2 * 1024) * MIB  # the bump is never lowered
    assert out.floor[2] == 0.0  # no kill, no floor
    plain = oom_bump(st, mask, 1000.0, req, usage)
    assert plain.floor[0] == np.ceil(1.1 * 1.2 * 1024) * MIB
    s1 = apply_ooms(OOMState(), [NOW - 60], [1.1 * GIB], GIB, NOW, 3600.0, safest=12.0 * GIB)
    assert s1.active(NOW) == 12 * GIB
    s2 = apply_ooms(s1, [NOW - 60], [1.1 * GIB], GIB, NOW + 60, 3600.0, safest=20.0 * GIB)
    assert s2.floor == s1.floor  # no new kill: nothing changes


def test_recommend_batch_lifts_a_killed_container_to_its_safest_level(monkeypatch):
    from foresize.core.recommend import core as recommend_core

    # The recent-peak rule would hold the spike by itself; this checks the allocation.
    monkeypatch.setattr(recommend_core, "MEMORY_PEAK_WINDOW", 0.0)
    rng = np.random.default_rng(4)
    n = 288 * 8
    reqs = []
    for k in range(6):
        h = ContainerHistory(
            cpu=np.full(n, 0.5),
            memory=GIB * (1.0 + 0.05 * k) * (1 + 0.03 * rng.random(n)),
            first_seen=NOW - n * 300.0,
        )
        reqs.append(TargetRequest(RecommendParams(), {"app": h}, {"app": res(500, GIB)}, None, {}))
    spiky = 300 * MIB * (1 + 0.05 * rng.random(n))
    spiky[-1] = 12 * GIB
    quiet = ContainerHistory(np.full(n, 0.5), spiky, NOW - n * 300.0)
    killed = ContainerHistory(
        np.full(n, 0.5), spiky, NOW - n * 300.0, oom_times=[NOW - 30], oom_usage=[400 * MIB]
    )
    cur = {"app": res(500, 350 * MIB)}
    a = recommend_batch(
        [*reqs, TargetRequest(RecommendParams(), {"app": quiet}, cur, None, {})], NOW
    )
    b = recommend_batch(
        [*reqs, TargetRequest(RecommendParams(), {"app": killed}, cur, None, {})], NOW
    )
    assert a[-1].quantiles["app"]["memory"] < 0.999  # it was taking risk
    low = a[-1].suggestion.containers["app"].requests["memory"]
    lifted = b[-1].suggestion.containers["app"].requests["memory"]
    assert low < 2 * GIB
    assert lifted >= 11 * GIB  # the spike its history knows, not 1.2 x 400 MiB


def test_a_fleet_reference_given_by_the_caller_prices_the_risk():
    """`memory_reference` stands for the fleet when it is recommended in parts: the same
    container takes the safest level against a fleet of far larger containers and the
    cheapest against a fleet of tiny ones; `at_mode` reports its mode-level forecast."""
    rng = np.random.default_rng(6)
    n = 288 * 8
    spiky = 300 * MIB * (1 + 0.05 * rng.random(n))
    spiky[-1] = 12 * GIB
    h = ContainerHistory(np.full(n, 0.5), spiky, NOW - n * 300.0)
    req = TargetRequest(RecommendParams(), {"app": h}, {"app": res(500, GIB)}, None, {})
    (alone,) = recommend_batch([req], NOW)
    (rich,) = recommend_batch([req], NOW, memory_reference=1e15)
    (poor,) = recommend_batch([req], NOW, memory_reference=1.0)
    assert rich.quantiles["app"]["memory"] == MEMORY_RISK_LEVELS[-1]
    assert poor.quantiles["app"]["memory"] == MEMORY_RISK_LEVELS[0]
    assert poor.forecasts["app"]["memory"] < alone.forecasts["app"]["memory"]
    assert alone.at_mode["app"] > 0
    # Off for forecasts that are not one container's request (a workload's total).
    fixed = replace(req, params=RecommendParams(allocate_memory_risk=False))
    (own,) = recommend_batch([fixed], NOW, memory_reference=1.0)
    assert own.quantiles["app"]["memory"] == mode_quantile("balanced", "memory")


# --- stabilised CPU, memory headroom and peaks, what a kill teaches ------------------------


def daily_history(now: float, days: int = 4, peak_hours=(8, 16)) -> ContainerHistory:
    """0.2 cores, 1 core from peak_hours[0] to peak_hours[1] UTC every day; the last sample
    is at `now`."""
    n = days * DAY_POINTS
    t = now - (n - 1 - np.arange(n)) * 300.0
    hour = (t % 86400.0) / 3600.0
    cpu = np.where((hour >= peak_hours[0]) & (hour < peak_hours[1]), 1.0, 0.2)
    return ContainerHistory(cpu, np.full(n, float(GIB)), first_seen=now - days * 86400.0)


def test_cpu_follows_the_time_of_day_schedule_and_downsizes_only_at_a_block_start():
    """The operator path runs THE CPU rule (`scheduled_cpu`): at midnight UTC (a block
    start) the request becomes the quantile of the coming block on past days (0.2 cores:
    the 1-core peak comes at 08:00). An hour into the block a request above the schedule
    (within the let-go's factor 1 / CPU_RAISE_SHARE) is kept: downsizes wait for the next
    block."""
    h = {"app": daily_history(NOW)}
    r = recommend_target(RecommendParams(), h, {"app": res(1000, GIB)}, None, NOW)
    assert 200 <= r.suggestion.containers["app"].requests["cpu"] <= 210
    assert r.changed["app"]["cpu"] is True
    later = NOW + 3600.0
    h = {"app": daily_history(later)}
    kept = recommend_target(RecommendParams(), h, {"app": res(450, GIB)}, None, later)
    assert kept.suggestion.containers["app"].requests["cpu"] == 450
    assert kept.changed["app"]["cpu"] is False
    # At 08:00 (the next block start) the request goes up ahead of the peak.
    eight = NOW + 8 * 3600.0
    h = {"app": daily_history(eight)}
    up = recommend_target(RecommendParams(), h, {"app": res(200, GIB)}, None, eight)
    assert up.suggestion.containers["app"].requests["cpu"] >= 1000


def test_cpu_segments_follow_the_container_own_peak_hours():
    """The operator path cuts each container's day around its own peak: with a peak from
    13:00 to 17:00 a request of 1 core is released by 17:45 (a segment starts at 17:00,
    fixed blocks start at 16:00 and would hold the peak until midnight; at 17:00 the
    time-of-day forecast, pooled over +-30 minutes of past days, still sees the peak and
    would raise a released request back at 17:15: seed.md N3; the let-go follows once
    that forecast no longer sees it) and kept at 08:00 (no
    boundary of this container; a request within the let-go's factor 1 / CPU_RAISE_SHARE
    of the schedule)."""
    at17 = NOW + 17 * 3600.0
    h = {"app": daily_history(at17, days=8, peak_hours=(13, 17))}
    r = recommend_target(RecommendParams(), h, {"app": res(1000, GIB)}, None, at17)
    assert r.suggestion.containers["app"].requests["cpu"] >= 1000
    at1745 = at17 + 2700.0
    h = {"app": daily_history(at1745, days=8, peak_hours=(13, 17))}
    r = recommend_target(RecommendParams(), h, {"app": res(1000, GIB)}, None, at1745)
    assert 200 <= r.suggestion.containers["app"].requests["cpu"] <= 210
    at8 = NOW + 8 * 3600.0
    h = {"app": daily_history(at8, days=8, peak_hours=(13, 17))}
    kept = recommend_target(RecommendParams(), h, {"app": res(450, GIB)}, None, at8)
    assert kept.suggestion.containers["app"].requests["cpu"] == 450
    at13 = NOW + 13 * 3600.0
    h = {"app": daily_history(at13, days=8, peak_hours=(13, 17))}
    up = recommend_target(RecommendParams(), h, {"app": res(200, GIB)}, None, at13)
    assert up.suggestion.containers["app"].requests["cpu"] >= 1000


def test_scheduled_cpu_rule():
    nan = np.nan
    sched = np.array([100.0, 100.0, 100.0, nan, nan, 100.0, 100.0])
    raise_at = np.array([50.0, 150.0, 150.0, 50.0, 50.0, 90.0, 90.0])
    raise_to = np.array([300.0, 300.0, 300.0, 300.0, 300.0, 180.0, 300.0])
    current = np.array([400.0, 400.0, 120.0, 400.0, nan, 95.0, 80.0])
    start = scheduled_cpu(sched, raise_at, raise_to, current, True)
    # Block start: the schedule, or the raise where the median is above it or the request
    # is under 40% of the forecast; no schedule (less than a day of history): the forecast.
    assert np.array_equal(start, [100.0, 300.0, 300.0, 300.0, 300.0, 100.0, 300.0], equal_nan=True)
    mid = scheduled_cpu(sched, raise_at, raise_to, current, False)
    # Mid-block: keep, unless the median is above both the schedule and the request, or
    # the request is under 40% of the forecast at the mode's quantile.
    assert np.array_equal(mid, [nan, nan, 300.0, nan, 300.0, nan, 300.0], equal_nan=True)
    # Each container its own segment start.
    own = np.array([True, False, True, False, True, False, True])
    mixed = scheduled_cpu(sched, raise_at, raise_to, current, own)
    assert np.array_equal(mixed, np.where(own, start, mid), equal_nan=True)


def test_a_large_raise_is_let_go_when_the_forecast_is_back_under_the_schedule():
    """Mid-segment, a request more than 2.5 times the schedule (1 / CPU_RAISE_SHARE) goes
    back to the schedule once the forecast at the mode's quantile is under it; a smaller
    raise, or one the forecast still wants, is kept until the segment ends."""
    sched = np.full(4, 100.0)
    raise_at = np.full(4, 50.0)
    raise_to = np.array([90.0, 90.0, 120.0, 90.0])
    current = np.array([300.0, 200.0, 300.0, 100.0 / CPU_RAISE_SHARE])
    mid = scheduled_cpu(sched, raise_at, raise_to, current, False)
    assert np.array_equal(mid, [100.0, np.nan, np.nan, np.nan], equal_nan=True)


def test_scheduled_cpu_reads_the_last_interval():
    """What the container did since the last decision refines the rule (mid-segment,
    schedule 100): a raise needs usage at the request in
    force; an interval spent entirely over 2.5 times the schedule is met at once; a raise
    is let go once the forecast is 2.5 times under it and usage is under the schedule; a
    request CPU_DROP_FACTOR times the forecast comes down to it, below the schedule, when
    usage stayed under the forecast and CPU_DROP_HOURS remain in the segment; a forecast
    from the time of day keeps its anticipating raises."""
    nan = np.nan
    sched = np.full(7, 100.0)
    raise_at = np.array([250.0, 250.0, 50.0, 50.0, 50.0, 50.0, 50.0])
    raise_to = np.array([300.0, 300.0, 300.0, 110.0, 100.0, 100.0, 100.0])
    current = np.array([200.0, 200.0, 200.0, 300.0, 1000.0, 1000.0, 1000.0])
    last_max = np.array([150.0, 250.0, 700.0, 80.0, 90.0, 90.0, 150.0])
    last_min = np.array([50.0, 100.0, 600.0, 40.0, 40.0, 40.0, 40.0])
    hours = np.array([8.0, 8.0, 8.0, 8.0, 8.0, 1.0, 8.0]) * 3600.0
    old = scheduled_cpu(sched, raise_at, raise_to, current, False)
    assert np.array_equal(old, [300.0, 300.0, nan, nan, nan, nan, nan], equal_nan=True)
    new = scheduled_cpu(sched, raise_at, raise_to, current, False, last_max, last_min, hours)
    # 0: no raise under the request in force; 1: usage at it, raised; 2: a burst, to its
    # highest sample; 3: a raise let go (300 > 2.5 x 110, usage under the schedule);
    # 4: a drop to the forecast (1000 > 4 x 100, 8 hours left); 5: an hour left, the raise
    # is only let go to the schedule; 6: usage over the schedule, kept.
    assert np.array_equal(new, [nan, 300.0, 700.0, 110.0, 100.0, 100.0, nan], equal_nan=True)
    assert CPU_DROP_FACTOR * 100.0 < 1000.0 and CPU_DROP_HOURS <= 8 * 3600.0
    # A drop below the schedule: a request at 4.5 times the forecast of 20, none above it,
    # with 8 hours left in the segment; with less than CPU_DROP_HOURS left it is kept.
    low, short = scheduled_cpu(
        np.full(2, 100.0),
        np.full(2, 10.0),
        np.full(2, 20.0),
        np.full(2, 90.0),
        False,
        np.full(2, 15.0),
        np.full(2, 5.0),
        np.array([8 * 3600.0, CPU_DROP_HOURS - 900.0]),
    )
    assert low == 20.0 and np.isnan(short)
    # Unknown usage (a gap) never blocks a raise and never drops.
    gap = scheduled_cpu(
        sched, raise_at, raise_to, current, False, np.full(7, nan), np.full(7, nan), hours
    )
    assert np.array_equal(gap, old, equal_nan=True)
    # A forecast from the time of day (`slot_day`, `slot_week`) anticipates: its raise of a
    # request under 40% of it needs no usage; it never drops below the schedule, and a
    # raise is let go once usage stayed under the level it returns to (3, 4, 5: the peak
    # has passed; 6: usage at 150 over that level, kept).
    seasonal = np.ones(7, dtype=bool)
    ahead = scheduled_cpu(
        sched,
        raise_at,
        np.array([600.0, 300.0, 300.0, 110.0, 100.0, 100.0, 100.0]),
        current,
        False,
        last_max,
        last_min,
        hours,
        seasonal,
    )
    assert np.array_equal(ahead, [600.0, 300.0, 700.0, 110.0, 100.0, 100.0, nan], equal_nan=True)
    # A segment start moves to the schedule whatever the usage.
    start = scheduled_cpu(sched, raise_at, raise_to, current, True, last_max, last_min, hours)
    assert start[0] == 300.0 and start[4] == 100.0


def test_a_segment_start_never_sets_a_request_a_time_of_day_raise_takes_back():
    """seed.md N3: at the start of the segment after a daily spike the schedule is 100m,
    but the time-of-day forecast (pooled over +-30 minutes of past days) still sees the
    900m spike; its raise needs no usage, so dropping to 100m meant a raise back to 900m at
    the next decision. Under that forecast the segment start goes to the forecast; under
    another, or with the last interval unknown, it moves to the schedule as before."""
    nan = np.nan
    one = np.ones(1)
    args = (100.0 * one, 100.0 * one, 900.0 * one, 890.0 * one, True)
    usage = (100.0 * one, 100.0 * one, 10 * 3600.0 * one)
    seasonal = scheduled_cpu(*args, *usage, np.ones(1, dtype=bool))
    assert seasonal[0] == 900.0
    other = scheduled_cpu(*args, *usage, np.zeros(1, dtype=bool))
    gap = scheduled_cpu(*args, nan * one, nan * one, usage[2], np.ones(1, dtype=bool))
    assert other[0] == gap[0] == scheduled_cpu(*args)[0] == 100.0
    # 15 minutes on the forecast no longer sees the spike: the raise is let go.
    later = scheduled_cpu(
        100.0 * one, 100.0 * one, 103.0 * one, 900.0 * one, False, *usage, np.ones(1, dtype=bool)
    )
    assert later[0] == 103.0


def test_cpu_lets_go_mid_segment_where_usage_is_far_under_the_request():
    """The operator path passes the last interval and the time left in the segment
    (`scheduled_cpu`): a 1-core request over a container using 0.1 core with short
    0.15-core spikes comes down to about its forecast at noon, mid-segment (it was kept
    until the next segment before)."""

    def spiky(now: float) -> ContainerHistory:
        n = 3 * DAY_POINTS
        cpu = np.where(np.arange(n) % 6 == 0, 0.15, 0.1)
        cpu[-3:] = 0.1
        return ContainerHistory(cpu, np.full(n, float(GIB)), first_seen=now - 3 * 86400.0)

    noon = NOW + 12 * 3600.0
    r = recommend_target(
        RecommendParams(), {"app": spiky(noon)}, {"app": res(1000, GIB)}, None, noon
    )
    assert 140 <= r.suggestion.containers["app"].requests["cpu"] <= 1000 / CPU_DROP_FACTOR
    assert r.changed["app"]["cpu"] is True


def test_memory_headroom_and_recent_peak():
    """A flat 1 GiB container gets 5% headroom; one that peaked at 3 GiB two days ago
    keeps that peak (plus headroom) although its forecasts and the 6-hour ratchet have
    long let go of it."""
    cur = {"app": res(500, GIB)}
    flat = ContainerHistory(
        np.full(3 * DAY_POINTS, 0.5), np.full(3 * DAY_POINTS, float(GIB)), NOW - 3 * 86400.0
    )
    r = recommend_target(RecommendParams(), {"app": flat}, cur, None, NOW)
    mem = r.suggestion.containers["app"].requests["memory"]
    assert mem >= GIB * (1 + MEMORY_HEADROOM) and mem <= GIB * (1 + MEMORY_HEADROOM) + MIB
    n = 5 * DAY_POINTS
    m = np.full(n, float(GIB))
    m[n - 2 * DAY_POINTS - 12 : n - 2 * DAY_POINTS] = 3.0 * GIB  # an hour at 3 GiB, 2 days ago
    peaked = ContainerHistory(np.full(n, 0.5), m, NOW - 5 * 86400.0)
    r = recommend_target(RecommendParams(), {"app": peaked}, cur, None, NOW)
    assert r.suggestion.containers["app"].requests["memory"] >= 3.0 * GIB * (1 + MEMORY_HEADROOM)
    assert r.forecasts["app"]["memory"] < 1.5 * GIB  # the forecast itself let go
    # Older than the window: released.
    m2 = np.full(n, float(GIB))
    m2[: DAY_POINTS // 2] = 3.0 * GIB  # 4.5+ days ago
    old = ContainerHistory(np.full(n, 0.5), m2, NOW - 5 * 86400.0)
    r = recommend_target(RecommendParams(), {"app": old}, cur, None, NOW)
    assert r.suggestion.containers["app"].requests["memory"] < 1.5 * GIB


def test_a_kill_holds_its_floor_for_days():
    """What a kill teaches: the floor outlives a one-hour stabilization window."""
    st = apply_ooms(OOMState(), [NOW - 60], [1.5 * GIB], GIB, NOW, 3600.0)
    assert st.active(NOW + 3600) == st.floor > 0
    assert st.active(NOW - 60 + KILL_MEMORY - 1) == st.floor
    assert st.active(NOW - 60 + KILL_MEMORY) == 0
    # A longer stabilization window still wins.
    longer = apply_ooms(OOMState(), [NOW - 60], [], GIB, NOW, 2 * KILL_MEMORY)
    assert longer.until == NOW - 60 + 2 * KILL_MEMORY


def test_memory_holds_scale_with_the_modes_miss_probability():
    """The risk posture governs how long memory remembers a level: the default mode keeps
    the measured 6 h ratchet and 3-day kill memory, a mode with k times the misses holds
    1/k as long, and no hold outlives the 14 days of history."""
    q = {m: mode_quantile(m, "memory") for m in MODE_CPU_QUANTILES}
    assert memory_holds(q["balanced"]) == pytest.approx((DEFAULT_MEMORY_STABILIZATION, KILL_MEMORY))
    assert memory_holds(0.999) == memory_holds(q["balanced"])  # percentile 99.9 alike
    assert memory_holds(q["undershoot"]) == pytest.approx((6 * 3600 / 5, 3 * 86400 / 5))
    assert memory_holds(q["cost_optimized"]) == pytest.approx((6 * 3600 / 2.5, 3 * 86400 / 2.5))
    assert memory_holds(q["overshoot"]) == pytest.approx((20 * 6 * 3600, 14 * 86400))
    holds = [memory_holds(q[m]) for m in sorted(q, key=q.get)]
    assert holds == sorted(holds)
    with pytest.raises(ValueError, match="memory quantile"):
        memory_holds(1.0)


def test_memory_request_headroom_ratchet_and_recent_peak():
    """THE memory rule: headroom on the forecast, the highest target of the ratchet's
    window, never below the recent peak with headroom; NaN (not enough data) stays NaN."""
    h = 1.0 + MEMORY_HEADROOM
    t, kept = memory_request(np.array([4.0, 1.0, np.nan]), (), 0.0, 3600.0, np.full(3, np.nan))
    assert t[:2] == pytest.approx([4.0 * h, 1.0 * h]) and np.isnan(t[2])
    # 30 minutes later the forecasts dropped: held at the window's highest target.
    t, kept = memory_request(np.array([1.0, 1.0, 1.0]), kept, 1800.0, 3600.0, np.full(3, 0.5))
    assert t == pytest.approx([4.0 * h, 1.0 * h, 1.0 * h])
    # Past the window: released, except where the recent peak holds it up.
    peak = np.array([0.5, 3.0, 0.5])
    t, kept = memory_request(np.array([1.0, 1.0, 1.0]), kept, 3600.0 + 1.0, 3600.0, peak)
    assert t == pytest.approx([1.0 * h, 3.0 * h, 1.0 * h])
    assert [k for k, _ in kept] == [1800.0, 3601.0]
    off, none = memory_request(np.array([1.0]), ((0.0, np.array([9.0])),), 60.0, 0.0, [np.nan])
    assert off == pytest.approx([h]) and none == ()


def test_recent_peak_reads_the_last_three_days():
    y = np.full((2, 5 * DAY_POINTS), 1.0)
    y[0, -3 * DAY_POINTS - 1] = 9.0  # just outside the 3 days
    y[1, -3 * DAY_POINTS] = 9.0  # just inside
    y[1, -10:] = np.nan
    assert recent_peak(y, 300.0).tolist() == [1.0, 9.0]
    assert np.isnan(recent_peak(np.full((1, 4), np.nan), 300.0)).all()
    assert np.isnan(recent_peak(np.zeros((1, 0)), 300.0)).all()


def test_operator_and_replay_run_one_memory_rule():
    """The operator's scalar path (state in `OOMState.recent`) gives, decision by
    decision, what the vectorised rule the replay calls gives for a fleet."""
    from foresize.core.recommend.finish import memory_target

    rng = np.random.default_rng(14)
    n, steps = 3, 40
    params = RecommendParams(memory=ResourceModel("cost_optimized"))
    window = params.memory_holds()[0]
    states = [OOMState() for _ in range(n)]
    kept: tuple = ()
    usage = rng.uniform(0.5, 2.0, (n, DAY_POINTS)) * GIB
    for k in range(steps):
        now = NOW + 900.0 * k
        usage = np.concatenate([usage[:, 3:], rng.uniform(0.5, 2.0, (n, 3)) * GIB], axis=1)
        fc = rng.uniform(0.5, 4.0, n) * GIB
        fleet, kept = memory_request(fc, kept, now, window, recent_peak(usage, 300.0))
        for i in range(n):
            hist = ContainerHistory(np.full(DAY_POINTS, 0.5), usage[i], NOW - 86400.0)
            one, states[i] = memory_target(float(fc[i]), states[i], hist, params, now)
            assert one == pytest.approx(fleet[i], rel=1e-12)


def test_a_riskier_mode_releases_memory_and_forgets_a_kill_sooner():
    """At undershoot (five times the default's misses) a drop is released after 1.2 h,
    not 6 h, and a kill's floor holds 0.6 days, not 3: riskier is also cheaper."""
    cur = {"app": res(500, GIB)}
    high = flat_history(cpu=2.0, mem=3 * GIB)
    low = flat_history(cpu=0.2, mem=500 * MIB)
    with_headroom = int(np.ceil(500 * (1 + MEMORY_HEADROOM))) * MIB
    for mode, held_at_2h in (("balanced", True), ("undershoot", False)):
        p = RecommendParams(memory=ResourceModel(mode))
        r1 = recommend_target(p, {"app": high}, cur, None, NOW)
        high_mem = r1.suggestion.containers["app"].requests["memory"]
        r2 = recommend_target(p, {"app": low}, cur, r1.oom_state, NOW + 2 * 3600)
        mem = r2.suggestion.containers["app"].requests["memory"]
        assert mem == (high_mem if held_at_2h else with_headroom), mode
    under = RecommendParams(memory=ResourceModel("undershoot"))
    killed = replace(flat_history(mem=GIB), oom_times=[NOW - 60], oom_usage=[1.5 * GIB])
    r = recommend_target(under, {"app": killed}, cur, None, NOW)
    assert r.oom_state["app"].until == pytest.approx(NOW - 60 + 0.6 * 86400)
    r = recommend_target(RecommendParams(), {"app": killed}, cur, None, NOW)
    assert r.oom_state["app"].until == pytest.approx(NOW - 60 + KILL_MEMORY)


# --- the CPU day schedule carried between calls ---------------------------------------------


def _fleet_history(now: float, seed: int, peak: tuple[int, int]) -> ContainerHistory:
    """9 days of 5-minute CPU (noisy, a daily peak) ending at `now`; the same absolute
    times give the same samples whatever `now`, so later calls see the history grown."""
    start = NOW - 12 * 86400.0
    t = np.arange(start, now + 1.0, 300.0)
    rng = np.random.default_rng(seed)
    noise = rng.uniform(0.0, 0.3, size=int((NOW + 3 * 86400.0 - start) // 300.0) + 2)
    hour = (t % 86400.0) / 3600.0
    cpu = np.where((hour >= peak[0]) & (hour < peak[1]), 1.0, 0.2) + noise[: len(t)]
    cpu, t = cpu[-9 * DAY_POINTS :], t[-9 * DAY_POINTS :]
    return ContainerHistory(cpu, np.full(len(cpu), float(GIB)), first_seen=float(t[0]))


def _fleet(now: float, schedules=None, backfill: str | None = None) -> list[TargetRequest]:
    peaks = {"a": {"web": (8, 16), "side": (0, 4)}, "b": {"api": (13, 17)}}
    reqs = []
    for seed, (target, containers) in enumerate(peaks.items()):
        hist = {
            c: _fleet_history(now, seed * 10 + i, pk)
            for i, (c, pk) in enumerate(containers.items())
        }
        if backfill in hist:
            # A sample of yesterday changed after the schedule was computed (late data).
            cpu = hist[backfill].cpu.copy()
            cpu[-DAY_POINTS * 2] += 5.0
            hist[backfill] = replace(hist[backfill], cpu=cpu)
        current = {c: res(500, GIB) for c in containers}
        carried = None if schedules is None else schedules.get(target, {})
        reqs.append(
            TargetRequest(RecommendParams(uid=target), hist, current, schedule_state=carried)
        )
    return reqs


def _outcome(results) -> str:
    return repr(
        [(r.suggestion.containers, r.forecasts, r.models, r.quantiles, r.changed) for r in results]
    )


def test_a_carried_day_schedule_is_reused_within_the_day_and_equals_a_fresh_one():
    """The CPU day schedule changes once a day: a call carrying the previous call's
    schedules reuses them while the day and the history it reads are the same, recomputes
    them on a new day or when that history changed, and always gives what a call without
    carried schedules gives."""
    morning, noon, tomorrow = NOW + 2 * 3600.0, NOW + 11 * 3600.0, NOW + 86400.0 + 2 * 3600.0
    first = recommend_batch(_fleet(morning, schedules={}), morning)
    assert _outcome(first) == _outcome(recommend_batch(_fleet(morning), morning))
    assert all(r.schedule_state is None for r in recommend_batch(_fleet(morning), morning))
    carried = {"a": first[0].schedule_state, "b": first[1].schedule_state}
    assert set(carried["a"]) == {"web", "side"} and set(carried["b"]) == {"api"}

    # Later the same day, the history grown: reused, and the same as a fresh computation.
    later = recommend_batch(_fleet(noon, schedules=carried), noon)
    assert later[0].schedule_state["web"] is carried["a"]["web"]
    assert later[1].schedule_state["api"] is carried["b"]["api"]
    assert _outcome(later) == _outcome(recommend_batch(_fleet(noon), noon))

    # A sample the schedule reads changed: that container's schedule is recomputed.
    late = recommend_batch(_fleet(noon, schedules=carried, backfill="web"), noon)
    assert late[0].schedule_state["web"] is not carried["a"]["web"]
    assert late[0].schedule_state["side"] is carried["a"]["side"]
    assert _outcome(late) == _outcome(recommend_batch(_fleet(noon, backfill="web"), noon))

    # The next day: every schedule is recomputed and equals a fresh one.
    nxt = recommend_batch(_fleet(tomorrow, schedules=carried), tomorrow)
    fresh = recommend_batch(_fleet(tomorrow, schedules={}), tomorrow)
    assert _outcome(nxt) == _outcome(recommend_batch(_fleet(tomorrow), tomorrow))
    for ti, target in enumerate(("a", "b")):
        for name, old in carried[target].items():
            new = nxt[ti].schedule_state[name]
            assert new is not old and new.key != old.key
            np.testing.assert_array_equal(new.level, fresh[ti].schedule_state[name].level)
            np.testing.assert_array_equal(new.opens, fresh[ti].schedule_state[name].opens)
    # The noise makes each day's schedule differ: a stale one would show.
    assert any(
        not np.array_equal(nxt[0].schedule_state[n].level, carried["a"][n].level)
        for n in ("web", "side")
    )


_levels = st.one_of(st.just(np.nan), st.floats(1.0, 1e4), st.sampled_from([100.0, 250.0, 400.0]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(*[_levels] * 7, st.floats(0.0, 16 * 3600.0), st.booleans()), min_size=1),
    st.booleans(),
)
def test_scheduled_cpu_only_picks_among_its_inputs(rows, start):
    """Whatever the mix of known and unknown values, the CPU rule's target is NaN (keep)
    or one of the levels it was given (the schedule, the forecast, the larger of the two,
    the last interval's highest sample): it never invents a request. Unknown usage (a
    gap) gives the rule's answer without the last interval."""
    a = np.array([r[:8] for r in rows], dtype=np.float64).T
    sched, raise_at, raise_to, current, last_max, last_min, _, left = a
    last_min = np.fmin(last_min, last_max)
    seasonal = np.array([r[8] for r in rows])
    out = scheduled_cpu(
        sched, raise_at, raise_to, current, start, last_max, last_min, left, seasonal
    )
    allowed = np.stack([sched, raise_to, np.fmax(sched, raise_to), last_max])
    picked = np.isnan(out) | (np.isclose(allowed, out).any(axis=0))
    assert picked.all()
    unknown = np.full(len(rows), np.nan)
    gap = scheduled_cpu(sched, raise_at, raise_to, current, start, unknown, unknown, left, seasonal)
    assert np.array_equal(
        gap, scheduled_cpu(sched, raise_at, raise_to, current, start), equal_nan=True
    )


def test_interval_range_reads_known_samples_only():
    """The last interval's highest and lowest sample per container, gaps skipped; a
    container with no sample in it is unknown (NaN), never 0 or infinite."""
    nan = np.nan
    hi, lo = interval_range(np.array([[1.0, 3.0, 2.0], [nan, 5.0, nan], [nan, nan, nan]]))
    assert np.array_equal(hi, [3.0, 5.0, nan], equal_nan=True)
    assert np.array_equal(lo, [1.0, 5.0, nan], equal_nan=True)
    empty_hi, empty_lo = interval_range(np.zeros((2, 0)))
    assert np.isnan(empty_hi).all() and np.isnan(empty_lo).all()
