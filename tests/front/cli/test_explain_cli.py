"""Issue 24 part 4: `foresize explain` and the steps on the demo.

On the demo every container's chain of steps ends at the request written into status;
`foresize explain` prints that chain from a simulator run (`--scenario --at`) and from a
live API server (`--server`), with `-o json` in the issue's shape. The rules' steps one
by one: tests/core/recommend/test_explain_steps.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import textwrap

import pytest
from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.core.recommend.explain import explain_status
from foresize.front.cli import app


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
    web = sim.target_status[("AIScaleTarget", "shop", "web")]["explanation"]["containers"][0]
    hpa = [s for s in web["steps"] if s["step"] == "hpa"]
    assert [s["resource"] for s in hpa] == ["cpu"], "the HPA's resource is left alone: a step"
    assert "HorizontalPodAutoscaler web" in hpa[0]["why"]
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
