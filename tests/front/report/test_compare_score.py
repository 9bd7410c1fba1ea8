"""`foresize simulate --compare` scores every run by THE scoring (`core.recommend.score`),
the one `bench recommend` and the operator's shadow policies use (issue 24 part 3)."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from foresize.front.cli import app

SCENARIO = textwrap.dedent(
    """\
    name: score-one
    seed: 5
    nodes:
      - {name: n, count: 1, cpu: "4", memory: 8Gi}
    workloads:
      - kind: Deployment
        name: api
        namespace: shop
        replicas: 2
        containers:
          - name: api
            requests: {cpu: "1", memory: 1Gi}
            limits: {memory: 1Gi}
            usage:
              cpu: {generator: diurnal, base: 200m, amplitude: 0.3, peak_hour: 13, noise: 0.05}
              memory: {generator: constant, base: 300Mi, noise: 0.02}
    """
)


def test_compare_runs_carry_the_bench_score(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(SCENARIO)
    out = CliRunner().invoke(
        app,
        [
            "simulate",
            "--scenario",
            str(path),
            "--duration",
            "2h",
            "--compare",
            "static,vpa",
            "-o",
            "json",
            "--no-progress",
        ],
    )
    assert out.exit_code == 0, (out.output, out.exception)
    doc = json.loads(out.stdout)
    keys = {"slack", "shortfall", "under", "events_per_series_day", "changes_per_series_day"}
    for run in doc["runs"]:
        assert set(run["score"]) == {"cpu", "memory"}
        assert all(set(v) == keys for v in run["score"].values())
    static = doc["runs"][0]
    # Usage stays under the static requests: the score's slack is the summary's
    # (requested - used) / requested, and nothing is short.
    total = static["totals"]
    want = 1 - total["cpu_used_core_hours"] / total["cpu_requested_core_hours"]
    assert static["score"]["cpu"]["slack"] == pytest.approx(want, rel=0.02)
    assert static["score"]["cpu"]["shortfall"] == 0
    assert static["score"]["memory"]["events_per_series_day"] == 0
