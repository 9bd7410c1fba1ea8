"""Predictive replicas and the */scale decision (pure).

`replicas` (predicted = ceil(forecast / per-replica target), rounding, bounds, effective
= max(HPA's, predicted); vectorised variant) and `planner.plan_horizontal`.
"""

from foresize.core.cluster.replicas import (
    effective_replicas,
    predict_replicas,
    predict_replicas_many,
    round_replicas,
)

__all__ = ["effective_replicas", "predict_replicas", "predict_replicas_many", "round_replicas"]
