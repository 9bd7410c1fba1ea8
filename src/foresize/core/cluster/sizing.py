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
from foresize.core.cluster.target_fields import ContainerPolicy, ResourcePolicy


def _bounded(value: int, policy: ResourcePolicy | None) -> int:
    if policy is None:
        return value
    if policy.upper is not None and value > policy.upper:
        value = policy.upper
    if policy.lower is not None and value < policy.lower:
        value = policy.lower
    return value


def settle_request_over_limit(request: int, limit: int, limit_suggested: bool) -> tuple[int, int]:
    """(request, limit) with the request no higher than the limit, as the API server
    requires, settled one way for the webhook, the DaemonSet autoscaler and the in-place
    resize alike: a limit the suggestion set is raised to its request (the request is
    the forecast need, and the suggestion's own limit must not cut it); a limit the
    suggestion leaves as it is caps the request (a user's limit is not raised behind
    their back)."""
    if request <= limit:
        return request, limit
    if limit_suggested:
        return request, request
    return limit, limit


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
            suggested = False
            if rpolicy is not None and rpolicy.limit_ratio is not None:
                limit = math.ceil(request * rpolicy.limit_ratio)
            elif suggestion is not None and resource in suggestion.limits:
                limit, suggested = suggestion.limits[resource], True
            request, limit = settle_request_over_limit(request, limit, suggested)
            out.limits[resource] = limit
        out.requests[resource] = request
    return out
