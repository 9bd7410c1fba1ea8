"""The planner's half of the start-up boost (`cluster.boost`): leave a pod alone while it
starts with its boosted CPU, and unboost it in place once its start-up period is over
(Ready, its `until`, or its usage settled: the pass's per-pod CPU samples).

The unboost is an in-place CPU downsize back to the target's suggestion (or, where the
target has none yet, to what the webhook admitted before boosting). It is sent in the
first pass after the period ends, not paced by the batch budget: it disrupts nothing, and
every pass it waits the pod holds CPU it no longer needs. Like every resize it goes
through the admission step (capacity ledger, events)."""

from __future__ import annotations

from foresize.core.api.quantity import CPU
from foresize.core.cluster.boost import (
    ENDED_SETTLE_TIMEOUT,
    BoostState,
    CpuSamples,
)
from foresize.core.cluster.model import ContainerSuggestion, Pod, Suggestion
from foresize.core.vertical.desired import KnownPod, PodChange, pod_change
from foresize.core.vertical.run import RESIZE, Candidate, PassContext, TargetRun

UNBOOST = "unboost"


def plan_boosts(
    run: TargetRun, ctx: PassContext, out: list[Candidate], entries: list[KnownPod]
) -> set[str]:
    """The uids of the pods the boost handles this pass (the update mode leaves them);
    `entries`: the target's pods' entries (`desired.known_pod`), in their order."""
    handled: set[str] = set()
    pol = run.policy
    if pol.vertical_mode != "autonomous" or ctx.snapshot.paused or pol.deleting:
        return handled
    for entry in entries:
        state = entry.boost  # `boost_state(pod)`, read when the entry was made
        if state is None or not entry.running:
            continue
        pod = entry.pod
        if state.problem:
            if run.report_once(f"boost:{pod.uid}", state.problem):
                run.pod_event(pod, "StartupBoostIgnored", state.problem, "Warning")
            continue
        if not state.still_boosted(pod):
            continue
        handled.add(pod.uid)
        usage = ctx.pod_usage.samples(pod.key) if ctx.pod_usage is not None else None
        ended = state.ended(pod, ctx.now, usage)
        if not ended:
            run.boosting += 1
            for note in state.bounded:  # what clamped it, said while the pod starts
                run.notes.append(f"start-up boost of pod {pod.name} clamped: {note}")
            continue
        change = _unboost(run, pod, state)
        if change is None:
            continue
        out.append(Candidate(RESIZE, pod, run, change, UNBOOST, urgent=True, known=entry))
        if ended == ENDED_SETTLE_TIMEOUT and state.settle is not None:
            # Said, not guessed: the pod may still have needed the CPU.
            message = _timeout_message(pod, state, usage)
            run.notes.append(message)
            if run.report_once(f"boost-timeout:{pod.uid}", "1"):
                run.pod_event(pod, "StartupBoostTimedOut", message, "Warning")
    return handled


def _timeout_message(pod: Pod, state: BoostState, usage: CpuSamples | None) -> str:
    assert state.settle is not None
    st = state.settle
    seen = "no CPU usage sample of it was seen" if not usage else "its CPU usage had not settled"
    return (
        f"start-up boost of pod {pod.name} ended {st.timeout:g}s after Ready without "
        f"settling: {seen} ({st.samples} samples in a row under {st.below:g}x the "
        "unboosted request expected)"
    )


def _unboost(run: TargetRun, pod: Pod, state: BoostState) -> PodChange | None:
    """The CPU change back to the suggestion, else to the values before the boost."""
    pol = run.policy
    if run.suggestion is not None and CPU not in run.skip:
        change = pod_change(pod, run.suggestion, run.skip, pol.scale_up, pol.scale_down, (CPU,))
        if change is not None and CPU in change.changed:
            return change
    back = Suggestion(
        "unboost",
        0.0,
        {
            name: ContainerSuggestion(
                name, {CPU: b["request"]}, {CPU: b["limit"]} if "limit" in b else {}
            )
            for name, b in state.back.items()
            if "request" in b
        },
    )
    return pod_change(pod, back, frozenset(), pol.scale_up, pol.scale_down, (CPU,))
