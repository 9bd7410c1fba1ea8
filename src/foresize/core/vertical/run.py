"""What one planning pass knows about one target while it decides, and the candidates
(proposed resizes and evictions) the decision step hands to the admission step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from foresize.core.cluster.actions import ContainerResize, EmitEvent
from foresize.core.cluster.boost import PodCpuWindow
from foresize.core.cluster.capacity import format_resources
from foresize.core.cluster.model import Container, Pod, Suggestion
from foresize.core.cluster.pending import ComingSize
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView
from foresize.core.cluster.windows import UTC_ONLY, MaintenancePolicy, TimeZones
from foresize.core.vertical.desired import (
    KnownPod,
    PodChange,
    SharedChanges,
    SharedDesired,
    known_pod,
    shared_desired_containers,
)
from foresize.core.vertical.policy import WorkerConfig
from foresize.core.vertical.state import EvictionBucket, StallRecord, TargetState

if TYPE_CHECKING:  # `vertical.limits` reads this module
    from foresize.core.vertical.limits import Limits

# Candidate kinds: an in-place resize, an eviction, and the release of a Deferred resize
# (patch back to what the kubelet allocated).
RESIZE = "resize"
EVICT = "evict"
RELEASE = "release"


@dataclass(slots=True)
class Candidate:
    kind: str  # RESIZE | EVICT | RELEASE
    pod: Pod
    run: TargetRun
    change: PodChange | None = None
    reason: str = ""
    urgent: bool = False
    # RELEASE: what the Deferred resize is patched to (empty: back to the allocation)
    release_to: tuple[ContainerResize, ...] = ()
    # The pod's memo entry, where the decision step had it (`entry` looks it up else).
    known: KnownPod | None = None

    def entry(self) -> KnownPod:
        """The pod's memo entry (`desired.known_pod`)."""
        if self.known is None:
            self.known = known_pod(self.run.known, self.pod)
        return self.known


@dataclass(slots=True)
class PassContext:
    """What every target of a pass shares."""

    snapshot: ClusterSnapshot
    now: float
    config: WorkerConfig
    bucket: EvictionBucket | None = None  # the cluster-wide eviction rate limit, if on
    # pod uid -> the size it will have: recreated, or an upsize waiting (`vertical.coming`)
    coming: dict[str, ComingSize] = field(default_factory=dict)
    # The maintenance windows and budgets (`vertical.limits`): the zone database, the
    # windows' checks by policy, every target of the pass, disruptions per namespace in
    # the last hour (this pass's included).
    zones: TimeZones = UTC_ONLY
    window_checks: dict[MaintenancePolicy, list[str]] = field(default_factory=dict)
    runs: list[TargetRun] = field(default_factory=list)
    ns_disruptions: dict[str, int] = field(default_factory=dict)
    # The pods' recent CPU samples (`cluster.boost.PodCpuWindow`): when a boost settles.
    pod_usage: PodCpuWindow | None = None
    # A node autoscaler adds nodes for Pending pods (`vertical.provision`).
    provisioning: bool = False


@dataclass(slots=True)
class PodView:
    """A running pod of the target as this pass sees it: its stall, if any."""

    pod: Pod
    reason: str | None  # the kubelet's stall reason now
    record: StallRecord | None  # when the stall was first seen (survives restarts)
    known: KnownPod  # what was derived from the pod object (`desired.known_pod`)


@dataclass(slots=True)
class TargetRun:
    policy: TargetView
    state: TargetState
    suggestion: Suggestion | None
    workload: Any = None
    skip: frozenset[str] = frozenset()
    pods: list[Pod] = field(default_factory=list)
    replicas: int = 0
    budget: int = 0  # disruptions still allowed in this batch
    paced: bool = False  # the interval since the last batch has not passed
    disrupted_now: int = 0
    evictions_left: int = 1_000_000  # breaker / PDB gate
    issued: int = 0
    stalled: int = 0
    waiting_capacity: int = 0
    without_controller: list[str] = field(default_factory=list)  # pods never evicted
    # workload key -> ready, not terminating, less the ready pods evicted this pass
    ready_replicas: dict[str, int] = field(default_factory=dict)
    held_min_replicas: list[str] = field(default_factory=list)  # not evicted: min_replicas
    # pod -> (the opt-out annotation, what was not done): pods that opted out of
    # voluntary disruption (`admit.disruption_hold`)
    held_opt_out: dict[str, tuple[str, str]] = field(default_factory=dict)
    rate_limited: int = 0  # evictions held back by the cluster-wide rate limit
    held_for_webhook: int = 0  # evictions held while the pod webhook is not serving
    overlaps: list[str] = field(default_factory=list)  # targets claiming our selected pods
    notes: list[str] = field(default_factory=list)
    history_problem: str | None = None  # `WorkerConfig.history_problem` of the pass
    boosting: int = 0  # pods in their start-up boost (`vertical.boost`)
    # pod -> why its memory raise waits for (or makes) its restart: a heap sized at start
    waiting_restart: dict[str, str] = field(default_factory=dict)
    events: list[EmitEvent] = field(default_factory=list)
    # The target's status.conditions as read (a status write replaces the whole list).
    target_conditions: list[dict[str, Any]] = field(default_factory=list)
    pod_level_left: list[str] = field(default_factory=list)  # pods with pod-level resources
    claimed_by: str = ""  # other vertical autoscalers acting on the workload (described)
    limits: Limits | None = None  # windows and budgets this pass (`vertical.limits`)
    # What was derived from each pod object, kept across passes (`vertical.memo`).
    known: dict[str, KnownPod] = field(default_factory=dict)
    # The entries of `pods`, in their order, once the decision step has looked them up;
    # those of the target's pods in the last pass (`memo.TargetMemo.entries`).
    entries: list[KnownPod] = field(default_factory=list)
    last_entries: list[KnownPod] = field(default_factory=list)
    # The pass's changes by pod spec (`desired.known_pod_change`): computed once per spec.
    changes_by_spec: SharedChanges = field(default_factory=dict)
    desired_by_spec: SharedDesired = field(default_factory=dict)

    def desired(self, pod: Pod) -> tuple[list[Container], str | None]:
        """The pod's containers with the suggestion applied, once per pod spec
        (`desired.shared_desired_containers`: values only, not object identity)."""
        assert self.suggestion is not None
        return shared_desired_containers(
            self.desired_by_spec, self.known, pod, self.suggestion, self.skip
        )

    def target_event(self, reason: str, message: str, type_: str = "Normal") -> None:
        p = self.policy
        self.events.append(
            EmitEvent(p.namespace, "AIScaleTarget", p.name, reason, message, type_, p.uid)
        )

    def pod_event(self, pod: Pod, reason: str, message: str, type_: str = "Normal") -> None:
        self.events.append(
            EmitEvent(pod.namespace, "Pod", pod.name, reason, message, type_, pod.uid)
        )

    def report_once(self, topic: str, value: str) -> bool:
        """True the first time `topic` takes `value` (so the caller emits its event)."""
        if self.state.reported.get(topic) == value:
            return False
        self.state.reported[topic] = value
        return True


def describe_change(pod: Pod, change: PodChange) -> str:
    parts = []
    by = {c.name: c for c in pod.containers}
    for cr in change.containers:
        cur = by[cr.name].resources
        parts.append(
            f"{cr.name}: requests {format_resources(cur.requests)} -> "
            f"{format_resources(cr.requests)}"
            + (
                f", limits {format_resources(cur.limits)} -> {format_resources(cr.limits)}"
                if cr.limits
                else ""
            )
        )
    return "; ".join(parts)
