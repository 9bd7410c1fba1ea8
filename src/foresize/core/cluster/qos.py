"""QoS class and the scheduler's charge for a pod, exactly as Kubernetes computes them.

- QoS: `pkg/apis/core/helper/qos/qos.go` (ComputePodQOS). Guaranteed compares the pod-wide
  *sums* of requests and limits, and every container (init containers included) must carry
  both a CPU and a memory limit. Pod-level resources (`spec.resources`), where set for a
  supported resource (cpu, memory, hugepages-*: `IsPodLevelResourcesSet`), decide instead
  and the containers are not looked at.
- Pod requests: `component-helpers/resource/helpers.go` (PodRequests and
  AggregateContainerRequests): sidecar (restartable) init containers add to the regular
  containers; any other init container counts at its peak together with the sidecars
  started before it; pod-level requests (cpu, memory, hugepages-*), where set, replace
  that sum per resource; the pod's `overhead` is added on top.
- Scheduler charge: the same with UseStatusResources (Kubernetes 1.33-1.35,
  `determineContainerReqs`): per container max(spec request, allocated, actual request),
  with spec left out while the pod's resize is Infeasible.
- Kubelet admission of a resize (`pkg/kubelet/allocation/allocation_manager.go`,
  canAdmitPod over getAllocatedPods): every other pod at its *allocated* resources, in the
  same aggregate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from foresize.core.cluster.model import (
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


# The resources pod-level `spec.resources` may set (component-helpers/resource
# `SupportedPodLevelResources` in Kubernetes 1.35): cpu, memory and every hugepages size.
HUGEPAGES_PREFIX = "hugepages-"


def is_supported_pod_level_resource(name: str) -> bool:
    """IsSupportedPodLevelResource: cpu, memory, or a `hugepages-<size>`."""
    return name in COMPUTE_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def has_pod_level_resources(pod: Pod) -> bool:
    """IsPodLevelResourcesSet: `spec.resources` requests or limits a supported pod-level
    resource (hugepages alone make a pod "pod-level"; ephemeral-storage alone does not)."""
    res = pod.resources
    if res is None:
        return False
    return any(is_supported_pod_level_resource(r) for r in (*res.requests, *res.limits))


def pod_level_requests(pod: Pod) -> ResourceMap:
    """Pod-level requests of the supported resources after API defaulting
    (`defaultPodRequests`: a pod-level limit without a request defaults the request to
    it); empty when none is set (IsPodLevelRequestsSet of the defaulted spec is
    `bool(pod_level_requests(pod))`). Each replaces the containers' sum in the pod's
    requests (`applyPodLevelResources`)."""
    res = pod.resources
    if res is None:
        return {}
    out = {r: v for r, v in res.requests.items() if is_supported_pod_level_resource(r)}
    for r, v in res.limits.items():
        if is_supported_pod_level_resource(r):
            out.setdefault(r, v)
    return out


def _qos_of_sums(requests: ResourceMap, limits: ResourceMap, guaranteed: bool) -> QoSClass:
    """The tail of ComputePodQOS once requests and limits are summed."""
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


def qos_class_of(containers: Iterable[Container]) -> QoSClass:
    """QoS class of a pod without pod-level resources whose containers (regular and init)
    are `containers`."""
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
    return _qos_of_sums(requests, limits, guaranteed)


def pod_level_qos_class(pod: Pod) -> QoSClass:
    """QoS class from pod-level resources alone (ComputePodQOS's pod-level branch, which
    counts cpu and memory only: a pod whose pod-level resources are hugepages alone is
    BestEffort)."""
    requests = {
        r: v for r, v in pod_level_requests(pod).items() if r in COMPUTE_RESOURCES and v > 0
    }
    res = pod.resources
    limits = {
        r: v for r, v in (res.limits if res else {}).items() if r in COMPUTE_RESOURCES and v > 0
    }
    # Without both a cpu and a memory limit at pod level the pod cannot be Guaranteed.
    guaranteed = set(limits) >= set(COMPUTE_RESOURCES) or not limits
    return _qos_of_sums(requests, limits, guaranteed)


def pod_qos_class(pod: Pod) -> QoSClass:
    """The pod's QoS class: pod-level resources decide where set, else the containers."""
    if has_pod_level_resources(pod):
        return pod_level_qos_class(pod)
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


def container_allocated(container: Container, status: ContainerStatus | None) -> ResourceMap:
    """What the kubelet has allocated to a container (its spec until it reports any)."""
    if status is not None and status.allocated:
        return dict(status.allocated)
    return effective_requests(container)


def _add(into: ResourceMap, other: ResourceMap) -> None:
    for name, qty in other.items():
        into[name] = into.get(name, 0) + qty


PerContainer = Callable[[Container, ContainerStatus | None], ResourceMap]


def aggregate_containers(pod: Pod, per_container: PerContainer) -> ResourceMap:
    """AggregateContainerRequests: regular containers and sidecars add up; every other init
    container counts at its peak, alongside the sidecars started before it:
    max(sum(regular) + sum(sidecars), max over init i of (init i + sidecars before i))."""
    total: ResourceMap = {}
    for c in pod.containers:
        _add(total, per_container(c, pod.status_of(c.name)))
    if not pod.init_containers:
        return total  # the common pod: nothing below would change the sum
    sidecars: ResourceMap = {}
    init_peak: ResourceMap = {}
    for ic in pod.init_containers:
        req = per_container(ic, pod.status_of(ic.name))
        if ic.is_sidecar:
            _add(total, req)
            _add(sidecars, req)
            candidate = dict(sidecars)
        else:
            candidate = dict(req)
            _add(candidate, sidecars)
        for name, qty in candidate.items():
            if qty > init_peak.get(name, 0):
                init_peak[name] = qty
    for name, qty in init_peak.items():
        if qty > total.get(name, 0):
            total[name] = qty
    return total


def pod_requests(pod: Pod, per_container: PerContainer) -> ResourceMap:
    """PodRequests: the container aggregate, pod-level requests replacing it per resource
    where set (`applyPodLevelResources`), then the pod's overhead added."""
    total = aggregate_containers(pod, per_container)
    total.update(pod_level_requests(pod))
    _add(total, pod.overhead)
    return total


def pod_charge(pod: Pod) -> ResourceMap:
    """What the scheduler charges a node for `pod` (per resource, canonical units)."""
    if pod.phase in ("Succeeded", "Failed"):
        return {}
    infeasible = resize_infeasible(pod)
    return pod_requests(pod, lambda c, st: container_charge(c, st, infeasible=infeasible))


def spec_requests(pod: Pod) -> ResourceMap:
    """The pod's requests from its spec alone (PodRequests without status resources)."""
    return pod_requests(pod, lambda c, _st: effective_requests(c))


def allocated_requests(pod: Pod) -> ResourceMap:
    """The pod's requests as the kubelet has allocated them (what a resize of another pod
    on the node is admitted against)."""
    return pod_requests(pod, container_allocated)


def spec_requests_with(pod: Pod, containers: Iterable[Container]) -> ResourceMap:
    """`spec_requests` of the pod were its regular containers replaced by `containers` (by
    name): what a pod recreated at new sizes asks the scheduler for, sidecars, init
    containers, pod-level requests and overhead included."""
    by_name = {c.name: c for c in containers}
    return pod_requests(pod, lambda c, _st: effective_requests(by_name.get(c.name, c)))
