"""THE start-up boost rule (issue 25): more CPU for a new pod while it starts, then back.

Many services need several times their steady CPU while they start (JIT compilation,
cache warm-up): sized for steady state they start slowly and fail probes, sized for
start-up they waste it all day. With `spec.vertical.startup_boost` the pod webhook raises
each managed container's CPU at admission (a factor or an absolute request, bounded by
`max_cpu`, the container's upperbound and the largest node's allocatable CPU: `fit_to_node`),
and records what it would have set without the
boost in the pod's `foresize.io/startup-boost` annotation; once the start-up period is
over (the pod is Ready, or `duration` after its start, or its usage settled) the vertical
planner resizes the pod back in place to those values. Pure: both shells run it (the
webhook's decision and the reconcile pass).

"Usage settled" (`settle`): the pod is Ready and its last `samples` CPU usage samples taken
since it became Ready (the shell's collector: metrics-server polls, the simulator's usage
steps) each show every boosted container under `below` times the request it goes back to.
A pod that is Ready but still burns its boost (JIT compilation, cache warm-up after the
readiness probe passed) keeps it; one whose usage already fits the unboosted request does
not need it. Usage the shell never sees (no metrics source, a container missing from the
samples) never counts as settled: `timeout` after Ready the boost ends anyway, and says so.

The QoS class never changes: a request and a limit move by the same factor, so a
Guaranteed container (request == limit) stays Guaranteed and a Burstable one keeps its
request at or under its limit; a container without a CPU request gets none. The boosted
size is what the pod is scheduled with, so the scheduler (and the capacity guard, which
charges max(spec, allocated, actual)) counts it until the unboost lands.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from foresize.core.api.quantity import CPU
from foresize.core.cluster.model import READY, Pod, ResourceRequirements

BOOST_ANNOTATION = "foresize.io/startup-boost"

# How a boost ended (`BoostState.ended`): the reason the unboost gives.
ENDED_READY = "ready"
ENDED_DURATION = "duration"
ENDED_SETTLED = "settled"
ENDED_SETTLE_TIMEOUT = "settle_timeout"


@dataclass(frozen=True, slots=True)
class Settle:
    """`startup_boost.settle`: end the boost once the pod's CPU usage settled."""

    samples: int = 3  # consecutive usage samples since Ready, each under the level
    below: float = 1.0  # the level: this times the request the container goes back to
    timeout: float = 600.0  # seconds after Ready: the boost ends even if usage never settled


@dataclass(frozen=True, slots=True)
class BoostPolicy:
    """`spec.vertical.startup_boost` as the decisions read it (CPU in millicores)."""

    factor: float | None = None
    cpu: int | None = None
    max_cpu: int | None = None
    duration: float | None = None  # seconds from the pod's start; None: until Ready
    settle: Settle | None = None  # until usage settles (`duration`, if set, caps it)


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
    (`until`: epoch seconds, absent: when the pod is Ready; `settle`: when its usage
    settles, `until` a cap), and what bounded it (the planner reports it in the target's
    status while the pod starts)."""
    value: dict[str, Any] = {"containers": back}
    if policy.duration is not None:
        value["until"] = start + policy.duration
    if policy.settle is not None:
        st = policy.settle
        value["settle"] = {"samples": st.samples, "below": st.below, "timeout": st.timeout}
    if bounded:
        value["bounded"] = list(bounded)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# A pod's CPU usage samples: (time, {container: cores}), oldest first.
CpuSamples = list[tuple[float, dict[str, float]]]


@dataclass(slots=True)
class PodCpuWindow:
    """The latest CPU usage samples of each pod (by namespace/name), for `settle`: fed by
    the shell's collector with every sample, start-up ones included (the usage history
    leaves a pod's first minutes out; the settling of a start-up is made of them). Keeps
    `keep` samples a pod; a pod with no sample for `forget` seconds is dropped."""

    keep: int = 32
    forget: float = 3600.0
    _pods: dict[str, deque[tuple[float, dict[str, float]]]] = field(default_factory=dict)
    _swept_at: float = 0.0

    def add(self, pod: str, t: float, container: str, cores: float) -> None:
        """One container's CPU sample (cores) of pod `pod` at time `t`."""
        samples = self._pods.get(pod)
        if samples is None:
            samples = self._pods[pod] = deque(maxlen=self.keep)
        if samples and samples[-1][0] == t:
            samples[-1][1][container] = cores
        elif not samples or samples[-1][0] < t:
            samples.append((t, {container: cores}))
        if t - self._swept_at >= self.forget:  # gone pods, swept once per `forget`
            self._swept_at = t
            for key in [k for k, v in self._pods.items() if v and v[-1][0] < t - self.forget]:
                del self._pods[key]

    def samples(self, pod: str) -> CpuSamples:
        return list(self._pods.get(pod, ()))


@dataclass(frozen=True, slots=True)
class BoostState:
    """A pod's boost as its annotation and spec say."""

    back: dict[str, dict[str, int]]  # container -> {"request", "limit"} millicores
    until: float | None
    problem: str = ""  # a malformed annotation: the pod is left alone, the note says why
    bounded: tuple[str, ...] = ()  # what clamped the boost at admission
    settle: Settle | None = None

    def ended(self, pod: Pod, now: float, usage: CpuSamples | None = None) -> str:
        """Why the start-up period is over ("": the pod still starts): `until` passed;
        without `settle` the pod is Ready; with it, its usage settled since Ready (or
        `timeout` after Ready it had not). `usage`: the pod's CPU samples (None: none)."""
        if self.until is not None and now >= self.until:
            return ENDED_DURATION
        if self.settle is None:
            if self.until is not None:
                return ""
            return ENDED_READY if pod.ready else ""
        if not pod.ready:
            return ""
        cond = pod.condition(READY)
        since = max(cond.last_transition_time if cond else 0.0, pod.start_time or 0.0)
        if self.settled(usage or [], since):
            return ENDED_SETTLED
        return ENDED_SETTLE_TIMEOUT if now >= since + self.settle.timeout else ""

    def settled(self, usage: CpuSamples, since: float) -> bool:
        """The last `settle.samples` samples taken after `since` each show every boosted
        container under `below` x the request it goes back to (a container missing from
        a sample is not settled)."""
        assert self.settle is not None
        recent = [cpu for t, cpu in usage if t > since][-self.settle.samples :]
        if len(recent) < self.settle.samples:
            return False
        for cpu in recent:
            for name, b in self.back.items():
                cores = cpu.get(name)
                if cores is None or cores * 1000.0 >= self.settle.below * b.get("request", 0):
                    return False
        return True

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
        settle = _settle(value.get("settle"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return BoostState({}, None, f"{BOOST_ANNOTATION} is not what the webhook writes: {exc}")
    return BoostState(back, until_s, bounded=bounded, settle=settle)


def _settle(raw: object) -> Settle | None:
    """The annotation's `settle` (None: absent); a value out of range raises ValueError."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError(f"settle {raw!r}: an object expected")
    samples, below, timeout = int(raw["samples"]), float(raw["below"]), float(raw["timeout"])
    if samples < 1 or not below > 0 or not math.isfinite(below) or not timeout > 0:
        raise ValueError(f"settle {raw!r}: samples >= 1, below > 0 and timeout > 0 expected")
    return Settle(samples, below, timeout)
