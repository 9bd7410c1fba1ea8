"""PodDisruptionBudgets (the disruption controller's status) and the Eviction API."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from foresize.core.cluster.actions import (
    ActionResult,
    EvictPod,
)
from foresize.core.cluster.model import (
    Pod,
    PodDisruptionBudget,
    disruption_opt_out,
)
from foresize.core.cluster.snapshot import labels_match
from foresize.shells.sim.cluster.api import ApiServer
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.scenario import PDBSpec

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.lifecycle import PodLifecycle

POLICY = "policy"  # the eviction cause of the policy under test (Foresize, vpa)
ALWAYS_ALLOW = "AlwaysAllow"  # unhealthyPodEvictionPolicy; the default is IfHealthyBudget
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
    # The spec the disruption controller last processed (its status follows this one until
    # it catches up with a change): None means `spec`.
    observed_spec: PDBSpec | None = None


class Disruption:
    """PDB status and the Eviction API's checks."""

    # Peers, connected by the facade once every part exists.
    lifecycle: PodLifecycle

    def __init__(self, clock: Clock, journal: Journal, store: ObjectStore) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.pdbs: dict[str, PDBState] = {}

    def status(self, pdb: PDBState) -> PodDisruptionBudget:
        """The PDB with the status the disruption controller computes
        (`pkg/controller/disruption/disruption.go`: countHealthyPods, getExpectedPodCount,
        updatePdbStatus), from the spec it last processed."""
        s = pdb.observed_spec or pdb.spec
        # Counts only, so in no particular order (the status is built for every snapshot).
        pods, meta = self.store.pods, self.store.meta
        matched = [k for k in pdb.members if k in pods]
        # countHealthyPods: not terminating and Ready (IsPodReady).
        healthy = sum(1 for k in matched if pods[k].deletion_time is None and meta[k].ready)

        def expected_scale() -> int:
            # getExpectedScale: the scale of each controller of a matched pod, once; pods
            # without a controller are "unmanaged" and do not count.
            scales: dict[str, int] = {}
            for k in matched:
                top = meta[k].top
                if top is not None and top in self.store.workloads:
                    scales[top] = self.store.workloads[top].replicas
            return sum(scales.values())

        def scaled(v: int | str, total: int) -> int:
            # GetScaledValueFromIntOrPercent(..., roundUp=true)
            if isinstance(v, str):
                return math.ceil(int(v.rstrip("%")) * total / 100)
            return v

        if s.max_unavailable is not None:
            expected = expected_scale()
            desired = max(0, expected - scaled(s.max_unavailable, expected))
        elif isinstance(s.min_available, int):
            desired, expected = s.min_available, len(matched)
        else:
            expected = expected_scale()
            desired = scaled(s.min_available or 0, expected)
        # updatePdbStatus: no disruption while the PDB expects no pods, never negative.
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        return PodDisruptionBudget(
            pdb.spec.namespace,
            pdb.spec.name,
            dict(pdb.spec.selector),
            pdb.spec.min_available,
            pdb.spec.max_unavailable,
            disruptions_allowed=allowed,
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
        unhealthy_pod_eviction_policy: str | None = None,
    ) -> None:
        """Change a PDB's spec; until the disruption controller has processed it (after
        `processing_delay`), its status stays that of the old spec and evictions that must
        check the budget get 429 with retryAfterSeconds 10."""
        pdb = self.pdbs[f"{namespace}/{name}"]
        if pdb.observed_spec is None:
            pdb.observed_spec = pdb.spec
        new = PDBSpec(
            pdb.spec.name,
            namespace,
            pdb.spec.selector,
            min_available,
            max_unavailable,
            unhealthy_pod_eviction_policy or pdb.spec.unhealthy_pod_eviction_policy,
        )
        pdb.spec = new
        pdb.generation += 1
        gen = pdb.generation

        def processed() -> None:
            if gen > pdb.observed_generation:
                pdb.observed_generation = gen
                pdb.observed_spec = new if gen == pdb.generation else pdb.observed_spec

        self.clock.at(self.clock.now + processing_delay, processed)

    def refuse(self, key: str, target: str, res: ActionResult) -> ActionResult:
        """Log a refused eviction (429 / 500) with its code and hand the result back."""
        self.journal.log(
            "EvictionRefused", f"Pod/{key}", res.reason, res.message, code=res.code, target=target
        )
        return res

    def matching(self, pod: Pod) -> list[PDBState]:
        """getPodDisruptionBudgets: the pod's namespace, and a selector that matches it (an
        empty selector matches nothing here)."""
        return [
            p
            for p in self.pdbs.values()
            if p.spec.namespace == pod.namespace
            and p.spec.selector
            and labels_match(p.spec.selector, pod.labels)
        ]

    def evict(self, a: EvictPod, *, cause: str = POLICY) -> ActionResult:
        """POST pods/{name}/eviction, in the order of `EvictionREST.Create`
        (`pkg/registry/core/pod/storage/eviction.go`). `cause` is who asked: the policy
        under test (through `ClusterPort.apply`) or a node autoscaler (`consolidation`);
        the summary counts evictions by it."""
        key = f"{a.namespace}/{a.name}"
        pod = self.store.pods.get(key)
        if pod is None:
            return ApiServer.not_found("pods", a.name)
        if a.uid and a.uid != pod.uid:
            # deleteOptions.preconditions.uid: the pod under that name is another one.
            return self.refuse(
                key,
                a.target,
                ActionResult(
                    False,
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods "{a.name}": Precondition failed: '
                    f"UID in precondition: {a.uid}, UID in object meta: {pod.uid}",
                ),
            )
        meta = self.store.meta[key]
        grace = float(a.grace_period_seconds) if a.grace_period_seconds is not None else meta.grace
        refused = None if self.can_ignore_pdb(pod) else self.check_budget(pod, meta.ready)
        if refused is not None:
            return self.refuse(key, a.target, refused)
        self.journal.count(meta.top, "evictions" if cause == POLICY else f"{cause}_evictions")
        if disruption_opt_out(pod.annotations) is not None:
            self.journal.count(meta.top, "do_not_disrupt_evictions")
        self.journal.log(
            "Evicted",
            f"Pod/{key}",
            a.reason or "Evicted",
            "evicted through the Eviction API",
            target=a.target,
            cause=cause,
        )
        self.lifecycle.delete(key, grace, "Evicted")
        return ActionResult(True, 201, "Created")

    @staticmethod
    def can_ignore_pdb(pod: Pod) -> bool:
        """canIgnorePDB: a Pending, finished or already terminating pod is deleted at once."""
        return pod.phase in ("Pending", "Succeeded", "Failed") or pod.deletion_time is not None

    def check_budget(self, pod: Pod, ready: bool) -> ActionResult | None:
        """The refusal the pod's PDB gives its eviction, or None to go ahead."""
        pdbs = self.matching(pod)
        if len(pdbs) > 1:
            return ActionResult(False, 500, "InternalError", MANY_PDBS_MESSAGE)
        if not pdbs:
            return None
        pdb = pdbs[0]
        status = self.status(pdb)
        if not ready:
            # An unhealthy pod does not count towards currentHealthy: AlwaysAllow lets it go,
            # IfHealthyBudget (the default) only while the budget is met and not empty;
            # otherwise it goes through checkAndDecrement like a healthy pod.
            if pdb.spec.unhealthy_pod_eviction_policy == ALWAYS_ALLOW:
                return None
            if status.current_healthy >= status.desired_healthy and status.desired_healthy > 0:
                return None
        # checkAndDecrement
        if pdb.observed_generation < pdb.generation:
            return _budget_refusal(
                f"The disruption budget {pdb.spec.name} is still being processed by the server.",
                retry_after_seconds=10,
            )
        if status.disruptions_allowed == 0:
            return _budget_refusal(
                f"The disruption budget {pdb.spec.name} needs {status.desired_healthy} "
                f"healthy pods and has {status.current_healthy} currently"
            )
        # Allowed: the pod's deletion takes it out of currentHealthy at once, which is what
        # the decrement of disruptionsAllowed (and DisruptedPods) stands for.
        return None
