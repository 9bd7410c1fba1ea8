"""The rules of a target whose `scaleTargetRef` is a CronJob (issue 25 item 3).

A CronJob's runs are new pods every time, most of them gone before an in-place pass could
reach them, and a running job evicted loses its work. So such a target sizes its pods at
creation only: its update mode reads as `initial` (`recreate`, the API default, too; the
in-place modes are refused, naming the field), it has no `spec.horizontal` (a CronJob has
no `*/scale`), and no `startup_boost` (its unboost is an in-place resize of a running
pod). Its recommendation is learned from its past runs' peaks (`recommend.runs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from foresize.core.api.policy import VerticalSpec

CRONJOB = "CronJob"
JOB_GROUP = "JobGroup"
"""The bare Jobs whose pods carry `foresize.io/job-group: <name>` (`cluster.jobs`): sized
as a CronJob's runs are, by the same rules."""
RUNS_KINDS = (CRONJOB, JOB_GROUP)
"""The `scaleTargetRef` kinds whose pods are runs, sized at creation from past runs."""
CRONJOB_UPDATE_MODE = "initial"
"""A CronJob's pods are sized by the pod webhook when created and never evicted; a run
just OOM-killed, or nearing its request, has its memory raised in place
(`vertical.modes.decide_initial`), nothing else."""
RESIZING_MODES = ("in_place", "in_place_or_recreate")
"""The update modes a CronJob target refuses: they resize running pods. `recreate` is
taken (it is the API default, which the API server writes into every stored object, and
for a CronJob every run is a recreation: its new pods get the new size) and read as
`initial`: a running job is never evicted."""


def cronjob_target_problem(vertical: VerticalSpec | None, horizontal: object | None) -> str | None:
    """What a CronJob target's spec asks that a CronJob cannot take (None: nothing), in
    words naming the field."""
    if horizontal is not None:
        return "horizontal: a CronJob has no replicas to scale (a CronJob target is vertical only)"
    if vertical is None:
        return None
    policy = vertical.update_policy
    if policy.update_mode in RESIZING_MODES:
        return (
            f"vertical.update_policy.update_mode: a CronJob's pods are sized when they are "
            f"created ({CRONJOB_UPDATE_MODE}); {policy.update_mode} would resize or evict a "
            "running job"
        )
    if vertical.startup_boost is not None:
        return (
            "vertical.startup_boost: a CronJob's pods are not resized after creation, so a "
            "boost could never be undone"
        )
    return None
