"""The `*/scale` decision (pure): a replica count written to a horizontally autonomous
target's workload, or to the workload of a target coordinating with its HPA
(`hpa_resource_policy: coordinate`), typically by the HPA, becomes max(written,
predicted), the prediction
kept within the target's bounds and rounding. It never touches pods and never sets the
managed annotation (architecture §3.3: the annotation belongs to the pod webhook only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from foresize.core.admission.index import AdmissionIndex
from foresize.core.cluster.replicas import effective_replicas, round_replicas
from foresize.core.cluster.target import TargetView

# AdmissionReview `request.resource.resource` -> workload kind.
RESOURCE_KINDS = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "rollouts": "Rollout",
    "replicasets": "ReplicaSet",
}


@dataclass(slots=True)
class ScaleDecision:
    replicas: int | None = None  # the new count, or None to leave the write as it is
    target: TargetView | None = None
    warnings: list[str] = field(default_factory=list)


def decide_scale(
    kind: str, namespace: str, name: str, written: int, index: AdmissionIndex, now: float
) -> ScaleDecision:
    decision = ScaleDecision()
    if index.paused:
        return decision
    target = index.target_for(kind, namespace, name)
    if target is None:
        return decision
    decision.target = target
    # A coordinating target's replica floor is half of its decision (issue 27 part 4).
    if not (target.horizontal_autonomous or target.coordinates) or target.deleting:
        return decision
    predicted = index.predicted_of(target)
    if predicted is None:
        return decision
    if target.prediction_until is not None and now > target.prediction_until:
        decision.warnings.append(
            f"foresize: prediction of AIScaleTarget {target.key} is stale; replicas left as written"
        )
        return decision
    predicted = round_replicas(
        predicted,
        min_replicas=target.min_replicas,
        max_replicas=target.max_replicas,
        multiple_of=target.multiple_of,
        allowed=target.allowed_replicas,
    )
    effective = effective_replicas(written, predicted, max_replicas=target.max_replicas)
    if effective != written:
        decision.replicas = effective
    return decision
