"""`foresize bench nodes`: the issue's JSON keys, how a resize's landing is measured, the
medians. Scenarios here are built from the
test excerpt (`tests/data/traces`), never from `../shared/traces`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from foresize.bench.nodes import (
    DEMAND,
    FLAVOURS,
    HELD,
    HOURLY_PEAK,
    KEYS,
    POLICIES,
    ROW_KEYS,
    RUN_KEYS,
    HourlyPeaks,
    medians,
    resize_landing,
    run_metrics,
    scenario,
)
from foresize.front.cli import app
from foresize.shells.sim.events import EventLog, SimEvent
from support import paths

DATA = paths.DATA / "traces"


def _bench_json(*args: str) -> dict:
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "nodes",
            "--trace-root",
            str(DATA),
            "--family",
            "crane",
            "--deployments",
            "1",
            "--duration",
            "1h",
            *args,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_bench_nodes_json_has_exactly_the_issue_keys() -> None:
    out = _bench_json("--flavour", "karpenter")
    assert list(out) == ["policies", "runs", "ran"]
    # What the run covered, so a shorter or smaller run says so.
    assert out["ran"] == {
        "hours": 1.0,
        "families": ["crane"],
        "flavours": ["karpenter"],
        "deployments": 1,
        "runs_per_policy": 1,
    }
    assert list(out["policies"]) == list(POLICIES)
    for row in out["policies"].values():
        # The issue's keys, in its order, with the held upsizes right after `stalls`.
        assert tuple(k for k in row if k != HELD) == KEYS
        assert tuple(row) == ROW_KEYS and ROW_KEYS.index(HELD) == KEYS.index("stalls") + 1
        assert row["node_hours"] > 1.0  # a base node for the hour, at least
        assert set(row["evictions_by_cause"]) == {
            "policy",
            "consolidation",
            "node_pressure",
            "preemption",
        }


def test_bench_nodes_json_has_a_row_per_run_and_medians_over_them() -> None:
    out = _bench_json()  # both flavours: two runs per policy
    runs = out["runs"]
    assert [(r["family"], r["flavour"], r["policy"]) for r in runs] == [
        ("crane", f, p) for f in FLAVOURS for p in POLICIES
    ]
    for r in runs:
        assert tuple(r)[3:] == RUN_KEYS  # the medians' keys, and beside the request:
        assert r[HOURLY_PEAK] >= r[DEMAND] > 0  # an hour's peak is at least its mean
    for policy, median_row in out["policies"].items():
        mine = [r for r in runs if r["policy"] == policy]
        assert len(mine) == out["ran"]["runs_per_policy"] == 2
        for key in ("node_hours", "cost", "cpu_request_core_hours", HELD):
            assert median_row[key] == round((mine[0][key] + mine[1][key]) / 2, 4)


def _hourly_peaks(cpu: dict, hours: float) -> float:
    from foresize.shells.sim.runner import build, run_for
    from foresize.shells.sim.scenario import parse_scenario

    data = {
        "name": "peaks",
        "nodes": [{"name": "n", "cpu": "8", "memory": "32Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "a",
                "replicas": 2,
                "containers": [
                    {"name": "app", "requests": {"cpu": "1", "memory": "256Mi"}, "usage": {
                        "cpu": cpu, "memory": {"generator": "constant", "base": "128Mi"}}}
                ],
            }
        ],
    }  # fmt: skip
    sim = build(parse_scenario(data, "<test>"), step=60.0)
    peaks = HourlyPeaks(sim)
    run_for(sim, hours * 3600.0)
    return peaks.core_hours()


def test_the_hourly_oracle_requests_each_hours_peak_for_every_replica() -> None:
    # A flat 0.5 core on 2 replicas: the oracle asks what they use, 1 core·h an hour
    # (less the first step, before the pods run).
    flat = _hourly_peaks({"generator": "constant", "base": 0.5, "noise": 0}, 4)
    assert 3.9 < flat <= 4.0
    # A daily cycle of 0 to 1 core (mean 0.5): each hour at its own peak, a little above
    # the mean's 24 core·h, half of holding the day's peak (1 core x 2 replicas x 24 h).
    daily = {"generator": "diurnal", "base": 0.5, "amplitude": 1.0, "noise": 0}
    day = _hourly_peaks(daily, 24)
    assert 24.0 < day < 27.0


def test_bench_nodes_refuses_an_unknown_family_or_flavour() -> None:
    result = CliRunner().invoke(app, ["bench", "nodes", "--family", "azur", "--json"])
    assert result.exit_code != 0
    assert "--family: unknown trace family 'azur'" in str(result.exception)
    result = CliRunner().invoke(app, ["bench", "nodes", "--flavour", "gke", "--json"])
    assert result.exit_code != 0
    assert "--flavour: unknown node autoscaler flavour 'gke'" in str(result.exception)


def test_static_requests_come_from_the_first_day_of_the_trace() -> None:
    sc = scenario(DATA, "crane", "karpenter", deployments=1)
    (w,) = sc.workloads
    (c,) = w.containers
    assert c.cpu.kind == "trace" and w.replicas == 3
    # 95th percentile of the first day, scaled so the series' median is 0.15 cores: above
    # the median, far below a request sized to the whole trace's peak.
    assert 150 < c.requests["cpu"] < 1000
    assert sc.node_autoscaler is not None and sc.node_autoscaler.flavour == "karpenter"


def _log(*events: tuple[float, str, str, str, dict]) -> EventLog:
    log = EventLog()
    for t, kind, obj, reason, details in events:
        log.append(SimEvent(t, kind, obj, reason, "", details))
    return log


def test_resize_landing_in_place_by_recreation_and_never() -> None:
    log = _log(
        (0, "PodCreated", "Pod/ns/a", "", {"owner": "Deployment/ns/a"}),
        (0, "PodCreated", "Pod/ns/b", "", {"owner": "Deployment/ns/b"}),
        (0, "PodCreated", "Pod/ns/c", "", {"owner": "Deployment/ns/c"}),
        # a: an upsize sent twice before it lands 30 s after the first.
        (10, "ResizeRequested", "Pod/ns/a", "", {"direction": "up"}),
        (20, "ResizeRequested", "Pod/ns/a", "", {"direction": "up"}),
        (40, "ResizeApplied", "Pod/ns/a", "", {}),
        # a downsize is no upsize decision.
        (50, "ResizeRequested", "Pod/ns/a", "", {"direction": "down"}),
        (55, "ResizeApplied", "Pod/ns/a", "", {}),
        # b: stalled, evicted, its replacement scheduled 200 s after the decision.
        (100, "ResizeRequested", "Pod/ns/b", "", {"direction": "up"}),
        (250, "Evicted", "Pod/ns/b", "stall-fallback", {"cause": "policy"}),
        (290, "PodCreated", "Pod/ns/b2", "", {"owner": "Deployment/ns/b"}),
        (300, "PodScheduled", "Pod/ns/b2", "", {}),
        # c: waits for room and never lands.
        (400, "Event", "Pod/ns/c", "ResizeWaitingForCapacity", {}),
    )
    landed, decisions, in_place = resize_landing(log)
    assert sorted(landed) == [30, 200]
    assert (decisions, in_place) == (3, 1)


def test_an_upsize_no_node_has_room_to_recreate_is_a_held_decision() -> None:
    log = _log(
        (0, "PodCreated", "Pod/ns/d", "", {"owner": "Deployment/ns/d"}),
        (0, "PodCreated", "Pod/ns/e", "", {"owner": "Deployment/ns/e"}),
    )
    no_room = "no node has room for the pod at its suggested size; not evicting"
    log.append(SimEvent(10, "Event", "Pod/ns/d", "EvictionSkipped", no_room, {}))
    log.append(SimEvent(20, "Event", "Pod/ns/d", "EvictionSkipped", no_room, {}))
    # Skipped for another reason (no controller): no upsize decision.
    other = "not evicting (recreate): no controller owns the pod, nothing would recreate it"
    log.append(SimEvent(30, "Event", "Pod/ns/e", "EvictionSkipped", other, {}))
    landed, decisions, in_place = resize_landing(log)
    assert (landed, decisions, in_place) == ([], 1, 0)
    summary = {
        "totals": {},
        "node_autoscaler": {
            "node_hours": 1.0,
            "cost": 0.1,
            "evictions_by_cause": {},
            "do_not_disrupt_evictions": 0,
        },
    }
    row = run_metrics(summary, log)
    assert row[HELD] == 1 and row["inplace_within_60s_share"] == 0.0


def test_medians_per_key_and_per_cause_skip_missing_values() -> None:
    rows = []
    for i, p50 in enumerate((None, 10.0, 30.0)):
        row = {k: float(i) for k in KEYS}
        row["resize_land_seconds_p50"] = p50
        row["evictions_by_cause"] = {"policy": i, "consolidation": 2 * i}
        rows.append(row)
    m = medians(rows)
    assert m["node_hours"] == 1.0
    assert m["resize_land_seconds_p50"] == 20.0
    assert m["evictions_by_cause"] == {"consolidation": 2.0, "policy": 1.0}
