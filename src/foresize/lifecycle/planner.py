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
- Pause (`snapshot.paused`): running pods keep their values and nothing is planned;
  state is kept as it is, so a revert resumes and mode changes made during the pause
  are still noticed after it. New pods get template values through admission.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foresize.admission.targets import AUTONOMOUS, TargetView, dsa_view, target_view
from foresize.cluster.actions import Action
from foresize.cluster.snapshot import ClusterSnapshot
from foresize.lifecycle.revert import REVERT_FINALIZER, RevertPlan, plan_revert


@dataclass(slots=True)
class RevertJob:
    target: TargetView
    reason: str
    since: float
    restarted: set[str] = field(default_factory=set)
    reported: set[str] = field(default_factory=set)


@dataclass(slots=True)
class LifecycleState:
    modes: dict[str, str] = field(default_factory=dict)  # "Kind/ns/name" -> vertical mode
    jobs: dict[str, RevertJob] = field(default_factory=dict)

    def copy(self) -> LifecycleState:
        return LifecycleState(
            dict(self.modes),
            {
                k: RevertJob(j.target, j.reason, j.since, set(j.restarted), set(j.reported))
                for k, j in self.jobs.items()
            },
        )


@dataclass(slots=True)
class LifecyclePlan:
    actions: list[Action]
    state: LifecycleState
    finalizers_done: list[str] = field(default_factory=list)  # "Kind/ns/name"
    reverts: dict[str, RevertPlan] = field(default_factory=dict)


def _key(view: TargetView) -> str:
    return f"{view.kind}/{view.namespace}/{view.name}"


def plan_lifecycle(snapshot: ClusterSnapshot, now: float, state: LifecycleState) -> LifecyclePlan:
    new = state.copy()
    plan = LifecyclePlan([], new)
    if snapshot.paused:
        return plan
    views = [target_view(t) for t in snapshot.targets] + [
        dsa_view(d) for d in snapshot.daemonset_autoscalers
    ]
    for view in views:
        key = _key(view)
        prev = new.modes.get(key)
        new.modes[key] = view.vertical_mode
        job = new.jobs.get(key)
        if view.deleting:
            if REVERT_FINALIZER in view.finalizers and (
                job is None or job.reason != "TargetDeleted"
            ):
                new.jobs[key] = RevertJob(view, "TargetDeleted", now)
            elif job is not None:
                job.target = view
            continue
        if view.vertical_mode == AUTONOMOUS:
            new.jobs.pop(key, None)  # back to autonomous: the revert is moot
        elif prev == AUTONOMOUS:
            new.jobs[key] = RevertJob(view, "LeftAutonomousMode", now)
        elif job is not None:
            job.target = view
    for key in sorted(new.jobs):
        job = new.jobs[key]
        rp = plan_revert(
            snapshot,
            job.target,
            now,
            reason=job.reason,
            already_restarted=job.restarted,
            reported=job.reported,
        )
        plan.reverts[key] = rp
        plan.actions.extend(rp.actions)
        job.restarted.update(rp.restarted)
        job.reported.update(rp.left)
        if rp.complete:
            if job.reason == "TargetDeleted":
                plan.finalizers_done.append(key)
            # Pods left behind (in_place) stay reported; nothing more to do for them.
            del new.jobs[key]
    return plan
