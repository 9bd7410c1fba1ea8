"""What the planner derived from pod objects, kept from one pass to the next (issue 26).

Most pods are the same object from one pass to the next: both shells replace a pod when
it changes and never edit one they have handed to a pass (`cluster.model`; the kube
informer keeps the object of a pod whose resourceVersion did not move, across relists
too). So what a pass derived from a pod object (its change towards a suggestion, whether
a resize is in flight, its stall, its charge on the node) holds for as long as the very
same object comes back. The memo lives in the worker's state (`WorkerState.memo`): the
shell hands it in with the state and gets it back with the new state; nothing is kept
anywhere else. Every entry names the object it came from and is used only for that object
(`desired.known_pod`, `capacity.NodeLedger.charge`), so a pod that moved in any way is
derived afresh.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from foresize.core.cluster.capacity import LedgerMemo
from foresize.core.vertical.desired import KnownPod, SharedChanges, SharedDesired

# A target's changes by pod spec are dropped once they outnumber its pods this many times
# (plus a few): each entry holds only for its suggestion, and a target whose pods went
# through many specs under one suggestion keeps no more than this.
SPECS_PER_POD = 4


@dataclass(slots=True)
class TargetMemo:
    """What one target's passes keep: its pods' changes and desired containers by pod
    spec (`desired.known_pod_change`, `desired.shared_desired_containers`; each entry
    names the suggestion it holds for), so a new pod object whose spec another pod had
    takes that pod's change in a later pass too; and its pods' entries of the last pass,
    in their order (`entries`), so a pod handed in again at its place is found there."""

    changes: SharedChanges = field(default_factory=dict)
    desired: SharedDesired = field(default_factory=dict)
    entries: list[KnownPod] = field(default_factory=list)


@dataclass(slots=True)
class PlanMemo:
    """Pod uid -> what was derived from the pod object last seen (`pods`); the node
    ledger's pod charges and node rooms (`ledger`); target key -> what its passes keep
    (`targets`, `TargetMemo`)."""

    pods: dict[str, KnownPod] = field(default_factory=dict)
    ledger: LedgerMemo = field(default_factory=LedgerMemo)
    targets: dict[str, TargetMemo] = field(default_factory=dict)

    def target(self, key: str, pods: int) -> TargetMemo:
        """The target's memo (`pods`: how many pods it has now; spec tables grown past
        `SPECS_PER_POD` a pod start again empty)."""
        held = self.targets.get(key)
        if held is None:
            held = self.targets[key] = TargetMemo()
        elif len(held.changes) + len(held.desired) > SPECS_PER_POD * pods + 8:
            held.changes, held.desired = {}, {}
        return held

    def prune(self, live: Set[str], nodes: Set[str], targets: Set[str] = frozenset()) -> None:
        """Drop the entries of pods, nodes and targets that are gone (`live`: the uids of
        the snapshot's pods; `nodes`: its node names; `targets`: the keys of the targets
        the pass planned), once a memo has more entries than there are of them: it then
        never holds more than one entry a pod, node or target."""
        for memo, keys in (
            (self.pods, live),
            (self.ledger.charges, live),
            (self.ledger.rooms, nodes),
            (self.targets, targets),
        ):
            if len(memo) > len(keys):
                for key in [k for k in memo if k not in keys]:
                    del memo[key]
