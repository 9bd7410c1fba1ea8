"""The admission step: every proposal of the pass, in priority order, checked against its
target's batch budget, the eviction gates (PDB back-off, circuit breaker) and the capacity
guard, and turned into actions (`ResizePod`, `EvictPod`) with their Events.

Capacity guard (scheduler safety): an upsize is admitted on its node while it fits the
node's free capacity by the scheduler's own charge. One that cannot fit is not sent (it
would sit Deferred and keep the larger request charged to the node): under
`in_place_or_recreate` the pod is evicted instead, if its recreated self fits somewhere;
under `in_place` it waits and is reported.
"""

from __future__ import annotations

from foresize.core.cluster.actions import Action, EvictPod, ResizePod
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.model import (
    COMPUTE_RESOURCES,
    Pod,
    ResourceMap,
)
from foresize.core.cluster.model import disruption_hold as model_disruption_hold
from foresize.core.cluster.qos import pod_qos_class, spec_requests_with
from foresize.core.vertical import limits
from foresize.core.vertical.coming import forget, note_recreate, note_waiting
from foresize.core.vertical.desired import (
    allocated_containers,
    charge_delta,
    entry_derived,
)
from foresize.core.vertical.provision import (
    EVICTING_INTO_PENDING,
    recreate_into_pending,
    room_found,
)
from foresize.core.vertical.run import (
    EVICT,
    RELEASE,
    Candidate,
    PassContext,
    TargetRun,
    describe_change,
)

# The Event reason of an eviction the min-replicas rule holds back.
EVICTION_SKIPPED_MIN_REPLICAS = "EvictionSkippedMinReplicas"
# The Event reason of an eviction or restart held because the pod opted out of voluntary
# disruption (`karpenter.sh/do-not-disrupt`, `cluster-autoscaler.kubernetes.io/safe-to-evict`).
DISRUPTION_SKIPPED_OPT_OUT = "DisruptionSkippedDoNotDisrupt"
# The Event reason of evictions held while the pod webhook is not serving.
EVICTION_SKIPPED_WEBHOOK = "EvictionSkippedWebhookUnavailable"

_WHY_EVICT = {
    "recreate": "recreate with the suggested resources",
    "stall-fallback": "resize stalled past stall_timeout",
    "refused": "resize refused by the API server",
    "capacity": "upsize cannot fit its node",
    "heap-bound": "memory raise of a heap sized at start: recreated with the new limit",
}


def recreated_by_controller(pod: Pod) -> bool:
    """Does a controller recreate the pod after an eviction? A pod with no controlling
    owner (a bare pod a selector picked up) or a static pod's mirror (owned by its Node)
    is gone for good once evicted: such pods are never evicted."""
    owner = pod.owner
    return owner is not None and owner.controller and owner.kind != "Node" and not pod.static


def disruption_hold(pod: Pod) -> str | None:
    """Why Foresize must not evict or restart `pod`, or None: it carries Karpenter's
    `do-not-disrupt: "true"` or Cluster Autoscaler's `safe-to-evict: "false"` (the owner
    asked that nothing disrupts it voluntarily; Foresize then resizes it in place only), or
    one of them with an odd value (`"True"`, `"yes"`): meant, though a node autoscaler
    would ignore it, so it is honoured too and the target's status says so."""
    return model_disruption_hold(pod.annotations)


def _hold_for_opt_out(c: Candidate, annotation: str, what: str) -> None:
    run, pod = c.run, c.pod
    run.held_opt_out[pod.name] = (annotation, what)
    if run.report_once(f"optout:{pod.uid}", what):
        msg = (
            f"not {what}: the pod opts out of voluntary disruption ({annotation}); "
            "it is resized in place only"
        )
        run.pod_event(pod, DISRUPTION_SKIPPED_OPT_OUT, msg, "Warning")
        run.target_event(DISRUPTION_SKIPPED_OPT_OUT, f"pod {pod.name}: {msg}", "Warning")


def priority(c: Candidate) -> tuple[int, int, int, float, str, str]:
    """Evictions (fallbacks) and releases first, then urgent OOM fixes, then downsizes (they
    free capacity once actuated), then upsizes by priority, Guaranteed first, oldest first —
    the order the kubelet itself retries Deferred resizes in."""
    if c.kind in (EVICT, RELEASE):
        rank = 0
    elif c.urgent:
        rank = 1
    elif c.change is not None and c.change.direction == "down":
        rank = 2
    else:
        rank = 3
    qos = 0 if rank == 3 and _qos(c) == "Guaranteed" else 1
    return (rank, -c.pod.priority, qos, c.pod.creation_time, c.pod.namespace, c.pod.name)


def _qos(c: Candidate) -> str:
    entry = c.entry()
    if entry.qos is None:
        entry.qos = pod_qos_class(c.pod)
    return entry.qos


def admit(
    candidates: list[Candidate], ctx: PassContext, ledger: NodeLedger, actions: list[Action]
) -> None:
    """Turn the proposals that pass their checks into actions, in priority order."""
    candidates.sort(key=priority)
    for c in candidates:
        # The maintenance windows and the budgets first: a held action is not tried.
        if not limits.allowed(c, ctx):
            continue
        if c.kind == RELEASE:
            _release(c, ctx, actions)
            continue
        if c.kind == EVICT:
            _evict(c, ctx, ledger, actions)
            continue
        fallback = _resize(c, ctx, ledger, actions)
        if fallback is not None and limits.allowed(fallback, ctx):
            _evict(fallback, ctx, ledger, actions)


def _release(c: Candidate, ctx: PassContext, actions: list[Action]) -> None:
    pod = c.pod
    limits.sent(c, ctx)
    forget(ctx, pod.uid)
    actions.append(
        ResizePod(
            pod.namespace,
            pod.name,
            c.release_to or allocated_containers(pod),
            c.run.policy.key,
            "release-deferred",
            "down",
            uid=pod.uid,
        )
    )
    c.run.state.inflight[pod.name] = pod.uid


def _resize(
    c: Candidate, ctx: PassContext, ledger: NodeLedger, actions: list[Action]
) -> Candidate | None:
    """Send the resize if the budget and the node allow; the eviction to try instead when
    the upsize cannot fit and the mode may recreate."""
    run, pod, change = c.run, c.pod, c.change
    assert change is not None
    if not c.urgent and run.budget <= 0:
        return None
    hold = disruption_hold(pod)
    if hold is not None and change.restarts:
        # resizePolicy RestartContainer: this resize restarts a container.
        _hold_for_opt_out(c, hold, "resizing (the resize would restart a container)")
        return None
    entry = c.entry()
    if ctx.config.capacity_guard:
        delta = entry_derived(
            entry, "charge_delta", lambda: charge_delta(pod, change, ledger.charge(pod)), change
        )
        node = pod.node_name or ""
        why = ledger.why_not(node, delta, pod.priority)
        if why is not None:
            if (
                run.policy.update_mode == "in_place_or_recreate"
                and recreated_by_controller(pod)
                and hold is None
            ):
                return Candidate(EVICT, pod, run, change, "capacity", c.urgent, known=c.known)
            _wait_for_capacity(c, why)
            note_waiting(c, ctx)
            return None
        ledger.reserve(node, delta)
    limits.sent(c, ctx)
    room_found(c)  # a resize goes: whatever it waited for is over
    actions.append(
        ResizePod(
            pod.namespace,
            pod.name,
            change.containers,
            run.policy.key,
            c.reason,
            change.direction,
            uid=pod.uid,
        )
    )
    if not c.urgent:
        run.budget -= 1
    run.issued += 1
    run.state.inflight[pod.name] = pod.uid
    what = "restarting resize" if change.restarts else "in-place resize"
    described = entry_derived(entry, "describe", lambda: describe_change(pod, change), change)
    msg = f"{what}: {described}"
    run.pod_event(pod, "Resizing", msg)
    run.target_event("Resizing", f"pod {pod.name}: {msg}")
    return None


def _wait_for_capacity(c: Candidate, msg: str) -> None:
    run, pod, change = c.run, c.pod, c.change
    assert change is not None
    run.waiting_capacity += 1
    if not run.report_once(f"guard:{pod.uid}", change.signature):
        return
    run.pod_event(pod, "ResizeWaitingForCapacity", msg, "Warning")
    run.target_event("ResizeWaitingForCapacity", f"pod {pod.name}: {msg}", "Warning")


def _not_evicted_without_controller(c: Candidate) -> None:
    run, pod = c.run, c.pod
    why = _WHY_EVICT.get(c.reason, c.reason)
    if run.report_once(f"nocontroller:{pod.uid}", c.reason):
        msg = f"not evicting ({why}): no controller owns the pod, nothing would recreate it"
        run.pod_event(pod, "EvictionSkipped", msg, "Warning")
        run.target_event("PodWithoutController", f"pod {pod.name}: {msg}", "Warning")


def workload_key(run: TargetRun, pod: Pod, ctx: PassContext) -> str:
    """The workload whose ready replicas the min-replicas rule counts: the target's own
    (`scaleTargetRef`), else the pod's top controller (a selector target may span several
    workloads; VPA likewise counts per controller)."""
    if run.workload is not None:
        return str(run.workload.key)
    top = ctx.snapshot.top_owner(pod)
    if top is not None:
        return str(top.key)
    owner = pod.owner
    return f"{owner.kind}/{pod.namespace}/{owner.name}" if owner is not None else pod.uid


def count_ready(run: TargetRun, ctx: PassContext, ready: list[Pod] | None = None) -> None:
    """The ready replicas per workload at the start of the pass (the rule's baseline);
    `ready`: the target's pods that are ready and not terminating, where the caller has
    read them already."""
    run.ready_replicas = {}
    if ready is None:
        ready = [p for p in run.pods if p.ready and not p.terminating]
    if run.workload is not None:  # every pod counts for the target's own workload
        if ready:
            run.ready_replicas[str(run.workload.key)] = len(ready)
        return
    for p in ready:
        key = workload_key(run, p, ctx)
        run.ready_replicas[key] = run.ready_replicas.get(key, 0) + 1


def _leaves_too_few_ready(c: Candidate, ctx: PassContext) -> bool:
    """The min-replicas rule: a ready pod is evicted only while its workload has at least
    `update_policy.min_replicas` ready replicas, the pod included, counting down the ready
    pods this pass already evicts — so evictions always leave `min_replicas - 1` replicas
    ready, and never take a workload's last ready replica down unless the target allows it
    with `min_replicas: 1`. VPA's updater (`--min-replicas`, per VPA
    `updatePolicy.minReplicas`) counts live pods instead; counting ready ones also holds
    the healthy replica while its sibling is not ready. A pod that is not ready serves
    nothing, so evicting it takes nothing down (VPA likewise always lets a pending pod
    go): that is how a crash-looping single replica still gets its bigger size. In-place
    resizes are not affected. A held pod is listed in `status.pods_held_by_min_replicas`,
    with one Event per pod and reason."""
    run, pod = c.run, c.pod
    if not pod.ready:
        return False
    need = run.policy.eviction_min_replicas
    ready = run.ready_replicas.get(workload_key(run, pod, ctx), 0)
    if ready >= need:
        run.state.reported.pop(f"minreplicas:{pod.uid}", None)
        return False
    run.held_min_replicas.append(pod.name)
    if run.report_once(f"minreplicas:{pod.uid}", c.reason):
        why = _WHY_EVICT.get(c.reason, c.reason)
        msg = (
            f"not evicting ({why}): the workload has {ready} ready replica(s), "
            f"fewer than update_policy.min_replicas={need}"
        )
        run.pod_event(pod, EVICTION_SKIPPED_MIN_REPLICAS, msg, "Warning")
        run.target_event(EVICTION_SKIPPED_MIN_REPLICAS, f"pod {pod.name}: {msg}", "Warning")
    return True


def _need_recreated(c: Candidate) -> ResourceMap | None:
    """The requests the recreated pod will have (None: no suggestion, nothing to check)."""
    if c.run.suggestion is None:
        return None
    containers, _ = c.run.desired(c.pod)
    # The scheduler's view of the new pod: sidecars, init containers and overhead included.
    need = spec_requests_with(c.pod, containers)
    return {r: v for r, v in need.items() if r in COMPUTE_RESOURCES}


def _evict(c: Candidate, ctx: PassContext, ledger: NodeLedger, actions: list[Action]) -> None:
    run, pod = c.run, c.pod
    if not recreated_by_controller(pod):
        _not_evicted_without_controller(c)
        return
    hold = disruption_hold(pod)
    if hold is not None:
        _hold_for_opt_out(c, hold, f"evicting ({_WHY_EVICT.get(c.reason, c.reason)})")
        return
    note_recreate(c, ctx)  # sent now or held below: it is coming either way
    # VPA's `--use-admission-controller-status`: the replacement gets its new size only
    # from the pod webhook; while it is not serving (down, or its certificate expired: the
    # API server then skips it, failurePolicy Ignore) the pod would come back at its old
    # size, a disruption for nothing and, pass after pass, an eviction loop the circuit
    # breaker stops only after three cycles. In-place resizes do not need the webhook.
    if not ctx.snapshot.admission_healthy:
        run.held_for_webhook += 1
        return
    if _leaves_too_few_ready(c, ctx):
        return
    # Every eviction counts against the batch, an OOM-killed pod's too (only in-place
    # OOM fixes skip the pacing, see `modes.OOM_URGENT_WINDOW`): an evicted replica serves
    # nothing until its replacement is Ready, while an OOM-killed one restarts in place
    # and serves between kills, so evicting all of them at once would turn periodic OOM
    # restarts into an outage.
    if run.evictions_left <= 0 or run.budget <= 0:
        return
    until = run.state.blocked_pods.get(pod.uid)
    if until is not None and ctx.now < until:
        return
    need = _need_recreated(c)
    into_pending = False
    if need is not None and not ledger.fits_elsewhere(pod, need):
        into_pending = recreate_into_pending(c, ctx, need)
        if not into_pending:
            if run.report_once(f"nofit:{pod.uid}", c.reason):
                run.pod_event(pod, "EvictionSkipped", _no_room_message(ctx), "Warning")
            return
    else:
        room_found(c)
    # Last, so a token is spent only on an eviction that is sent.
    if ctx.bucket is not None and not ctx.bucket.take():
        run.rate_limited += 1
        return
    limits.sent(c, ctx)
    actions.append(EvictPod(pod.namespace, pod.name, run.policy.key, c.reason, uid=pod.uid))
    run.state.inflight[pod.name] = pod.uid
    run.evictions_left -= 1
    if pod.ready:  # its replacement is not ready yet
        key = workload_key(run, pod, ctx)
        run.ready_replicas[key] = run.ready_replicas.get(key, 0) - 1
    run.budget -= 1
    run.issued += 1
    why = _WHY_EVICT.get(c.reason, c.reason)
    if into_pending:
        why += "; no node has room yet, the node autoscaler provisions for the Pending pod"
        run.pod_event(pod, EVICTING_INTO_PENDING, f"evicting: {why}")
        run.target_event(EVICTING_INTO_PENDING, f"pod {pod.name}: {why}")
        return
    run.pod_event(pod, "Evicting", f"evicting: {why}")
    run.target_event("Evicting", f"pod {pod.name}: {why}")


def _no_room_message(ctx: PassContext) -> str:
    msg = "no node has room for the pod at its suggested size; not evicting"
    if ctx.provisioning:
        # The bench reads "no node has room" in this Event: keep it in front.
        msg += " yet (recreated into Pending after stall_timeout if a node type holds it)"
    return msg
