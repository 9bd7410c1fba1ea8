"""`foresize bench plan` runs a real planning pass and prints the stable JSON keys."""

import json

import pytest
from typer.testing import CliRunner

from foresize.front.cli import app


def test_bench_plan_json_small() -> None:
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "plan",
            "--pods",
            "200",
            "--targets",
            "20",
            "--nodes",
            "10",
            "--repeats",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert {
        "pods",
        "targets",
        "nodes",
        "seconds_median",
        "cpu_seconds_median",
        "cold_seconds_median",
        "cold_cpu_seconds_median",
        "peak_rss_mib",
    } <= out.keys()
    assert out["pods"] == 200 and out["targets"] == 20 and out["nodes"] == 10
    assert out["actions"] > 0 and out["seconds_median"] > 0
    # The pass with the memo of the passes before plans what the pass after a restart does.
    assert out["cold_actions"] == out["actions"] and out["changed"] == 0.1


@pytest.mark.parametrize("option", ["--targets", "--pods", "--nodes", "--repeats"])
def test_bench_plan_rejects_bad_sizes(option: str) -> None:
    from foresize.core.errors import ForesizeError

    result = CliRunner().invoke(app, ["bench", "plan", option, "0"])
    # A ForesizeError (one line, exit status 2 from `foresize.front.cli.main`), not a crash.
    assert isinstance(result.exception, ForesizeError), result.exception
    assert str(result.exception) == f"{option} must be at least 1, got 0"


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_bench_plan_rejects_a_share_of_changed_pods_outside_0_to_1(value: str) -> None:
    from foresize.core.errors import ForesizeError

    result = CliRunner().invoke(app, ["bench", "plan", "--changed", value])
    assert isinstance(result.exception, ForesizeError), result.exception
    assert str(result.exception) == f"--changed must be between 0 and 1, got {float(value)}"


def test_bench_plan_with_a_cluster_default_policy_times_its_resolution() -> None:
    """`--default-policy`: every target is in the policy hierarchy, each pass resolves it
    first (as `reconcile.plan_pass` does), and the preset's rules are the ones planned."""
    args = ["bench", "plan", "--pods", "200", "--targets", "20", "--nodes", "10"]
    args += ["--repeats", "2", "--json"]
    plain = json.loads(CliRunner().invoke(app, args).output)
    result = CliRunner().invoke(app, [*args, "--default-policy", "cost"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["resolve_cpu_seconds_median"] > 0 and out["resolve_cold_cpu_seconds"] > 0
    # The cost preset disrupts a quarter of the replicas at once, not the default one pod:
    # the targets were planned with their effective spec.
    assert out["actions"] != plain["actions"]
    assert out["cold_actions"] == out["actions"]
    assert "resolve_cpu_seconds_median" not in plain


def test_bench_plan_rejects_an_unknown_preset() -> None:
    from foresize.core.errors import ForesizeError

    result = CliRunner().invoke(app, ["bench", "plan", "--default-policy", "cheap"])
    assert isinstance(result.exception, ForesizeError), result.exception
    assert str(result.exception) == (
        "--default-policy must be one of cost, balanced, performance, batch, got 'cheap'"
    )
