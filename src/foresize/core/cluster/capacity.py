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

Pending pods count too (seed 004, audit N4: an HPA's new replicas waiting for room an
upsize was about to take). They are placed as the scheduler would take them, highest
priority first, then oldest, each on the schedulable node with the most free CPU where it
fits; the room so reserved is not free for a resize of a pod of equal or lower priority.
A Pending pod that fits no node now waits for room: on every node big enough to run it,
an upsize of a pod of equal or lower priority may not take what it lacks there. (A
higher-priority pod's upsize may: the scheduler would preempt the Pending pod's way too.)

The replicas an HPA is forecast to add (`horizontal.coming`, seed 004: the scale-out at
the peak that found the room taken by upsizes sent ahead of it) are placed the same way,
after the pods really Pending, as the pods admission would create: their room is kept
free like a Pending pod's.

Headroom placeholders (`cluster.headroom`, where the ledger is given their namespace) are
room held for upsizes: their charge counts as free. A reservation that needs it takes the
node's placeholders, fewest first (largest first, then by name), and for a resize lists
them in `released` (the pass deletes them before the resize is sent: the kubelet grants
only what its node has free); a recreated pod takes them without a release (the scheduler
preempts them). Pending placeholders claim no room.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from foresize.core.cluster.actions import ContainerResize
from foresize.core.cluster.headroom import is_placeholder
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    Node,
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


def pod_key(pod: Pod) -> str:
    return f"{pod.namespace}/{pod.name}"


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
    return container.copy(ResourceRequirements(req, lim))


def resize_delta(
    pod: Pod, changes: Iterable[ContainerResize], charge: ResourceMap | None = None
) -> ResourceMap:
    """How much more the scheduler would charge the node once the resize is written
    (`charge`: the pod's `pod_charge` where the caller has it, e.g. `NodeLedger.charge`).

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

    before = pod_charge(pod) if charge is None else charge
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


def pending_pods(snapshot: ClusterSnapshot) -> list[Pod]:
    """Pods waiting for a node, in the scheduler's queue order: priority, then age."""
    waiting = [
        p
        for p in snapshot.pods
        if p.node_name is None and p.phase == "Pending" and not p.terminating
    ]
    return sorted(waiting, key=lambda p: (-p.priority, p.creation_time, p.namespace, p.name))


@dataclass(frozen=True, slots=True)
class PendingNeed:
    """A Pending pod's claim on room: reserved on `node`, or (node None) waiting for it."""

    key: str  # namespace/name
    priority: int
    need: ResourceMap
    node: str | None
    expected: bool = False  # a replica an HPA is forecast to add, not a pod yet


def expected_pods(pods: Iterable[Pod]) -> list[Pod]:
    """Forecast replicas in the order the scheduler would take them: priority, then name."""
    return sorted(pods, key=lambda p: (-p.priority, p.namespace, p.name))


def pending_message(node: str, blocker: PendingNeed) -> str:
    """Why the guard held an upsize for a Pending pod (or a forecast replica)."""
    where = f"on node {node}" if blocker.node == node else f"room node {node} lacks"
    if blocker.expected:
        return (
            f"upsize not sent: the HorizontalPodAutoscaler of {blocker.key.rsplit('#', 1)[0]} "
            f"is forecast to add a replica (priority {blocker.priority}) that needs the "
            f"{format_resources(blocker.need)} {where}; room kept for it, waiting for capacity"
        )
    return (
        f"upsize not sent: Pending pod {blocker.key} (priority {blocker.priority}) needs the "
        f"{format_resources(blocker.need)} {where}; it schedules first, waiting for capacity"
    )


def _own_node_first(nodes: Mapping[str, object], own: str | None) -> Iterator[str]:
    """The node names, the pod's own first: lazily, since the first node with room ends
    the search (a list of every node per eviction grows with the square of the cluster)."""
    if own is not None and own in nodes:
        yield own
    for name in nodes:
        if name != own:
            yield name


# Pod uid -> (the pod object, its `pod_charge`): valid for that very object only (the
# shells never edit a pod they handed to a pass, `cluster.model`), so the planner's state
# may carry it from pass to pass (`vertical.memo.PlanMemo`).
ChargeMemo = dict[str, tuple[Pod, ResourceMap]]


@dataclass(slots=True)
class NodeRoom:
    """A node's room at the start of a pass, and what it was computed from: the node
    object, the very pod objects on it and the headroom namespace."""

    node: object
    pods: list[Pod]
    headroom: str | None
    free: ResourceMap
    held: list[tuple[Pod, ResourceMap]]

    def holds_for(self, node: object, pods: list[Pod], headroom: str | None) -> bool:
        return (
            self.node is node
            and self.headroom == headroom
            and len(self.pods) == len(pods)
            and all(a is b for a, b in zip(self.pods, pods, strict=True))
        )


@dataclass(slots=True)
class LedgerMemo:
    """What a ledger derived that a later pass's ledger may reuse while its inputs are
    the very same objects: each pod's charge, each node's room at the start of a pass."""

    charges: ChargeMemo = field(default_factory=dict)
    rooms: dict[str, NodeRoom] = field(default_factory=dict)


class NodeLedger:
    """Free capacity per node for one pass, reduced as resizes and recreations are admitted,
    and the room Pending pods need (see the module's notes)."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        expected: Iterable[Pod] = (),
        headroom_namespace: str | None = None,
        memo: LedgerMemo | None = None,
    ) -> None:
        """`expected`: the pods an HPA is forecast to add (not in the snapshot), as
        admission would create them; their room is kept like a Pending pod's.
        `headroom_namespace`: where headroom placeholders live (None: no headroom).
        `memo`: the charges and rooms earlier passes derived (`LedgerMemo`), added to
        as this pass derives more (None: a memo of this pass alone)."""
        self.snapshot = snapshot
        self._free: dict[str, ResourceMap] = {}
        self._pending: list[PendingNeed] | None = None
        self._expected = expected_pods(expected)
        self._headroom = headroom_namespace
        # node -> the placeholders on it whose room is still held, taken from the end.
        self._held: dict[str, list[tuple[Pod, ResourceMap]]] = {}
        self.released: list[Pod] = []  # placeholders a resize of this pass needs gone
        # Each pod's charge once (a pass at most), though the node walk, the pod's resize
        # and its eviction all read it.
        self._memo = LedgerMemo() if memo is None else memo
        self._charges: ChargeMemo = self._memo.charges

    def charge(self, pod: Pod) -> ResourceMap:
        """`pod_charge(pod)`, once per pod object (read it, do not change it)."""
        hit = self._charges.get(pod.uid)
        if hit is not None and hit[0] is pod:
            return hit[1]
        charge = pod_charge(pod)
        self._charges[pod.uid] = (pod, charge)
        return charge

    def _placeholder(self, pod: Pod) -> bool:
        return self._headroom is not None and is_placeholder(pod, self._headroom)

    def free(self, node: str) -> ResourceMap:
        """Allocatable minus the scheduler's charge of every pod on the node but the
        headroom placeholders (their room is held for upsizes; cached)."""
        free = self._free.get(node)
        if free is None:
            room = self._room_at_start(node)
            # This pass's copies: its reservations take from them.
            free = self._free[node] = dict(room.free)
            self._held[node] = list(room.held)
        return free

    def _room_at_start(self, node: str) -> NodeRoom:
        n = self.snapshot.nodes.get(node)
        pods = self.snapshot.pods_on_node(node)
        room = self._memo.rooms.get(node)
        if room is not None:
            if room.holds_for(n, pods, self._headroom):
                return room
            moved = self._moved_room(room, n, pods)
            if moved is not None:
                self._memo.rooms[node] = moved
                return moved
        free = dict(n.allocatable) if n is not None else {}
        held = []
        for p in pods:
            charge = self.charge(p)
            if self._placeholder(p) and not p.terminating:
                held.append((p, charge))
                continue
            for r, v in charge.items():
                free[r] = free.get(r, 0) - v
        # Taken from the end: the smallest (then last by name) first, so a small
        # upsize releases one small placeholder, not a large one.
        held.sort(key=lambda e: (-sum(e[1].values()), e[0].name))
        room = self._memo.rooms[node] = NodeRoom(n, list(pods), self._headroom, free, held)
        return room

    def _moved_room(self, room: NodeRoom, node: object, pods: list[Pod]) -> NodeRoom | None:
        """The node's room from the last pass's, adjusted by the pods that changed (the
        charges of the pod objects gone from the node given back, those of the new ones
        taken), where that gives what a walk of every pod would: the same node object, no
        headroom placeholders (whose room is held apart), each pod object once where the
        node's pod count changed, and no changed pod charged a resource the node does not
        list (a walk would add or drop that key). None: walk them all. Amounts are
        integers, so the order of the subtractions does not change the result."""
        if self._headroom is not None or room.headroom is not None or room.node is not node:
            return None
        if len(room.pods) == len(pods):
            # Place by place (a shell hands a changed pod in where the old one was): the
            # sums over both lists differ by the places that differ, whatever they hold.
            gone = [a for a, b in zip(room.pods, pods, strict=True) if a is not b]
            new = [b for a, b in zip(room.pods, pods, strict=True) if a is not b]
        else:
            before = {id(p): p for p in room.pods}
            now = {id(p): p for p in pods}
            if len(before) != len(room.pods) or len(now) != len(pods):
                return None
            gone = [p for key, p in before.items() if key not in now]
            new = [p for key, p in now.items() if key not in before]
        if len(gone) + len(new) > len(pods):
            return None  # most of the node moved: the walk is no dearer
        allocatable = node.allocatable if isinstance(node, Node) else {}
        free = dict(room.free)
        for sign, changed, charge in ((1, gone, self._known_charge), (-1, new, self.charge)):
            for p in changed:
                for r, v in charge(p).items():
                    if r not in allocatable:
                        return None
                    free[r] += sign * v
        return NodeRoom(node, list(pods), None, free, [])

    def _known_charge(self, pod: Pod) -> ResourceMap:
        """`charge` of a pod object that may have been replaced since (a pod gone from a
        node): from the memo when it holds this very object, else computed and not kept,
        so the memo keeps the entry of the object in the snapshot."""
        hit = self._charges.get(pod.uid)
        if hit is not None and hit[0] is pod:
            return hit[1]
        return pod_charge(pod)

    def reserve(self, node: str, delta: ResourceMap, *, release: bool = True) -> None:
        """Take `delta` from the node's free room; where that leaves less than the
        placeholders hold, take placeholders until it does not (listed in `released`
        for a resize; `release=False` for a recreated pod the scheduler places)."""
        free = self.free(node)
        for r, v in delta.items():
            if v > 0:
                free[r] = free.get(r, 0) - v
        held = self._held.get(node, [])

        def short() -> bool:
            kept: ResourceMap = {}
            for _, charge in held:
                for r, v in charge.items():
                    kept[r] = kept.get(r, 0) + v
            return any(free.get(r, 0) < kept.get(r, 0) for r, v in delta.items() if v > 0)

        while held and short():
            pod, _ = held.pop()
            if release:
                self.released.append(pod)

    def pending(self) -> list[PendingNeed]:
        """The Pending pods' needs, placed once per pass (see the module's notes)."""
        if self._pending is None:
            self._pending = []
            placed: dict[str, ResourceMap] = {}
            nodes = self.snapshot.nodes
            open_nodes = sorted(n for n, v in nodes.items() if v.ready and not v.unschedulable)
            queue = [(p, False) for p in pending_pods(self.snapshot) if not self._placeholder(p)]
            queue += [(p, True) for p in self._expected]
            for pod, expected in queue:
                need = positive(spec_requests(pod))
                best: str | None = None
                best_cpu = -1.0
                for name in open_nodes:
                    room = self._room(name, placed)
                    if not fits(need, room):
                        continue
                    alloc = nodes[name].allocatable.get("cpu", 0)
                    share = room.get("cpu", 0) / alloc if alloc else 0.0
                    if share > best_cpu:
                        best, best_cpu = name, share
                if best is not None:
                    taken = placed.setdefault(best, {})
                    for r, v in need.items():
                        taken[r] = taken.get(r, 0) + v
                self._pending.append(PendingNeed(pod_key(pod), pod.priority, need, best, expected))
        return self._pending

    def _room(self, node: str, placed: dict[str, ResourceMap]) -> ResourceMap:
        taken = placed.get(node, {})
        return {r: v - taken.get(r, 0) for r, v in self.free(node).items()}

    def blocker(self, node: str, delta: ResourceMap, priority: int) -> PendingNeed | None:
        """The Pending pod (priority >= `priority`) whose room `delta` on `node` would
        take, if any: one placed there, or one waiting that could run there."""
        grow = positive(delta)
        if not grow or not any(p.priority >= priority for p in self.pending()):
            return None
        free = self.free(node)
        reserved: ResourceMap = {}
        for p in self.pending():
            if p.node == node and p.priority >= priority:
                for r, v in p.need.items():
                    reserved[r] = reserved.get(r, 0) + v
        for p in self.pending():
            if p.priority < priority:
                continue
            if p.node == node and any(
                free.get(r, 0) - reserved.get(r, 0) - v < 0 for r, v in grow.items()
            ):
                return p
            if (
                p.node is None
                and self.could_run(node, p)
                and any(
                    p.need.get(r, 0) > 0 and free.get(r, 0) - reserved.get(r, 0) - v < p.need[r]
                    for r, v in grow.items()
                )
            ):
                return p
        return None

    def could_run(self, node: str, p: PendingNeed) -> bool:
        n = self.snapshot.nodes.get(node)
        return (
            n is not None
            and n.ready
            and not n.unschedulable
            and all(n.allocatable.get(r, 0) >= v for r, v in p.need.items())
        )

    def why_not(self, node: str, delta: ResourceMap, priority: int | None = None) -> str | None:
        """Why `delta` may not be admitted on `node` (None: it may): no room, or the room
        a Pending pod of equal or higher priority needs."""
        if not fits(delta, self.free(node)):
            return no_room_message(node, delta, self.free(node))
        if priority is not None:
            blocker = self.blocker(node, delta, priority)
            if blocker is not None:
                return pending_message(node, blocker)
        return None

    def admit(self, node: str, delta: ResourceMap, priority: int | None = None) -> bool:
        """Reserve `delta` on `node` if it fits and (with the resized pod's `priority`)
        takes no room a Pending pod of equal or higher priority needs; False (nothing
        reserved) otherwise."""
        if self.why_not(node, delta, priority) is not None:
            return False
        self.reserve(node, delta)
        return True

    def fits_elsewhere(self, pod: Pod, need: ResourceMap) -> bool:
        """Would the pod, recreated with requests `need`, fit some schedulable node? The
        node it runs on first (its own charge goes with it); the room found is reserved, so
        two evictions in one pass do not count on the same room."""
        nodes = self.snapshot.nodes
        own = self.charge(pod)
        for name in _own_node_first(nodes, pod.node_name):
            node = nodes[name]
            if node.unschedulable or not node.ready:
                continue
            free = self.free(name)
            room = (
                {r: v + own.get(r, 0) for r, v in free.items()} if name == pod.node_name else free
            )
            grow = (
                {r: v - own.get(r, 0) for r, v in need.items()} if name == pod.node_name else need
            )
            if fits(need, room) and self.blocker(name, grow, pod.priority) is None:
                self.reserve(name, need, release=False)
                return True
        return False
