"""Scenario files: errors name the file, the path inside it and the problem; the demo and
the CLI work end to end."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app
from foresize.shells.sim.scenario import builtin_scenarios, load_scenario, parse_duration
from support.sim import container, workload

NODES = [{"name": "n", "cpu": "2", "memory": "4Gi"}]


def write(tmp_path, data) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def error_for(tmp_path, data) -> str:
    path = write(tmp_path, data)
    with pytest.raises(ForesizeError) as exc:
        load_scenario(path)
    return str(exc.value)


def test_bad_quantity_names_file_line_and_path(tmp_path):
    # Audit reliability 4b: errors named the field path but not the line.
    ws = [workload("a"), workload("b"), workload("c", containers=[container(req={"cpu": "lots"})])]
    msg = error_for(tmp_path, {"nodes": NODES, "workloads": ws})
    text = (tmp_path / "scenario.yaml").read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if "lots" in t)
    assert msg.startswith(f"{tmp_path / 'scenario.yaml'}:{line}: ")
    assert "workloads[2].containers[0].requests.cpu" in msg and "not a quantity" in msg


@pytest.mark.parametrize(
    ("mutate", "path", "problem"),
    [
        (lambda d: d["workloads"][0].update(kind="CronThing"), "workloads[0].kind", "unknown kind"),
        (lambda d: d["workloads"][0].update(replicaz=3), "workloads[0].replicaz", "unknown field"),
        (
            lambda d: d["workloads"][0]["containers"][0]["usage"].update(
                cpu={"generator": "sine", "base": 1}
            ),
            "workloads[0].containers[0].usage.cpu.generator",
            "unknown generator",
        ),
        (
            lambda d: d["workloads"][0]["containers"][0]["usage"].update(
                memory={"generator": "leak", "base": "1Gi"}
            ),
            "workloads[0].containers[0].usage.memory.growth_per_hour",
            "required",
        ),
        (
            lambda d: d["workloads"][0]["containers"][0]["usage"].update(
                cpu={"generator": "trace", "file": "missing.csv"}
            ),
            "workloads[0].containers[0].usage.cpu.file",
            "no such file",
        ),
        (lambda d: d["nodes"][0].pop("memory"), "nodes[0].memory", "required"),
        (lambda d: d.update(nodes=[]), "nodes", "at least one node"),
        (
            lambda d: d.update(pdbs=[{"name": "p", "selector": {"app": "a"}}]),
            "pdbs[0]",
            "exactly one of min_available and max_unavailable",
        ),
        (
            lambda d: d.update(
                hpas=[{"name": "h", "target": {"name": "zzz"}, "max_replicas": 3, "metrics": []}]
            ),
            "hpas[0].target",
            "no workload Deployment/default/zzz",
        ),
        (
            lambda d: d["workloads"][0].update(readiness_delay="soon"),
            "workloads[0].readiness_delay",
            "not a duration",
        ),
        # Names the API server refuses (a workload's name is an RFC 1123 subdomain, its
        # namespace an RFC 1123 label).
        (
            lambda d: d["workloads"][0].update(name="Web_Bad!"),
            "workloads[0].name",
            "'Web_Bad!' is not a valid name: a lowercase RFC 1123 subdomain",
        ),
        (
            lambda d: d["workloads"][0].update(name="a" * 300),
            "workloads[0].name",
            "a 300-character string is not a valid name: must be no more than 253 characters",
        ),
        (
            lambda d: d["workloads"][0].update(namespace="Shop_X"),
            "workloads[0].namespace",
            "'Shop_X' is not a valid namespace: a lowercase RFC 1123 label",
        ),
        (
            lambda d: d["workloads"][0].update(namespace="s" * 64),
            "workloads[0].namespace",
            "a 64-character string is not a valid namespace: must be no more than 63",
        ),
    ],
)
def test_scenario_mistakes_are_reported_with_their_path(tmp_path, mutate, path, problem):
    data = {"nodes": [dict(n) for n in NODES], "workloads": [workload("a")]}
    mutate(data)
    msg = error_for(tmp_path, data)
    assert re.search(rf"scenario\.yaml:\d+: {re.escape(path)}: ", msg) and problem in msg, msg


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("nodes:\n  - name: n\n    cpu: [1\n")
    with pytest.raises(ForesizeError, match=r"broken.yaml:\d+: not valid YAML"):
        load_scenario(str(path))
    with pytest.raises(ForesizeError, match="no such scenario file"):
        load_scenario("does-not-exist")


def test_builtin_demo_loads_and_durations_parse():
    assert "demo" in builtin_scenarios()
    sc = load_scenario("demo")
    kinds = {w.kind for w in sc.workloads}
    assert kinds == {"Deployment", "StatefulSet", "DaemonSet", "Job"}
    assert sc.hpas and sc.pdbs and len(sc.nodes) >= 3
    assert parse_duration("7d") == 7 * 86400 and parse_duration("90m") == 5400
    assert parse_duration(30) == 30.0
    assert parse_duration("1h30m") == 5400 and parse_duration("2d12h") == 60 * 3600


def test_simulate_cli_json_keys():
    runner = CliRunner()
    result = runner.invoke(
        app, ["simulate", "--duration", "3h", "--json", "--seed", "5", "--policy", "static"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["scenario"] == "demo" and out["policy"] == "static"
    assert out["duration_hours"] == 3
    keys = {
        "cpu_requested_core_hours",
        "cpu_used_core_hours",
        "memory_requested_gib_hours",
        "memory_used_gib_hours",
        "oom_kills",
        "throttled_seconds",
        "evictions",
        "resizes",
        "pending_pod_hours",
        "stalls",
        "breaker_openings",
        "preemptions",
    }
    for row in out["workloads"]:
        assert keys | {"name"} <= set(row)
    assert keys <= set(out["totals"])
    assert out["totals"]["cpu_requested_core_hours"] == pytest.approx(
        sum(r["cpu_requested_core_hours"] for r in out["workloads"]), rel=1e-6
    )
    assert out["totals"]["cpu_used_core_hours"] > 0


def test_simulate_cli_writes_the_event_log(tmp_path):
    out = tmp_path / "events.jsonl"
    result = CliRunner().invoke(
        app, ["simulate", "-d", "1h", "--no-progress", "--events", str(out)]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and set(lines[0]) == {"time", "kind", "object", "reason", "message", "details"}
    assert any(e["kind"] == "PodScheduled" for e in lines)
    assert "workload" in result.stdout  # the table


def test_simulate_cli_reports_user_errors(tmp_path, capsys, monkeypatch):
    from foresize.front.cli import main

    bad = write(tmp_path, {"nodes": NODES, "workloads": [workload("a", replicas=-1)]})
    for argv, needle in (
        (["simulate", "--scenario", bad], "workloads[0].replicas: must be at least 0"),
        (["simulate", "--duration", "forever"], "--duration: 'forever' is not a duration"),
        (["simulate", "--policy", "magic"], "unknown policy 'magic'"),
        (["simulate", "--seed", "-1"], "--seed: must be a non-negative integer"),
    ):
        monkeypatch.setattr("sys.argv", ["foresize", *argv])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and needle in err and "Traceback" not in err


def test_bench_sim_cli_json():
    runner = CliRunner()
    args = ["bench", "sim", "--json", "--duration", "1h", "--repeats", "1"]
    result = runner.invoke(app, [*args, "--nodes", "5", "--pods", "100"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"nodes", "pods", "simulated_hours", "wall_seconds_median"} <= set(out)
    assert out["nodes"] == 5 and out["pods"] == 100 and out["simulated_hours"] == 1
    assert out["simulated_hours_per_wall_second"] > 0
    assert out["pods_running_at_end"] > 0


def test_registered_policy_is_installed_into_the_run():
    from foresize.shells.sim.policies import POLICIES, available_policies, register_policy
    from foresize.shells.sim.runner import simulate

    ticks: list[float] = []

    def install(sim) -> None:
        sim.every(600, lambda s, now: ticks.append(now))

    register_policy("test-ticks", install)
    try:
        assert "test-ticks" in available_policies() and "static" in available_policies()
        _, summary = simulate(load_scenario("demo"), duration=3600, policy="test-ticks")
        assert summary["policy"] == "test-ticks"
        assert ticks == [0, 600, 1200, 1800, 2400, 3000, 3600]
    finally:
        POLICIES.pop("test-ticks", None)


def test_simulate_defaults_to_the_foresize_policy():
    """The main job shows Foresize at work: the default policy is foresize, with savings."""
    result = CliRunner().invoke(app, ["simulate", "--duration", "2h", "--json", "--seed", "5"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["policy"] == "foresize"
    assert "savings_vs_static" in out
