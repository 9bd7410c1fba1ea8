"""`foresize bench plan` runs a real planning pass and prints the stable JSON keys."""

import json

from typer.testing import CliRunner

from foresize.cli import app


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
    assert {"pods", "targets", "nodes", "seconds_median", "peak_rss_mib"} <= out.keys()
    assert out["pods"] == 200 and out["targets"] == 20 and out["nodes"] == 10
    assert out["actions"] > 0 and out["seconds_median"] > 0


def test_bench_plan_rejects_bad_sizes() -> None:
    result = CliRunner().invoke(app, ["bench", "plan", "--targets", "0"])
    assert result.exit_code != 0
