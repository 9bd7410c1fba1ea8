"""Jobs and the CronJobs that run them: which CronJob a Job is a run of.

A CronJob's runs are Jobs it owns (`ownerReferences`, controller: true, kind CronJob),
named by the CronJob controller `<cronjob>-<scheduled time in minutes since the epoch>`
(`getJobName` in kubernetes/pkg/controller/cronjob/utils.go: 8 digits since 1976). The
owner reference is the fact; the name is how a reader that does not have the Job object
(the pod webhook seeing only the pod's owner, a Prometheus series) still finds the
CronJob. The runs of one CronJob are one workload with one history.

Bare Jobs (no CronJob owner: created by a pipeline, an operator, `kubectl create job`)
are grouped by a label on their pod template, `foresize.io/job-group: <group>` (the pods
carry it, which is what the webhook and the collectors see): the Jobs of one group are
the runs of one workload, sized like a CronJob's (`recommend.runs`) by a target whose
`scaleTargetRef` is `{kind: JobGroup, name: <group>}`. A group is a DNS label (what a
`scaleTargetRef` name can name); a label value that is not one is not a group: its Job
keeps a history of its own, and the webhook says why in a warning. A Job the CronJob
controller named (`<cronjob>-<8+ digits>`) is its CronJob's run whatever its labels.
Its history is keyed `jobgroup:<group>` (`history_workload`): a colon is in no Kubernetes
object's name, so a group never shares a history with a Deployment or CronJob of the
same name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from foresize.core.api.jobs import JOB_GROUP as JOB_GROUP  # the target kind, re-exported
from foresize.core.api.names import dns_label_error

JOB = "Job"
CRONJOB = "CronJob"
JOB_GROUP_LABEL = "foresize.io/job-group"
_GROUP_HISTORY_PREFIX = "jobgroup:"
MAX_GROUP_LENGTH = 63
"""A DNS label's length, which is also a label value's."""

_CRONJOB_RUN = re.compile(r"^(?P<cronjob>.+)-\d{8,}$")


def cronjob_of_job_name(name: str) -> str | None:
    """The CronJob a Job named `name` is a run of, from the CronJob controller's naming
    (None: not such a name)."""
    match = _CRONJOB_RUN.match(name)
    return match["cronjob"] if match else None


def job_group_problem(value: str) -> str | None:
    """Why a `foresize.io/job-group` label value names no group (None: it names one)."""
    if len(value) > MAX_GROUP_LENGTH:  # before any pattern: a value from a trace is any size
        return f"label {JOB_GROUP_LABEL} is {len(value)} characters (a group name is at most 63)"
    problem = dns_label_error(value)
    if problem is None:
        return None
    return f"label {JOB_GROUP_LABEL}={value[:70]!r} is not a group name ({problem})"


def job_group_of(labels: Mapping[str, str] | None) -> str | None:
    """The job group a pod's (or a Job template's) labels put it in (None: no label, or a
    value that names no group, `job_group_problem`)."""
    value = (labels or {}).get(JOB_GROUP_LABEL)
    if not isinstance(value, str) or job_group_problem(value) is not None:
        return None
    return value


def history_workload(group: str) -> str:
    """The workload name a job group's history is kept under."""
    return _GROUP_HISTORY_PREFIX + group


def group_of_history_workload(workload: str) -> str | None:
    """The job group whose history `workload` is (None: a workload's name)."""
    if not workload.startswith(_GROUP_HISTORY_PREFIX):
        return None
    return job_group_of({JOB_GROUP_LABEL: workload[len(_GROUP_HISTORY_PREFIX) :]})
