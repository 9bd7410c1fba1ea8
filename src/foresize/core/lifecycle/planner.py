"""The lifecycle pass (pure): notice targets leaving vertical autonomous mode or being
deleted, drive their revert to completion, and honour the cluster-wide pause.

`plan_lifecycle(snapshot, now, state) -> LifecyclePlan` is called by the shell's control
loop (the operator, or `sim.every(...)` in the simulator) after taking a snapshot; the
shell applies `plan.actions`, removes the `foresize.io/revert` finalizer of the targets in
`plan.finalizers_done`, and keeps `plan.state` for the next pass.

- A target seen autonomous and now recommendation/observe starts a revert ("LeftAutonomousMode").
- A target being deleted with the finalizer starts one ("TargetDeleted"); once nothing
  is left to issue, its finalizer may go.
- Returning to autonomous cancels a revert in progress.
- Operator restarts: the last mode seen and any revert in progress (with the workloads
  it already restarted) are written to `status.lifecycle` and read back by a fresh state,
  so a mode switch made while the operator was down is still reverted and a rollout
  restart is not issued twice.
- Pause (`snapshot.paused`): running pods keep their values and nothing is planned;
  state is kept as it is, so a revert resumes and mode changes made during the pause
  are still noticed after it. New pods get template values through admission.
- Revert everything now (`snapshot.revert_all`, the pause ConfigMap's `revert: "true"`,
  which pauses too): every target still autonomous gets a revert ("ClusterRevert"), run
  as a revert on leaving autonomous mode is (in place where the API server allows, a
  workload restart where the QoS class would change and the update policy permits it,
  paced by the target's disruption batches). Maintenance windows do not hold it: it was
  asked for now. Once the flag is gone and the pause lifted, the targets are autonomous
  again and their pods are sized anew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from foresize.core.api.access import JSONValue
from foresize.core.api.types import format_timestamp, parse_timestamp
from foresize.core.cluster.actions import Action, WriteTargetStatus
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.refusals import Refusal
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView, dsa_view, target_view
from foresize.core.cluster.target_fields import AUTONOMOUS
from foresize.core.lifecycle.revert import HELD_PREFIX, REVERT_FINALIZER, RevertPlan, plan_revert

STATUS_KEY = "lifecycle"

PAUSE_CONFIGMAP = "foresize-pause"
"""The ConfigMap whose `data` pauses Foresize cluster-wide (the operator's
`--pause-configmap` default)."""


def pause_flags(data: object) -> tuple[bool, bool]:
    """(paused, revert_all) as the pause ConfigMap's `data` says: `paused: "true"` pauses;
    `revert: "true"` reverts every autonomous target now, and pauses too. The one reading
    of it: the operator's watch and the webhook's `--state` file both call this."""
    if not isinstance(data, Mapping):
        return False, False
    revert = str(data.get("revert", "")).lower() == "true"
    paused = str(data.get("paused", "")).lower() == "true"
    return paused or revert, revert


@dataclass(slots=True)
class RevertJob:
    target: TargetView
    reason: str
    since: float
    restarted: set[str] = field(default_factory=set)
    reported: set[str] = field(default_factory=set)
    last_batch_at: float | None = None  # the last restarting resize of the revert


@dataclass(slots=True)
class LifecycleState:
    modes: dict[str, str] = field(default_factory=dict)  # "Kind/ns/name" -> vertical mode
    jobs: dict[str, RevertJob] = field(default_factory=dict)
    written: dict[str, dict[str, Any]] = field(default_factory=dict)  # last status written

    def copy(self) -> LifecycleState:
        return LifecycleState(
            dict(self.modes),
            {
                k: RevertJob(
                    j.target, j.reason, j.since, set(j.restarted), set(j.reported), j.last_batch_at
                )
                for k, j in self.jobs.items()
            },
            dict(self.written),
        )


@dataclass(slots=True)
class LifecyclePlan:
    actions: list[Action]
    state: LifecycleState
    finalizers_done: list[str] = field(default_factory=list)  # "Kind/ns/name"
    reverts: dict[str, RevertPlan] = field(default_factory=dict)


def _key(view: TargetView) -> str:
    return f"{view.kind}/{view.namespace}/{view.name}"


def plan_lifecycle(
    snapshot: ClusterSnapshot,
    now: float,
    state: LifecycleState,
    ledger: NodeLedger | None = None,
    refusals: Mapping[str, Refusal] | None = None,
) -> LifecyclePlan:
    """`ledger`: the pass's node capacity, which every revert resize is admitted through
    (shared with the other planners that resize pods in the same pass); `refusals`: the
    resizes the API server refused outright (`cluster.refusals`)."""
    new = state.copy()
    ledger = ledger or NodeLedger(snapshot)
    plan = LifecyclePlan([], new)
    if snapshot.paused and not snapshot.revert_all:
        return plan
    views = [target_view(t) for t in snapshot.targets] + [
        dsa_view(d) for d in snapshot.daemonset_autoscalers
    ]
    for view in views:
        _track_mode(new, view, now, revert_all=snapshot.revert_all)
    for key in sorted(new.jobs):
        _run_revert(snapshot, now, plan, key, ledger, refusals or {})
    for view in views:
        _write_status(plan, view)
    return plan


CLUSTER_REVERT = "ClusterRevert"


def _track_mode(
    new: LifecycleState, view: TargetView, now: float, *, revert_all: bool = False
) -> None:
    """Start, update or cancel the target's revert job from its mode and deletion (and
    the cluster-wide "revert everything now")."""
    key = _key(view)
    if key not in new.modes:
        _restore(new, key, view)
    prev = new.modes.get(key)
    new.modes[key] = view.vertical_mode
    job = new.jobs.get(key)
    if revert_all and view.vertical_mode == AUTONOMOUS and not view.deleting:
        if job is None or job.reason != CLUSTER_REVERT:
            new.jobs[key] = RevertJob(view, CLUSTER_REVERT, now)
        else:
            job.target = view
        return
    if view.deleting:
        if REVERT_FINALIZER in view.finalizers and (job is None or job.reason != "TargetDeleted"):
            new.jobs[key] = RevertJob(view, "TargetDeleted", now)
        elif job is not None:
            job.target = view
        return
    if view.vertical_mode == AUTONOMOUS:
        new.jobs.pop(key, None)  # back to autonomous: the revert is moot
    elif prev == AUTONOMOUS:
        new.jobs[key] = RevertJob(view, "LeftAutonomousMode", now)
    elif job is not None:
        job.target = view


def _run_revert(
    snapshot: ClusterSnapshot,
    now: float,
    plan: LifecyclePlan,
    key: str,
    ledger: NodeLedger,
    refusals: Mapping[str, Refusal],
) -> None:
    """One revert job's step this pass; a complete job is dropped (and a deleted
    target's finalizer released)."""
    new = plan.state
    job = new.jobs[key]
    rp = plan_revert(
        snapshot,
        job.target,
        now,
        reason=job.reason,
        already_restarted=job.restarted,
        reported=job.reported,
        ledger=ledger,
        last_batch_at=job.last_batch_at,
        refusals=refusals,
    )
    if rp.batch_sent:
        job.last_batch_at = now
    plan.reverts[key] = rp
    plan.actions.extend(rp.actions)
    job.restarted.update(rp.restarted)
    job.reported.update(rp.left)
    job.reported.update(HELD_PREFIX + k for k in rp.held)
    if rp.complete and job.reason != CLUSTER_REVERT:
        if job.reason == "TargetDeleted":
            plan.finalizers_done.append(key)
        # Pods left behind (in_place) stay reported; nothing more to do for them.
        del new.jobs[key]
    # A cluster revert stays while the flag is on: it remembers the workloads it
    # restarted, so a rollout still rolling is not restarted again.


def _write_status(plan: LifecyclePlan, view: TargetView) -> None:
    """The target's lifecycle status, written when it differs from what is there."""
    new = plan.state
    key = _key(view)
    if key in plan.finalizers_done:
        return
    record = _record(new, key)
    before = new.written.get(key) or _persisted(view)
    if before != record:
        patch = dict(record)
        if before and "reverting" in before and "reverting" not in record:
            patch["reverting"] = None  # a merge patch removes a key with null
        plan.actions.append(
            WriteTargetStatus(view.namespace, view.name, {STATUS_KEY: patch}, kind=view.kind)
        )
    new.written[key] = record


def _persisted(view: TargetView) -> dict[str, Any] | None:
    return view.persisted(STATUS_KEY)


def _record(state: LifecycleState, key: str) -> dict[str, Any]:
    """What survives an operator restart: the last mode seen and any revert in progress."""
    record: dict[str, Any] = {"observed_mode": state.modes.get(key, "")}
    job = state.jobs.get(key)
    if job is not None:
        record["reverting"] = {
            "reason": job.reason,
            "since": format_timestamp(job.since),
            "restarted": sorted(job.restarted),
            "reported": sorted(job.reported),
        }
        if job.last_batch_at is not None:
            record["reverting"]["lastBatchTime"] = format_timestamp(job.last_batch_at)
    return record


def _restore(state: LifecycleState, key: str, view: TargetView) -> None:
    """Seed a fresh state (operator restart) from what an earlier pass wrote to status."""
    record = _persisted(view)
    if not record:
        return
    if record.get("observed_mode"):
        state.modes[key] = str(record["observed_mode"])
    job = record.get("reverting")
    if isinstance(job, dict) and key not in state.jobs:
        since = job.get("since")
        last_batch = job.get("lastBatchTime")
        state.jobs[key] = RevertJob(
            view,
            str(job.get("reason") or "LeftAutonomousMode"),
            parse_timestamp(since) if since is not None else 0.0,
            set(job.get("restarted") or ()),
            set(job.get("reported") or ()),
            _time_or_none(last_batch),
        )


def _time_or_none(value: JSONValue) -> float | None:
    """A time written by `_record`; None when absent or unreadable (a hand-edited status
    must not stop the revert: it only loses its pacing memory)."""
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def finalizers_to_add(
    snapshot: ClusterSnapshot, finalized: set[str]
) -> list[tuple[str, str, str, str]]:
    """(kind, namespace, name, uid) of the Foresize objects that still need the revert
    finalizer (it holds a deletion until the revert is done)."""
    out = []
    views = [
        *map(target_view, snapshot.targets),
        *map(dsa_view, snapshot.daemonset_autoscalers),
    ]
    for view in views:
        uid = view.uid or view.key
        if view.deleting or REVERT_FINALIZER in view.finalizers or uid in finalized:
            continue
        out.append((view.kind, view.namespace, view.name, uid))
    return out
