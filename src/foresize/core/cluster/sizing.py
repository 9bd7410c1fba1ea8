"""Sizing one container from a suggestion (pure): bounds, OOM floor, limit ratio, QoS kept.

One rule shared by the pod admission decision (`admission.pod`) and the DaemonSet
autoscaler (`lifecycle.daemonset`), so a pod sized at creation and a pod resized in place
get the same resources from the same suggestion.
"""

from __future__ import annotations

import math

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import (
    Container,
    ContainerSuggestion,
    QoSClass,
    ResourceRequirements,
)
from foresize.core.cluster.qos import effective_requests
from foresize.core.cluster.target import ContainerPolicy, ResourcePolicy


def _bounded(value: int, policy: ResourcePolicy | None) -> int:
    if policy is None:
        return value
    if policy.upper is not None and value > policy.upper:
        value = policy.upper
    if policy.lower is not None and value < policy.lower:
        value = policy.lower
    return value


def size_container(
    container: Container,
    policy: ContainerPolicy,
    suggestion: ContainerSuggestion | None,
    oom_floor: int | None,
    qos: QoSClass,
    leave: frozenset[str] = frozenset(),
) -> ResourceRequirements:
    """The container's resources after applying the suggestion (a new object; equal to
    the old one when nothing applies). Resources in `leave` keep their values."""
    out = container.resources.copy()
    declared = effective_requests(container)
    for resource in (CPU, MEMORY):
        if resource in leave:
            continue
        current = declared.get(resource)
        if current is None:
            # Not declared by the template: adding it would change the key set (and
            # possibly the QoS class) and could never be reverted in place.
            continue
        wanted = suggestion.requests.get(resource) if suggestion is not None else None
        if resource == MEMORY and oom_floor:
            wanted = max(wanted if wanted is not None else current, oom_floor)
        if wanted is None:
            continue
        rpolicy = policy.for_resource(resource)
        request = _bounded(int(wanted), rpolicy)
        limit = container.resources.limits.get(resource)
        if qos == "Guaranteed":
            out.requests[resource] = request
            out.limits[resource] = request
            continue
        if limit is not None:
            if rpolicy is not None and rpolicy.limit_ratio is not None:
                limit = math.ceil(request * rpolicy.limit_ratio)
            elif suggestion is not None and resource in suggestion.limits:
                limit = max(suggestion.limits[resource], request)
            # Without a ratio the limit stays; a request never exceeds it.
            request = min(request, limit)
            out.limits[resource] = limit
        out.requests[resource] = request
    return out
