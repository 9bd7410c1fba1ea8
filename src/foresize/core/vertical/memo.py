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
from foresize.core.vertical.desired import KnownPod


@dataclass(slots=True)
class PlanMemo:
    """Pod uid -> what was derived from the pod object last seen (`pods`); the node
    ledger's pod charges and node rooms (`ledger`)."""

    pods: dict[str, KnownPod] = field(default_factory=dict)
    ledger: LedgerMemo = field(default_factory=LedgerMemo)

    def prune(self, live: Set[str], nodes: Set[str]) -> None:
        """Drop the entries of pods and nodes that are gone (`live`: the uids of the
        snapshot's pods; `nodes`: its node names), once a memo has more entries than
        there are of them: it then never holds more than one entry a pod or node."""
        for memo, keys in (
            (self.pods, live),
            (self.ledger.charges, live),
            (self.ledger.rooms, nodes),
        ):
            if len(memo) > len(keys):
                for key in [k for k in memo if k not in keys]:
                    del memo[key]
