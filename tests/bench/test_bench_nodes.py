"""`foresize bench nodes`: the issue's JSON keys, how a resize's landing is measured, the
medians, and the forecast-sized headroom placeholders. Scenarios here are built from the
test excerpt (`tests/data/traces`), never from `../shared/traces`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from foresize.bench.nodes import KEYS, POLICIES, medians, resize_landing, scenario
from foresize.core.api.quantity import MIB
from foresize.core.cluster.model import ContainerSuggestion, Suggestion
from foresize.front.cli import app
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.events import EventLog, SimEvent
from foresize.shells.sim.headroom import CHUNK, DAY, Headroom
from foresize.shells.sim.operator import install_foresize
from foresize.shells.sim.scenario import parse_scenario
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


def test_headroom_forecast_is_yesterdays_growth_over_the_coming_window() -> None:
    h = Headroom(object())
    now = 2 * DAY
    h.totals.extend(
        [
            (now - DAY, 1000, 1000 * MIB),
            (now - DAY + 1800, 1600, 1100 * MIB),  # within the coming hour, a day ago
            (now - DAY + 7200, 9000, 9000 * MIB),  # beyond it
        ]
    )
    assert h.forecast(now) == (600, 100 * MIB)
    assert h.forecast(now - 3 * DAY) == (0, 0)  # no history for that time of day


def test_placeholders_make_room_for_an_upsize_on_their_node() -> None:
    data = {
        "name": "headroom",
        "nodes": [{"name": "n", "cpu": "2", "memory": "8Gi"}],
        "workloads": [
            {
                "name": "a",
                "replicas": 1,
                "readiness_delay": "1s",
                "containers": [{"name": "app", "requests": {"cpu": "500m", "memory": "256Mi"}}],
            }
        ],
    }
    sim = SimCluster(parse_scenario(data, "<test>"), seed=1)
    h = Headroom(sim)  # its loop is not started: the test sizes it
    h.operator = install_foresize(sim)
    h.create()
    sim.run(20)
    sim.controllers.set_replicas(h.key, 6, source="test")  # 6 x 250m: the node is full
    sim.run(20)
    placeholders = [p for p in sim.pods_of("Deployment", "foresize-headroom", "headroom")]
    assert sum(p.phase == "Running" for p in placeholders) == 6
    assert sim.node_free("n")[0] == 0
    # A suggestion 500m above the pod's request: two placeholders' worth of room needed.
    h.operator.suggestions["default/a"] = Suggestion(
        "s1", sim.now, {"app": ContainerSuggestion("app", {"cpu": 1000, "memory": 256 * MIB})}
    )
    assert h.suggested_total() == (1000, 256 * MIB)  # the suggestion, for its one replica
    h.release_for_upsizes(h.targeted_pods())
    assert sim.events.count("HeadroomReleased") == 6  # every placeholder on the node
    assert sim.node_free("n")[0] == 2000 - 500
    assert CHUNK["cpu"] == 250
    # Foresize's own suggestions come from the pass (its published `latest`).
    del h.operator.suggestions["default/a"]
    assert h.suggested_total() == (500, 256 * MIB)  # none yet: the template
    h.operator.pass_state.suggestions.latest["default/a"] = Suggestion(
        "s2", sim.now, {"app": ContainerSuggestion("app", {"cpu": 800, "memory": 300 * MIB})}
    )
    assert h.suggested_total() == (800, 300 * MIB)
