"""QoS class and the scheduler's charge for a pod, exactly as Kubernetes computes them.

- QoS: `pkg/apis/core/helper/qos/qos.go` (ComputePodQOS). Note that Guaranteed compares the
  pod-wide *sums* of requests and limits, and every container (init containers included)
  must carry both a CPU and a memory limit.
- Scheduler charge: `component-helpers/resource/helpers.go` (AggregateContainerRequests with
  UseStatusResources): per container max(spec request, allocated, actual request), with
  spec left out while the pod's resize is Infeasible; sidecar init containers add to the
  regular containers, other init containers count at their peak.
"""

from __future__ import annotations

from collections.abc import Iterable

from foresize.cluster.model import (
    COMPUTE_RESOURCES,
    POD_RESIZE_PENDING,
    REASON_INFEASIBLE,
    Container,
    ContainerStatus,
    Pod,
    QoSClass,
    ResourceMap,
)


def effective_requests(container: Container) -> ResourceMap:
    """Spec requests after API defaulting: a resource with only a limit requests its limit."""
    out = dict(container.resources.requests)
    for name, limit in container.resources.limits.items():
        out.setdefault(name, limit)
    return out


def qos_class_of(containers: Iterable[Container]) -> QoSClass:
    """QoS class of a pod whose containers (regular and init) are `containers`."""
    requests: ResourceMap = {}
    limits: ResourceMap = {}
    guaranteed = True
    for c in containers:
        for name, qty in effective_requests(c).items():
            if name in COMPUTE_RESOURCES and qty > 0:
                requests[name] = requests.get(name, 0) + qty
        found = set()
        for name, qty in c.resources.limits.items():
            if name in COMPUTE_RESOURCES and qty > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + qty
        if not found.issuperset(COMPUTE_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, req in requests.items():
            if limits.get(name) != req:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def pod_qos_class(pod: Pod) -> QoSClass:
    return qos_class_of([*pod.containers, *pod.init_containers])


def resize_infeasible(pod: Pod) -> bool:
    cond = pod.condition(POD_RESIZE_PENDING)
    return cond is not None and cond.reason == REASON_INFEASIBLE


def container_charge(
    container: Container, status: ContainerStatus | None, *, infeasible: bool
) -> ResourceMap:
    """max(spec request, allocated, actual request) per resource; spec skipped if Infeasible."""
    charge: ResourceMap = {} if infeasible and status is not None else effective_requests(container)
    if status is not None:
        for source in (status.allocated, status.resources.requests):
            for name, qty in source.items():
                if qty > charge.get(name, 0):
                    charge[name] = qty
        if infeasible and not charge:
            # No status resources reported yet: fall back to spec rather than charge nothing.
            charge = effective_requests(container)
    return charge


def _add(into: ResourceMap, other: ResourceMap) -> None:
    for name, qty in other.items():
        into[name] = into.get(name, 0) + qty


def pod_charge(pod: Pod) -> ResourceMap:
    """What the scheduler charges a node for `pod` (per resource, canonical units)."""
    if pod.phase in ("Succeeded", "Failed"):
        return {}
    infeasible = resize_infeasible(pod)
    total: ResourceMap = {}
    for c in pod.containers:
        _add(total, container_charge(c, pod.status_of(c.name), infeasible=infeasible))
    sidecars: ResourceMap = {}
    init_peak: ResourceMap = {}
    for ic in pod.init_containers:
        if ic.is_sidecar:
            req = container_charge(ic, pod.status_of(ic.name), infeasible=infeasible)
            _add(total, req)
            _add(sidecars, req)
            candidate = dict(sidecars)
        else:
            candidate = dict(effective_requests(ic))
            _add(candidate, sidecars)
        for name, qty in candidate.items():
            if qty > init_peak.get(name, 0):
                init_peak[name] = qty
    for name, qty in init_peak.items():
        if qty > total.get(name, 0):
            total[name] = qty
    return total


def spec_requests(pod: Pod) -> ResourceMap:
    """Sum of spec requests of the pod's regular and sidecar containers (no status)."""
    total: ResourceMap = {}
    for c in pod.containers:
        _add(total, effective_requests(c))
    for ic in pod.init_containers:
        if ic.is_sidecar:
            _add(total, effective_requests(ic))
    return total
