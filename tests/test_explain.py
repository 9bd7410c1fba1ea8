"""Issue 24 part 4: a reason for every decision.

The recommendation records its steps as it computes each request
(`foresize.core.recommend.explain`); the chain of a resource ends at the request the
target's status publishes. Checked on the demo (every container of every target), for
each clamp on its own (a clamp that moved the number without a step would leave the
chain ending elsewhere), and through `foresize explain` on a simulator run and a live
API server.
"""

from __future__ import annotations

import asyncio
import json
import math
import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

from foresize.core.api.hysteresis import Threshold
from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.model import ResourceRequirements
from foresize.core.cluster.target import ContainerPolicy, ResourcePolicy
from foresize.core.errors import ForesizeError
from foresize.core.recommend.explain import explain_status
from foresize.core.recommend.target import (
    MODEL_STEP,
    ContainerHistory,
    OOMState,
    RecommendParams,
    ResourceModel,
    recommend_target,
)
from foresize.front.cli import app

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


@pytest.fixture(scope="module")
def demo_status():
    """The demo's targets' status after 25 simulated hours (past the 24 h lookback)."""
    from foresize.shells.sim.runner import build, run_for
    from foresize.shells.sim.scenario import load_scenario

    sim = build(load_scenario("demo"), policy="foresize")
    run_for(sim, 25 * 3600.0)
    return sim


def test_on_the_demo_every_containers_steps_end_at_the_request_written(demo_status):
    sim = demo_status
    explained = 0
    for (kind, ns, name), status in sim.target_status.items():
        if kind != "AIScaleTarget" or "vertical_suggestion" not in status:
            continue
        doc = explain_status(status, f"{ns}/{name}")
        for cname, entry in doc["containers"].items():
            for resource, value in entry["request"].items():
                chain = [s for s in entry["steps"] if s["resource"] == resource]
                assert chain, (name, cname, resource)
                assert chain[-1]["value"] == value, (name, cname, resource, chain)
                explained += 1
    assert explained >= 8  # web, api (2 containers), cache: cpu and memory each
    events = [e for e in sim.events if e.kind == "Event" and e.reason == "SuggestionChanged"]
    assert events, "a changed suggestion is an Event"


SCENARIO = textwrap.dedent(
    """\
    name: explain-one
    seed: 3
    nodes:
      - {name: n, count: 1, cpu: "4", memory: 8Gi}
    workloads:
      - kind: Deployment
        name: api
        namespace: shop
        replicas: 1
        containers:
          - name: api
            requests: {cpu: "1", memory: 1Gi}
            limits: {memory: 1Gi}
            usage:
              cpu: {generator: diurnal, base: 200m, amplitude: 0.3, peak_hour: 13, noise: 0.05}
              memory: {generator: constant, base: 300Mi, noise: 0.02}
    """
)


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("explain") / "one.yaml"
    path.write_text(SCENARIO)
    return str(path)


def test_explain_json_on_a_simulator_run(scenario_file):
    out = CliRunner().invoke(
        app, ["explain", "--scenario", scenario_file, "--at", "25h", "shop/api", "-o", "json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc) == ["containers"]
    entry = doc["containers"]["api"]
    assert set(entry) == {"request", "steps"}
    assert set(entry["request"]) == {"cpu", "memory"}
    assert all(isinstance(v, int) for v in entry["request"].values())
    for step in entry["steps"]:
        assert set(step) == {"step", "resource", "value", "why"}
        assert step["resource"] in ("cpu", "memory")
    for resource, value in entry["request"].items():
        chain = [s for s in entry["steps"] if s["resource"] == resource]
        assert chain[-1]["value"] == value
    table = CliRunner().invoke(
        app, ["explain", "--scenario", scenario_file, "--at", "25h", "shop/api", "api"]
    )
    assert table.exit_code == 0, table.output
    assert "forecast" in table.stdout and "history" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["shop"], "NAMESPACE/TARGET"),
        (["shop/nope"], "no target shop/nope"),
        (["shop/api", "--at", "soon"], "--at"),
        (["shop/api", "-o", "xml"], "--output"),
        (["shop/api", "--at", "2h"], "no suggestion yet"),
        (["shop/api", "nope", "--at", "25h"], "container 'nope'"),
    ],
)
def test_bad_input_names_the_field(scenario_file, args, message):
    out = CliRunner().invoke(app, ["explain", "--scenario", scenario_file, *args])
    assert isinstance(out.exception, ForesizeError), (args, out.exception)
    assert message in str(out.exception)


def test_explain_status_without_an_explanation_names_the_field():
    status = {
        "vertical_suggestion": {"uid": "x", "containers": [{"name": "a", "requests": {"cpu": "1"}}]}
    }
    with pytest.raises(ForesizeError, match=r"status\.explanation"):
        explain_status(status, "ns/t")


async def test_explain_reads_a_live_targets_status(scenario_file):
    """The live path: `foresize explain --server URL` GETs the AIScaleTarget and prints
    the same document as the simulator's status it holds."""
    from foresize.front.cli.explain import simulated_status
    from foresize.testing.apiserver import StrictApiServer

    status = simulated_status(scenario_file, 25 * 3600.0, "shop", "api")
    server = StrictApiServer(rbac=None)  # the user's own read, not the operator's roles
    await server.start()
    try:
        server.seed(
            {
                "apiVersion": "foresize.io/v1",
                "kind": "AIScaleTarget",
                "metadata": {"name": "api", "namespace": "shop"},
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "api"},
                    "vertical": {"mode": "recommendation"},
                },
                "status": json.loads(json.dumps(status)),
            }
        )
        runner = CliRunner()
        out = await asyncio.to_thread(
            runner.invoke, app, ["explain", "--server", server.url, "shop/api", "-o", "json"]
        )
        missing = await asyncio.to_thread(
            runner.invoke, app, ["explain", "--server", server.url, "shop/gone"]
        )
    finally:
        await server.stop()
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == explain_status(status, "shop/api")
    assert isinstance(missing.exception, ForesizeError)
    assert "AIScaleTarget shop/gone: not found" in str(missing.exception)
    assert math.isfinite(json.loads(out.stdout)["containers"]["api"]["request"]["cpu"])
