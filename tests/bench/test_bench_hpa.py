"""`foresize bench hpa`: the issue's JSON shape and keys, the replica measures, the team's
request, and one property of the coordinated mode. Scenarios here are built from the test
excerpt (`tests/data/traces`), never from `../shared/traces`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from foresize.bench.hpa import KEYS, POLICIES, replica_metrics, run_one, scenario
from foresize.front.cli import app
from support import paths

DATA = paths.DATA / "traces"


def test_bench_hpa_json_has_exactly_the_issue_shape_and_keys():
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "hpa",
            "--trace-root",
            str(DATA),
            "--family",
            "crane",
            "--duration",
            "1h",
            "--collision-duration",
            "10m",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert list(out) == ["policies", "collision"]
    assert (
        list(out["policies"])
        == list(POLICIES)
        == [
            "hpa",
            "hpa+vpa",
            "hpa+foresize-leave",
            "hpa+foresize-coordinated",
        ]
    )
    for row in out["policies"].values():
        assert tuple(row) == KEYS
        assert row["replica_hours"] >= 2.0  # minReplicas 2 for the hour, at least
    assert list(out["collision"]) == ["own_preemptions", "pending_due_to_resize"]


def test_bench_hpa_refuses_an_unknown_family():
    result = CliRunner().invoke(app, ["bench", "hpa", "--family", "azur", "--json"])
    assert result.exit_code != 0
    assert "--family: unknown trace family 'azur'" in str(result.exception)


def test_the_teams_request_is_1_2_x_the_per_pod_p95_at_its_replica_count():
    """The `hpa` baseline is sized as a careful team would: 1.2 x the per-pod p95 of CPU at
    the M replicas it runs (not inflated), between 2 and 20 replicas, CPU at 60%."""
    sc = scenario(DATA, "crane")
    (wl,) = sc.workloads
    (hpa,) = sc.hpas
    assert (hpa.min_replicas, hpa.max_replicas) == (2, 20)
    assert [m.target_utilization for m in hpa.metrics] == [60]
    (c,) = wl.containers
    trace = c.cpu.trace
    assert trace is not None
    per_pod = trace[np.isfinite(trace) & (trace > 0)] * c.cpu.trace_scale  # a share of M
    assert 3 <= wl.replicas <= 10
    assert c.requests["cpu"] == pytest.approx(1.2 * np.percentile(per_pod, 95) * 1000, rel=0.01)


def test_replica_measures_of_a_timeline():
    """3 -> 5 at 1 h, 5 -> 4 at 1 h 5 min (a reversal within 10 min), -> 20 (max) at 2 h,
    over 3 h."""
    timeline = [(0.0, 3), (3600.0, 5), (3900.0, 4), (7200.0, 20)]
    m = replica_metrics(timeline, 3 * 3600.0, 20)
    assert m["replica_hours"] == pytest.approx(3 + 5 * 300 / 3600 + 4 * 3300 / 3600 + 20)
    assert m["seconds_at_max_replicas"] == 3600.0
    assert m["oscillations"] == 1.0  # up then down within 5 minutes; down then up took 55
    assert m["replica_changes_per_day"] == pytest.approx(3 / (3 / 24))


@pytest.mark.slow
def test_coordinated_never_sits_at_max_replicas_where_the_hpa_alone_does_not():
    """On the crane excerpt (Foresize acting after 3 h of history instead of 24 h, to stay
    short): the HPA alone never reaches maxReplicas, and coordinated, which sizes its
    requests and floor from the forecast, does not either (`hpa+vpa`'s fight does, on
    the real traces: docs/horizontal.md)."""
    sc = scenario(DATA, "crane")
    alone = run_one(sc, "hpa", 6.0)
    coordinated = run_one(sc, "hpa+foresize-coordinated", 6.0, min_lookback="3h")
    assert alone["seconds_at_max_replicas"] == 0.0
    assert coordinated["seconds_at_max_replicas"] == 0.0
    assert coordinated["resizes_per_day"] > 0  # it did act
