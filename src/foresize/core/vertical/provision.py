"""Recreating into Pending: the capacity fallback where a node autoscaler adds nodes.

The capacity guard (`vertical.admit`) sends no in-place upsize its node cannot hold, and
under `in_place_or_recreate` evicts the pod so it comes back bigger only if some node has
room for it now. Without a node autoscaler that is the whole story: a pod evicted with no
room anywhere would sit Pending for nothing. With one (Karpenter, Cluster Autoscaler) it
starves the workload: the held pod never goes Pending, so nothing asks for a node, and
the upsize waits until consolidation or churn happens to free room (`bench nodes` showed
`foresize` throttling 3.5x `vpa` that way). Karpenter and Cluster Autoscaler size nodes
only from Pending pods' requests, and the coming size Foresize publishes
(`cluster.pending`) is read by neither.

So, when the cluster has a node autoscaler, an upsize held because no node has room for
the recreated pod is recreated anyway once it has been held for the target's
`stall_timeout` (the bound a stalled in-place resize already gets before its recreation):
the eviction goes through every gate an eviction passes (PDBs through the Eviction API,
`do-not-disrupt` / `safe-to-evict`, min replicas, the batch and the maintenance windows
and budgets), the replacement is created at its new size by admission and goes Pending,
and the node autoscaler provisions a node for it. Only a pod that an empty node of a
type the cluster already runs would hold is recreated so: a node autoscaler may not
offer anything bigger, and a pod no node can take would stay Pending for good.

Whether the cluster has a node autoscaler is `WorkerConfig.node_autoscaler`: `True` or
`False` as the operator is told (`foresize operator --node-autoscaler on|off`; the
simulator sets it from the scenario's `node_autoscaler`), `None` (the operator's `auto`,
its default) to read it from the nodes: a node labelled `karpenter.sh/nodepool` is
Karpenter's, so Karpenter runs. Cluster Autoscaler leaves no such mark on its nodes, so
under it the operator is told with `--node-autoscaler on`.
"""

from __future__ import annotations

from foresize.core.cluster.capacity import fits
from foresize.core.cluster.model import Pod, ResourceMap
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.errors import ForesizeError
from foresize.core.vertical.run import Candidate, PassContext, TargetRun

# The label Karpenter puts on every node it launches (its NodePool's name).
KARPENTER_NODE_LABEL = "karpenter.sh/nodepool"

# The Event reason of an eviction whose replacement no node has room for yet: it goes
# Pending so the node autoscaler provisions for it.
EVICTING_INTO_PENDING = "EvictingIntoPending"


# `--node-autoscaler`'s values and the setting each is (`WorkerConfig.node_autoscaler`).
NODE_AUTOSCALER_SETTINGS: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


def parse_node_autoscaler(text: str, option: str = "--node-autoscaler") -> bool | None:
    """`auto`, `on` or `off` into the setting; an error naming the option otherwise."""
    key = text.strip().lower()
    if key not in NODE_AUTOSCALER_SETTINGS:
        raise ForesizeError(
            f"{option}: {text!r} is not one of {', '.join(NODE_AUTOSCALER_SETTINGS)}"
        )
    return NODE_AUTOSCALER_SETTINGS[key]


def node_autoscaler_present(setting: bool | None, snapshot: ClusterSnapshot) -> bool:
    """Does a node autoscaler add nodes for Pending pods? As set, or (None) read from the
    nodes: any node carrying Karpenter's NodePool label."""
    if setting is not None:
        return setting
    return any(KARPENTER_NODE_LABEL in n.labels for n in snapshot.nodes.values())


def fits_an_empty_node(snapshot: ClusterSnapshot, need: ResourceMap) -> bool:
    """Would an empty node of a kind the cluster runs hold a pod of requests `need`?"""
    return any(fits(need, n.allocatable) for n in snapshot.nodes.values())


def recreate_into_pending(c: Candidate, ctx: PassContext, need: ResourceMap) -> bool:
    """No node has room for the pod at `need`: may it be evicted all the same, to go
    Pending and have the node autoscaler add a node? Keeps when the hold began (persisted
    with the target's state, so a restart does not reset the clock)."""
    ts = c.run.state
    since = ts.no_room_since.setdefault(c.pod.uid, ctx.now)
    if not ctx.provisioning or not fits_an_empty_node(ctx.snapshot, need):
        return False
    return ctx.now - since >= c.run.policy.stall_timeout


def room_found(c: Candidate) -> None:
    """The pod's recreation found room (or went): the hold is over."""
    room_found_for(c.run, c.pod)


def room_found_for(run: TargetRun, pod: Pod) -> None:
    """The pod's hold for room is over (it found room, or it has no upsize to hold)."""
    run.state.no_room_since.pop(pod.uid, None)
