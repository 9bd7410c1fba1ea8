"""Copy helpers and small records of the simulated cluster.

The simulator hands out snapshots that share objects with its own state; it never
mutates an object a snapshot may hold: it clones it first (copy-on-write), so a snapshot
stays a faithful point-in-time view without copying 2,000 pods on every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    OwnerRef,
    Pod,
    PodCondition,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.shells.sim.scenario import ContainerSpec, WorkloadSpec


class ContainerKey(NamedTuple):
    """Identifies a container in usage observations."""

    namespace: str
    workload: str  # "Kind/name" of the top-level controller, or "" for a bare pod
    pod: str
    container: str


def resizable_containers(pod: Pod) -> list[Container]:
    """The containers the kubelet runs for the pod's whole life and resizes in place:
    regular containers, then sidecar (restartable) init containers
    (`pkg/kubelet/allocation/allocation_manager.go`, IsResizableContainer). The simulator's
    usage slots of a pod follow this order."""
    return [*pod.containers, *(c for c in pod.init_containers if c.is_sidecar)]


def clone_container(c: Container) -> Container:
    return c.copy()


def clone_status(s: ContainerStatus) -> ContainerStatus:
    return ContainerStatus(
        s.name,
        dict(s.allocated),
        s.resources.copy(),
        s.ready,
        s.restart_count,
        s.last_termination_reason,
        s.last_termination_time,
    )


def clone_pod(p: Pod) -> Pod:
    return Pod(
        namespace=p.namespace,
        name=p.name,
        uid=p.uid,
        labels=dict(p.labels),
        annotations=dict(p.annotations),
        owner=p.owner,
        node_name=p.node_name,
        priority=p.priority,
        containers=[clone_container(c) for c in p.containers],
        init_containers=[clone_container(c) for c in p.init_containers],
        phase=p.phase,
        conditions=[
            PodCondition(c.type, c.status, c.reason, c.message, c.last_transition_time)
            for c in p.conditions
        ],
        container_statuses=[clone_status(s) for s in p.container_statuses],
        init_container_statuses=[clone_status(s) for s in p.init_container_statuses],
        generation=p.generation,
        observed_generation=p.observed_generation,
        creation_time=p.creation_time,
        start_time=p.start_time,
        deletion_time=p.deletion_time,
        restart_policy=p.restart_policy,
        static=p.static,
        os=p.os,
        resources=p.resources.copy() if p.resources is not None else None,
        overhead=dict(p.overhead),
    )


def clone_template(t: PodTemplate) -> PodTemplate:
    return PodTemplate(
        dict(t.labels),
        dict(t.annotations),
        [clone_container(c) for c in t.containers],
        [clone_container(c) for c in t.init_containers],
        t.priority,
        t.resources.copy() if t.resources is not None else None,
        dict(t.overhead),
    )


def clone_workload(w: Workload) -> Workload:
    return Workload(
        w.kind,
        w.namespace,
        w.name,
        w.uid,
        dict(w.labels),
        dict(w.selector),
        w.replicas,
        clone_template(w.template),
        w.paused,
        w.owner,
    )


def _container_from_spec(c: ContainerSpec) -> Container:
    return Container(
        c.name,
        ResourceRequirements(dict(c.requests), dict(c.limits)),
        dict(c.resize_policy),
        c.restart_policy,
        c.command,
        c.args,
        dict[str, str | None](c.env),
    )


def template_from_spec(spec: WorkloadSpec) -> PodTemplate:
    return PodTemplate(
        labels=dict(spec.labels),
        annotations=dict(spec.annotations),
        containers=[_container_from_spec(c) for c in spec.containers],
        init_containers=[_container_from_spec(c) for c in spec.init_containers],
        priority=spec.priority,
        resources=(
            ResourceRequirements(dict(spec.pod_requests), dict(spec.pod_limits))
            if spec.pod_requests or spec.pod_limits
            else None
        ),
        overhead=dict(spec.overhead),
    )


@dataclass(slots=True)
class PodMeta:
    """The simulator's private bookkeeping for one pod."""

    top: str | None  # key of the top-level workload (Kind/ns/name) or None
    owner_key: str | None  # key of the direct controller (e.g. the ReplicaSet)
    wl_index: int  # accounting row
    revision: int = 0
    slots: list[int] = field(default_factory=list)  # one per regular container
    pinned_node: str | None = None  # DaemonSet pods
    nominated_node: str | None = None  # set after preemption
    readiness_delay: float = 10.0
    grace: float = 30.0
    charge: tuple[int, int] = (0, 0)  # cached scheduler charge (cpu m, memory bytes)
    charged_node: str | None = None
    resize_requested_at: float | None = None
    actuate_at: float | None = None  # resize allocated, to be actuated at this time
    stall_generation: int = 0  # generation already counted as a stall
    crash_count: int = 0  # consecutive crashes (back-off)
    last_crash: float = -1e18
    ready: bool = False
    run_until: float | None = None  # Job pods complete at this time
    ordinal: int = -1  # StatefulSet pods


@dataclass(slots=True)
class WorkloadState:
    """Controller state of one top-level workload."""

    spec: WorkloadSpec
    index: int
    revision: int = 1
    rs_name: str = ""  # Deployments: the current ReplicaSet
    pods: set[str] = field(default_factory=set)  # keys of pods owned (any phase)
    succeeded: int = 0  # Jobs
    job_round_started: float = 0.0
    job_done: bool = False
    rollout: bool = False  # a rolling update is in progress
    owner_ref: OwnerRef | None = None
