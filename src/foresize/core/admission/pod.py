"""The pod admission decision (pure): which resources a new pod gets, and whether the
webhook marks it `foresize.io/managed: "true"`.

One function, `decide_pod`, serves both the HTTPS webhook (through `review.py`, which
turns the decision into a JSON patch) and the simulated cluster (through `mutate_pod`),
so simulations exercise exactly the logic a real cluster runs.

Rules (architecture §3.3):
- Only at CREATE (the callers only ask then); in-place resizes never come through here.
- Only for a target in vertical autonomous mode (or a DaemonSetAutoscaler in autonomous
  scale mode) with a suggestion or an OOM floor; never while the cluster is paused.
- A resource an HPA on the pod's workload scales on keeps its template value unless the
  target opted in (`spec.vertical.hpa_resource_policy: override`), exactly as the
  vertical planner leaves it alone on running pods (architecture §3.2): otherwise new
  replicas would be sized differently from running ones and the HPA's utilisation
  arithmetic would shift with every rollout.
- The QoS class of the pod never changes, and the set of resource keys each container
  declares never changes: Foresize only rewrites CPU/memory values the template already
  declares. Keeping the key set is what makes a later revert to the template possible
  in place (the API refuses to remove a request or limit from a running pod).
- The annotation is added only when a value actually changed; it is never removed.
- A pod with pod-level resources (`spec.resources`) is left as it is, with a warning:
  pod-level requests decide its QoS class and its scheduling, and the API server refuses a
  pod whose container requests exceed them, so rewriting container values could only do
  nothing or block the pod's creation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from foresize.core.admission.heap import (
    HEAP_REWRITE_ANNOTATION,
    HeapEdit,
    apply_edits,
    encode_edits,
    non_heap_allowances,
    plan_heap,
)
from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.access import first as get
from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.boost import (
    BOOST_ANNOTATION,
    BoostPolicy,
    boost_container,
    encode,
    fit_to_node,
)
from foresize.core.cluster.jobs import JOB_GROUP_LABEL, job_group_problem
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    Pod,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.qos import has_pod_level_resources, qos_class_of
from foresize.core.cluster.sizing import size_container
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView

MANAGED_ANNOTATION = "foresize.io/managed"
MANAGED_VALUE = "true"
POD_LEVEL_WARNING = (
    "foresize: pod sets pod-level resources (spec.resources); {kind} {key} leaves its "
    "resources as the template sets them"
)


@dataclass(slots=True)
class PodDecision:
    """New resources for the containers that change (by name), and warnings to return."""

    target: TargetView | None = None
    containers: dict[str, ResourceRequirements] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Annotations to set besides the managed one (the start-up boost's, the heap's).
    annotations: dict[str, str] = field(default_factory=dict)
    # Heap settings rewritten to follow the memory limits written (`admission.heap`).
    heap: dict[str, list[HeapEdit]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.containers)


def _same(a: ResourceRequirements, b: ResourceRequirements) -> bool:
    return a.requests == b.requests and a.limits == b.limits


def decide_pod(
    pod: Pod,
    owner: OwnerRef | Workload | None,
    index: AdmissionIndex,
    now: float,
) -> PodDecision:
    """Decide a new pod's resources. `owner` is the controller creating it (a Workload, an
    OwnerRef, or None to use `pod.owner`)."""
    decision = PodDecision()
    if index.paused:
        return decision
    target = index.target_for_pod(pod, owner)
    if target is None:
        odd = pod.labels.get(JOB_GROUP_LABEL)
        problem = job_group_problem(odd) if isinstance(odd, str) else None
        if problem is not None:  # a group meant, none named: say so, admit unchanged
            decision.warnings.append(f"foresize: {problem}; this Job is in no job group")
        return decision
    decision.target = target
    if not target.vertical_autonomous or target.deleting:
        return decision
    suggestion = index.suggestion_of(target)
    if suggestion is None and not index.has_oom_floor(target) and target.startup_boost is None:
        return decision
    workload = None
    if not (target.ref_kind and target.ref_name):  # a selector target: the pod's controller
        workload = index.top_owner_ref(
            pod.namespace, owner if owner is not None else pod.owner, pod.labels
        )
    claim = index.claimed_by(target, pod.namespace, workload)
    if claim is not None:
        decision.warnings.append(
            f"foresize: {claim.describe()} also sizes this workload; {target.kind} "
            f"{target.key} leaves the pod's resources as the template sets them"
        )
        return decision
    leave = index.hpa_left_alone(target, pod.namespace, workload)
    if has_pod_level_resources(pod):
        decision.warnings.append(POD_LEVEL_WARNING.format(kind=target.kind, key=target.key))
        return decision
    qos = qos_class_of([*pod.containers, *pod.init_containers])
    if qos == "BestEffort":
        decision.warnings.append(
            f"foresize: pod is BestEffort; {target.kind} {target.key} leaves its resources "
            "unset (the QoS class is never changed)"
        )
        return decision
    new_containers: dict[str, ResourceRequirements] = {}
    for container in pod.containers:
        policy = target.policy_for(container.name)
        if policy is None:
            continue
        csug = suggestion.for_container(container.name) if suggestion is not None else None
        floor = index.oom_floor_of(target, container.name, now)
        resized = size_container(container, policy, csug, floor, qos, leave)
        if not _same(resized, container.resources):
            new_containers[container.name] = resized
    after = [Container(c.name, new_containers.get(c.name, c.resources)) for c in pod.containers]
    new_qos = qos_class_of([*after, *pod.init_containers]) if new_containers else qos
    if new_qos != qos:
        decision.warnings.append(
            f"foresize: suggestion of {target.kind} {target.key} would change the pod's QoS "
            f"class from {qos} to {new_qos}; resources left as the template sets them"
        )
        return decision
    decision.containers = new_containers
    _on_top(pod, target, leave, decision, index, now)
    return decision


def _on_top(
    pod: Pod,
    target: TargetView,
    leave: frozenset[str],
    decision: PodDecision,
    index: AdmissionIndex,
    now: float,
) -> None:
    """What goes on top of the sized containers: heap settings that follow the limits
    written (a malformed one leaves the pod as it is), then the start-up boost."""
    if target.keep_heap_consistent and not _keep_heaps(pod, target, decision, index, now):
        return
    if target.startup_boost is not None:
        _boost(pod, target, target.startup_boost, leave, decision, now, index.max_node_cpu)


def _keep_heaps(
    pod: Pod, target: TargetView, decision: PodDecision, index: AdmissionIndex, now: float
) -> bool:
    """`runtime.keep_heap_consistent`: each container whose memory limit the decision
    changes gets its heap setting rewritten to follow it (`admission.heap`). False, with
    the decision emptied, where a heap setting does not parse: the pod is admitted
    unchanged (a warning names the setting)."""
    allowances = non_heap_allowances(get(get(target.source, "status"), "runtime_notes"))
    for c in pod.containers:
        new = decision.containers.get(c.name)
        limit = new.limits.get(MEMORY) if new is not None else None
        if limit is None or limit == c.resources.limits.get(MEMORY):
            continue
        if index.oom_floor_of(target, c.name, now):
            # An OOM kill raised this memory: the kill says the memory outside the heap
            # ran out (a full heap is an OutOfMemoryError, not a kill), and the allowance
            # learned before it is what that memory had then, too little. A heap that
            # followed the limit would take the raise away from what was killed.
            continue
        plan = plan_heap(c, limit, allowances.get(c.name))
        if plan.malformed:
            decision.containers.clear()
            decision.heap.clear()
            decision.warnings.append(f"foresize: {plan.warning}; pod admitted unchanged")
            return False
        if plan.warning:
            decision.warnings.append(f"foresize: {plan.warning}")
        if plan.edits:
            decision.heap[c.name] = plan.edits
    if decision.heap:
        decision.annotations[HEAP_REWRITE_ANNOTATION] = encode_edits(decision.heap)
    return True


def _boost(
    pod: Pod,
    target: TargetView,
    policy: BoostPolicy,
    leave: frozenset[str],
    decision: PodDecision,
    now: float,
    node_cpu: int | None = None,
) -> None:
    """THE start-up boost (`cluster.boost`) on top of the sized containers, and the
    annotation that tells the vertical planner what to return to."""
    if CPU in leave:
        decision.warnings.append(
            f"foresize: {target.kind} {target.key} leaves CPU to the HPA; no start-up boost"
        )
        return
    back: dict[str, dict[str, int]] = {}
    boosted: dict[str, ResourceRequirements] = {}
    bases: dict[str, ResourceRequirements] = {}
    bounded: list[str] = []
    for c in pod.containers:
        cpolicy = target.policy_for(c.name)
        if cpolicy is None:
            continue
        base = decision.containers.get(c.name, c.resources)
        upper = cpolicy.for_resource(CPU)
        got = boost_container(base, policy, upper.upper if upper else None, c.name)
        if got is None:
            continue
        boosted[c.name], back[c.name], bases[c.name] = got.resources, got.back, base
        if got.note:
            bounded.append(got.note)
    if not boosted:
        return
    others = sum(
        decision.containers.get(c.name, c.resources).requests.get(CPU, 0)
        for c in pod.containers
        if c.name not in boosted
    ) + max((c.resources.requests.get(CPU, 0) for c in pod.init_containers), default=0)
    node_note = fit_to_node(boosted, bases, others + pod.overhead.get(CPU, 0), node_cpu)
    if node_note:
        bounded.append(node_note)
    for name in [n for n, r in boosted.items() if r.requests.get(CPU, 0) <= back[n]["request"]]:
        del boosted[name], back[name]  # no room left to boost it at all
    decision.warnings.extend(f"foresize: {note}" for note in bounded)
    if not boosted:
        return
    after = [c.copy(boosted.get(c.name, decision.containers.get(c.name))) for c in pod.containers]
    if qos_class_of([*after, *pod.init_containers]) != qos_class_of(
        [*pod.containers, *pod.init_containers]
    ):
        decision.warnings.append("foresize: a start-up boost would change the QoS class; none")
        return
    decision.containers.update(boosted)
    decision.annotations[BOOST_ANNOTATION] = encode(back, policy, now, bounded)


def apply_decision(pod: Pod, decision: PodDecision) -> Pod:
    """A copy of `pod` with the decision applied (resources and the managed annotation)."""
    if not decision.changed:
        return pod
    containers = [
        apply_edits(
            c.copy(decision.containers[c.name].copy() if c.name in decision.containers else None),
            decision.heap.get(c.name, []),
        )
        for c in pod.containers
    ]
    annotations = dict(pod.annotations)
    annotations[MANAGED_ANNOTATION] = MANAGED_VALUE
    annotations.update(decision.annotations)
    return dataclasses.replace(pod, containers=containers, annotations=annotations)


def mutate_pod(
    pod: Pod,
    owner: OwnerRef | Workload | None,
    snapshot_or_index: ClusterSnapshot | AdmissionIndex,
    now: float,
) -> tuple[Pod, bool]:
    """The admission hook for core objects: the same decision as the HTTPS webhook.
    Returns the (possibly new) pod and whether its resources changed."""
    index = (
        snapshot_or_index
        if isinstance(snapshot_or_index, AdmissionIndex)
        else AdmissionIndex.from_snapshot(snapshot_or_index)
    )
    decision = decide_pod(pod, owner, index, now)
    return apply_decision(pod, decision), decision.changed
