"""What disrupts a pod, and how many disruptions a workload takes at once (architecture §3.2).

One home for the pacing rule every planner that changes running pods applies: the
disruption worker (its evictions and resizes), the DaemonSetAutoscaler's resizes and the
revert on leaving autonomous mode. A resize that restarts a container (a changed resource
whose `resizePolicy` is `RestartContainer`) is a disruption like an eviction: at most
`max_disrupted` of a workload's pods at once (a percentage rounded up, at least one), pods
already disrupted (terminating, not Ready, or with a restarting resize not yet actuated)
counted against it, and batches at least `interval` apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from foresize.core.cluster.actions import ContainerResize
from foresize.core.cluster.model import COMPUTE_RESOURCES, RESTART_CONTAINER, Container, Pod


def batch_size(max_disrupted: int | str, replicas: int) -> int:
    """Pods that may be disrupted at once: a percentage of replicas rounded up, at least 1."""
    if isinstance(max_disrupted, int):
        return max(1, max_disrupted)
    pct = float(max_disrupted.rstrip("%"))
    # Round the percentage up (20% of 11 replicas is 3), never below one pod.
    return max(1, math.ceil(pct * max(replicas, 0) / 100.0 - 1e-9))


def restarts_container(container: Container, changed: Iterable[str]) -> bool:
    """Does changing these resources of `container` in place restart it? (The kubelet
    restarts a container when a resource whose resizePolicy is RestartContainer changes.)"""
    return any(container.resize_policy.get(r) == RESTART_CONTAINER for r in changed)


def resize_restarts(pod: Pod, changes: Iterable[ContainerResize]) -> bool:
    """Does this resize of `pod` restart one of its containers?"""
    for change in changes:
        current = pod.container(change.name)
        if current is None:
            continue
        res = current.resources
        changed = {
            r
            for r in COMPUTE_RESOURCES
            if (r in change.requests and change.requests[r] != res.requests.get(r))
            or (r in change.limits and change.limits[r] != res.limits.get(r))
        }
        if restarts_container(current, changed):
            return True
    return False


def restart_pending(pod: Pod) -> bool:
    """A container whose resizePolicy is RestartContainer has a change the kubelet has not
    actuated yet: it will restart whenever the resize lands."""
    for c in pod.containers:
        st = pod.status_of(c.name)
        if st is None:
            continue
        for r, pol in c.resize_policy.items():
            if pol == RESTART_CONTAINER and r in COMPUTE_RESOURCES:
                if c.resources.requests.get(r) != st.allocated.get(r, c.resources.requests.get(r)):
                    return True
                if c.resources.limits.get(r) != st.resources.limits.get(
                    r, c.resources.limits.get(r)
                ):
                    return True
    return False


def disrupted(pod: Pod) -> bool:
    """The pod counts against its workload's batch already."""
    return pod.terminating or not pod.ready or restart_pending(pod)


@dataclass(slots=True)
class RestartBatch:
    """The restarting resizes one planner may still send to one workload in this pass."""

    left: int
    paced: bool  # the interval since the last batch has not passed
    sent: int = 0

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.sent += 1
        return True


def restart_batch(
    pods: Iterable[Pod],
    max_disrupted: int | str,
    interval: float,
    last_batch_at: float | None,
    now: float,
) -> RestartBatch:
    """This pass's batch for a workload whose live pods are `pods`: `max_disrupted` of them,
    less the pods already disrupted; none while `interval` has not passed since the last
    batch (`last_batch_at`, kept by the caller)."""
    live = list(pods)
    paced = last_batch_at is not None and now - last_batch_at < interval
    size = batch_size(max_disrupted, len(live))
    left = 0 if paced else max(0, size - sum(1 for p in live if disrupted(p)))
    return RestartBatch(left, paced)
