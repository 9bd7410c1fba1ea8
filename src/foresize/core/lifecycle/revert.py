"""Stopping autonomous scaling (pure): revert running pods to their controller's template.

When a target leaves vertical autonomous mode (to recommendation or observe) or is
deleted (its `foresize.io/revert` finalizer holds the deletion until this is done), the
running pods Foresize resized go back to the values their controller's pod template
declares (architecture §3.4):

- by an in-place resize wherever the API server would accept it (checked with the same
  rules the API server applies, `foresize.core.cluster.validation`); the pods are not
  re-admitted, so they keep `foresize.io/managed: "true"` if they had it;
- where it would not (the template declares a different set of resource keys than the
  running pod, which would change its QoS class or remove a request/limit) and the
  update policy permits recreation (`recreate`, `in_place_or_recreate`), by restarting
  the workload (`kubectl.kubernetes.io/restartedAt`): the new pods are admitted while the
  target is no longer autonomous, get template values and no annotation;
- with `in_place` or `initial` (no recreation) such pods are left as they are, and the
  reason is reported once as a Warning event on the pod and in the target's status;
- a revert that raises a request passes the capacity guard like every resize: if the
  node has no room for it (by the scheduler's charge) it is not sent, so it never sits
  Deferred holding capacity the node does not have; the revert stays open and tries
  again on the next pass, and the pod is reported once;
- a revert resize that restarts a container (resizePolicy RestartContainer) is a
  disruption, paced like the disruption worker's (`cluster.disruption`: the target's
  `disruption.max_disrupted` of its pods at once, pods already disrupted counted, batches
  `disruption.interval` apart); the others wait for a next batch and the revert stays open.

A cluster-wide pause is not a revert: running pods keep their values and nothing is
planned (see `plan_lifecycle`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from foresize.core.api.types import format_timestamp
from foresize.core.cluster.actions import (
    Action,
    ContainerResize,
    EmitEvent,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.core.cluster.capacity import NodeLedger, resize_delta
from foresize.core.cluster.disruption import RestartBatch, resize_restarts, restart_batch
from foresize.core.cluster.model import (
    COMPUTE_RESOURCES,
    Container,
    Pod,
    Workload,
    disruption_hold,
)
from foresize.core.cluster.refusals import Refusal, refusal_of
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView
from foresize.core.cluster.validation import check_resize

REVERT_FINALIZER = "foresize.io/revert"
# `reported` keys of pods whose revert waits for capacity (kept apart from pods "left").
HELD_PREFIX = "capacity:"


@dataclass(slots=True)
class RevertPlan:
    actions: list[Action] = field(default_factory=list)
    resized: list[str] = field(default_factory=list)  # pod keys resized in place now
    restarted: list[str] = field(default_factory=list)  # workload keys restarted now
    left: dict[str, str] = field(default_factory=dict)  # pod key -> why it was left
    waiting: list[str] = field(default_factory=list)  # pods of a workload already restarted
    held: dict[str, str] = field(default_factory=dict)  # pod key -> no room on its node
    paced: list[str] = field(default_factory=list)  # restarting resizes left for a next batch
    batch_sent: bool = False  # a restarting resize went out: the batch's time is now

    @property
    def complete(self) -> bool:
        """Nothing more to issue: every pod is at template values, left with a reason, or
        belongs to a workload whose restart was already issued."""
        return not self.resized and not self.restarted and not self.held and not self.paced


def pods_of_target(snapshot: ClusterSnapshot, target: TargetView) -> list[Pod]:
    """The target's live pods (neither finished nor terminating)."""
    if target.ref_kind and target.ref_name:
        wl = snapshot.workload(target.ref_kind, target.namespace, target.ref_name)
        pods = list(snapshot.pods_of(wl)) if wl is not None else []
    elif target.has_selector:
        pods = [
            p for p in snapshot.pods if p.namespace == target.namespace and target.selects(p.labels)
        ]
    else:
        pods = []
    return [p for p in pods if not p.terminating and p.phase not in ("Succeeded", "Failed")]


def template_of(snapshot: ClusterSnapshot, pod: Pod) -> tuple[Workload | None, Workload | None]:
    """(controller whose template made the pod, top-level workload to restart).

    For a Deployment's pod the template is its ReplicaSet's (pods of an older revision
    revert to the template they were made from)."""
    top = snapshot.top_owner(pod)
    direct = (
        snapshot.workload(pod.owner.kind, pod.namespace, pod.owner.name)
        if pod.owner is not None
        else None
    )
    source = direct if direct is not None and direct.template.containers else top
    return source, top


def _revert_containers(pod: Pod, template: list[Container]) -> tuple[ContainerResize, ...]:
    """The compute resources each container must get back; a key the template does not
    declare is sent as None (removal, which the API refuses: that is the point of
    checking it)."""
    by_name = {c.name: c for c in template}
    out = []
    for c in pod.containers:
        t = by_name.get(c.name)
        if t is None:
            continue
        req: dict[str, int | None] = {}
        lim: dict[str, int | None] = {}
        for src, want, dst in (
            (c.resources.requests, t.resources.requests, req),
            (c.resources.limits, t.resources.limits, lim),
        ):
            for name in COMPUTE_RESOURCES:
                if src.get(name) != want.get(name):
                    dst[name] = want.get(name)
        if req or lim:
            out.append(ContainerResize(c.name, req, lim))  # type: ignore[arg-type]
    return tuple(out)


def _direction(pod: Pod, changes: tuple[ContainerResize, ...]) -> str:
    ups = downs = 0
    for ch in changes:
        cur = pod.container(ch.name)
        if cur is None:
            continue
        for name, qty in ch.requests.items():
            old = cur.resources.requests.get(name, 0)
            if qty is None or qty < old:
                downs += 1
            elif qty > old:
                ups += 1
    return "mixed" if ups and downs else "up" if ups else "down"


def plan_revert(
    snapshot: ClusterSnapshot,
    target: TargetView,
    now: float,
    *,
    reason: str = "LeftAutonomousMode",
    already_restarted: Collection[str] = (),
    reported: Collection[str] = (),
    ledger: NodeLedger | None = None,
    last_batch_at: float | None = None,
    refusals: Mapping[str, Refusal] | None = None,
) -> RevertPlan:
    """Actions that bring `target`'s running pods back to their templates.

    `already_restarted`: workload keys whose restart this revert already issued (the
    caller keeps them between passes so a rolling restart is not re-triggered);
    `reported`: pod keys whose "left" (or "held") event was already emitted;
    `ledger`: the pass's node capacity, shared with the other planners that resize;
    `last_batch_at`: when this revert's last restarting resize went out;
    `refusals`: the resizes the API server refused outright (`cluster.refusals`): such a
    revert is not sent again but handled as one the API server would refuse."""
    plan = RevertPlan()
    ledger = ledger or NodeLedger(snapshot)
    pods = {p.key: p for p in snapshot.pods}
    resizes: dict[str, list[ResizePod]] = {}
    to_restart: dict[str, Workload] = {}
    restart_for: dict[str, list[tuple[str, str]]] = {}  # workload -> (pod, why) it restarts for
    opted_out: dict[str, str] = {}  # workload -> the opt-out annotation of one of its pods
    live = pods_of_target(snapshot, target)
    batch = restart_batch(
        live, target.max_disrupted, target.disruption_interval, last_batch_at, now
    )
    for pod in live:
        source, top = template_of(snapshot, pod)
        if source is None:
            continue
        top_key = top.key if top is not None else ""
        if (opt_out := disruption_hold(pod.annotations)) is not None:
            opted_out.setdefault(top_key, opt_out)
        if top_key in already_restarted:
            if _revert_containers(pod, source.template.containers):
                plan.waiting.append(pod.key)
            continue
        changes = _revert_containers(pod, source.template.containers)
        if not changes:
            continue
        action = ResizePod(
            pod.namespace,
            pod.name,
            changes,
            target=target.key,
            reason="Revert",
            direction=_direction(pod, changes),
            uid=pod.uid,
            target_kind=target.kind,
        )
        why = _not_in_place(pod, action, refusals or {})
        if why is None:
            resizes.setdefault(top_key, []).append(action)
            continue
        if target.permits_recreation and top is not None:
            to_restart[top.key] = top
            restart_for.setdefault(top.key, []).append((pod.key, why))
            continue
        plan.left[pod.key] = (
            f"not reverted: {why}; update_mode {target.update_mode} does not permit "
            "recreation, so the pod keeps its current resources until it is recreated"
        )
    _keep_opted_out(plan, to_restart, restart_for, opted_out)
    for key, wl in sorted(to_restart.items()):
        plan.restarted.append(key)
        plan.actions.append(
            RestartWorkload(
                wl.namespace,
                wl.kind,
                wl.name,
                now,
                target=target.key,
                reason=f"Revert{reason}",
            )
        )
        plan.actions.append(
            EmitEvent(
                target.namespace,
                target.kind,
                target.name,
                "RevertRestart",
                f"{wl.kind} {wl.name}: template resource keys differ from running pods "
                "(QoS class would change); restarting the workload to revert",
                uid=target.uid,
            )
        )
    for key, actions in sorted(resizes.items()):
        if key not in to_restart:  # a restart recreates these pods anyway
            _admit_resizes(plan, actions, pods, ledger, reported, batch)
    plan.batch_sent = batch.sent > 0
    for pod_key, why in sorted(plan.left.items()):
        if pod_key in reported:
            continue
        ns, name = pod_key.split("/", 1)
        plan.actions.append(EmitEvent(ns, "Pod", name, "RevertNotInPlace", why, "Warning"))
    if plan.left or plan.restarted or plan.resized or plan.held or plan.paced:
        plan.actions.append(revert_status(target, plan, now, reason))
    return plan


def _not_in_place(pod: Pod, action: ResizePod, refusals: Mapping[str, Refusal]) -> str | None:
    """Why the revert cannot go in place, or None: the API server would refuse it, or
    refused this very change already (403 NodeCapacity: the template asks more than the
    node has; handled as the first case)."""
    refused = check_resize(pod, action)
    if refused is not None:
        return (
            "the template declares a different set of resource keys than the running pod "
            f"(the API server refuses the in-place revert: {refused.message})"
        )
    earlier = refusal_of(refusals, action)
    if earlier is not None:
        return f"the in-place revert was refused: {earlier.describe()}"
    return None


def _admit_resizes(
    plan: RevertPlan,
    actions: list[ResizePod],
    pods: dict[str, Pod],
    ledger: NodeLedger,
    reported: Collection[str],
    batch: RestartBatch,
) -> None:
    """The disruption batch and the capacity guard: a revert that restarts a container
    waits for a next batch once this one is spent; one that does not fit its node now is
    held, not sent, and said once on the pod."""
    for a in actions:
        pod_key = f"{a.namespace}/{a.name}"
        pod = pods[pod_key]
        restarts = resize_restarts(pod, a.containers)
        hold = disruption_hold(pod.annotations) if restarts else None
        if hold is not None:
            plan.left[pod_key] = (
                "not reverted: the revert resize would restart a container (resizePolicy "
                f"RestartContainer) and the pod opts out of voluntary disruption ({hold}); "
                "it keeps its current resources until it is recreated"
            )
            continue
        if restarts and batch.left <= 0:
            plan.paced.append(pod_key)
            continue
        node = pod.node_name or ""
        delta = resize_delta(pod, a.containers)
        why = ledger.why_not(node, delta, pod.priority)
        if why is None:
            ledger.reserve(node, delta)
            if restarts:
                batch.take()
            plan.resized.append(pod_key)
            plan.actions.append(a)
            continue
        plan.held[pod_key] = why
        if HELD_PREFIX + pod_key not in reported:
            plan.actions.append(
                EmitEvent(
                    a.namespace,
                    "Pod",
                    a.name,
                    "RevertWaitingForCapacity",
                    f"revert {why}",
                    "Warning",
                )
            )


def revert_status(
    target: TargetView, plan: RevertPlan, now: float, reason: str
) -> WriteTargetStatus:
    if plan.left:
        status, why = "False", "PodsLeft"
        message = f"{len(plan.left)} pod(s) could not be reverted in place: " + "; ".join(
            f"{k}: {v}" for k, v in sorted(plan.left.items())
        )
    else:
        status, why = "True", reason
        message = (
            f"reverting to template values: {len(plan.resized)} pod(s) resized in place, "
            f"{len(plan.restarted)} workload(s) restarted"
        )
        if plan.held:
            message += f", {len(plan.held)} waiting for room on their node"
        if plan.paced:
            message += f", {len(plan.paced)} restarting resize(s) waiting for a next batch"
    # Its own status key: a merge patch of `conditions` would replace the whole list
    # and clobber the conditions other planners own.
    return WriteTargetStatus(
        target.namespace,
        target.name,
        {
            "revert": {
                "reverted": status == "True",
                "reason": why,
                "message": message,
                # A list, not a map: a merge patch replaces lists whole, so a pod that
                # is gone (or was reverted since) drops out instead of lingering.
                "pods_left": [{"pod": k, "reason": v} for k, v in sorted(plan.left.items())],
                "pods_waiting_for_capacity": sorted(plan.held),
                "pods_waiting_for_disruption_batch": sorted(plan.paced),
                "time": format_timestamp(now),
            }
        },
        kind=target.kind,
    )


def _keep_opted_out(
    plan: RevertPlan,
    to_restart: dict[str, Workload],
    restart_for: dict[str, list[tuple[str, str]]],
    opted_out: dict[str, str],
) -> None:
    """A restart recreates every pod of the workload: never one with a pod that opted out
    of voluntary disruption (the node autoscalers' annotations, honoured as the vertical
    worker honours them); its pods are left, saying why."""
    for key in sorted(set(to_restart) & set(opted_out)):
        del to_restart[key]
        for pod_key, why in restart_for[key]:
            plan.left[pod_key] = (
                f"not reverted: {why}; a pod of the workload opts out of voluntary "
                f"disruption ({opted_out[key]}), so it is not restarted and the pod keeps "
                "its current resources until it is recreated"
            )
