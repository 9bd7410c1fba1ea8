"""Jobs and the CronJobs that run them: which CronJob a Job is a run of.

A CronJob's runs are Jobs it owns (`ownerReferences`, controller: true, kind CronJob),
named by the CronJob controller `<cronjob>-<scheduled time in minutes since the epoch>`
(`getJobName` in kubernetes/pkg/controller/cronjob/utils.go: 8 digits since 1976). The
owner reference is the fact; the name is how a reader that does not have the Job object
(the pod webhook seeing only the pod's owner, a Prometheus series) still finds the
CronJob. The runs of one CronJob are one workload with one history.
"""

from __future__ import annotations

import re

JOB = "Job"
CRONJOB = "CronJob"

_CRONJOB_RUN = re.compile(r"^(?P<cronjob>.+)-\d{8,}$")


def cronjob_of_job_name(name: str) -> str | None:
    """The CronJob a Job named `name` is a run of, from the CronJob controller's naming
    (None: not such a name)."""
    match = _CRONJOB_RUN.match(name)
    return match["cronjob"] if match else None
