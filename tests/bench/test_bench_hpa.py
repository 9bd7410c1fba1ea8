"""`foresize bench hpa`: the issue's JSON shape and keys, the replica measures, the team's
request, and one property of the coordinated mode. Scenarios here are built from the test
excerpt (`tests/data/traces`), never from `../shared/traces`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import foresize.bench.hpa as bench_hpa
from foresize.bench.hpa import KEYS, POLICIES, _run, replica_metrics, run_one, scenario
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


def test_the_bounds_are_the_hpa_alones_requests_in_the_warm_up_and_the_band_edge_after(
    monkeypatch,
):
    """The `hpa` run's bounds: before Foresize's warm-up ends the lowest CPU request is what
    the HPA alone requested (nothing acts yet); after it, demand / (u x 1.1) each step, the
    lowest total the HPA leaves alone. The team's request is compared with the per-pod p95
    of demand at the HPA's median count."""
    sc = scenario(DATA, "crane")
    _, warm = _run(sc, "hpa", 1.0)
    row = warm.row(sc.name, 1.0)
    assert row["band_edge_cpu_request_ratio"] == 1.0  # an hour: all of it warm-up
    assert row["band_edge_cpu_request_ratio_after_warmup"] == 0.0  # nothing after it
    monkeypatch.setattr(bench_hpa, "WARMUP", 0.0)
    _, after = _run(sc, "hpa", 1.0)
    demand = np.array(after.demand)
    edge = demand.sum() * 60.0 / (0.6 * 1.1)
    row = after.row(sc.name, 1.0)
    assert row["band_edge_cpu_request_ratio"] == pytest.approx(
        edge / after.requested_core_seconds, abs=1e-4
    )
    assert row["band_edge_cpu_request_ratio"] < 1.0  # the HPA alone sits below the edge
    assert row["band_edge_cpu_request_ratio_after_warmup"] == row["band_edge_cpu_request_ratio"]
    median = int(np.median(after.replicas))
    assert row["median_replicas"] == median
    assert row["team_request_over_that_p95"] == pytest.approx(
        1.0 / (np.percentile(demand, 95) / median), abs=1e-3
    )


def test_the_cut_counts_steps_with_demand_above_0_9_x_the_requests():
    """`underprovisioned_seconds_at_cut`: what a uniform 10% cut of the HPA alone's requests
    would leave under-provisioned (demand 9.5 cores against 10 requested counts; 8.5 not);
    `jump_seconds`: the first under-provisioned step of each excursion."""

    class Usage:
        def __init__(self, demand: float, requested: float) -> None:
            self.cpu_demand = np.array([demand / 2, demand / 2])
            self.cpu_req = np.array([requested / 2, requested / 2])

    class Metering:
        usage = Usage(9.5, 10.0)

        def active(self):
            return np.array([0, 1]), None

    class Sim:
        metering = Metering()

    b = bench_hpa.Bounds(Sim(), 60.0, 0.5)  # type: ignore[arg-type]
    b(0.0, None, None, None)
    Sim.metering.usage = Usage(8.5, 10.0)
    b(60.0, None, None, None)
    assert b.cut_seconds == 60.0
    assert b.requested_core_seconds == 2 * 10.0 * 60.0
    # above the requests two steps running: the first is the jump, the second the lag
    for t, demand in ((120.0, 11.0), (180.0, 12.0), (240.0, 5.0), (300.0, 11.0)):
        Sim.metering.usage = Usage(demand, 10.0)
        b(t, None, None, None)
    assert b.jump_seconds == 120.0  # 120 s and 300 s
    assert b.replicas == [2] * 6


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
