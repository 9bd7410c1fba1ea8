"""The HorizontalPodAutoscaler controller, after kubernetes `pkg/controller/podautoscaler`.

Two halves, as upstream:
- the replica calculator (`replica_calculator.go`), in `hpa_calculator.py`;
- the controller (`horizontal.go`), here: the busiest metric wins; without `behavior`, the
  highest recommendation of the last 5 minutes holds a scale down and a scale up is at
  most max(2 x current, 4); with `behavior`, the up/down stabilization windows, the
  Pods/Percent policies per period with `selectPolicy` (Max, Min, Disabled) over the
  scale events of the recent past, then min/max replicas.
The functions below take time as an argument (simulated seconds) and are what the
controller of the simulated cluster runs every `hpa_sync_period`; their tests are
upstream's own tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from foresize.core.api.quantity import CPU
from foresize.core.cluster import model
from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    HPAMetric,
)
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.hpa_calculator import (
    TOLERANCE,
    HPAError,
    PodMetric,
    PodSample,
    Tolerances,
    average_value_replicas,
    resource_replicas,
)
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.scenario import HPABehavior, HPAScalingPolicy, HPAScalingRules, HPASpec

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.controllers import Controllers
    from foresize.shells.sim.cluster.metering import Metering

# kube-controller-manager defaults (`--horizontal-pod-autoscaler-*`).
DOWNSCALE_STABILIZATION = 300.0  # the scale-down window when behavior does not set one
# Without `behavior`, one sync may at most reach max(2 x current, 4) replicas
# (horizontal.go, calculateScaleUpLimit: bogus usage reports must not explode a target).
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4

# `behavior` as the API server completes it (GenerateHPAScaleUpRules / ScaleDownRules):
# scale up at once by 4 pods or 100% per 15 s, whichever is more; scale down by up to
# 100% per 15 s after the controller's stabilization window (None: the flag's 300 s).
DEFAULT_SCALE_UP = HPAScalingRules(
    stabilization_window=0.0,
    select_policy="Max",
    policies=(HPAScalingPolicy("Pods", 4, 15.0), HPAScalingPolicy("Percent", 100, 15.0)),
)
DEFAULT_SCALE_DOWN = HPAScalingRules(
    stabilization_window=None,
    select_policy="Max",
    policies=(HPAScalingPolicy("Percent", 100, 15.0),),
)


# --------------------------------------------------------------------------- controller


@dataclass(slots=True)
class Recommendation:
    replicas: int
    at: float


@dataclass(slots=True)
class ScaleEvent:
    change: int
    at: float
    outdated: bool = False


def complete_behavior(behavior: HPABehavior | None) -> HPABehavior | None:
    """Fill what a written `behavior` leaves out with the API server's defaults
    (SetDefaults_HorizontalPodAutoscalerBehavior); no behavior stays none."""
    if behavior is None:
        return None
    return HPABehavior(
        _complete(behavior.scale_up, DEFAULT_SCALE_UP),
        _complete(behavior.scale_down, DEFAULT_SCALE_DOWN),
    )


def _complete(rules: HPAScalingRules | None, default: HPAScalingRules) -> HPAScalingRules:
    if rules is None:
        return default
    return HPAScalingRules(
        rules.stabilization_window
        if rules.stabilization_window is not None
        else default.stabilization_window,
        rules.select_policy or default.select_policy,
        rules.policies if rules.policies is not None else default.policies,
        rules.tolerance if rules.tolerance is not None else default.tolerance,
    )


def stabilize(recs: list[Recommendation], desired: int, now: float, window: float) -> int:
    """stabilizeRecommendation (no behavior): the highest recommendation of the window,
    this one included; the sample is stored in place of one older than the window."""
    best = desired
    old = -1
    for i, r in enumerate(recs):
        if r.at < now - window:
            old = i
        elif r.replicas > best:
            best = r.replicas
    _store(recs, old, Recommendation(desired, now))
    return best


def stabilize_with_behaviors(
    recs: list[Recommendation],
    current: int,
    desired: int,
    now: float,
    up_window: float,
    down_window: float,
) -> tuple[int, str]:
    """stabilizeRecommendationWithBehaviors: a scale up goes no higher than the lowest
    recommendation of the up window, a scale down no lower than the highest of the down
    window; the sample replaces one older than both windows."""
    up = down = desired
    old = -1
    for i, r in enumerate(recs):
        if r.at > now - up_window:
            up = min(up, r.replicas)
        if r.at > now - down_window:
            down = max(down, r.replicas)
        if r.at < now - up_window and r.at < now - down_window:
            old = i
    out = min(max(current, up), down)
    _store(recs, old, Recommendation(desired, now))
    return out, ("ScaleUpStabilized" if desired >= current else "ScaleDownStabilized")


def _store(recs: list[Recommendation], old: int, rec: Recommendation) -> None:
    if old >= 0:
        recs[old] = rec
    else:
        recs.append(rec)


def scale_up_limit_without_behavior(current: int) -> int:
    return int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))


def convert_with_rules(current: int, desired: int, lo: int, hi: int) -> tuple[int, str]:
    """convertDesiredReplicasWithRules (no behavior): min/max and the default scale-up
    limit; the condition reason that limited it (or DesiredWithinRange)."""
    limit = scale_up_limit_without_behavior(current)
    if hi > limit:
        top, reason = limit, "ScaleUpLimit"
    else:
        top, reason = hi, "TooManyReplicas"
    if desired < lo:
        return lo, "TooFewReplicas"
    if desired > top:
        return top, reason
    return desired, "DesiredWithinRange"


def change_in_period(period: float, events: Iterable[ScaleEvent], now: float) -> int:
    """getReplicasChangePerPeriod: the replicas added (or removed) in the last period."""
    return sum(e.change for e in events if e.at > now - period)


def _policy_sizes(
    current: int,
    up_events: list[ScaleEvent],
    down_events: list[ScaleEvent],
    rules: HPAScalingRules,
    now: float,
    *,
    up: bool,
) -> list[int]:
    """The size each policy allows, counted from the size at the start of its period."""
    sizes = []
    for p in rules.policies or ():
        start = (
            current
            - change_in_period(p.period, up_events, now)
            + change_in_period(p.period, down_events, now)
        )
        if p.type == "Pods":
            sizes.append(start + p.value if up else start - p.value)
        elif up:  # rounded up, or a small target could never grow
            sizes.append(math.ceil(start * (1 + p.value / 100)))
        else:  # truncated toward zero, as int32(float64(...))
            sizes.append(int(start * (1 - p.value / 100)))
    return sizes


def scale_up_limit(
    current: int,
    up_events: list[ScaleEvent],
    down_events: list[ScaleEvent],
    rules: HPAScalingRules,
    now: float,
) -> int:
    """calculateScaleUpLimitWithScalingRules: Max picks the largest size, Min the
    smallest; Disabled holds the current size."""
    sizes = _policy_sizes(current, up_events, down_events, rules, now, up=True)
    if rules.select_policy == "Disabled" or not sizes:
        return current
    return min(sizes) if rules.select_policy == "Min" else max(sizes)


def scale_down_limit(
    current: int,
    up_events: list[ScaleEvent],
    down_events: list[ScaleEvent],
    rules: HPAScalingRules,
    now: float,
) -> int:
    """calculateScaleDownLimitWithBehaviors: Max (the biggest change) picks the smallest
    size, Min the largest."""
    sizes = _policy_sizes(current, up_events, down_events, rules, now, up=False)
    if rules.select_policy == "Disabled" or not sizes:
        return current
    return max(sizes) if rules.select_policy == "Min" else min(sizes)


def convert_with_behavior_rate(
    current: int,
    desired: int,
    lo: int,
    hi: int,
    up_events: list[ScaleEvent],
    down_events: list[ScaleEvent],
    behavior: HPABehavior,
    now: float,
) -> tuple[int, str]:
    """convertDesiredReplicasWithBehaviorRate: the policies' rate, then min/max."""
    assert behavior.scale_up is not None and behavior.scale_down is not None
    if desired > current:
        up_limit = scale_up_limit(current, up_events, down_events, behavior.scale_up, now)
        limit = max(current, up_limit)
        if hi > limit:
            top, reason = limit, "ScaleUpLimit"
        else:
            top, reason = hi, "TooManyReplicas"
        if desired > top:
            return top, reason
    elif desired < current:
        limit = min(
            current, scale_down_limit(current, up_events, down_events, behavior.scale_down, now)
        )
        if lo < limit:
            bottom, reason = limit, "ScaleDownLimit"
        else:
            bottom, reason = lo, "TooFewReplicas"
        if desired < bottom:
            return bottom, reason
    return desired, "DesiredWithinRange"


def longest_period(rules: HPAScalingRules | None) -> float:
    return max((p.period for p in (rules.policies or ())), default=0.0) if rules else 0.0


def store_scale_event(
    behavior: HPABehavior | None,
    up_events: list[ScaleEvent],
    down_events: list[ScaleEvent],
    previous: int,
    new: int,
    now: float,
) -> None:
    """storeScaleEvent: events older than the direction's longest policy period are
    marked outdated and the last of them is reused; without behavior nothing is kept."""
    if behavior is None:
        return
    if new > previous:
        events, period, change = up_events, longest_period(behavior.scale_up), new - previous
    else:
        events, period, change = down_events, longest_period(behavior.scale_down), previous - new
    old = -1
    for i, e in enumerate(events):
        if e.at < now - period:
            e.outdated = True
        if e.outdated:
            old = i
    event = ScaleEvent(change, now)
    if old >= 0:
        events[old] = event
    else:
        events.append(event)


@dataclass(slots=True)
class HPAState:
    """An HPA and the controller's memory of its recent recommendations and scalings."""

    spec: HPASpec
    current: int = 0
    desired: int = 0
    recommendations: list[Recommendation] = field(default_factory=list)
    up_events: list[ScaleEvent] = field(default_factory=list)
    down_events: list[ScaleEvent] = field(default_factory=list)
    # The last sync's ScalingActive / AbleToScale / ScalingLimited reasons.
    conditions: dict[str, str] = field(default_factory=dict)


def normalize(
    h: HPAState, current: int, proposal: int, now: float, behavior: HPABehavior | None
) -> int:
    """normalizeDesiredReplicas[WithBehaviors]: stabilize, then rate and bounds."""
    s = h.spec
    if behavior is None:
        stable = stabilize(h.recommendations, proposal, now, DOWNSCALE_STABILIZATION)
        h.conditions["AbleToScale"] = (
            "ScaleDownStabilized" if stable != proposal else "ReadyForNewScale"
        )
        out, limited = convert_with_rules(current, stable, s.min_replicas, s.max_replicas)
    else:
        assert behavior.scale_up is not None and behavior.scale_down is not None
        up_window = behavior.scale_up.stabilization_window or 0.0
        down_window = behavior.scale_down.stabilization_window
        if down_window is None:
            down_window = DOWNSCALE_STABILIZATION
        stable, reason = stabilize_with_behaviors(
            h.recommendations, current, proposal, now, up_window, down_window
        )
        h.conditions["AbleToScale"] = reason if stable != proposal else "ReadyForNewScale"
        out, limited = convert_with_behavior_rate(
            current,
            stable,
            s.min_replicas,
            s.max_replicas,
            h.up_events,
            h.down_events,
            behavior,
            now,
        )
    h.conditions["ScalingLimited"] = limited
    return out


def tolerances_of(behavior: HPABehavior | None) -> Tolerances:
    if behavior is None:
        return Tolerances()
    up = behavior.scale_up.tolerance if behavior.scale_up else None
    down = behavior.scale_down.tolerance if behavior.scale_down else None
    return Tolerances(TOLERANCE if down is None else down, TOLERANCE if up is None else up)


class HPAController:
    """The HPA controller: one sync per HPA every `hpa_sync_period`."""

    # Peers, connected by the facade once every part exists.
    metering: Metering
    controllers: Controllers

    def __init__(
        self, clock: Clock, journal: Journal, store: ObjectStore, *, sync_period: float, step: float
    ) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.sync_period = sync_period
        self.step = step  # the usage step: the metrics API's resolution
        self.hpas: dict[str, HPAState] = {}

    def hpa_object(self, h: HPAState) -> HorizontalPodAutoscaler:
        s = h.spec
        wl = self.store.workloads.get(f"{s.target_kind}/{s.namespace}/{s.target_name}")
        return HorizontalPodAutoscaler(
            s.namespace,
            s.name,
            s.target_kind,
            s.target_name,
            s.min_replicas,
            s.max_replicas,
            [
                HPAMetric(
                    "Resource",
                    m.resource,
                    m.target_utilization,
                    m.target_average_value,
                )
                for m in s.metrics
            ],
            current_replicas=wl.replicas if wl else 0,
            desired_replicas=h.desired or (wl.replicas if wl else 0),
            scale_up=_core_rules(s.behavior.scale_up if s.behavior else None),
            scale_down=_core_rules(s.behavior.scale_down if s.behavior else None),
        )

    def samples(self, wkey: str, resource: str) -> tuple[list[PodSample], dict[str, PodMetric]]:
        """The target's pods as the replica calculator lists them (spec requests), and the
        metrics API's last sample of each (the usage step's; none for a pod whose
        containers started since)."""
        u = self.metering.usage
        sampled_at = self.metering.sampled_at
        pods: list[PodSample] = []
        metrics: dict[str, PodMetric] = {}
        for key in sorted(self.store.wl_state[wkey].pods):
            pod = self.store.pods.get(key)
            meta = self.store.meta.get(key)
            if pod is None or meta is None:
                continue
            request: int | None = 0
            for c in pod.containers:
                r = c.resources.requests.get(resource)
                if r is None:
                    request = None
                    break
                assert request is not None
                request += r if resource == CPU else r * 1000
            if meta.slots and all(u.started[s] <= sampled_at for s in meta.slots):
                if resource == CPU:
                    value = sum(float(u.cpu_used[s]) for s in meta.slots) * 1000
                else:
                    value = sum(min(float(u.mem[s]), float(u.mem_lim[s])) for s in meta.slots)
                    value *= 1000
                metrics[pod.name] = PodMetric(round(value), sampled_at, self.step)
            cond = pod.condition("Ready")
            changed = cond.last_transition_time if cond is not None else None
            pods.append(
                PodSample(
                    pod.name,
                    request,
                    phase=pod.phase,
                    ready=None if cond is None else cond.status == "True",
                    ready_changed=-math.inf if changed is None else changed,
                    start_time=pod.start_time,
                    deleting=pod.deletion_time is not None,
                )
            )
        return pods, metrics

    def sync(self, hkey: str) -> None:
        h = self.hpas.get(hkey)
        if h is None:
            return
        s = h.spec
        self.clock.at(self.clock.now + self.sync_period, self.sync, hkey)
        wkey = f"{s.target_kind}/{s.namespace}/{s.target_name}"
        wl = self.store.workloads.get(wkey)
        if wl is None or wkey not in self.store.wl_state:
            h.conditions["AbleToScale"] = "FailedGetScale"
            return
        behavior = complete_behavior(s.behavior)
        current = wl.replicas
        h.current = current
        reason = ""
        if current == 0:
            h.conditions["ScalingActive"] = "ScalingDisabled"
            return
        if current > s.max_replicas:
            desired, reason = s.max_replicas, "Current number of replicas above Spec.MaxReplicas"
        elif current < s.min_replicas:
            desired, reason = s.min_replicas, "Current number of replicas below Spec.MinReplicas"
        else:
            proposal, reason = self.propose(h, wkey, current, behavior)
            if proposal < 0:
                return
            desired = normalize(h, current, proposal, self.clock.now, behavior)
        h.desired = desired
        if desired == current:
            return
        self.controllers.set_replicas(wkey, desired, source=f"HorizontalPodAutoscaler/{hkey}")
        store_scale_event(behavior, h.up_events, h.down_events, current, desired, self.clock.now)
        self.journal.log(
            "HPAScaled",
            f"HorizontalPodAutoscaler/{hkey}",
            "SuccessfulRescale",
            f"New size: {desired}; reason: {reason}",
            previous=current,
            replicas=self.store.workloads[wkey].replicas,
        )

    def propose(
        self, h: HPAState, wkey: str, current: int, behavior: HPABehavior | None
    ) -> tuple[int, str]:
        """computeReplicasForMetrics: the busiest metric's proposal and its reason; -1
        when every metric failed, or one failed and the others would scale down."""
        tol = tolerances_of(behavior)
        best, name, invalid = 0, "", 0
        for m in h.spec.metrics:
            pods, metrics = self.samples(wkey, m.resource)
            now = self.clock.now
            try:
                if m.target_utilization is not None:
                    want, _, _ = resource_replicas(
                        current, m.target_utilization, pods, metrics, m.resource, now, tol
                    )
                    label = f"{m.resource} resource utilization (percentage of request)"
                else:
                    assert m.target_average_value is not None
                    target = m.target_average_value * (1 if m.resource == CPU else 1000)
                    want, _ = average_value_replicas(
                        current, target, pods, metrics, m.resource, now, tol
                    )
                    label = f"{m.resource} resource"
            except HPAError as exc:
                invalid += 1
                h.conditions["ScalingActive"] = f"FailedGetResourceMetric: {exc}"
                continue
            if want > best:
                best, name = want, label
        if invalid >= len(h.spec.metrics) or (invalid and best < current):
            return -1, ""
        if invalid == 0:
            h.conditions["ScalingActive"] = "ValidMetricFound"
        if best > current:
            return best, f"{name} above target"
        if best < current:
            return best, "All metrics below target"
        return best, ""


def _core_rules(rules: HPAScalingRules | None) -> model.HPAScalingRules | None:
    """One direction of the scenario's `behavior` as the core reads it from an HPA object
    (None fields: the API server's defaults)."""
    if rules is None:
        return None
    return model.HPAScalingRules(
        rules.stabilization_window,
        rules.select_policy or "Max",
        tuple(model.HPAScalingPolicy(p.type, p.value, p.period) for p in rules.policies or ()),
    )
