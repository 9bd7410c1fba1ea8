"""From a suggestion to the exact resources one pod should have, without breaking rules the
API server enforces (QoS class may not change, limits are not added, a request never
exceeds its limit), and the change measured the ways the worker needs: is it worth doing
(hysteresis), which way it goes, what it costs the node in the scheduler's charge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from foresize.core.api.hysteresis import Threshold
from foresize.core.cluster.actions import ContainerResize
from foresize.core.cluster.boost import BoostState, boost_state
from foresize.core.cluster.capacity import resize_delta
from foresize.core.cluster.disruption import restarts_container
from foresize.core.cluster.model import (
    COMPUTE_RESOURCES,
    Container,
    Pod,
    ResourceMap,
    ResourceRequirements,
    Suggestion,
    odd_disruption_annotation,
)
from foresize.core.cluster.qos import has_pod_level_resources, pod_qos_class, qos_class_of
from foresize.core.cluster.refusals import container_signature
from foresize.core.cluster.sizing import settle_request_over_limit
from foresize.core.vertical.stall import awaiting_kubelet, stall_reason


@dataclass(slots=True)
class PodChange:
    """What one pod needs to reach its target resources."""

    containers: tuple[ContainerResize, ...]  # full desired resources of changed containers
    changed: frozenset[str]  # resources whose value changes (requests or limits)
    direction: str  # up | down | mixed
    significant: bool  # beyond the target's scaling_behavior thresholds
    restarts: bool  # a changed resource has resizePolicy RestartContainer
    signature: str
    problem: str | None = None  # why it cannot be done in place (e.g. QoS change)


def _apply(container: Container, requests: ResourceMap, limits: ResourceMap) -> Container:
    return container.copy(ResourceRequirements(requests, limits))


def _unchanged(
    c: Container,
    requests: ResourceMap,
    limits: ResourceMap,
    skip: frozenset[str] | set[str],
    guaranteed: bool,
) -> bool:
    """Fast path: the suggestion already equals the container's spec (the common case)."""
    cur_req, cur_lim = c.resources.requests, c.resources.limits
    for r, v in requests.items():
        if r in COMPUTE_RESOURCES and r not in skip and cur_req.get(r) != v and _declares(c, r):
            return False
        if guaranteed and r in cur_lim and cur_lim[r] != v and r not in skip:
            return False
    for r, v in limits.items():
        if r in COMPUTE_RESOURCES and r not in skip and r in cur_lim and cur_lim[r] != v:
            return False
    return True


def _declares(c: Container, resource: str) -> bool:
    return resource in c.resources.requests or resource in c.resources.limits


def desired_containers(
    pod: Pod, suggestion: Suggestion, skip: frozenset[str] | set[str]
) -> tuple[list[Container], str | None]:
    """The pod's containers with the suggestion applied; a problem string if not allowed.

    A container left as it is comes back as the same object (callers test `is`)."""
    every = (*pod.containers, *pod.init_containers)
    all_limits = all("cpu" in c.resources.limits and "memory" in c.resources.limits for c in every)
    # Only a pod with every CPU and memory limit can be Guaranteed: skip the full QoS
    # computation for the common Burstable pod (we never add limits).
    guaranteed = all_limits and pod_qos_class(pod) == "Guaranteed"
    out: list[Container] = []
    touched = False
    for c in pod.containers:
        s = suggestion.for_container(c.name)
        if s is None or _unchanged(c, s.requests, s.limits, skip, guaranteed):
            out.append(c)
            continue
        touched = True
        req = dict(c.resources.requests)
        lim = dict(c.resources.limits)
        for r, v in s.requests.items():
            # Only resources the container declares (a request, or a limit the API server
            # defaults the request from): a request added here could never be taken away in
            # place (the API refuses to remove one), so the revert to the template would
            # need a restart; the webhook keeps the key set for the same reason.
            if r in COMPUTE_RESOURCES and r not in skip and (r in req or r in lim):
                req[r] = v
        for r, v in s.limits.items():
            # Limits are only changed where the pod already has one: adding a limit is a
            # policy decision the user makes through limit.ratio in the template.
            if r in COMPUTE_RESOURCES and r not in skip and r in lim:
                lim[r] = v
        for r in COMPUTE_RESOURCES:
            if r not in req or r not in lim:
                continue
            if guaranteed:
                # Guaranteed must stay requests == limits.
                lim[r] = req[r]
            else:
                suggested = r in s.limits and r not in skip
                req[r], lim[r] = settle_request_over_limit(req[r], lim[r], suggested)
        out.append(_apply(c, req, lim))
    if not touched:
        return out, None
    if not all_limits and any(c.resources.requests or c.resources.limits for c in every):
        # Burstable without every limit: it cannot become Guaranteed (no limit is added)
        # nor BestEffort (no request is removed).
        return out, None
    before = pod_qos_class(pod)
    after = qos_class_of([*out, *pod.init_containers])
    if after != before:
        return out, f"the change would move the pod from QoS {before} to {after}"
    return out, None


def pod_change(
    pod: Pod,
    suggestion: Suggestion,
    skip: frozenset[str] | set[str],
    scale_up: Threshold,
    scale_down: Threshold,
    only: tuple[str, ...] | None = None,
) -> PodChange | None:
    """The change from the pod's spec to its target, or None when the spec already matches.

    `only` restricts the change to these resources (recreate mode: recreate_resources).
    """
    desired, problem = desired_containers(pod, suggestion, skip)
    changed: set[str] = set()
    ups = downs = 0
    significant = False
    restarts = False
    resizes: list[ContainerResize] = []
    for cur, new in zip(pod.containers, desired, strict=True):
        if cur is new:
            continue
        c_changed: set[str] = set()
        for r in COMPUTE_RESOURCES:
            if only is not None and r not in only:
                continue
            a, b = cur.resources.requests.get(r), new.resources.requests.get(r)
            la, lb = cur.resources.limits.get(r), new.resources.limits.get(r)
            if a != b:
                c_changed.add(r)
                a0, b0 = a or 0, b or 0
                if b0 > a0:
                    ups += 1
                    significant = significant or scale_up.significant(r, a0, b0)
                else:
                    downs += 1
                    significant = significant or scale_down.significant(r, a0, b0)
            if la != lb:
                c_changed.add(r)
                la0, lb0 = la or 0, lb or 0
                th = scale_up if lb0 > la0 else scale_down
                significant = significant or th.significant(r, la0, lb0)
        if not c_changed:
            continue
        changed |= c_changed
        if restarts_container(cur, c_changed):
            restarts = True
        # Resources outside `only` keep their current values in the patch.
        req = dict(cur.resources.requests)
        lim = dict(cur.resources.limits)
        for r in c_changed:
            if r in new.resources.requests:
                req[r] = new.resources.requests[r]
            if r in new.resources.limits:
                lim[r] = new.resources.limits[r]
        resizes.append(ContainerResize(cur.name, req, lim))
    if not changed:
        return None
    direction = "mixed" if ups and downs else ("up" if ups else "down")
    sig = ";".join(container_sig(c.name, c.requests, c.limits) for c in resizes)
    return PodChange(
        tuple(resizes), frozenset(changed), direction, significant, restarts, sig, problem
    )


# What a pod's change depends on besides the pod and the suggestion: the resources left
# alone, the scale-up and scale-down thresholds, and the resources the change is limited to.
Thresholds = tuple[frozenset[str] | set[str], Threshold, Threshold, tuple[str, ...] | None]


@dataclass(slots=True)
class KnownPod:
    """What the planner derived from one pod object: what every step of a pass asks of it
    (read once, when the entry is made: the pod never changes), whether a resize of it is
    in flight, and its change towards a suggestion with the objects that change came from."""

    pod: Pod
    # Read from the pod when the entry is made (`__post_init__`).
    ready: bool = field(init=False)
    terminating: bool = field(init=False)
    # Running on a node and not terminating: the pods an update mode decides on.
    running: bool = field(init=False)
    stall: str | None = field(init=False)  # `stall.stall_reason(pod)`
    awaiting_kubelet: bool = field(init=False)  # `stall.awaiting_kubelet(pod)`
    pod_level: bool = field(init=False)  # `qos.has_pod_level_resources(pod)`
    boost: BoostState | None = field(init=False)  # `cluster.boost.boost_state(pod)`
    # `model.odd_disruption_annotation(pod.annotations)`
    odd_annotation: str | None = field(init=False)
    in_flight: bool | None = None  # `resize_in_flight(pod)`, once asked
    suggestion: Suggestion | None = None
    thresholds: Thresholds | None = None
    change: PodChange | None = None
    spec: SpecKey | None = None  # `spec_key(pod)`, once asked
    qos: str | None = None  # `qos.pod_qos_class(pod)`, once asked
    # name -> (what else it was derived from, the value): `derived`.
    facts: dict[str, tuple[tuple[object, ...], object]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pod = self.pod
        self.ready = pod.ready
        self.terminating = pod.terminating
        self.running = pod.phase == "Running" and pod.node_name is not None and not self.terminating
        self.stall = stall_reason(pod)
        self.awaiting_kubelet = awaiting_kubelet(pod)
        self.pod_level = has_pod_level_resources(pod)
        self.boost = boost_state(pod)
        self.odd_annotation = odd_disruption_annotation(pod.annotations)


def known_pod(known: dict[str, KnownPod], pod: Pod) -> KnownPod:
    """The entry of `known` (pod uid -> `KnownPod`) for this very pod object; a fresh one
    when the caller passes another object. Both shells replace a pod on every change and
    never edit one they have handed to a pass (`cluster.model`), so a pod whose spec or
    status moved arrives as a new object and everything is derived afresh. The planner
    re-reads every pod on every pass (tens of thousands of passes in the simulator), and
    most pods are unchanged between two of them."""
    hit = known.get(pod.uid)
    if hit is None or hit.pod is not pod:
        hit = known[pod.uid] = KnownPod(pod)
    return hit


SpecKey = tuple[object, ...]

T = TypeVar("T")


def derived(
    known: dict[str, KnownPod],
    pod: Pod,
    name: str,
    compute: Callable[[], T],
    *inputs: object,
) -> T:
    """`compute()`, a function of this very pod object and of `inputs` alone, once per
    pod object (`known_pod`) and inputs (each the same object, or an equal one, as the
    last time). `name` says which fact it is: one name, one function."""
    return entry_derived(known_pod(known, pod), name, compute, *inputs)


def entry_derived(entry: KnownPod, name: str, compute: Callable[[], T], *inputs: object) -> T:
    """`derived` for the pod of an entry the caller has already looked up."""
    hit = entry.facts.get(name)
    # Tuples compare item by item, each by identity first, then by equality.
    if hit is not None and hit[0] == inputs:
        return cast(T, hit[1])
    value = compute()
    entry.facts[name] = (inputs, value)
    return value


def spec_key(pod: Pod) -> SpecKey:
    """Everything of the pod's spec that `pod_change` reads, as a hashable value: each
    container's name, requests, limits and resizePolicy; the init containers' resources
    (the QoS class); the pod-level resources. The pods of one workload share their
    template, so most of a target's pods share one key and one change. Dict items are
    kept in their order, so pods that share a key get the very same patches."""
    containers = []
    for c in pod.containers:
        r = c.resources
        containers.append(
            (c.name, *r.requests.items(), None, *r.limits.items(), None, *c.resize_policy.items())
        )
    inits = []
    for c in pod.init_containers:
        r = c.resources
        inits.append((c.restart_policy, *r.requests.items(), None, *r.limits.items()))
    res = pod.resources
    pod_level = None if res is None else (*res.requests.items(), None, *res.limits.items())
    return (*containers, None, *inits, None, pod_level)


# Changes by spec for one target's pass: spec key and `only` -> (the suggestion and the
# thresholds it was computed with, the change).
SharedChanges = dict[
    tuple[SpecKey, tuple[str, ...] | None], tuple[Suggestion, Thresholds, "PodChange | None"]
]


def known_pod_change(
    known: dict[str, KnownPod],
    pod: Pod,
    suggestion: Suggestion,
    skip: frozenset[str] | set[str],
    scale_up: Threshold,
    scale_down: Threshold,
    only: tuple[str, ...] | None = None,
    shared: SharedChanges | None = None,
) -> PodChange | None:
    """`pod_change`, computed once per pod object (`known_pod`) and suggestion object, and
    again when the thresholds differ. With `shared` (one target's pass), a pod whose spec
    another pod already had (`spec_key`) takes that pod's change: the change is a
    function of the spec, the suggestion and the thresholds alone, and nobody edits one."""
    return entry_change(known_pod(known, pod), suggestion, skip, scale_up, scale_down, only, shared)


def entry_change(
    entry: KnownPod,
    suggestion: Suggestion,
    skip: frozenset[str] | set[str],
    scale_up: Threshold,
    scale_down: Threshold,
    only: tuple[str, ...] | None = None,
    shared: SharedChanges | None = None,
) -> PodChange | None:
    """`known_pod_change` for the pod of an entry the caller has already looked up."""
    pod = entry.pod
    thresholds = (skip, scale_up, scale_down, only)
    if entry.suggestion is not suggestion or entry.thresholds != thresholds:
        if shared is None:
            entry.change = pod_change(pod, suggestion, skip, scale_up, scale_down, only)
        else:
            if entry.spec is None:
                entry.spec = spec_key(pod)
            key = (entry.spec, only)
            hit = shared.get(key)
            if hit is not None and hit[0] is suggestion and hit[1] == thresholds:
                entry.change = hit[2]
            else:
                entry.change = pod_change(pod, suggestion, skip, scale_up, scale_down, only)
                shared[key] = (suggestion, thresholds, entry.change)
        entry.suggestion, entry.thresholds = suggestion, thresholds
    return entry.change


def known_spec(known: dict[str, KnownPod], pod: Pod) -> SpecKey:
    """`spec_key`, computed once per pod object (`known_pod`)."""
    entry = known_pod(known, pod)
    if entry.spec is None:
        entry.spec = spec_key(pod)
    return entry.spec


# The containers with one target's suggestion applied, by pod spec, for one pass: spec
# key -> (the suggestion and the resources left alone it was computed with, the result).
SharedDesired = dict[
    SpecKey, tuple[Suggestion, "frozenset[str] | set[str]", "tuple[list[Container], str | None]"]
]


def shared_desired_containers(
    shared: SharedDesired,
    known: dict[str, KnownPod],
    pod: Pod,
    suggestion: Suggestion,
    skip: frozenset[str] | set[str],
) -> tuple[list[Container], str | None]:
    """`desired_containers` once per pod spec (`spec_key`) of a target's pass, for callers
    that read the resources only: a container left as it is may be another pod's (equal)
    object here, so `is` tells nothing."""
    key = known_spec(known, pod)
    hit = shared.get(key)
    if hit is not None and hit[0] is suggestion and hit[1] == skip:
        return hit[2]
    out = desired_containers(pod, suggestion, skip)
    shared[key] = (suggestion, skip, out)
    return out


def known_in_flight(known: dict[str, KnownPod], pod: Pod) -> bool:
    """`resize_in_flight`, computed once per pod object (`known_pod`)."""
    return entry_in_flight(known_pod(known, pod))


def entry_in_flight(entry: KnownPod) -> bool:
    """`known_in_flight` for an entry the caller has already looked up."""
    if entry.in_flight is None:
        entry.in_flight = resize_in_flight(entry.pod)
    return entry.in_flight


def container_sig(name: str, requests: ResourceMap, limits: ResourceMap) -> str:
    """One container's part of a change signature (the exact resources it asks for; the
    rule's home is `cluster.refusals`, which every planner's refusals compare by)."""
    return container_signature(name, requests, limits)


def charge_delta(pod: Pod, change: PodChange, charge: ResourceMap | None = None) -> ResourceMap:
    """How much more the scheduler would charge the node once the change is written
    (`charge`: the pod's charge now, where the caller has it)."""
    return resize_delta(pod, change.containers, charge)


def allocated_containers(pod: Pod) -> tuple[ContainerResize, ...]:
    """The resources the kubelet has allocated/actuated: what a released resize goes back to."""
    out = []
    for c in pod.containers:
        st = pod.status_of(c.name)
        req = dict(c.resources.requests)
        lim = dict(c.resources.limits)
        if st is not None:
            for r, v in st.allocated.items():
                if r in req:
                    req[r] = v
            for r, v in st.resources.limits.items():
                if r in lim:
                    lim[r] = v
        out.append(ContainerResize(c.name, req, lim))
    return tuple(out)


def fitting_containers(pod: Pod, room: ResourceMap) -> tuple[ContainerResize, ...]:
    """The pod's pending ask shrunk to what `room` (beyond what the kubelet allocated)
    allows: each growing request gets its allocation plus as much of its growth as the
    room has left, container by container; what the spec lowers stays lowered. A limit
    equal to its request in the spec (Guaranteed) follows the fitted request, so the QoS
    class holds; other limits stay as the spec asks (the scheduler does not charge them)."""
    back = {c.name: c for c in allocated_containers(pod)}
    left = dict(room)
    out = []
    for c in pod.containers:
        have = back[c.name].requests
        req = dict(c.resources.requests)
        for r, want in c.resources.requests.items():
            got = have.get(r, want)
            if r in COMPUTE_RESOURCES and want > got:
                give = min(want - got, max(0, left.get(r, 0)))
                req[r] = got + give
                left[r] = left.get(r, 0) - give
        lim = dict(c.resources.limits)
        for r, value in c.resources.limits.items():
            if value == c.resources.requests.get(r):
                lim[r] = req[r]
        out.append(ContainerResize(c.name, req, lim))
    return tuple(out)


def resize_in_flight(pod: Pod) -> bool:
    """The spec asks for something the kubelet has not (yet) allocated."""
    for c in pod.containers:
        st = pod.status_of(c.name)
        if st is None:
            continue
        for r, v in c.resources.requests.items():
            if r in COMPUTE_RESOURCES and st.allocated.get(r, v) != v:
                return True
        for r, v in c.resources.limits.items():
            if r in COMPUTE_RESOURCES and st.resources.limits.get(r, v) != v:
                return True
    return False


def matches_suggestion(
    pod: Pod, suggestion: Suggestion, skip: frozenset[str] | set[str], tolerance: float
) -> bool:
    """Does a (new) pod's spec carry the suggested requests? Used for the circuit breaker."""
    desired, _ = desired_containers(pod, suggestion, skip)
    for cur, new in zip(pod.containers, desired, strict=True):
        for r in COMPUTE_RESOURCES:
            want = new.resources.requests.get(r)
            have = cur.resources.requests.get(r)
            if want is None:
                continue
            if have is None or abs(have - want) > tolerance * max(want, 1):
                return False
    return True
