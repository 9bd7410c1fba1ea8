"""`foresize bench nodes`: the issue's JSON keys, how a resize's landing is measured, the
medians. Scenarios here are built from the
test excerpt (`tests/data/traces`), never from `../shared/traces`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from foresize.bench.nodes import KEYS, POLICIES, medians, resize_landing, scenario
from foresize.front.cli import app
from foresize.shells.sim.events import EventLog, SimEvent
from support import paths

DATA = paths.DATA / "traces"


def test_bench_nodes_json_has_exactly_the_issue_keys() -> None:
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
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert list(out) == ["policies"]
    assert list(out["policies"]) == list(POLICIES)
    for row in out["policies"].values():
        assert tuple(row) == KEYS
        assert row["node_hours"] > 1.0  # a base node for the hour, at least
        assert set(row["evictions_by_cause"]) == {
            "policy",
            "consolidation",
            "node_pressure",
            "preemption",
        }


def test_bench_nodes_refuses_an_unknown_family() -> None:
    result = CliRunner().invoke(app, ["bench", "nodes", "--family", "azur", "--json"])
    assert result.exit_code != 0
    assert "--family: unknown trace family 'azur'" in str(result.exception)


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
