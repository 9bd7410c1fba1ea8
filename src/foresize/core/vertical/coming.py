"""The worker's half of publishing what Foresize will do (`cluster.pending`): each pod the
pass decides to recreate, whose upsize waits for room on its node, or whose upsize the
kubelet holds Deferred, with the size it will have. Noted where the decision is made;
the pass (`reconcile.plan_pass`) turns them into the annotation and the demand metric."""

from __future__ import annotations

from foresize.core.api.quantity import CPU
from foresize.core.cluster.model import REASON_DEFERRED, ResourceMap
from foresize.core.cluster.pending import (
    DEFERRED,
    RECREATE,
    WAITING_FOR_ROOM,
    ComingSize,
    coming_size,
)
from foresize.core.vertical.desired import entry_derived
from foresize.core.vertical.run import Candidate, PassContext, PodView, TargetRun


def note_recreate(c: Candidate, ctx: PassContext) -> None:
    """A pod Foresize will evict to recreate at new requests (sent now or held): its
    replacement is sized by admission, the start-up boost included when the target has
    one (the webhook boosts every new pod it sizes)."""
    run = c.run
    if run.suggestion is None:
        return
    # A function of the pod, the suggestion, the resources left alone and the target's
    # policy (the boost, the bounds): once per pod object while they hold.
    _note(
        ctx,
        entry_derived(
            c.entry(),
            "coming:recreate",
            lambda: _recreated_size(c),
            run.suggestion,
            run.skip,
            run.policy,
        ),
    )


def _recreated_size(c: Candidate) -> ComingSize | None:
    run = c.run
    containers, _ = run.desired(c.pod)
    requests = {x.name: dict(x.resources.requests) for x in containers}
    boost = run.policy.startup_boost if CPU not in run.skip else None
    upper: dict[str, int | None] = {}
    for x in c.pod.containers:
        policy = run.policy.policy_for(x.name)
        if policy is not None:
            bound = policy.for_resource(CPU)
            upper[x.name] = bound.upper if bound is not None else None
    return coming_size(c.pod, requests, RECREATE, boost, upper)


def note_waiting(c: Candidate, ctx: PassContext) -> None:
    """An in-place upsize the capacity guard holds: the pod stays, its node lacks room."""
    change = c.change
    if change is None:
        return

    def size() -> ComingSize | None:
        assert change is not None
        requests: dict[str, ResourceMap] = {cr.name: dict(cr.requests) for cr in change.containers}
        return coming_size(c.pod, requests, WAITING_FOR_ROOM)

    _note(ctx, entry_derived(c.entry(), "coming:waiting", size, change))


def note_deferred(run: TargetRun, view: PodView, ctx: PassContext) -> None:
    """An upsize the kubelet holds as Deferred: the spec already asks for the new size."""
    if view.reason != REASON_DEFERRED:
        return
    pod = view.pod

    def size() -> ComingSize | None:
        requests = {x.name: dict(x.resources.requests) for x in pod.containers}
        return coming_size(pod, requests, DEFERRED)

    _note(ctx, entry_derived(view.known, "coming:deferred", size))


def forget(ctx: PassContext, uid: str) -> None:
    """The pod no longer waits (its Deferred resize was released)."""
    ctx.coming.pop(uid, None)


def _note(ctx: PassContext, coming: ComingSize | None) -> None:
    if coming is not None:  # None: nothing grows
        ctx.coming[coming.uid] = coming
