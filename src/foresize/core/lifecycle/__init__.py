"""Enrol, unenrol and revert, pause, templates, DaemonSet seeding (pure planning).

`planner.plan_lifecycle` (mode changes, deletion with the `foresize.io/revert` finalizer,
pause), `revert.plan_revert`, `templates.plan_templates` (ClusterAIScaleTemplate),
`daemonset.dsa_suggestion` / `daemonset.plan_dsa` (DaemonSetAutoscaler).
"""

from foresize.core.lifecycle.planner import LifecyclePlan, LifecycleState, plan_lifecycle
from foresize.core.lifecycle.revert import REVERT_FINALIZER, RevertPlan, plan_revert

__all__ = [
    "REVERT_FINALIZER",
    "LifecyclePlan",
    "LifecycleState",
    "RevertPlan",
    "plan_lifecycle",
    "plan_revert",
]
