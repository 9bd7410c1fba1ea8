"""What each update mode proposes for one running pod (the decision step).

- `initial`: only the admission webhook sets resources; running pods are never touched.
- `recreate`: a pod whose `recreate_resources` differ is proposed for eviction.
- `in_place`: the pod is proposed for an in-place resize; never evicted. A stall stays until
  capacity frees up or a new forecast changes the target.
- `in_place_or_recreate`: in place first; a pod whose resize stalled for `stall_timeout`,
  or that the API server refused outright (422, 403 NodeCapacity), is proposed for eviction.

A memory raise of a container whose heap is a share of the limit it saw at start
(`cluster.runtime.HeapCeiling.follows_limit`) is never expected to grow the heap in place:
`in_place_or_recreate` recreates the pod (its replacement starts with the new limit, so
with the bigger heap); `in_place` holds the memory part for the pod's next restart and
says so; an OOM-urgent raise still goes in place (it gives the non-heap room at once, and
the killed container restarts into the new limit).

Each returns how many disruptions the pod already accounts for (0 or 1: an in-place change
still rolling, or a stalled restart-on-resize), and appends its proposal to `out`. The
admission step (`vertical.admit`) then checks each proposal against the budget, the
eviction gates and the capacity guard.
"""

from __future__ import annotations

from collections.abc import Callable

from foresize.core.api.jobs import RUNS_KINDS
from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.actions import ContainerResize
from foresize.core.cluster.capacity import format_resources
from foresize.core.cluster.disruption import restart_pending
from foresize.core.cluster.jobs import JOB
from foresize.core.cluster.model import (
    COMPUTE_RESOURCES,
    REASON_DEFERRED,
    Container,
    Pod,
    ResourceMap,
)
from foresize.core.cluster.qos import allocated_requests, pod_charge
from foresize.core.cluster.runtime import heap_ceiling
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.vertical.admit import disruption_hold, recreated_by_controller
from foresize.core.vertical.desired import (
    PodChange,
    allocated_containers,
    container_sig,
    entry_change,
    entry_derived,
    entry_in_flight,
    fitting_containers,
)
from foresize.core.vertical.run import (
    EVICT,
    RELEASE,
    RESIZE,
    Candidate,
    PassContext,
    PodView,
    TargetRun,
)

# An OOM kill this recent makes a memory upsize of that pod urgent (architecture §3.1: ×1.2
# at once): an in-place resize of it skips the batch pacing, because the OOMing pod is
# already disrupted and the resize ends the disruption without another one. An eviction of
# it does not (`admit._evict`): it goes first, but within the batch.
OOM_URGENT_WINDOW = 600.0
OOM_KILLED = "OOMKilled"

Decide = Callable[[TargetRun, PodView, PassContext, list[Candidate]], int]


def recent_oom(pod: Pod, now: float) -> bool:
    for st in pod.container_statuses:
        if (
            st.last_termination_reason == OOM_KILLED
            and st.last_termination_time is not None
            and now - st.last_termination_time <= OOM_URGENT_WINDOW
        ):
            return True
    return False


def new_run_oom_kill(before: Pod | None, after: Pod) -> bool:
    """Does `after` show an OOM kill of a run's container (a pod of a Job) that `before`
    (the same pod as last seen; None: not seen) did not? Such a kill makes a pass due at
    once (both shells: the kube shell's pod watch, the simulator's): the kubelet restarts
    the container after a 10 s back-off, sooner than the next pass, and the pass's raise
    (`decide_initial`) must land before the restart, or the run is killed again at the
    same limit."""
    if after.owner is None or after.owner.kind != JOB:
        return False
    seen = {
        st.name: st.last_termination_time
        for st in (before.container_statuses if before is not None else ())
        if st.last_termination_reason == OOM_KILLED
    }
    return any(
        st.last_termination_reason == OOM_KILLED
        and st.last_termination_time is not None
        and seen.get(st.name) != st.last_termination_time
        for st in after.container_statuses
    )


def _raises_memory(c: Container, requests: dict[str, int], limits: dict[str, int]) -> bool:
    for new, old in ((requests, c.resources.requests), (limits, c.resources.limits)):
        if new.get(MEMORY, 0) > old.get(MEMORY, new.get(MEMORY, 0)):
            return True
    return False


def memory_up(pod: Pod, change: PodChange) -> bool:
    """Does the change raise a memory request or limit (what OOM remediation does)?"""
    for cr in change.containers:
        c = pod.container(cr.name)
        if c is not None and _raises_memory(c, cr.requests, cr.limits):
            return True
    return False


# The eviction reason of a pod recreated so that its heap follows a raised memory limit.
HEAP_BOUND = "heap-bound"


def heap_bound_raises(pod: Pod, change: PodChange) -> list[str]:
    """The containers (as `name (heap source)`) whose memory the change raises while
    their heap is a share of the limit seen at start: in place the cgroup grows but the
    running heap does not, so the raise reaches the heap only after a restart."""
    out = []
    for cr in change.containers:
        c = pod.container(cr.name)
        if c is None or not _raises_memory(c, cr.requests, cr.limits):
            continue
        ceiling = heap_ceiling(c.command, c.args, c.env, c.env_from)
        if ceiling.follows_limit:
            out.append(f"{c.name} ({ceiling.source})")
    return out


def _heap_bound(view: PodView, change: PodChange | None) -> list[str]:
    """`heap_bound_raises`, once per pod object and change (`desired.derived`)."""
    if change is None:
        return []
    pod = view.pod
    return entry_derived(view.known, "heap_bound", lambda: heap_bound_raises(pod, change), change)


def _hold_for_restart(run: TargetRun, pod: Pod, bound: list[str], how: str) -> None:
    """Say that a heap-bound pod's memory raise waits for (or makes) its restart: a note
    and the pod in the status while it lasts, one Event per pod and raise."""
    msg = (
        f"memory raise of {', '.join(bound)} {how}: the heap is sized from the limit at "
        "the container's start, so an in-place raise gives it nothing"
    )
    run.waiting_restart[pod.name] = msg
    if run.report_once(f"heap:{pod.uid}", ",".join(bound) + how):
        run.pod_event(pod, "HeapBoundResize", msg)


def _urgent(pod: Pod, change: PodChange | None, now: float) -> bool:
    return change is not None and recent_oom(pod, now) and memory_up(pod, change)


def _already_disrupted(run: TargetRun, view: PodView) -> int:
    """1 if the pod counts against the batch already: an in-place change still rolling, or
    a stalled resize that will restart a container when it lands."""
    if view.reason is None:
        return 1 if entry_in_flight(view.known) else 0
    return 1 if restart_pending(view.pod) else 0


def _change(run: TargetRun, view: PodView, only: tuple[str, ...] | None = None) -> PodChange | None:
    pol = run.policy
    assert run.suggestion is not None
    return entry_change(
        view.known,
        run.suggestion,
        run.skip,
        pol.scale_up,
        pol.scale_down,
        only,
        run.changes_by_spec,
    )


def pending_sig(pod: Pod) -> str:
    """Signature (as `PodChange.signature`) of the resize the pod's spec is asking for."""
    back = {c.name: c for c in allocated_containers(pod)}
    parts = []
    for c in pod.containers:
        a = back[c.name]
        if a.requests != c.resources.requests or a.limits != c.resources.limits:
            parts.append(container_sig(c.name, c.resources.requests, c.resources.limits))
    return ";".join(parts)


def _release(
    run: TargetRun, view: PodView, change: PodChange | None, ctx: PassContext, out: list[Candidate]
) -> bool:
    """Release a Deferred resize that has held node capacity for `release_deferred_after`
    (`release_deferred`: `fit` shrinks the ask to what the node has room for, `allocated`
    patches it back to what the kubelet allocated, `never` keeps it). Under
    `in_place_or_recreate` a pod that can be recreated is evicted at `stall_timeout`
    first; it is released only if that eviction could not go for `release_deferred_after`
    more (PDB, no room elsewhere). True if proposed."""
    pol, rec, pod, now = run.policy, view.record, view.pod, ctx.now
    if (
        view.reason != REASON_DEFERRED
        or pol.release_deferred == "never"
        or rec is None
        or change is not None
    ):
        return False
    after = pol.release_deferred_after
    if pol.update_mode == "in_place_or_recreate" and recreatable(pod):
        after += pol.stall_timeout
    if now - rec.first_seen < after:
        return False
    back = allocated_containers(pod)
    to: tuple[ContainerResize, ...] = ()
    how = "patched back to the allocated resources"
    if pol.release_deferred == "fit":
        fitted = fitting_containers(pod, node_room(ctx.snapshot, pod))
        if all(
            c.requests == p.resources.requests for c, p in zip(fitted, pod.containers, strict=True)
        ):
            return False  # room came back: the kubelet admits it on its next try
        if fitted != back:
            to, how = fitted, "shrunk to what the node has room for"
    out.append(
        Candidate(RELEASE, pod, run, None, "release-deferred", release_to=to, known=view.known)
    )
    run.state.released[pod.uid] = pending_sig(pod)
    run.pod_event(
        pod,
        "ResizeReleased",
        f"resize Deferred for {now - rec.first_seen:.0f}s: {how} so it stops holding node "
        f"capacity ({'; '.join(describe_resize(c) for c in (to or back))})",
        "Warning",
    )
    return True


def recreatable(pod: Pod) -> bool:
    """Would an eviction recreate the pod (a controller owns it, and it did not opt out of
    voluntary disruption)?"""
    return recreated_by_controller(pod) and disruption_hold(pod) is None


def node_room(snapshot: ClusterSnapshot, pod: Pod) -> ResourceMap:
    """What the pod may grow by on its node now: the node's allocatable less the
    scheduler's charge of every other pod there and what the kubelet allocated this one
    (its own pending ask is not counted: that is what is being sized)."""
    node = snapshot.nodes.get(pod.node_name or "")
    if node is None:
        return {}
    used = dict(allocated_requests(pod))
    for other in snapshot.pods_on_node(node.name):
        if other.uid != pod.uid:
            for r, v in pod_charge(other).items():
                used[r] = used.get(r, 0) + v
    return {
        r: node.allocatable[r] - used.get(r, 0) for r in COMPUTE_RESOURCES if r in node.allocatable
    }


def describe_resize(c: ContainerResize) -> str:
    return f"{c.name}: {format_resources(c.requests)}"


def _still_refused(run: TargetRun, view: PodView, change: PodChange | None) -> bool:
    """Was this pod's resize refused by the API server (422, 403 NodeCapacity)? A new
    forecast that changes the target clears the refusal: it is tried in place again."""
    ts, uid = run.state, view.pod.uid
    if uid not in ts.refused:
        return False
    if change is None or ts.refused[uid] == change.signature:
        return True
    del ts.refused[uid]
    if view.record is not None and view.record.reason == "Refused":
        del ts.stalls[uid]
        view.record = None
    return False


def _propose_resize(
    run: TargetRun,
    view: PodView,
    change: PodChange | None,
    urgent: bool,
    ctx: PassContext,
    out: list[Candidate],
) -> None:
    if change is None or not (change.significant or urgent):
        return
    if run.state.released.get(view.pod.uid) == change.signature and not ctx.config.capacity_guard:
        return  # released because it could not land; without the guard do not resend
    out.append(Candidate(RESIZE, view.pod, run, change, "resize", urgent, known=view.known))


def decide_initial(run: TargetRun, view: PodView, ctx: PassContext, out: list[Candidate]) -> int:
    """Nothing for a running pod, but for a run of a CronJob (or job group) whose memory
    the runs' suggestion (`recommend.runs`) now puts above the pod's: the raise an OOM kill
    of the run gave it, or the raise ahead of a kill of a run in progress near its
    request; sent in place, urgent. A killed container is restarting already (a Job's
    pods restart in place under `restartPolicy: OnFailure`), so the raise disrupts
    nothing; without it the run is killed again at the same limit until its Job's
    `backoffLimit` fails it. A memory raise in place needs no restart (`resizePolicy`
    NotRequired; pods/resize allows it). Memory only, never down, never an eviction."""
    if run.policy.ref_kind not in RUNS_KINDS:
        return 0
    change = _change(run, view, (MEMORY,))
    if change is not None and change.problem is None and memory_up(view.pod, change):
        _propose_resize(run, view, change, True, ctx, out)
    return 0


def decide_recreate(run: TargetRun, view: PodView, ctx: PassContext, out: list[Candidate]) -> int:
    pod = view.pod
    change = _change(run, view, run.policy.recreate_resources)
    urgent = _urgent(pod, change, ctx.now)
    if change is not None and (change.significant or urgent):
        out.append(Candidate(EVICT, pod, run, change, "recreate", urgent, known=view.known))
    return _already_disrupted(run, view)


def decide_in_place(run: TargetRun, view: PodView, ctx: PassContext, out: list[Candidate]) -> int:
    pod = view.pod
    change = _change(run, view)
    if change is not None and change.problem is not None:
        if run.report_once(f"qos:{pod.uid}", change.signature):
            run.pod_event(pod, "ResizeNotPossible", change.problem, "Warning")
        return 0
    disrupted = _already_disrupted(run, view)
    urgent = _urgent(pod, change, ctx.now)
    if _release(run, view, change, ctx, out):
        return disrupted
    if _still_refused(run, view, change):
        refused_sig = run.state.refused[pod.uid]
        if run.report_once(f"refused:{pod.uid}", refused_sig):
            run.pod_event(
                pod, "ResizeRefused", "resize refused by the API server; waiting", "Warning"
            )
        return disrupted
    bound = _heap_bound(view, change) if not urgent else []
    if bound and change is not None and change.significant:
        _hold_for_restart(run, pod, bound, "waits for the pod's next restart")
        change = _change(run, view, (CPU,))  # the CPU part still goes in place
    _propose_resize(run, view, change, urgent, ctx, out)
    return disrupted


def decide_in_place_or_recreate(
    run: TargetRun, view: PodView, ctx: PassContext, out: list[Candidate]
) -> int:
    pod = view.pod
    change = _change(run, view)
    disrupted = _already_disrupted(run, view)
    urgent = _urgent(pod, change, ctx.now)
    if _release(run, view, change, ctx, out):
        return disrupted
    refused = _still_refused(run, view, change)
    rec = view.record
    if rec is not None and (
        rec.reason == "Refused" or ctx.now - rec.first_seen >= run.policy.stall_timeout
    ):
        # A refusal (422, 403 NodeCapacity) evicts at once: say so, not a stall timeout.
        why = "refused" if rec.reason == "Refused" else "stall-fallback"
        out.append(Candidate(EVICT, pod, run, change, why, urgent, known=view.known))
        return disrupted
    if refused or (change is not None and change.problem is not None):
        out.append(Candidate(EVICT, pod, run, change, "refused", urgent, known=view.known))
        return disrupted
    bound = _heap_bound(view, change) if not urgent else []
    if bound and change is not None and change.significant:
        _hold_for_restart(run, pod, bound, "recreates the pod")
        out.append(Candidate(EVICT, pod, run, change, HEAP_BOUND, known=view.known))
        return disrupted
    _propose_resize(run, view, change, urgent, ctx, out)
    return disrupted


DECIDE: dict[str, Decide] = {
    "initial": decide_initial,
    "recreate": decide_recreate,
    "in_place": decide_in_place,
    "in_place_or_recreate": decide_in_place_or_recreate,
}
