"""Jobs and CronJobs (`cluster.jobs`): the owner chain a Job's pod resolves through, as the
kube shell converts the objects and the snapshot and the webhook's index read them."""

from __future__ import annotations

from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.types import parse_target
from foresize.core.cluster.jobs import cronjob_of_job_name
from foresize.core.cluster.kubejson import pod_from, workload_from
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.history import job_pod_history, workload_of_pod

CONTAINER = {"name": "report", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}
CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "report", "namespace": "batch", "uid": "u-cron"},
    "spec": {
        "schedule": "0 2 * * *",
        "suspend": True,
        "jobTemplate": {
            "spec": {
                "parallelism": 2,
                "template": {
                    "metadata": {"labels": {"app": "report"}},
                    "spec": {"containers": [CONTAINER]},
                },
            }
        },
    },
}
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "report-29666666",
        "namespace": "batch",
        "uid": "u-job",
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": "report",
                "uid": "u-cron",
                "controller": True,
            }
        ],
    },
    "spec": {"template": {"spec": {"containers": [CONTAINER]}}},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "report-29666666-x7k2p",
        "namespace": "batch",
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "report-29666666",
                "uid": "u-job",
                "controller": True,
            }
        ],
    },
    "spec": {"containers": [CONTAINER]},
}


def test_a_cronjob_is_read_from_its_job_template() -> None:
    cron = workload_from("CronJob", CRONJOB)
    assert cron.key == "CronJob/batch/report"
    assert [c.name for c in cron.template.containers] == ["report"]
    assert cron.template.containers[0].resources.requests == {"cpu": 2000, "memory": 4 * 2**30}
    assert cron.template.labels == {"app": "report"}
    assert cron.replicas == 2 and cron.paused is True
    job = workload_from("Job", JOB)
    assert job.owner is not None and (job.owner.kind, job.owner.name) == ("CronJob", "report")


def test_a_job_pod_resolves_to_its_cronjob() -> None:
    cron, job = workload_from("CronJob", CRONJOB), workload_from("Job", JOB)
    pod = pod_from(POD)
    snap = ClusterSnapshot(now=0.0, pods=[pod], workloads={cron.key: cron, job.key: job})
    top = snap.top_owner(pod)
    assert top is not None and top.key == "CronJob/batch/report"
    assert snap.pods_of(cron) == [pod]


def test_the_webhook_index_resolves_a_job_it_does_not_hold_by_its_name() -> None:
    target = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "report", "namespace": "batch"},
            "spec": {
                "scaleTargetRef": {"kind": "CronJob", "name": "report"},
                "vertical": {"mode": "autonomous"},
            },
        }
    )
    pod = pod_from(POD)
    index = AdmissionIndex.build([target])  # no Job object: the CronJob controller's naming
    assert index.top_owner_ref("batch", pod.owner, pod.labels) == ("CronJob", "report")
    found = index.target_for_pod(pod)
    assert found is not None and found.name == "report"
    # A Job of that naming whose CronJob is no target's stays a Job; a bare Job too.
    assert AdmissionIndex.build([]).top_owner_ref("batch", pod.owner, {}) == (
        "Job",
        "report-29666666",
    )
    # The Job object, where the index holds it, is the fact.
    job = workload_from("Job", {**JOB, "metadata": {**JOB["metadata"], "ownerReferences": []}})
    held = AdmissionIndex.build([target], workloads={job.key: job})
    assert held.top_owner_ref("batch", pod.owner, {}) == ("Job", "report-29666666")


def test_runs_of_a_cronjob_share_one_history_and_keep_their_first_minutes() -> None:
    assert cronjob_of_job_name("report-29666666") == "report"
    assert cronjob_of_job_name("migrate-db") is None
    assert workload_of_pod("report-29666666-x7k2p", ("Job", "report-29666666")) == (
        "CronJob",
        "report",
    )
    assert workload_of_pod("migrate-db-x7k2p", ("Job", "migrate-db")) == ("Job", "migrate-db")
    assert job_pod_history(pod_from(POD).owner) is True
    assert job_pod_history(None) is False


def test_a_jobs_status_reads_into_its_outcome() -> None:
    """The Failed (or Complete) condition with status True ends a Job: its reason, and its
    lastTransitionTime as the end (completionTime where the condition has none)."""
    from foresize.core.cluster.kubejson import workload_from
    from foresize.core.cluster.model import JobOutcome

    def job(status: dict) -> JobOutcome | None:
        obj = {"metadata": {"name": "j", "namespace": "ns"}, "spec": {}, "status": status}
        return workload_from("Job", obj).job

    failed = job(
        {
            "startTime": "2026-05-28T20:00:00Z",
            "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"},
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "lastTransitionTime": "2026-05-28T20:10:00Z",
                },
            ],
        }
    )
    assert failed == JobOutcome(1779998400.0, 1779999000.0, "Failed", "DeadlineExceeded")
    done = job(
        {
            "completionTime": "2026-05-28T20:05:00Z",
            "conditions": [{"type": "Complete", "status": "True"}],
        }
    )
    assert done == JobOutcome(None, 1779998700.0, "Complete", "")
    assert job({"conditions": [{"type": "Failed", "status": "False"}]}) == JobOutcome()
    dropped: list[str] = []
    obj = {"metadata": {"name": "j"}, "status": {"startTime": "soon"}}
    assert workload_from("Job", obj, dropped).job == JobOutcome()
    assert dropped and "status.startTime" in dropped[0]
