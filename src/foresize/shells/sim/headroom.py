"""`--policy foresize+headroom`: Foresize with forecast-sized headroom placeholders (the
overprovisioning pattern of the Cluster Autoscaler FAQ), on the simulated cluster only.

A Deployment of pause pods at priority -1 (above Cluster Autoscaler's expendable cutoff
of -10, so both node autoscalers provision for it; below every real pod, so the
scheduler preempts it for any of them) holds room on the nodes. Its size is a forecast of
the upsize demand of the coming window: how much the targets' suggested requests (all
replicas) grew over the same window one day earlier (seasonal-naive: the daily peak comes back), in
chunks of `CHUNK`. When an upsize does not fit its node, the placeholders on that node
are deleted first (grace 0), so the resize lands in place; the Deployment recreates them
and they go Pending wherever there is no room, which makes the node autoscaler add a
node ahead of the next upsize instead of after a stall. Every loop runs before the
operator's pass at the same instant.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.shells.sim.operator import SIM_LOOP_INTERVAL, SimOperator, install_foresize
from foresize.shells.sim.policies import register_policy
from foresize.shells.sim.scenario_spec import ContainerSpec, WorkloadSpec
from foresize.shells.sim.usage import GeneratorSpec

NAMESPACE = "foresize-headroom"
NAME = "headroom"
PRIORITY = -1
CHUNK = {CPU: 250, MEMORY: 512 * MIB}  # one placeholder pod's requests
WINDOW = 3600.0  # the coming window the headroom covers
DAY = 86400.0
MAX_PLACEHOLDERS = 40
# Samples of the targeted pods' total requests kept for the seasonal forecast.
HISTORY = DAY + WINDOW + 2 * SIM_LOOP_INTERVAL


class Headroom:
    """The placeholder Deployment, its forecast size and the release before upsizes."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.operator: SimOperator | None = None
        self.key = f"Deployment/{NAMESPACE}/{NAME}"
        self.totals: deque[tuple[float, int, int]] = deque()
        self.released = 0

    def create(self) -> None:
        """Add the placeholder Deployment (after the operator's targets were made, so it
        has none)."""
        self.sim.controllers.add_workload(
            WorkloadSpec(
                kind="Deployment",
                name=NAME,
                namespace=NAMESPACE,
                replicas=0,
                labels={"app": NAME},
                priority=PRIORITY,
                containers=[
                    ContainerSpec(
                        "pause",
                        requests=dict(CHUNK),
                        limits=dict(CHUNK),
                        cpu=GeneratorSpec("constant", base=0.001),
                        memory=GeneratorSpec("constant", base=4 * MIB),
                    )
                ],
                readiness_delay=0.0,
                termination_grace=0.0,
                jitter=0.0,
            )
        )

    def targeted_pods(self) -> list[Any]:
        assert self.operator is not None
        pods = []
        for target in self.operator.targets.values():
            ref = target.spec.scaleTargetRef
            pods += self.sim.pods_of(ref.kind, target.metadata.namespace, ref.name)
        return [p for p in pods if p.phase == "Running" and p.deletion_time is None]

    def tick(self, sim: Any, now: float) -> None:
        pods = self.targeted_pods()
        self.totals.append((now, *self.suggested_total()))
        while self.totals and self.totals[0][0] < now - HISTORY:
            self.totals.popleft()
        self.resize(self.forecast(now))
        self.release_for_upsizes(pods)

    def suggestion(self, tkey: str) -> Any:
        """A target's latest suggestion: Foresize's own, published by the pass, or one
        handed to the worker (a baseline recommender's)."""
        assert self.operator is not None
        own = self.operator.suggestions.get(tkey)
        return own if own is not None else self.operator.pass_state.suggestions.latest.get(tkey)

    def suggested_total(self) -> tuple[int, int]:
        """What the targets' suggestions ask for all their replicas (the template's
        requests where there is no suggestion yet): unlike the pods' own requests, it
        does not dip while a pod is being recreated or moved."""
        assert self.operator is not None
        cpu = mem = 0
        for tkey, target in self.operator.targets.items():
            ref = target.spec.scaleTargetRef
            wl = self.sim.workloads.get(f"{ref.kind}/{target.metadata.namespace}/{ref.name}")
            if wl is None:
                continue
            sugg = self.suggestion(tkey)
            for c in wl.template.containers:
                cs = sugg.for_container(c.name) if sugg is not None else None
                req = cs.requests if cs is not None else c.resources.requests
                cpu += wl.replicas * req.get(CPU, c.resources.requests.get(CPU, 0))
                mem += wl.replicas * req.get(MEMORY, c.resources.requests.get(MEMORY, 0))
        return cpu, mem

    def forecast(self, now: float) -> tuple[int, int]:
        """Yesterday's growth of the suggested requests over the coming window."""
        start, end = now - DAY, now - DAY + WINDOW
        past = [(c, m) for t, c, m in self.totals if start <= t <= end]
        if len(past) < 2:
            return 0, 0
        base_cpu, base_mem = past[0]
        return (
            max(0, max(c for c, _ in past) - base_cpu),
            max(0, max(m for _, m in past) - base_mem),
        )

    def resize(self, need: tuple[int, int]) -> None:
        replicas = min(
            MAX_PLACEHOLDERS, math.ceil(max(need[0] / CHUNK[CPU], need[1] / CHUNK[MEMORY]))
        )
        if self.sim.workloads[self.key].replicas != replicas:
            self.sim.controllers.set_replicas(self.key, replicas, source="headroom")

    def release_for_upsizes(self, pods: list[Any]) -> None:
        """Delete the placeholders on a node where a coming upsize does not fit."""
        assert self.operator is not None
        want: dict[str, list[int]] = {}
        for p in pods:
            top = self.sim.meta[p.key].top  # Kind/namespace/name, keyed namespace/name
            sugg = self.suggestion(top.split("/", 1)[1]) if top else None
            if sugg is None or p.node_name is None:
                continue
            grow = want.setdefault(p.node_name, [0, 0])
            for c in p.containers:
                cs = sugg.for_container(c.name)
                if cs is None:
                    continue
                for i, r in enumerate((CPU, MEMORY)):
                    grow[i] += max(0, cs.requests.get(r, 0) - c.resources.requests.get(r, 0))
        for node, grow in sorted(want.items()):
            free = self.sim.node_free(node)
            if grow[0] <= free[0] and grow[1] <= free[1]:
                continue
            for key in sorted(self.sim.nodeset.node_pods.get(node, ())):
                p = self.sim.pods.get(key)
                if p is None or self.sim.meta[key].top != self.key:
                    continue
                self.released += 1
                self.sim.log(
                    "HeadroomReleased", f"Pod/{key}", "Upsize", f"room for upsizes on {node}"
                )
                self.sim.lifecycle.remove(key, p.uid)


def install_foresize_headroom(sim: Any) -> SimOperator:
    headroom = Headroom(sim)
    sim.every(SIM_LOOP_INTERVAL, headroom.tick)  # before the operator's pass
    headroom.operator = install_foresize(sim)
    headroom.create()
    return headroom.operator


register_policy("foresize+headroom", install_foresize_headroom)

__all__ = ["CHUNK", "Headroom", "install_foresize_headroom"]
