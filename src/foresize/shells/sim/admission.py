"""Wire the admission decisions into the simulated cluster.

`install(sim)` sets `sim.admission_hook` (every pod CREATE of the simulator's controllers
goes through `mutate_pod`, the same decision the HTTPS webhook makes) and
`sim.scale_hook` (every replica write, the simulator's `*/scale` UPDATE, goes through
`decide_scale`). The returned `SimAdmission` holds the in-memory suggestion, OOM-floor
and prediction overrides the simulated operator updates, and can be switched off
(`enabled = False`) to model a webhook that is down (the circuit-breaker scenario).
DaemonSet pods are seeded from their DaemonSetAutoscaler's status, which the operator's
pass writes (`foresize.shells.sim.operator`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foresize.core.admission.index import AdmissionIndex, largest_node_cpu
from foresize.core.admission.pod import mutate_pod
from foresize.core.admission.scale import decide_scale
from foresize.core.cluster.model import Pod, Suggestion, Workload
from foresize.core.cluster.policies import PolicyIndex, resolve_snapshot
from foresize.core.cluster.snapshot import ClusterSnapshot


@dataclass
class SimAdmission:
    sim: Any
    enabled: bool = True
    # False: the webhook server is down (or its certificate expired) and the operator
    # knows it (`ClusterSnapshot.admission_healthy`); `enabled = False` instead models an
    # API server that silently stops calling it, which only the circuit breaker notices.
    serving: bool = True
    scale_enabled: bool = True
    suggestions: dict[str, Suggestion] = field(default_factory=dict)
    oom_floors: dict[str, dict[str, int]] = field(default_factory=dict)
    predictions: dict[str, int] = field(default_factory=dict)
    admitted: int = 0
    mutated: int = 0
    _cache: tuple[Any, AdmissionIndex] | None = None
    _objects: Any = None

    def index(self) -> AdmissionIndex:
        """The index over the simulator's current objects, rebuilt only when the target
        objects (compared by identity: the API objects are replaced, never edited), the
        pause flag or the workloads mapping change. The override dicts are read live."""
        sim = self.sim
        # HPAs enter the index only through the resources they scale on, fixed by their
        # spec: their keys say enough to know when to rebuild.
        hpas = getattr(sim, "hpas", None) or {}
        key = (
            tuple(map(id, sim.targets)),
            tuple(map(id, sim.daemonset_autoscalers)),
            sim.paused or sim.revert_all,
            id(sim.workloads),
            tuple(hpas),
            tuple(getattr(sim, "vertical_claims", ())),
            len(sim.nodes),  # a node added or gone moves the largest node (boost clamp)
            tuple(map(id, getattr(sim, "policies", ()))),
            repr(sorted(getattr(sim, "namespaces", {}).items())),
        )
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        # The targets with their effective spec (the policy hierarchy), as the pass reads.
        policies = list(getattr(sim, "policies", ()))
        resolved, _ = resolve_snapshot(
            ClusterSnapshot(
                now=sim.now,
                targets=list(sim.targets),
                policies=policies,
                namespaces=dict(getattr(sim, "namespaces", {})),
            )
        )
        index = AdmissionIndex.build(
            resolved.targets,
            policies=PolicyIndex.build(policies),
            daemonset_autoscalers=sim.daemonset_autoscalers,
            workloads=sim.workloads,
            hpas=sim.hpa_objects() if hpas else (),
            vertical_claims=getattr(sim, "vertical_claims", ()),
            paused=sim.paused or sim.revert_all,
            suggestions=self.suggestions,
            oom_floors=self.oom_floors,
            predictions=self.predictions,
            max_node_cpu=largest_node_cpu(sim.nodes.values()),
        )
        # Keep the objects referenced so their ids cannot be reused while cached.
        self._cache = (key, index)
        self._objects = (list(sim.targets), list(sim.daemonset_autoscalers))
        return index

    def admit(self, pod: Pod, workload: Workload | None, now: float) -> Pod:
        if not self.enabled or not self.serving:
            return pod
        self.admitted += 1
        new, changed = mutate_pod(pod, workload, self.index(), now)
        self.mutated += changed
        return new

    def scale(self, workload: Workload, replicas: int, now: float) -> int:
        if not self.scale_enabled:
            return replicas
        decision = decide_scale(
            workload.kind, workload.namespace, workload.name, replicas, self.index(), now
        )
        return decision.replicas if decision.replicas is not None else replicas


def install(sim: Any, *, scale: bool = True) -> SimAdmission:
    """Install the pod (and, unless `scale=False`, the scale) hook on `sim`."""
    hook = SimAdmission(sim)
    sim.admission_hook = hook.admit
    if scale:
        sim.scale_hook = hook.scale
    return hook
