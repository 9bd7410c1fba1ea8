"""THE start-up boost rule (issue 25): more CPU for a new pod while it starts, then back.

Many services need several times their steady CPU while they start (JIT compilation,
cache warm-up): sized for steady state they start slowly and fail probes, sized for
start-up they waste it all day. With `spec.vertical.startup_boost` the pod webhook raises
each managed container's CPU at admission (a factor or an absolute request, bounded by
`max_cpu`, the container's upperbound and the largest node's allocatable CPU: `fit_to_node`),
and records what it would have set without the
boost in the pod's `foresize.io/startup-boost` annotation; once the start-up period is
over (the pod is Ready, or `duration` after its start) the vertical planner resizes the
pod back in place to those values. Pure: both shells run it (the webhook's decision and
the reconcile pass).

The QoS class never changes: a request and a limit move by the same factor, so a
Guaranteed container (request == limit) stays Guaranteed and a Burstable one keeps its
request at or under its limit; a container without a CPU request gets none. The boosted
size is what the pod is scheduled with, so the scheduler (and the capacity guard, which
charges max(spec, allocated, actual)) counts it until the unboost lands.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from foresize.core.api.quantity import CPU
from foresize.core.cluster.model import Pod, ResourceRequirements

BOOST_ANNOTATION = "foresize.io/startup-boost"


@dataclass(frozen=True, slots=True)
class BoostPolicy:
    """`spec.vertical.startup_boost` as the decisions read it (CPU in millicores)."""

    factor: float | None = None
    cpu: int | None = None
    max_cpu: int | None = None
    duration: float | None = None  # seconds from the pod's start; None: until Ready


@dataclass(frozen=True, slots=True)
class Boosted:
    """A container's boosted resources, and what it goes back to (None: not boosted)."""

    resources: ResourceRequirements
    back: dict[str, int]  # "request" / "limit" (millicores) to return to
    note: str = ""  # what bounded the boost, if anything


def boost_container(
    res: ResourceRequirements, policy: BoostPolicy, upperbound: int | None, name: str
) -> Boosted | None:
    """The boosted resources of one container admitted with `res` (None: nothing to
    boost - no CPU request, or the bounds leave no room above it)."""
    request = res.requests.get(CPU)
    if not request:
        return None
    if policy.factor is not None:
        want = math.ceil(request * policy.factor)
    else:
        want = max(request, policy.cpu or 0)
    bounds = [(b, what) for b, what in ((policy.max_cpu, "max_cpu"), (upperbound, "upperbound"))]
    note = ""
    for bound, what in bounds:
        if bound is not None and want > bound:
            want, note = bound, f"{name}: boost bounded by {what}"
    if want <= request:
        return None
    ratio = want / request
    limits = dict(res.limits)
    back = {"request": request}
    if CPU in limits:
        back["limit"] = limits[CPU]
        # The limit moves with the request: the QoS class stays what it was.
        limits[CPU] = want if limits[CPU] == request else math.ceil(limits[CPU] * ratio)
    requests = dict(res.requests)
    requests[CPU] = want
    return Boosted(ResourceRequirements(requests, limits), back, note)


def fit_to_node(
    boosted: dict[str, ResourceRequirements],
    base: dict[str, ResourceRequirements],
    others: int,
    node_cpu: int | None,
) -> str:
    """Clamp the boosted containers so the pod's CPU request (theirs + `others`, the
    containers not boosted, init containers' and overhead included) fits the largest
    node's allocatable CPU: a boost no node can hold would leave the pod Pending, which is
    the slow start the boost is for. Each boost is cut by the same share of its raise, the
    limit with it (QoS kept). Returns the note ("" if it fit); `boosted` is changed."""
    if node_cpu is None:
        return ""
    total = others + sum(r.requests.get(CPU, 0) for r in boosted.values())
    if total <= node_cpu:
        return ""
    raise_ = sum(r.requests.get(CPU, 0) - base[n].requests.get(CPU, 0) for n, r in boosted.items())
    room = max(0, node_cpu - others - sum(base[n].requests.get(CPU, 0) for n in boosted))
    share = min(1.0, room / raise_) if raise_ > 0 else 0.0
    for name, res in boosted.items():
        before = base[name].requests.get(CPU, 0)
        want = before + math.floor((res.requests.get(CPU, 0) - before) * share)
        ratio = want / before if before else 1.0
        res.requests[CPU] = want
        if CPU in res.limits and CPU in base[name].limits:
            lim = base[name].limits[CPU]
            res.limits[CPU] = want if lim == before else math.ceil(lim * ratio)
    return (
        f"boost bounded by the largest node's allocatable CPU ({node_cpu}m): the pod "
        f"would ask {total}m"
    )


def encode(
    back: dict[str, dict[str, int]],
    policy: BoostPolicy,
    start: float,
    bounded: list[str] | None = None,
) -> str:
    """The annotation's value: per container what to return to, when the boost ends
    (`until`: epoch seconds, absent: when the pod is Ready), and what bounded it (the
    planner reports it in the target's status while the pod starts)."""
    value: dict[str, Any] = {"containers": back}
    if policy.duration is not None:
        value["until"] = start + policy.duration
    if bounded:
        value["bounded"] = list(bounded)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class BoostState:
    """A pod's boost as its annotation and spec say."""

    back: dict[str, dict[str, int]]  # container -> {"request", "limit"} millicores
    until: float | None
    problem: str = ""  # a malformed annotation: the pod is left alone, the note says why
    bounded: tuple[str, ...] = ()  # what clamped the boost at admission

    def active(self, pod: Pod, now: float) -> bool:
        """Still in its start-up period (not Ready yet, or before `until`)."""
        if self.until is not None:
            return now < self.until
        return not pod.ready

    def still_boosted(self, pod: Pod) -> bool:
        """The pod's spec still asks for more CPU than it goes back to (the unboost has
        not been written)."""
        for c in pod.containers:
            b = self.back.get(c.name)
            if b is not None and c.resources.requests.get(CPU, 0) > b.get("request", 0):
                return True
        return False


def boost_state(pod: Pod) -> BoostState | None:
    """The pod's boost (None: not boosted at admission)."""
    raw = pod.annotations.get(BOOST_ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
        back = {
            str(name): {k: int(v) for k, v in dict(b).items() if k in ("request", "limit")}
            for name, b in dict(value["containers"]).items()
        }
        until = value.get("until")
        until_s = float(until) if until is not None else None
        bounded = tuple(str(b) for b in value.get("bounded") or ())
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return BoostState({}, None, f"{BOOST_ANNOTATION} is not what the webhook writes: {exc}")
    return BoostState(back, until_s, bounded=bounded)
