"""Reading a pod's resize state from what the kubelet reports.

A stall is `PodResizePending` with reason `Deferred` or `Infeasible`, or
`PodResizeInProgress` with reason `Error` (a memory limit below live usage: the API accepts
the patch, the kubelet cannot shrink the cgroup). Nothing else is a stall: an
`InProgress` without a reason is a resize being actuated. Conditions are read for the
generation the kubelet has observed; older ones do not apply to the newest spec.
"""

from __future__ import annotations

from foresize.core.cluster.model import (
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    REASON_DEFERRED,
    REASON_ERROR,
    REASON_INFEASIBLE,
    Pod,
)


def awaiting_kubelet(pod: Pod) -> bool:
    """The kubelet has not acted on the newest spec yet."""
    return bool(pod.observed_generation) and pod.observed_generation < pod.generation


def stall_reason(pod: Pod) -> str | None:
    """The stall the kubelet reports for the pod's latest observed resize, if any."""
    if awaiting_kubelet(pod):
        # The kubelet has not acted on the newest spec yet: older conditions do not apply.
        return None
    pending = pod.condition(POD_RESIZE_PENDING)
    if (
        pending is not None
        and pending.status == "True"
        and pending.reason in (REASON_DEFERRED, REASON_INFEASIBLE)
    ):
        return pending.reason
    prog = pod.condition(POD_RESIZE_IN_PROGRESS)
    if prog is not None and prog.status == "True" and prog.reason == REASON_ERROR:
        return REASON_ERROR
    return None


def stall_message(pod: Pod, reason: str) -> str:
    """The kubelet's message for the stall (its reason when it gave none)."""
    cond = pod.condition(POD_RESIZE_PENDING if reason != REASON_ERROR else POD_RESIZE_IN_PROGRESS)
    return cond.message if cond is not None and cond.message else reason
