"""The policy hierarchy in the simulator: a scenario's `policies`, `namespaces` and a
workload's `policy` reach the pass (the same `plan_pass` as the kube shell): the cluster
default's `in_place` resizes, a workload's `batch` (recreate) evicts, a namespace label
picks its policy, and the simulated targets set only what differs from the options'
defaults so the levels above show through; `status.policy` names every source."""

from __future__ import annotations

from typing import Any

import pytest

from foresize.core.api.quantity import MIB
from foresize.core.errors import ForesizeError
from foresize.shells.sim.scenario import parse_scenario
from support.sim import evicted, make_sim, operator, suggest, workload

POLICIES = [
    {"name": "default", "preset": "performance"},
    {"name": "recycle", "preset": "batch"},
]


def run(**top: Any) -> tuple[Any, Any]:
    sim = make_sim(
        [workload("web", replicas=2), workload("api", replicas=2, **top.pop("api", {}))],
        cpu="8",
        memory="16Gi",
        **top,
    )
    op = operator(sim, "in_place_or_recreate")  # the options' default: not on the targets
    for name in ("web", "api"):  # memory grows: `recreate` evicts for it
        suggest(op, name, app=({"cpu": 600, "memory": 700 * MIB}, {}))
    sim.run(300)
    return sim, op


def source(sim: Any, name: str, field: str = "vertical.update_policy.update_mode") -> str:
    status = sim.target_status[("AIScaleTarget", "default", name)]
    return status["policy"]["fields"][field]["source"]


def test_the_cluster_default_and_a_workload_policy_decide_resize_or_eviction():
    sim, _ = run(policies=POLICIES, api={"policy": "recycle"})
    assert not evicted(sim, "Pod/default/web-")  # performance: in place only
    assert evicted(sim, "Pod/default/api-")  # batch: recreate
    assert source(sim, "web") == "cluster/policy:default/preset:performance"
    assert source(sim, "api") == "workload/policy:recycle/preset:batch"
    assert source(sim, "web", "vertical.mode") == "target"


def test_a_namespace_label_picks_the_policy_of_every_target_in_it():
    sim, _ = run(
        policies=POLICIES,
        namespaces=[{"name": "default", "labels": {"foresize.io/policy": "recycle"}}],
    )
    assert evicted(sim, "Pod/default/web-") and evicted(sim, "Pod/default/api-")
    assert source(sim, "web") == "namespace/policy:recycle/preset:batch"


def test_the_target_s_own_field_wins_over_every_policy():
    """An update mode the options set explicitly is the target's own: `batch` above it
    (the namespace's) does not make it evict."""
    sim = make_sim(
        [workload("web", replicas=2)],
        cpu="8",
        memory="16Gi",
        policies=POLICIES,
        namespaces=[{"name": "default", "labels": {"foresize.io/policy": "recycle"}}],
    )
    op = operator(sim, "in_place")
    suggest(op, "web", app=({"cpu": 600, "memory": 700 * MIB}, {}))
    sim.run(300)
    assert not evicted(sim, "Pod/default/web-")
    assert source(sim, "web") == "target"
    assert source(sim, "web", "model.mode") == "namespace/policy:recycle/preset:batch"


def test_a_cycle_falls_back_to_the_level_above_with_a_condition():
    """The workload names `a`, which starts from `b`, which starts from `a`: left out; the
    cluster default (performance: in place) still applies."""
    cycle = [{"name": "a", "policy": "b", "preset": "batch"}, {"name": "b", "policy": "a"}]
    sim, _ = run(policies=[POLICIES[0], *cycle], api={"policy": "a"})
    assert not evicted(sim, "Pod/default/api-")
    assert source(sim, "api") == "cluster/policy:default/preset:performance"
    status = sim.target_status[("AIScaleTarget", "default", "api")]
    (condition,) = [c for c in status["conditions"] if c["type"] == "PolicyResolved"]
    assert condition["status"] == "False" and condition["reason"] == "PolicyCycle"
    assert "a -> b -> a" in condition["message"]


def test_without_a_hierarchy_the_targets_keep_the_options_and_no_policy_status():
    sim, _ = run()
    assert not evicted(sim, "Pod/default/")  # in_place_or_recreate resizes in place here
    assert "policy" not in sim.target_status[("AIScaleTarget", "default", "web")]


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"policies": [{"name": "x", "preset": "cheap"}]}, "policies[0].preset: must be one of"),
        ({"policies": [{"name": "x"}, {"name": "x"}]}, "policies[1].name: duplicate policy"),
        ({"namespaces": [{"name": "Shop"}]}, "namespaces[0].name: 'Shop' is not a valid"),
        ({"namespaces": [{"name": "s", "extra": 1}]}, "namespaces[0]"),
    ],
)
def test_bad_policies_in_a_scenario_name_the_field(top: dict[str, Any], message: str):
    data = {
        "nodes": [{"name": "n", "cpu": "1", "memory": "1Gi"}],
        "workloads": [workload("web")],
        **top,
    }
    with pytest.raises(ForesizeError) as err:
        parse_scenario(data, "<test>")
    assert message in str(err.value)


SCENARIO = """\
nodes: [{name: n, cpu: "4", memory: 8Gi}]
workloads:
  - name: web
    replicas: 2
    policy: team
    containers:
      - {name: app, requests: {cpu: 500m, memory: 512Mi}, usage: {cpu: 100m, memory: 200Mi}}
"""


def test_simulate_policies_file_runs_under_it_and_bad_input_names_file_and_field(tmp_path):
    from typer.testing import CliRunner

    from foresize.front.cli import app

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    args = ["simulate", "--scenario", str(scenario), "--duration", "20m", "-o", "json"]
    # The workload names a policy neither the scenario nor --policies defines.
    missing = CliRunner().invoke(app, args)
    assert isinstance(missing.exception, ForesizeError)
    assert "workloads[0].policy: ClusterAIScalePolicy 'team'" in str(missing.exception)
    policies = tmp_path / "policies.yaml"
    policies.write_text(
        "apiVersion: foresize.io/v1\nkind: ClusterAIScalePolicy\nmetadata: {name: team}\n"
        "spec: {preset: cost}\n"
    )
    ran = CliRunner().invoke(app, [*args, "--policies", str(policies)])
    assert ran.exit_code == 0, (ran.output, ran.exception)
    policies.write_text(policies.read_text().replace("cost", "cheap"))
    bad = CliRunner().invoke(app, [*args, "--policies", str(policies)])
    assert isinstance(bad.exception, ForesizeError)
    assert f"{policies}:4: spec.preset: must be one of" in str(bad.exception)
