"""Wire the admission decisions into the simulated cluster.

`install(sim)` sets `sim.admission_hook` (every pod CREATE of the simulator's controllers
goes through `mutate_pod`, the same decision the HTTPS webhook makes) and
`sim.scale_hook` (every replica write, the simulator's `*/scale` UPDATE, goes through
`decide_scale`). The returned `SimAdmission` holds the in-memory suggestion, OOM-floor,
prediction and DaemonSet-suggestion overrides the sim loop updates, and can be switched
off (`enabled = False`) to model a webhook that is down (the circuit-breaker scenario).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foresize.admission.index import AdmissionIndex
from foresize.admission.pod import mutate_pod
from foresize.admission.scale import decide_scale
from foresize.cluster.model import Pod, Suggestion, Workload


@dataclass
class SimAdmission:
    sim: Any
    enabled: bool = True
    scale_enabled: bool = True
    suggestions: dict[str, Suggestion] = field(default_factory=dict)
    oom_floors: dict[str, dict[str, int]] = field(default_factory=dict)
    predictions: dict[str, int] = field(default_factory=dict)
    dsa_suggestions: dict[str, Suggestion] = field(default_factory=dict)
    admitted: int = 0
    mutated: int = 0

    def index(self) -> AdmissionIndex:
        """A fresh index over the simulator's current objects (targets are few; the
        workloads mapping is shared, not copied)."""
        sim = self.sim
        return AdmissionIndex.build(
            sim.targets,
            daemonset_autoscalers=sim.daemonset_autoscalers,
            workloads=sim.workloads,
            paused=sim.paused,
            suggestions=self.suggestions,
            oom_floors=self.oom_floors,
            predictions=self.predictions,
            dsa_suggestions=self.dsa_suggestions,
        )

    def admit(self, pod: Pod, workload: Workload | None, now: float) -> Pod:
        if not self.enabled:
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
