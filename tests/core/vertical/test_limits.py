"""`vertical.limits`: the maintenance windows and change budgets in the planner — outside
every window no disruptive action (in-place resizes go on), `restrict: all` holds every
change, OOM fixes only where the policy says, windows that cannot be read hold what they
guard (a condition says why), budgets count what landed and survive a restart."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import (
    ActionResult,
    EmitEvent,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.model import ContainerSuggestion, Suggestion
from foresize.core.vertical.planner import execute, plan
from foresize.core.vertical.policy import WorkerConfig
from foresize.core.vertical.state import WorkerState
from support.vertical import KEY, apply_ok, deferred, of, pod, snap, sugg, target
from support.zones import TableZones, utc

CONFIG = WorkerConfig(time_zones=TableZones())
NIGHT = {"schedule": "0 2 * * *", "duration": "2h", "timeZone": "Europe/Berlin"}
# 2026-07-01: 02:00-04:00 CEST is 00:00-02:00 UTC.
NOON = utc("2026-07-01T12:00")
INSIDE = utc("2026-07-02T00:30")


def _target(update_mode: str, **vertical: Any) -> Any:
    vertical.setdefault("disruption", {"max_disrupted": 5, "interval": "1s"})
    return target(update_mode, min_replicas=1, **vertical)


def _maintenance(**extra: Any) -> dict[str, Any]:
    return {"windows": [NIGHT], **extra}


def _statuses(actions: list) -> list[dict]:
    return [a.status for a in of(actions, WriteTargetStatus)]


def _stuck(name: str = "stuck") -> Any:
    # Asked for 200m/200Mi, the kubelet keeps 100m/100Mi: Deferred.
    return pod(
        name,
        cpu=200,
        mem=200 * MIB,
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[deferred()],
    )


def test_outside_the_window_in_place_goes_on_and_the_stall_fallback_waits() -> None:
    t = _target("in_place_or_recreate", maintenance=_maintenance())
    s = snap([_stuck(), pod("small")], [t])
    state = WorkerState()
    actions, state = plan(s, NOON, state, CONFIG, sugg())
    assert [a.name for a in of(actions, ResizePod)] == ["small"]
    actions, state = plan(s, NOON + 600, state, CONFIG, sugg())  # past stall_timeout
    assert not of(actions, EvictPod)
    (status,) = _statuses(actions)
    (held,) = status["held_back"]
    assert held["rule"] == "maintenance_window"
    assert held["pods"] == ["stuck"]
    assert held["containers"] == [{"name": "app", "resources": ["cpu", "memory"]}]
    assert held["until"] == "2026-07-02T00:00:00Z"
    assert (
        "eviction held: outside every maintenance window; windows[0] opens next at"
        in (held["message"])
    )
    reasons = [e.reason for e in of(actions, EmitEvent)]
    assert reasons.count("HeldForMaintenanceWindow") == 1
    actions, state = plan(s, NOON + 660, state, CONFIG, sugg())  # once per closed spell
    assert "HeldForMaintenanceWindow" not in [e.reason for e in of(actions, EmitEvent)]
    # In the window the fallback goes, and the hold is gone from status.
    actions, state = plan(s, INSIDE, state, CONFIG, sugg())
    assert [a.name for a in of(actions, EvictPod)] == ["stuck"]
    assert all(st.get("held_back") is None for st in _statuses(actions))


def test_recreate_evicts_only_inside_a_window() -> None:
    s = snap([pod("a"), pod("b")], [_target("recreate", maintenance=_maintenance())])
    actions, state = plan(s, NOON, WorkerState(), CONFIG, sugg())
    assert not of(actions, EvictPod) and not of(actions, ResizePod)
    actions, _ = plan(s, INSIDE, state, CONFIG, sugg())
    assert sorted(a.name for a in of(actions, EvictPod)) == ["a", "b"]
    # The window closes at 04:00 CEST (02:00 UTC) sharp.
    actions, _ = plan(s, utc("2026-07-02T02:00"), WorkerState(), CONFIG, sugg())
    assert not of(actions, EvictPod)


def test_a_restarting_resize_is_disruptive() -> None:
    restarts = {"memory": "RestartContainer"}
    s = snap(
        [pod("r", resize_policy=restarts), pod("n")],
        [_target("in_place", maintenance=_maintenance())],
    )
    actions, _ = plan(s, NOON, WorkerState(), CONFIG, sugg())
    assert [a.name for a in of(actions, ResizePod)] == ["n"]
    actions, _ = plan(s, INSIDE, WorkerState(), CONFIG, sugg())
    assert sorted(a.name for a in of(actions, ResizePod)) == ["n", "r"]


def test_restrict_all_holds_every_change() -> None:
    s = snap([pod("a")], [_target("in_place", maintenance=_maintenance(restrict="all"))])
    actions, _ = plan(s, NOON, WorkerState(), CONFIG, sugg())
    assert not of(actions, ResizePod)
    (status,) = _statuses(actions)
    assert status["held_back"][0]["message"].startswith("in-place resize held")
    actions, _ = plan(s, INSIDE, WorkerState(), CONFIG, sugg())
    assert [a.name for a in of(actions, ResizePod)] == ["a"]


def _oom_pod(at: float) -> Any:
    return pod("oom", cpu=100, mem=100 * MIB, oom_at=at - 60)


def test_an_oom_fix_waits_for_the_window_unless_the_policy_says_so() -> None:
    held = _target("recreate", maintenance=_maintenance())
    actions, _ = plan(snap([_oom_pod(NOON)], [held]), NOON, WorkerState(), CONFIG, sugg())
    assert not of(actions, EvictPod)
    allowed = _target(
        "recreate", maintenance=_maintenance(), oom_remediation={"outside_windows": True}
    )
    actions, _ = plan(snap([_oom_pod(NOON)], [allowed]), NOON, WorkerState(), CONFIG, sugg())
    assert [a.name for a in of(actions, EvictPod)] == ["oom"]
    # Only the OOM fix: a pod without a recent kill still waits.
    s = snap([_oom_pod(NOON), pod("calm")], [allowed])
    actions, _ = plan(s, NOON, WorkerState(), CONFIG, sugg())
    assert [a.name for a in of(actions, EvictPod)] == ["oom"]


def test_an_unknown_zone_holds_disruption_and_says_why() -> None:
    lost = {**NIGHT, "timeZone": "Mars/Olympus"}
    t = _target("recreate", maintenance={"windows": [lost]})
    s = snap([pod("a")], [t])
    for at in (NOON, INSIDE, utc("2026-07-02T02:30")):  # UTC's 02:00-04:00 included
        actions, _ = plan(s, at, WorkerState(), CONFIG, sugg())
        assert not of(actions, EvictPod)
    (status,) = _statuses(actions)
    (condition,) = [c for c in status["conditions"] if c["type"] == "MaintenanceWindowsInvalid"]
    assert condition["status"] == "True"
    assert "spec.vertical.maintenance.windows[0].timeZone: 'Mars/Olympus'" in condition["message"]
    assert "cannot be read as written" in status["held_back"][0]["message"]


def test_overlapping_windows_hold_on_the_safe_side() -> None:
    t = _target(
        "recreate",
        maintenance={"windows": [NIGHT, {**NIGHT, "schedule": "0 3 * * *"}]},
    )
    actions, _ = plan(snap([pod("a")], [t]), INSIDE, WorkerState(), CONFIG, sugg())
    assert not of(actions, EvictPod)
    (status,) = _statuses(actions)
    (condition,) = [c for c in status["conditions"] if c["type"] == "MaintenanceWindowsInvalid"]
    assert "windows[1]: overlaps windows[0]" in condition["message"]


def test_without_a_zone_database_only_utc_opens() -> None:
    t = _target("recreate", maintenance=_maintenance())
    actions, _ = plan(snap([pod("a")], [t]), INSIDE, WorkerState(), WorkerConfig(), sugg())
    assert not of(actions, EvictPod)  # Europe/Berlin unknown to UTC_ONLY
    utc_night = {**NIGHT, "timeZone": "UTC"}
    t = _target("recreate", maintenance={"windows": [utc_night]})
    at = utc("2026-07-02T02:30")
    actions, _ = plan(snap([pod("a")], [t]), at, WorkerState(), WorkerConfig(), sugg())
    assert [a.name for a in of(actions, EvictPod)] == ["a"]


# ------------------------------------------------------------------ budgets


def _sugg(uid: str, cpu: int, mem: int = 100 * MIB) -> dict[str, Suggestion]:
    return {KEY: Suggestion(uid, 0.0, {"*": ContainerSuggestion("*", {"cpu": cpu, "memory": mem})})}


def _run(s: Any, at: float, state: WorkerState, suggestions: dict, apply=apply_ok) -> tuple:
    actions, state = plan(s, at, state, CONFIG, suggestions)
    state, _ = execute(actions, apply, state, s, at, CONFIG)
    return actions, state


def test_a_rollout_is_one_change_and_the_budget_holds_the_next() -> None:
    t = _target("in_place", budgets={"changes_per_workload_per_day": 1})
    s = snap([pod("a"), pod("b"), pod("c")], [t])
    actions, state = _run(s, NOON, WorkerState(), _sugg("s1", 200))
    assert len(of(actions, ResizePod)) == 3  # one suggestion, one change
    assert state.targets[KEY].budget.changes == [(NOON, "s1")]
    # Pods at 200m now; a new suggestion within 24 h waits.
    s2 = snap([pod("a", cpu=200), pod("b", cpu=200), pod("c", cpu=200)], [t])
    actions, state = _run(s2, NOON + 3600, state, _sugg("s2", 400))
    assert not of(actions, ResizePod)
    (status,) = _statuses(actions)
    (held,) = status["held_back"]
    assert held["rule"] == "change_budget"
    assert (
        "1 change(s) in the last 24h reach budgets.changes_per_workload_per_day=1"
        in (held["message"])
    )
    assert "one frees at 2026-07-02T12:00:00Z" in held["message"]
    actions, state = _run(s2, NOON + 86400, state, _sugg("s2", 400))
    assert len(of(actions, ResizePod)) == 3


def test_a_refused_action_is_not_counted() -> None:
    t = _target("recreate", budgets={"changes_per_workload_per_day": 1})
    s = snap([pod("a"), pod("b")], [t])
    refused = ActionResult(ok=False, code=429, message="pdb")
    actions, state = _run(s, NOON, WorkerState(), _sugg("s1", 100, 200 * MIB), lambda a: refused)
    assert of(actions, EvictPod)
    assert state.targets[KEY].budget.changes == []


def test_the_namespace_disruption_budget_spans_targets() -> None:
    budgets = {"disruptions_per_namespace_per_hour": 1}
    web = _target("recreate", budgets=budgets)
    api = target(
        "recreate", name="api", min_replicas=1, disruption={"max_disrupted": 5}, budgets=budgets
    )
    pods = [pod("w1"), pod("w2"), pod("a1", owner="api")]
    s = snap(pods, [web, api])
    bigger = _sugg("s1", 100, 200 * MIB)[KEY]
    both = {KEY: bigger, "default/api": bigger}
    actions, state = _run(s, NOON, WorkerState(), both)
    assert len(of(actions, EvictPod)) == 1
    held = [st["held_back"] for st in _statuses(actions) if st.get("held_back")]
    assert {h[0]["rule"] for h in held} == {"disruption_budget"}
    assert "1 disruption(s) in namespace default in the last hour" in held[0][0]["message"]
    gone = {a.name for a in of(actions, EvictPod)}
    left = snap([p for p in pods if p.name not in gone], [web, api])
    actions, state = _run(left, NOON + 1800, state, both)
    assert not of(actions, EvictPod)
    actions, state = _run(left, NOON + 3600, state, both)
    assert len(of(actions, EvictPod)) == 1


def test_the_counts_survive_an_operator_restart() -> None:
    t = _target("in_place", budgets={"changes_per_workload_per_day": 1})
    s = snap([pod("a")], [t])
    actions, state = _run(s, NOON, WorkerState(), _sugg("s1", 200))
    # The next pass writes the status with what landed; the operator then restarts.
    actions, state = plan(s, NOON + 60, state, CONFIG, _sugg("s1", 200))
    (status,) = _statuses(actions)
    assert status["disruption"]["budget"]["changes"] == [
        {"time": "2026-07-01T12:00:00Z", "suggestionUID": "s1"}
    ]
    t2 = t.model_copy(deep=True)
    t2.status = t2.status.model_validate({**t2.status.model_dump(), **status})
    s2 = snap([pod("a", cpu=200)], [t2])
    actions, _ = plan(s2, NOON + 3600, WorkerState(), CONFIG, _sugg("s2", 400))
    assert not of(actions, ResizePod)


def test_a_schedule_out_of_range_that_got_through_holds_and_says_which_field() -> None:
    # What the kube shell plans when `99 * * * *` got past the webhook (it fails open):
    # the object is read, its other window does not open either, the condition names it.
    from foresize.core.admission.validate import validate_policy, validate_target
    from foresize.shells.kube.handlers import parse_foresize, validation_message

    bad = {**NIGHT, "schedule": "99 * * * *"}
    t = _target("recreate", maintenance={"windows": [NIGHT, bad]})
    field = "spec.vertical.maintenance.windows[1].schedule: '99 * * * *' minute '99'"
    for at in (NOON, INSIDE):
        actions, _ = plan(snap([pod("a")], [t]), at, WorkerState(), CONFIG, sugg())
        assert not of(actions, EvictPod)
    (status,) = _statuses(actions)
    (condition,) = [c for c in status["conditions"] if c["type"] == "MaintenanceWindowsInvalid"]
    assert condition["status"] == "True" and field in condition["message"]
    manifest = t.model_dump(mode="json", exclude_none=True)
    assert parse_foresize("AIScaleTarget", manifest) is not None  # planned, not dropped
    assert field in (validation_message("AIScaleTarget", manifest) or "")
    # The validating webhook refuses it, naming the field, for a target and a policy alike.
    assert any(p.startswith(field) for p in validate_target(manifest))
    policy = {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScalePolicy",
        "metadata": {"name": "p"},
        "spec": {"vertical": {"maintenance": {"windows": [NIGHT, bad]}}},
    }
    assert any(p.startswith(field) for p in validate_policy(policy))
