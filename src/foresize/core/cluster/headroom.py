"""Forecast-sized headroom (issue 23 item 4): the placeholder pods, and their size.

The Cluster Autoscaler FAQ's overprovisioning pattern: a PriorityClass below every real
pod (value -1, `preemptionPolicy: Never`) and a Deployment of pause pods in it. The pods
hold room on the nodes; any real pod that needs the room preempts them (the scheduler's
preemption), and a node autoscaler provisions for them when they are Pending, so the room
is there before it is needed. Foresize sizes the Deployment, one per node pool, to the
forecast upsize demand of the coming window (`vertical.headroom` forecasts it), so the
upsizes of the window find room on their own node and land in place instead of stalling.

An in-place resize does not preempt anything: the kubelet only grants what its node has
free. So the capacity guard counts the placeholders' room as free for an upsize, and an
upsize that needs it releases (deletes, grace 0) the placeholders of its node in the same
pass, before the resize is sent (`capacity.NodeLedger`). The Deployment recreates them,
and they go Pending where there is no room left: the node autoscaler adds a node for them
ahead of the next upsize.

This module holds what both the planner and the ledger read: the configuration, which
pods are placeholders, the pool of a node, and the pure sizing from a pool's demand to
the Deployment's replicas (`plan_headroom`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.actions import EnsureHeadroom
from foresize.core.cluster.model import Node, Pod, ResourceMap
from foresize.core.cluster.pending import NODE_POOL_LABELS, node_pool
from foresize.core.cluster.snapshot import ClusterSnapshot

HEADROOM_LABEL = "foresize.io/headroom"
"""The label on the placeholder Deployment and its pods; its value is the node pool."""
HEADROOM_PRIORITY = -1
"""The placeholders' priority: below every real pod (the default priority is 0), so any of
them preempts a placeholder; above Cluster Autoscaler's expendable cutoff (-10), under
which a Pending pod does not make it scale up (the FAQ's own example uses -1)."""
PRIORITY_CLASS = "foresize-headroom"
DEFAULT_WINDOW = 3600.0
"""The coming window the headroom covers: a node autoscaler takes minutes to add a node
(Karpenter's batching and a node's start-up, Cluster Autoscaler's scan and start-up), so
an hour ahead is room made early enough, and the CPU schedule's segments are an hour's
slots (`recommend.core.SCHEDULE_SLOT`)."""
DEFAULT_POD_CPU = 250
DEFAULT_POD_MEMORY = 512 * MIB
"""One placeholder's requests: small enough that releasing one frees about what one
upsize takes, large enough that a pool's headroom is a few pods, not hundreds."""
DEFAULT_MAX_REPLICAS = 40
"""At most this many placeholders per pool: the bound on what a bad forecast can cost."""
MAX_PLACEHOLDERS = 1000
"""The largest `max_replicas` accepted: a pool's headroom is room for a window's upsizes,
never a second cluster of pause pods (1,000 default-sized ones hold 250 cores)."""
MAX_WINDOW = 86400.0
"""The longest coming window: without a schedule the forecast is the same window one day
earlier (seasonal-naive), which sees nothing past a day ahead."""
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True, slots=True)
class HeadroomConfig:
    """What the operator's `--headroom*` flags set (off unless given)."""

    namespace: str = "foresize-headroom"
    # Pools (`cluster.pending.node_pool` over `pool_labels`) that get headroom; None =
    # every pool, "" = nodes without any of the labels (a cluster that has no pools).
    pools: tuple[str, ...] | None = None
    pool_labels: tuple[str, ...] = NODE_POOL_LABELS
    window: float = DEFAULT_WINDOW
    pod_requests: Mapping[str, int] = field(
        default_factory=lambda: {CPU: DEFAULT_POD_CPU, MEMORY: DEFAULT_POD_MEMORY}
    )
    max_replicas: int = DEFAULT_MAX_REPLICAS
    priority_class: str = PRIORITY_CLASS

    def __post_init__(self) -> None:
        for r in (CPU, MEMORY):
            if self.pod_requests.get(r, 0) <= 0:
                raise ValueError(f"headroom pod_requests.{r}: must be positive")
        if not 0 < self.window <= MAX_WINDOW:
            raise ValueError(
                f"headroom window: must be positive and at most {MAX_WINDOW:g}s, "
                f"not {self.window:g}"
            )
        if not 0 <= self.max_replicas <= MAX_PLACEHOLDERS:
            raise ValueError(
                f"headroom max_replicas: must be from 0 to {MAX_PLACEHOLDERS}, "
                f"not {self.max_replicas}"
            )

    def wanted(self, pool: str) -> bool:
        return self.pools is None or pool in self.pools


def pool_of(node: Node | None, config: HeadroomConfig) -> str:
    """The node pool a node belongs to (`cluster.pending.node_pool`, the one reading)."""
    return node_pool(node, config.pool_labels)


def pool_label(snapshot: ClusterSnapshot, pool: str, config: HeadroomConfig) -> str:
    """The label a pool's nodes carry it under (the placeholders' node selector): the
    first of `pool_labels` a node of the pool has with that value ("" for pool "")."""
    for name in sorted(snapshot.nodes):
        labels = snapshot.nodes[name].labels
        for label in config.pool_labels:
            if labels.get(label):
                if labels[label] == pool:
                    return label
                break
    return ""


def deployment_name(pool: str) -> str:
    """The placeholder Deployment of a pool: `foresize-headroom[-POOL]`, a DNS label."""
    if not pool:
        return PRIORITY_CLASS
    slug = _NOT_DNS.sub("-", pool.lower()).strip("-")[: 63 - len(PRIORITY_CLASS) - 1]
    return f"{PRIORITY_CLASS}-{slug}" if slug else PRIORITY_CLASS


def is_placeholder(pod: Pod, namespace: str) -> bool:
    """A headroom placeholder: in the headroom namespace, labelled, below priority 0 (a
    real pod that merely carries the label is never taken for one)."""
    return pod.namespace == namespace and HEADROOM_LABEL in pod.labels and pod.priority < 0


def placeholder_count(demand: ResourceMap, config: HeadroomConfig) -> int:
    """Placeholders to hold `demand`: enough for each resource, at most `max_replicas`."""
    need = 0
    for r, per_pod in config.pod_requests.items():
        if per_pod > 0 and demand.get(r, 0) > 0:
            need = max(need, math.ceil(demand[r] / per_pod))
    return min(config.max_replicas, need)


def plan_headroom(
    snapshot: ClusterSnapshot,
    demand: Mapping[str, ResourceMap],
    config: HeadroomConfig,
) -> list[EnsureHeadroom]:
    """The placeholder Deployments to create or change: one per pool with demand (or with
    a Deployment already, which goes to 0 when the demand is gone), only where the
    Deployment's replicas or requests differ from what the snapshot shows."""
    pools = {p for p in demand if config.wanted(p)}
    existing: dict[str, tuple[int, ResourceMap]] = {}
    for wl in snapshot.workloads.values():
        if wl.kind == "Deployment" and wl.namespace == config.namespace:
            pool = wl.labels.get(HEADROOM_LABEL)
            if pool is not None and wl.template.containers:
                existing[pool] = (wl.replicas, dict(wl.template.containers[0].resources.requests))
                pools.add(pool)
    out = []
    requests = dict(config.pod_requests)
    for pool in sorted(pools):
        replicas = placeholder_count(demand.get(pool, {}), config) if config.wanted(pool) else 0
        have = existing.get(pool)
        if have is None and replicas == 0:
            continue
        if have is not None and have == (replicas, requests):
            continue
        out.append(
            EnsureHeadroom(
                namespace=config.namespace,
                name=deployment_name(pool),
                pool=pool,
                pool_label=pool_label(snapshot, pool, config) if pool else "",
                replicas=replicas,
                requests=requests,
                priority_class=config.priority_class,
                priority=HEADROOM_PRIORITY,
                demand=dict(demand.get(pool, {})),
            )
        )
    return out


__all__ = [
    "HEADROOM_LABEL",
    "HEADROOM_PRIORITY",
    "MAX_PLACEHOLDERS",
    "MAX_WINDOW",
    "PAUSE_IMAGE",
    "HeadroomConfig",
    "deployment_name",
    "is_placeholder",
    "placeholder_count",
    "plan_headroom",
    "pool_label",
    "pool_of",
]
