"""The disruption worker (pure planning): in-place resize, stall fallback, batching,
circuit breaker, capacity guard.

Entry points: `plan(snapshot, now, state, config, suggestions)` -> (actions, new state),
`on_result(state, action, result, now, config)` -> new state, and `execute(...)` which
applies a pass's actions in order through a callable and feeds the results back.
"""

from foresize.core.vertical.planner import execute, on_result, plan, stall_reason
from foresize.core.vertical.policy import WorkerConfig, batch_size, policy_of
from foresize.core.vertical.state import TargetState, WorkerState

__all__ = [
    "TargetState",
    "WorkerConfig",
    "WorkerState",
    "batch_size",
    "execute",
    "on_result",
    "plan",
    "policy_of",
    "stall_reason",
]
