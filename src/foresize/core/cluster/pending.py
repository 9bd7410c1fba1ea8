"""What Foresize will do that node autoscalers cannot see: the coming size of a pod and the
pending upsize demand per node pool (issue 23 item 3).

Karpenter and Cluster Autoscaler size nodes from the requests of Pending pods. Three
things Foresize is about to do are invisible to them (Karpenter RFC #3037; its
VPA-reading prediction work, PR #3134, reads only VerticalPodAutoscaler objects):

- `recreate`: a pod Foresize will evict so that it comes back at new requests (recreate
  mode, a stall or capacity fallback, a heap bound to its start-time limit), while the
  eviction waits (batch, PDB, no node with room yet) or is sent this pass;
- `waiting-for-room`: an in-place upsize the capacity guard holds because its node has
  no room (Foresize never sends it: it would sit Deferred);
- `deferred`: an in-place upsize the kubelet holds as `Deferred` (sent before the room
  went, or by another writer); the scheduler already charges the node its new size.

For each such pod the core computes its `ComingSize`: the requests per container it will
have (for a recreated pod, what admission will give it: the suggestion and, when the
target has a start-up boost, the boost the webhook applies on top, since the pod starts
boosted and must find room at that size); the pod's total at that size as the scheduler
counts it (sidecars, init containers, overhead); and the upsize: that total less what
the kubelet has allocated now, positive parts only (a Deferred grow's room is not really
there, so it counts from the allocation, not from the spec).

The shells publish both from the same pass (`reconcile.plan_pass`): the annotation
`foresize.io/coming-resources` on each such pod (`annotation_value`, format in
docs/vertical.md), removed once the pod no longer waits, and the gauge
`foresize_pending_upsize_demand{node_pool,resource}` (`PendingDemand.by_pool`). The
annotation is a pod annotation under Foresize's own prefix: it is not a
VerticalPodAutoscaler object, so no VPA recommender writes it and no VPA updater or
admission controller acts on the pod because of it; nothing but Foresize writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from foresize.core.api.quantity import CPU, MEMORY, format_quantity
from foresize.core.cluster.actions import Action, EvictPod, PatchPodMetadata
from foresize.core.cluster.boost import BoostPolicy, boost_container
from foresize.core.cluster.model import (
    COMPUTE_RESOURCES,
    Container,
    Node,
    Pod,
    ResourceMap,
    ResourceRequirements,
)
from foresize.core.cluster.qos import allocated_requests, qos_class_of, spec_requests_with
from foresize.core.cluster.snapshot import ClusterSnapshot

COMING_ANNOTATION = "foresize.io/coming-resources"
# The format's version, in the annotation: a node autoscaler reading it checks it.
COMING_FORMAT_VERSION = 1

RECREATE = "recreate"
WAITING_FOR_ROOM = "waiting-for-room"
DEFERRED = "deferred"
CAUSES = (RECREATE, WAITING_FOR_ROOM, DEFERRED)

# Where a node's pool is read from, first label present wins: Karpenter's NodePool, then
# the managed node groups of EKS, GKE and AKS (what Cluster Autoscaler scales there). A
# node with none of them is in the pool "" (reported as such).
NODE_POOL_LABELS = (
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
)


@dataclass(frozen=True, slots=True)
class ComingSize:
    """The size one pod will have once Foresize's pending change lands."""

    pod: str  # "namespace/name"
    uid: str
    node: str  # where the pod runs now ("" if unscheduled)
    cause: str  # RECREATE | WAITING_FOR_ROOM | DEFERRED
    containers: dict[str, ResourceMap]  # container -> its requests at the coming size
    pod_requests: ResourceMap  # the scheduler's request of the whole pod at that size
    upsize: ResourceMap  # pod_requests less what is allocated now (positive parts)
    boosted: bool = False  # the containers include the start-up boost of admission


def coming_size(
    pod: Pod,
    requests: Mapping[str, ResourceMap],
    cause: str,
    boost: BoostPolicy | None = None,
    upper_cpu: Mapping[str, int | None] | None = None,
) -> ComingSize | None:
    """The pod at its coming `requests` (container -> compute requests; containers not
    named keep theirs). `boost`: the target's start-up boost, applied as the webhook
    applies it to a recreated pod (`cluster.boost`, bounded by each container's CPU upper
    bound in `upper_cpu`; none where it would change the QoS class). None when nothing
    grows."""
    containers = [_with_requests(c, requests.get(c.name)) for c in pod.containers]
    boosted = False
    if boost is not None and cause == RECREATE:
        containers, boosted = _boosted(pod, containers, boost, upper_cpu or {})
    total = {r: v for r, v in spec_requests_with(pod, containers).items() if r in COMPUTE_RESOURCES}
    now = allocated_requests(pod)
    upsize = {r: total[r] - now.get(r, 0) for r in total if total[r] > now.get(r, 0)}
    if not upsize:
        return None
    return ComingSize(
        pod.key,
        pod.uid,
        pod.node_name or "",
        cause,
        {
            c.name: {r: v for r, v in c.resources.requests.items() if r in COMPUTE_RESOURCES}
            for c in containers
        },
        total,
        upsize,
        boosted,
    )


def _with_requests(c: Container, requests: ResourceMap | None) -> Container:
    if requests is None:
        return c
    return c.copy(ResourceRequirements({**c.resources.requests, **requests}, c.resources.limits))


def _boosted(
    pod: Pod, containers: list[Container], boost: BoostPolicy, upper_cpu: Mapping[str, int | None]
) -> tuple[list[Container], bool]:
    out, any_boost = [], False
    for c in containers:
        if c.name not in upper_cpu:  # not a container the target sizes
            out.append(c)
            continue
        got = boost_container(c.resources, boost, upper_cpu[c.name], c.name)
        out.append(c if got is None else c.copy(got.resources))
        any_boost = any_boost or got is not None
    if any_boost and qos_class_of([*out, *pod.init_containers]) != qos_class_of(
        [*containers, *pod.init_containers]
    ):
        return containers, False  # the webhook would not boost it either
    return out, any_boost


def annotation_value(coming: ComingSize) -> str:
    """The `foresize.io/coming-resources` value: compact JSON, keys sorted, quantities
    as Kubernetes writes them, so equal sizes give equal strings (no patch churn)."""
    doc = {
        "version": COMING_FORMAT_VERSION,
        "cause": coming.cause,
        "containers": {
            name: {"requests": _quantities(req)} for name, req in sorted(coming.containers.items())
        },
        "pod": {"requests": _quantities(coming.pod_requests)},
        "upsize": _quantities(coming.upsize),
        "boosted": coming.boosted,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _quantities(res: ResourceMap) -> dict[str, str]:
    return {r: format_quantity(r, v) for r, v in sorted(res.items()) if r in COMPUTE_RESOURCES}


def node_pool(node: Node | None, labels: Iterable[str] = NODE_POOL_LABELS) -> str:
    """The node's pool by the first of `labels` it carries ("" for none, or no node)."""
    if node is None:
        return ""
    for label in labels:
        value = node.labels.get(label)
        if value:
            return value
    return ""


@dataclass(slots=True)
class PendingDemand:
    """One pass's coming sizes and their sum per node pool."""

    pods: dict[str, ComingSize] = field(default_factory=dict)  # pod key -> coming size
    # (node pool, resource) -> the upsize requests the pool must find room for
    by_pool: dict[tuple[str, str], int] = field(default_factory=dict)
    # (node pool, cause) -> how many pods wait so
    pods_by_pool: dict[tuple[str, str], int] = field(default_factory=dict)


def pending_demand(
    comings: Iterable[ComingSize],
    nodes: Mapping[str, Node],
    labels: Iterable[str] = NODE_POOL_LABELS,
) -> PendingDemand:
    """The demand of `comings` by the pool of the node each pod runs on now (a recreated
    pod usually lands in its own pool: the one whose capacity it needs)."""
    labels = tuple(labels)
    out = PendingDemand()
    for c in sorted(comings, key=lambda c: c.pod):
        out.pods[c.pod] = c
        pool = node_pool(nodes.get(c.node), labels)
        for r in (CPU, MEMORY):
            out.by_pool[(pool, r)] = out.by_pool.get((pool, r), 0) + c.upsize.get(r, 0)
        out.pods_by_pool[(pool, c.cause)] = out.pods_by_pool.get((pool, c.cause), 0) + 1
    return out


def annotation_patches(
    pods: Iterable[Pod], demand: PendingDemand, skip: Iterable[str] = ()
) -> list[tuple[Pod, str | None]]:
    """(pod, new value or None to remove) for every pod whose annotation must change:
    set where a pod waits and its value differs, removed where it no longer waits. Pods
    in `skip` (evicted this pass: their replacement is Pending at its size) are left."""
    skipped = set(skip)
    out: list[tuple[Pod, str | None]] = []
    for pod in pods:
        if pod.key in skipped:
            continue
        have = pod.annotations.get(COMING_ANNOTATION)
        coming = demand.pods.get(pod.key)
        want = annotation_value(coming) if coming is not None and coming.uid == pod.uid else None
        if want != have:
            out.append((pod, want))
    return out


def publish(
    snapshot: ClusterSnapshot,
    comings: Iterable[ComingSize],
    planned: Iterable[Action],
    labels: Iterable[str] = NODE_POOL_LABELS,
) -> tuple[PendingDemand, list[Action]]:
    """The pass's demand, and the patches that set `foresize.io/coming-resources` on each
    pod that waits for its coming size and remove it from those that no longer wait; a
    pod `planned` evicts is left (its replacement is Pending at the new size, which node
    autoscalers read)."""
    demand = pending_demand(comings, snapshot.nodes, labels)
    evicted = {f"{a.namespace}/{a.name}" for a in planned if isinstance(a, EvictPod)}
    patches: list[Action] = [
        PatchPodMetadata(pod.namespace, pod.name, {COMING_ANNOTATION: value})
        for pod, value in annotation_patches(snapshot.pods, demand, evicted)
    ]
    return demand, patches
