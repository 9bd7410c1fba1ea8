"""The HorizontalPodAutoscaler controller: the replica arithmetic of the HPA with its
tolerance, scale-down stabilisation and scale-up limit."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    HPAMetric,
)
from foresize.shells.sim.scenario import HPASpec

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.facade import SimCluster


@dataclass(slots=True)
class HPAState:
    """An HPA and the controller's memory of its recent recommendations."""

    spec: HPASpec
    current: int = 0
    desired: int = 0
    recommendations: list[tuple[float, int]] = field(default_factory=list)


class HPAController:
    """The HPA controller: one sync per HPA every `hpa_sync_period`."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.hpas: dict[str, HPAState] = {}

    def hpa_object(self, h: HPAState) -> HorizontalPodAutoscaler:
        s = h.spec
        wl = self.sim.workloads.get(f"{s.target_kind}/{s.namespace}/{s.target_name}")
        return HorizontalPodAutoscaler(
            s.namespace,
            s.name,
            s.target_kind,
            s.target_name,
            s.min_replicas,
            s.max_replicas,
            [HPAMetric("Resource", r, u) for r, u in s.metrics],
            current_replicas=wl.replicas if wl else 0,
            desired_replicas=h.desired or (wl.replicas if wl else 0),
        )

    def sync(self, hkey: str) -> None:
        h = self.hpas.get(hkey)
        if h is None:
            return
        s = h.spec
        self.sim.at(self.sim.now + self.sim.scenario.hpa_sync_period, self.sync, hkey)
        wkey = f"{s.target_kind}/{s.namespace}/{s.target_name}"
        st = self.sim.wl_state.get(wkey)
        wl = self.sim.workloads.get(wkey)
        if st is None or wl is None:
            return
        if self.sim.metering.hpa_metrics is None:
            return
        # Ready pods as of the metrics' sample (pods Ready since have no metrics yet).
        ready_pods = int(self.sim.metering.hpa_metrics["ready"][0, st.index])
        if ready_pods <= 0:
            return
        current = wl.replicas
        proposal = 0
        reasons: list[str] = []
        for resource, target in s.metrics:
            use, req = self.sim.metering.hpa_metrics[resource][:, st.index]
            if req <= 0:
                continue
            util = 100.0 * use / req
            ratio = util / target
            want = current if abs(ratio - 1.0) <= 0.1 else math.ceil(ratio * ready_pods)
            if want > proposal:
                proposal = want
                side = "above" if ratio > 1 else "below"
                reasons = [f"{resource} resource utilization (percentage of request) {side} target"]
        if proposal == 0:
            return
        # Scale-down stabilisation (5 minutes) and the default scale-up limit.
        h.recommendations = [(t, r) for t, r in h.recommendations if t > self.sim.now - 300.0]
        h.recommendations.append((self.sim.now, proposal))
        desired = proposal
        if desired < current:
            desired = min(current, max(r for _, r in h.recommendations))
        desired = min(desired, max(2 * current, current + 4))
        desired = max(s.min_replicas, min(s.max_replicas, desired))
        h.desired = desired
        if desired != current:
            self.sim.controllers.set_replicas(
                wkey, desired, source=f"HorizontalPodAutoscaler/{s.namespace}/{s.name}"
            )
            self.sim.log(
                "HPAScaled",
                f"HorizontalPodAutoscaler/{s.namespace}/{s.name}",
                "SuccessfulRescale",
                f"New size: {desired}; reason: {reasons[0] if reasons else ''}",
                previous=current,
                replicas=self.sim.workloads[wkey].replicas,
            )
