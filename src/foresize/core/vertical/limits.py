"""Maintenance windows and change budgets in the admission step (issue 24 part 2): which
proposals may go now, and what the target's status, Events and `foresize explain` say
about those held back.

- A disruptive action (an eviction, a resize that restarts a container) goes only while a
  window is open; with `restrict: all` so does every change to a running pod (resizes,
  the start-up boost's unboost, the release of a Deferred resize). An OOM fix (the memory
  raise of a pod OOM-killed in the last 10 minutes) goes outside the windows only where
  `oom_remediation.outside_windows` says so.
- Windows that cannot be read as written (a zone the database does not know, windows
  that overlap: `cluster.windows.window_problems`) hold what they guard, always: the
  target gets the `MaintenanceWindowsInvalid` condition saying why, and the worker stays
  on the safe side (no disruption) until the spec is fixed.
- `budgets.changes_per_workload_per_day`: the first action toward a suggestion is a new
  change (the rest of its rollout is not); once the last 24 h hold that many, a new
  suggestion waits. `budgets.disruptions_per_namespace_per_hour`: every disruptive action
  in the namespace in the last hour, by every target there, against this target's number.
  The unboost and the release of a Deferred resize bring a pod back to what it was
  admitted with: not new sizes, the budgets do not count them.
- Counted when they land (`vertical.results` commits what `sent` recorded): a refused
  eviction changed nothing. The counts are in the target's status (`TargetState.budget`),
  so they survive an operator restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foresize.core.api.access import JSONValue
from foresize.core.api.fields import format_timestamp
from foresize.core.cluster.windows import (
    ALWAYS_OPEN,
    WindowState,
    window_problems,
    window_state,
)
from foresize.core.vertical.boost import UNBOOST
from foresize.core.vertical.desired import allocated_containers, desired_containers
from foresize.core.vertical.run import EVICT, RELEASE, Candidate, PassContext, TargetRun
from foresize.core.vertical.state import BUDGET_DAY, BUDGET_HOUR

# What held an action back: the step names `foresize explain` prints, and status reasons.
WINDOW = "maintenance_window"
CHANGE_BUDGET = "change_budget"
DISRUPTION_BUDGET = "disruption_budget"
HELD_EVENT = {
    WINDOW: "HeldForMaintenanceWindow",
    CHANGE_BUDGET: "HeldByChangeBudget",
    DISRUPTION_BUDGET: "HeldByDisruptionBudget",
}
CONDITION = "MaintenanceWindowsInvalid"

# Checked windows per pass at most: a check scans 400 days of openings, so it is kept per
# policy (`Limits.checks`); this bounds the memo as targets churn.
_CHECKS_LIMIT = 4096


@dataclass(slots=True)
class Hold:
    """Actions one rule held back this pass: why, the pods, and the resources of each
    container their change would have moved."""

    message: str
    pods: set[str] = field(default_factory=set)
    resources: dict[str, set[str]] = field(default_factory=dict)


@dataclass(slots=True)
class Limits:
    """One target's windows and budgets for this pass."""

    window: WindowState = ALWAYS_OPEN
    problems: list[str] = field(default_factory=list)
    holds: dict[str, Hold] = field(default_factory=dict)
    new_changes: set[str] = field(default_factory=set)  # suggestion uids started this pass


def start(run: TargetRun, ctx: PassContext) -> Limits:
    """The target's window now (closed while its windows have a problem) and its budgets'
    counts trimmed to their spans."""
    limits = Limits()
    run.state.budget.trim(ctx.now)
    policy = run.policy.maintenance
    if policy is not None:
        checks = ctx.window_checks
        problems = checks.get(policy)
        if problems is None:
            if len(checks) >= _CHECKS_LIMIT:
                checks.clear()
            found = window_problems(policy.windows, ctx.zones)
            problems = checks[policy] = [*policy.problems, *found]
        limits.problems = problems
        state = window_state(policy.windows, ctx.zones, ctx.now)
        limits.window = WindowState(False) if problems else state
    return limits


def is_disruptive(c: Candidate) -> bool:
    return c.kind == EVICT or (c.change is not None and c.change.restarts)


def _oom_fix(c: Candidate) -> bool:
    return c.urgent and c.reason != UNBOOST


def _counts(c: Candidate) -> bool:
    """Whether the change budget counts this action (a new size, not a way back)."""
    return c.kind != RELEASE and c.reason != UNBOOST


def allowed(c: Candidate, ctx: PassContext) -> bool:
    """May the admission step send `c` now? False records why it waits."""
    run = c.run
    limits = run.limits
    if limits is None:
        return True
    disruptive = is_disruptive(c)
    policy = run.policy.maintenance
    if (
        policy is not None
        and policy.holds(disruptive)
        and not limits.window.open
        and not (_oom_fix(c) and policy.oom_outside_windows and not limits.problems)
    ):
        _hold(c, WINDOW, _window_words(c, limits, disruptive))
        return False
    budgets = run.policy.budgets
    if budgets is None:
        return True
    ns = run.policy.namespace
    per_hour = budgets.disruptions_per_hour
    if disruptive and per_hour is not None and ctx.ns_disruptions.get(ns, 0) >= per_hour:
        _hold(c, DISRUPTION_BUDGET, _disruption_words(run, ctx, per_hour))
        return False
    per_day = budgets.changes_per_day
    uid = _uid(c)
    if per_day is not None and uid is not None and not _started(run, limits, uid):
        made = len(run.state.budget.changes) + len(limits.new_changes)
        if made >= per_day:
            _hold(c, CHANGE_BUDGET, _change_words(run, per_day))
            return False
    return True


def sent(c: Candidate, ctx: PassContext) -> None:
    """`c` is being sent: count it against this pass's budgets, and record it for the
    budgets' log once it lands."""
    run = c.run
    if run.limits is None:
        return
    disruptive = is_disruptive(c)
    uid = _uid(c)
    if run.policy.budgets is None or run.policy.budgets.changes_per_day is None:
        uid = None  # only a target with a change budget keeps its rollouts' log
    if uid is not None and not run.state.budget.counted(uid):
        run.limits.new_changes.add(uid)
    if disruptive:
        ns = run.policy.namespace
        ctx.ns_disruptions[ns] = ctx.ns_disruptions.get(ns, 0) + 1
    if uid is not None or disruptive:
        run.state.budget_pending[c.pod.name] = (uid, disruptive)


def _uid(c: Candidate) -> str | None:
    suggestion = c.run.suggestion
    return suggestion.uid if suggestion is not None and _counts(c) else None


def _started(run: TargetRun, limits: Limits, uid: str) -> bool:
    return uid in limits.new_changes or run.state.budget.counted(uid)


def _what(c: Candidate, disruptive: bool) -> str:
    if c.kind == EVICT:
        return "eviction"
    if c.kind == RELEASE:
        return "release of a Deferred resize"
    return "restarting resize" if disruptive else "in-place resize"


def _window_words(c: Candidate, limits: Limits, disruptive: bool) -> str:
    if limits.problems:
        return (
            f"{_what(c, disruptive)} held: the maintenance windows cannot be read as written"
            f" ({limits.problems[0]}), so the worker stays on the safe side"
        )
    return f"{_what(c, disruptive)} held: {limits.window.words()}"


def _disruption_words(run: TargetRun, ctx: PassContext, per_hour: int) -> str:
    ns = run.policy.namespace
    frees = min(
        (t for r in ctx.runs if r.policy.namespace == ns for t in r.state.budget.disruptions),
        default=None,
    )
    when = f"; one frees at {format_timestamp(frees + BUDGET_HOUR)}" if frees is not None else ""
    return (
        f"disruption held: {ctx.ns_disruptions.get(ns, 0)} disruption(s) in namespace {ns}"
        f" in the last hour reach budgets.disruptions_per_namespace_per_hour={per_hour}{when}"
    )


def _change_words(run: TargetRun, per_day: int) -> str:
    changes = run.state.budget.changes
    when = (
        f"; one frees at {format_timestamp(min(t for t, _ in changes) + BUDGET_DAY)}"
        if changes
        else ""
    )
    return (
        f"new size held: {len(changes)} change(s) in the last 24h reach"
        f" budgets.changes_per_workload_per_day={per_day}{when}"
    )


def _hold(c: Candidate, kind: str, message: str) -> None:
    run = c.run
    assert run.limits is not None
    hold = run.limits.holds.setdefault(kind, Hold(message))
    hold.pods.add(c.pod.name)
    for name, moved in _moved(c).items():
        hold.resources.setdefault(name, set()).update(moved)


def _moved(c: Candidate) -> dict[str, set[str]]:
    """The resources of each container the held action would have moved: its change, or
    for an eviction of a pod whose spec already asks for the suggestion (a stalled
    resize), what the kubelet allocated against what the suggestion sets."""
    out: dict[str, set[str]] = {}
    if c.change is not None:
        for cr in c.change.containers:
            moved = {r for r, v in cr.requests.items() if v is not None}
            moved |= {r for r, v in cr.limits.items() if v is not None}
            out[cr.name] = moved
        return out
    if c.run.suggestion is None:
        return out
    wanted, _ = desired_containers(c.pod, c.run.suggestion, c.run.skip)
    allocated = {a.name: a for a in allocated_containers(c.pod)}
    for container in wanted:
        have = allocated.get(container.name)
        if have is None:
            continue
        moved = {r for r, v in container.resources.requests.items() if have.requests.get(r) != v}
        if moved:
            out[container.name] = moved
    return out


# --------------------------------------------------------------------- reporting


def report(run: TargetRun) -> None:
    """A note per rule that held something while it lasts, one Event when it starts."""
    limits = run.limits
    for kind in (WINDOW, CHANGE_BUDGET, DISRUPTION_BUDGET):
        hold = limits.holds.get(kind) if limits is not None else None
        if hold is None:
            run.state.reported.pop(f"held-{kind}", None)
            continue
        msg = f"{len(hold.pods)} pod(s): {hold.message}"
        run.notes.append(msg)
        # Once per closed spell (the next opening), or per budget reached.
        key = str(limits.window.opens_at) if kind == WINDOW and limits is not None else "1"
        if run.report_once(f"held-{kind}", key):
            run.target_event(HELD_EVENT[kind], msg)


def held_status(run: TargetRun) -> list[dict[str, JSONValue]]:
    """`status.held_back`: what each rule held this pass (`foresize explain` reads it)."""
    limits = run.limits
    if limits is None:
        return []
    out: list[dict[str, JSONValue]] = []
    for kind, hold in sorted(limits.holds.items()):
        entry: dict[str, JSONValue] = {
            "rule": kind,
            "message": hold.message,
            "pods": sorted(hold.pods),
            "containers": [
                {"name": name, "resources": sorted(resources)}
                for name, resources in sorted(hold.resources.items())
            ],
        }
        if kind == WINDOW and limits.window.opens_at is not None:
            entry["until"] = format_timestamp(limits.window.opens_at)
        out.append(entry)
    return out


def condition(run: TargetRun, current: list[dict[str, JSONValue]]) -> dict[str, JSONValue] | None:
    """MaintenanceWindowsInvalid as it should now read (True with the problems, False once
    fixed), or None when `current` already says so (or it never was True)."""
    problems = run.limits.problems if run.limits is not None else []
    now = next((c for c in current if c.get("type") == CONDITION), None)
    if problems:
        wanted: dict[str, JSONValue] = {
            "type": CONDITION,
            "status": "True",
            "reason": "WindowsInvalid",
            "message": "; ".join(problems) + " (what the windows guard waits until they are fixed)",
        }
    elif now is not None and now.get("status") == "True":
        wanted = {
            "type": CONDITION,
            "status": "False",
            "reason": "WindowsValid",
            "message": "the maintenance windows are read as written",
        }
    else:
        return None
    if now is not None and all(now.get(k) == v for k, v in wanted.items()):
        return None
    return wanted
