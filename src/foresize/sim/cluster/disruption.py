"""PodDisruptionBudgets (the disruption controller's status) and the Eviction API."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from foresize.cluster.actions import (
    ActionResult,
    EvictPod,
)
from foresize.cluster.model import (
    Pod,
    PodDisruptionBudget,
)
from foresize.cluster.snapshot import labels_match
from foresize.sim.scenario import PDBSpec

if TYPE_CHECKING:
    from foresize.sim.cluster.facade import SimCluster

EVICTION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_PDBS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, "
    "which the eviction subresource does not support."
)


def _budget_refusal(message: str, retry_after_seconds: float | None = None) -> ActionResult:
    """The Eviction API's 429 for a PodDisruptionBudget, its cause saying why."""
    return ActionResult(
        False,
        429,
        "TooManyRequests",
        EVICTION_MESSAGE,
        ({"type": "DisruptionBudget", "message": message},),
        retry_after_seconds=retry_after_seconds,
    )


@dataclass(slots=True)
class PDBState:
    """A PDB as the simulated disruption controller holds it."""

    spec: PDBSpec
    generation: int = 1
    observed_generation: int = 1
    members: set[str] = field(default_factory=set)  # keys of pods the selector matches


class Disruption:
    """PDB status and the Eviction API's checks."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.pdbs: dict[str, PDBState] = {}

    def status(self, pdb: PDBState) -> PodDisruptionBudget:
        s = pdb.spec
        matched = [
            p
            for p in (self.sim.pods[k] for k in sorted(pdb.members))
            if p.phase not in ("Succeeded", "Failed")
        ]
        healthy = sum(1 for p in matched if p.deletion_time is None and self.sim.meta[p.key].ready)
        owners: dict[str, int] = {}
        bare = 0
        for p in matched:
            top = self.sim.meta[p.key].top
            if top is None:
                bare += 1
            else:
                owners[top] = self.sim.workloads[top].replicas
        expected = sum(owners.values()) + bare

        def amount(v: int | str) -> int:
            if isinstance(v, str):
                return math.ceil(int(v.rstrip("%")) * expected / 100)
            return v

        if s.min_available is not None:
            desired = amount(s.min_available)
        else:
            desired = max(0, expected - amount(s.max_unavailable or 0))
        return PodDisruptionBudget(
            s.namespace,
            s.name,
            dict(s.selector),
            s.min_available,
            s.max_unavailable,
            disruptions_allowed=max(0, healthy - desired),
            current_healthy=healthy,
            desired_healthy=desired,
            expected_pods=expected,
        )

    def index(self, pod: Pod) -> None:
        for pdb in self.pdbs.values():
            s = pdb.spec
            if s.namespace == pod.namespace and labels_match(s.selector, pod.labels):
                pdb.members.add(pod.key)
            else:
                pdb.members.discard(pod.key)

    def update_pdb(
        self,
        namespace: str,
        name: str,
        *,
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        processing_delay: float = 1.0,
    ) -> None:
        """Change a PDB's spec; until the disruption controller has processed it (after
        `processing_delay`), evictions it covers get 429 with retryAfterSeconds 10."""
        pdb = self.pdbs[f"{namespace}/{name}"]
        pdb.spec = PDBSpec(
            pdb.spec.name, namespace, pdb.spec.selector, min_available, max_unavailable
        )
        pdb.generation += 1
        gen = pdb.generation

        def processed() -> None:
            pdb.observed_generation = max(pdb.observed_generation, gen)

        self.sim.at(self.sim.now + processing_delay, processed)

    def refuse(self, key: str, target: str, res: ActionResult) -> ActionResult:
        """Log a refused eviction (429 / 500) with its code and hand the result back."""
        self.sim.log(
            "EvictionRefused", f"Pod/{key}", res.reason, res.message, code=res.code, target=target
        )
        return res

    def evict(self, a: EvictPod) -> ActionResult:
        key = f"{a.namespace}/{a.name}"
        pod = self.sim.pods.get(key)
        if pod is None:
            return self.sim.api.not_found("pods", a.name)
        meta = self.sim.meta[key]
        grace = float(a.grace_period_seconds) if a.grace_period_seconds is not None else meta.grace
        skip_pdb = (
            pod.node_name is None
            or pod.phase in ("Pending", "Succeeded", "Failed")
            or pod.deletion_time is not None
        )
        if not skip_pdb:
            pdbs = [
                p
                for p in self.pdbs.values()
                if p.spec.namespace == pod.namespace and labels_match(p.spec.selector, pod.labels)
            ]
            if len(pdbs) > 1:
                res = ActionResult(False, 500, "InternalError", MANY_PDBS_MESSAGE)
                return self.refuse(key, a.target, res)
            if pdbs:
                pdb = pdbs[0]
                if pdb.observed_generation < pdb.generation:
                    res = _budget_refusal(
                        f"The disruption budget {pdb.spec.name} "
                        "is still being processed by the server.",
                        retry_after_seconds=10,
                    )
                    return self.refuse(key, a.target, res)
                status = self.status(pdb)
                healthy_pod = meta.ready
                # IfHealthyBudget: an unhealthy pod may go only if the budget is met.
                allowed = (
                    status.disruptions_allowed > 0
                    if healthy_pod
                    else status.current_healthy >= status.desired_healthy
                )
                if not allowed:
                    res = _budget_refusal(
                        f"The disruption budget {pdb.spec.name} needs "
                        f"{status.desired_healthy} healthy pods and has "
                        f"{status.current_healthy} currently"
                    )
                    return self.refuse(key, a.target, res)
        self.sim.count(meta.top, "evictions")
        self.sim.log(
            "Evicted",
            f"Pod/{key}",
            a.reason or "Evicted",
            "evicted through the Eviction API",
            target=a.target,
        )
        self.sim.lifecycle.delete(key, grace, "Evicted")
        return ActionResult(True, 201, "Created")
