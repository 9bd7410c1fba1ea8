"""Issue 24 part 4: a reason for every decision (`foresize.core.recommend.explain`).

The recommendation records its steps as it computes each request; the chain of a
resource ends at the request the target's status publishes. Each clamp is checked on its
own: a clamp that moved the number without a step would leave the chain ending elsewhere.
The demo and `foresize explain` are in tests/front/cli/test_explain_cli.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from foresize.core.api.hysteresis import Threshold
from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.model import ResourceRequirements
from foresize.core.cluster.target_fields import ContainerPolicy, ResourcePolicy
from foresize.core.recommend.histories import MODEL_STEP, ContainerHistory
from foresize.core.recommend.oom import OOMState
from foresize.core.recommend.params import RecommendParams, ResourceModel
from foresize.core.recommend.target import recommend_target

DAY = 86400.0
NOW = 30 * DAY
GIB = 2**30


def _history(cpu_cores: float = 0.3, mem_bytes: float = 600 * MIB, days: float = 3.0, **kw):
    n = int(days * DAY / MODEL_STEP)
    rng = np.random.default_rng(7)
    cpu = cpu_cores * (1 + 0.1 * rng.standard_normal(n)).clip(0.5)
    mem = mem_bytes * (1 + 0.01 * rng.standard_normal(n))
    return ContainerHistory(cpu, mem, first_seen=NOW - days * DAY, **kw)


def _published(result, current):
    """What `recommend.suggestions` publishes: a move the hysteresis judged significant
    takes the new value, others keep the one in force."""
    out = {}
    for name, cs in result.suggestion.containers.items():
        out[name] = {
            r: (cs.requests[r] if result.changed[name].get(r) else current[name].requests[r])
            for r in (CPU, MEMORY)
            if r in cs.requests
        }
    return out


def _chain_ends_at_request(result, current) -> None:
    for name, req in _published(result, current).items():
        ex = result.steps[name]
        for r, v in req.items():
            assert ex.of(r), f"{name} {r}: no step"
            assert ex.last(r) == v, (name, r, v, [(s.step, s.value) for s in ex.of(r)])


def _run(params, current, history=None, oom=None):
    hist = {n: history or _history() for n in current}
    result = recommend_target(params, hist, current, oom, NOW)
    _chain_ends_at_request(result, current)
    return result


def _steps(result, name="app", resource=CPU):
    return [s.step for s in result.steps[name].of(resource)]


CURRENT = {"app": ResourceRequirements({CPU: 1000, MEMORY: 2 * GIB}, {MEMORY: 2 * GIB})}


def test_the_plain_chain_names_history_forecast_and_rounding():
    result = _run(RecommendParams(), CURRENT)
    assert _steps(result)[:3] == ["history", "forecast", "schedule"]
    assert _steps(result, resource=MEMORY)[:3] == ["history", "forecast", "headroom"]
    forecast = result.steps["app"].of(CPU)[1]
    assert "model " in forecast.why and "quantile 0.98" in forecast.why
    assert "backtest error" in forecast.why or "not backtested" in forecast.why
    assert "3.0d of history, no gaps" in result.steps["app"].of(CPU)[0].why


def test_history_gaps_are_named():
    h = _history()
    h.cpu[100:112] = np.nan  # one hour missing
    result = _run(RecommendParams(), CURRENT, h)
    assert "1 gap (1.0h missing)" in result.steps["app"].of(CPU)[0].why


@pytest.mark.parametrize(
    ("policy", "resource", "step"),
    [
        (ResourcePolicy(lower=800), CPU, "lower_bound"),
        (ResourcePolicy(upper=100), CPU, "upper_bound"),
        (ResourcePolicy(lower=GIB), MEMORY, "lower_bound"),
        (ResourcePolicy(upper=300 * MIB), MEMORY, "upper_bound"),
    ],
)
def test_each_bound_that_binds_is_a_step(policy, resource, step):
    bounds = ContainerPolicy("app", **{resource: policy})
    result = _run(RecommendParams(containers=(bounds,)), CURRENT)
    assert step in _steps(result, resource=resource)


def test_the_limit_in_force_is_a_step():
    """Without limit.ratio a request never exceeds the limit in force."""
    current = {"app": ResourceRequirements({CPU: 100, MEMORY: 2 * GIB}, {CPU: 150})}
    result = _run(RecommendParams(), current, _history(cpu_cores=1.0))
    assert "limit" in _steps(result)
    assert result.steps["app"].last(CPU) == 150


def test_the_buffer_the_oom_floor_and_the_hysteresis_are_steps():
    params = RecommendParams(
        cpu=ResourceModel(buffer_percentage=20.0),
        scale_down={CPU: Threshold("percent", 99.0), MEMORY: Threshold("percent", 0.0)},
    )
    oom = {"app": OOMState(floor=3 * GIB, until=NOW + DAY, count=2)}
    current = {"app": ResourceRequirements({CPU: 1000, MEMORY: 2 * GIB})}
    result = _run(params, current, oom=oom)
    assert "buffer" in _steps(result)
    assert _steps(result)[-1] == "hysteresis"  # a 99% scale-down threshold holds 1 core
    assert result.steps["app"].last(CPU) == 1000
    assert "oom_floor" in _steps(result, resource=MEMORY)
    assert result.steps["app"].last(MEMORY) == 3 * GIB


def test_the_qos_class_is_a_step():
    """A Burstable pod whose every request would land on its limit keeps one request 1m
    under it: the QoS rule moved that number, and says so."""
    current = {
        "app": ResourceRequirements({CPU: 100, MEMORY: 100 * MIB}, {CPU: 200, MEMORY: 200 * MIB})
    }
    result = _run(RecommendParams(), current, _history(cpu_cores=1.0, mem_bytes=400 * MIB))
    assert "qos" in _steps(result) + _steps(result, resource=MEMORY)


def test_not_enough_history_is_a_step():
    result = _run(RecommendParams(min_lookback_to_scale=7 * DAY), CURRENT)
    assert _steps(result) == ["history", "lookback"]
    assert "min_lookback_to_scale (7.0d)" in result.steps["app"].of(CPU)[1].why
