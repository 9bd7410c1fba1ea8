"""The capacity guard: per node, what the scheduler still has free, and whether a resize
or a recreated pod fits in it.

A node's free capacity is its allocatable minus, for every pod on it, the scheduler's
charge max(spec request, allocated, actual) (`cluster.qos.pod_charge`). Writing a larger
spec raises that charge at once, whether or not the kubelet can actuate it, so an upsize
that does not fit would sit Deferred while the scheduler counts capacity that is not
really free. A `NodeLedger` is built once per pass and every resize of the pass is
admitted through it, so two resizes never count on the same room. Every planner that
resizes running pods (the disruption worker, the DaemonSetAutoscaler, the revert) admits
its upsizes here.
"""

from __future__ import annotations

from collections.abc import Iterable

from foresize.core.cluster.actions import ContainerResize
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    Pod,
    ResourceMap,
    ResourceRequirements,
)
from foresize.core.cluster.qos import (
    container_charge,
    effective_requests,
    pod_charge,
    pod_requests,
    resize_infeasible,
    spec_requests,
)
from foresize.core.cluster.snapshot import ClusterSnapshot


def _patched(container: Container, change: ContainerResize) -> Container:
    """The container with the resize applied (a resize sets the resources it names; a None
    value removes one, as the revert may ask)."""
    req = dict(container.resources.requests)
    lim = dict(container.resources.limits)
    for src, dst in ((change.requests, req), (change.limits, lim)):
        for r, v in src.items():
            if v is None:
                dst.pop(r, None)
            else:
                dst[r] = v
    return Container(
        container.name,
        ResourceRequirements(req, lim),
        container.resize_policy,
        container.restart_policy,
    )


def resize_delta(pod: Pod, changes: Iterable[ContainerResize]) -> ResourceMap:
    """How much more the scheduler would charge the node once the resize is written.

    The charge is max(spec, allocated, actual) per container, aggregated as the scheduler
    does (`qos.pod_requests`: sidecars, init peaks, pod-level requests, overhead), so an
    upsize costs its increase at once and a downsize frees nothing until the kubelet has
    actuated it."""
    if pod.phase in ("Succeeded", "Failed"):
        return {}
    infeasible = resize_infeasible(pod)
    by_name = {c.name: c for c in changes}

    def after(c: Container, status: ContainerStatus | None) -> ResourceMap:
        change = by_name.get(c.name)
        if change is None:
            return container_charge(c, status, infeasible=infeasible)
        return container_charge(_patched(c, change), status, infeasible=False)

    before = pod_charge(pod)
    new = pod_requests(pod, after)
    delta: ResourceMap = {}
    for r in set(before) | set(new):
        d = new.get(r, 0) - before.get(r, 0)
        if d:
            delta[r] = d
    return delta


def _agreed(container: Container, status: ContainerStatus | None) -> ResourceMap:
    """Per resource the smaller of the spec request and the kubelet's allocation: what the
    container holds whichever way a pending resize goes."""
    spec = effective_requests(container)
    if status is None or not status.allocated:
        return spec
    return {r: min(v, status.allocated.get(r, v)) for r, v in spec.items()}


def charge_gap(pod: Pod) -> ResourceMap:
    """The scheduler's charge for the pod minus what its spec and allocation agree on.

    Zero for a pod whose resizes have landed. Positive while one has not: a Deferred
    upsize is charged at its new size while the kubelet grants the old one; a downsize not
    yet actuated is charged at its old size. Negative while a resize is Infeasible: the
    scheduler leaves that spec out, so the gap is the spec that will not land."""
    if pod.phase in ("Succeeded", "Failed"):
        return {}
    charge = pod_charge(pod)
    reference = spec_requests(pod) if resize_infeasible(pod) else pod_requests(pod, _agreed)
    return {r: charge.get(r, 0) - reference.get(r, 0) for r in set(charge) | set(reference)}


def fits(delta: ResourceMap, free: ResourceMap) -> bool:
    """Does every positive part of `delta` fit in `free`? (Negative parts free nothing:
    a downsize is charged until the kubelet has actuated it.)"""
    return all(v <= 0 or v <= free.get(r, 0) for r, v in delta.items())


def positive(delta: ResourceMap) -> ResourceMap:
    return {r: v for r, v in delta.items() if v > 0}


def format_resources(res: ResourceMap) -> str:
    """ "cpu=200m,memory=1Gi": resources in a message."""
    from foresize.core.api.quantity import format_quantity

    return ",".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(res.items()))


def no_room_message(node: str, delta: ResourceMap, free: ResourceMap) -> str:
    """Why the guard held an upsize: what it needs against what the node has free."""
    room = {r: max(v, 0) for r, v in free.items()}
    return (
        f"upsize does not fit node {node} now ({format_resources(positive(delta))} more "
        f"needed, {format_resources(room)} free): not sent, waiting for capacity"
    )


class NodeLedger:
    """Free capacity per node for one pass, reduced as resizes and recreations are admitted."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._free: dict[str, ResourceMap] = {}

    def free(self, node: str) -> ResourceMap:
        """Allocatable minus the scheduler's charge of every pod on the node (cached)."""
        free = self._free.get(node)
        if free is None:
            n = self.snapshot.nodes.get(node)
            free = dict(n.allocatable) if n is not None else {}
            for p in self.snapshot.pods_on_node(node):
                for r, v in pod_charge(p).items():
                    free[r] = free.get(r, 0) - v
            self._free[node] = free
        return free

    def reserve(self, node: str, delta: ResourceMap) -> None:
        free = self.free(node)
        for r, v in delta.items():
            if v > 0:
                free[r] = free.get(r, 0) - v

    def admit(self, node: str, delta: ResourceMap) -> bool:
        """Reserve `delta` on `node` if it fits; False (nothing reserved) if it does not."""
        if not fits(delta, self.free(node)):
            return False
        self.reserve(node, delta)
        return True

    def fits_elsewhere(self, pod: Pod, need: ResourceMap) -> bool:
        """Would the pod, recreated with requests `need`, fit some schedulable node? The
        node it runs on first (its own charge goes with it); the room found is reserved, so
        two evictions in one pass do not count on the same room."""
        nodes = self.snapshot.nodes
        own = pod_charge(pod)
        order = [pod.node_name] if pod.node_name in nodes else []
        order += [n for n in nodes if n != pod.node_name]
        for name in order:
            node = nodes[name]
            if node.unschedulable or not node.ready:
                continue
            free = self.free(name)
            room = (
                {r: v + own.get(r, 0) for r, v in free.items()} if name == pod.node_name else free
            )
            if fits(need, room):
                self.reserve(name, need)
                return True
        return False
