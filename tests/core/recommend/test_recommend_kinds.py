"""History keyed by the workload's kind (issue 25): a CronJob and a Deployment of one name
in one namespace keep separate histories and get separate recommendations; history of an
unknown kind (a store's rows from before kinds were kept) is read by a workload only while
its name is its kind's alone (`history.history_kinds`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, Sample
from foresize.core.api.quantity import GIB, MIB, to_canonical
from foresize.core.api.types import parse_target
from foresize.core.cluster.model import (
    Container,
    OwnerRef,
    Pod,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.history import UNKNOWN_KIND, HistoryWorkload, history_kinds, history_workload_of
from foresize.core.recommend.histories import load_histories
from foresize.core.recommend.runs import MIN_RUNS
from foresize.core.recommend.suggestions import plan_suggestions

NOW = 1_780_000_000.0
DAY = 86400.0
NS = "batch"


def _template() -> PodTemplate:
    resources = ResourceRequirements({"cpu": 2000, "memory": 4 * GIB}, {"memory": 4 * GIB})
    return PodTemplate(containers=[Container("report", resources)])


def _target(name: str, kind: str) -> Any:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": name, "namespace": NS, "uid": f"t-{name}"},
            "spec": {
                "scaleTargetRef": {"kind": kind, "name": "report"},
                "vertical": {"mode": "recommendation"},
            },
        }
    )


def _cluster(*, deployment: bool = True) -> tuple[ClusterSnapshot, Pod, Pod]:
    """A CronJob `report` with a run, and (unless not) a Deployment `report` beside it,
    with one pod each, as the kube shell's snapshot holds them."""
    cron = Workload("CronJob", NS, "report", "u-cron", template=_template())
    run = Workload(
        "Job",
        NS,
        "report-29666666",
        "u-job",
        template=_template(),
        owner=OwnerRef("CronJob", "report", "u-cron", "batch/v1"),
    )
    dep = Workload("Deployment", NS, "report", "u-dep", template=_template())
    rs = Workload(
        "ReplicaSet",
        NS,
        "report-5d8f7c9b4",
        "u-rs",
        template=_template(),
        owner=OwnerRef("Deployment", "report", "u-dep", "apps/v1"),
    )
    job_pod = Pod(NS, "report-29666666-x7k2p", owner=OwnerRef("Job", "report-29666666", "u-job"))
    dep_pod = Pod(NS, "report-5d8f7c9b4-abcde", owner=OwnerRef("ReplicaSet", "report-5d8f7c9b4"))
    workloads = [cron, run, *((dep, rs) if deployment else ())]
    targets = [_target("report-cron", "CronJob")]
    if deployment:
        targets.append(_target("report-web", "Deployment"))
    snap = ClusterSnapshot(
        now=NOW,
        workloads={w.key: w for w in workloads},
        targets=targets,
        pods=[job_pod, *((dep_pod,) if deployment else ())],
    )
    return snap, job_pod, dep_pod


def _collect(snap: ClusterSnapshot, pod: Pod, times: np.ndarray, cpu: float, mem: float) -> list:
    """Samples of `pod` keyed as the kube collector keys them (`history_workload_of`)."""
    kind, name = history_workload_of(pod, snap.top_owner(pod))
    return [Sample(float(t), NS, name, pod.name, "report", cpu, mem, kind) for t in times]


def _request(write: Any, resource: str) -> int:
    (entry,) = write.status["vertical_suggestion"]["containers"]
    return int(to_canonical(resource, entry["requests"][resource]))


def test_a_cronjob_and_a_deployment_of_one_name_get_separate_recommendations() -> None:
    snap, job_pod, dep_pod = _cluster()
    samples = []
    # The Deployment serves all day at 1.5 cores and 3 GiB, for 4 days.
    samples += _collect(snap, dep_pod, np.arange(NOW - 4 * DAY, NOW, 300.0), 1.5, 3 * GIB)
    # The CronJob's nightly runs: 40 minutes at half a core and 300 MiB.
    for night in range(MIN_RUNS + 1):
        start = NOW - (night + 1) * DAY + 3600
        samples += _collect(snap, job_pod, np.arange(start, start + 2400, 60.0), 0.5, 300 * MIB)
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(samples)
    writes = {w.name: w for w in plan_suggestions(snap, history, NOW)}
    cron, web = writes["report-cron"], writes["report-web"]
    # Each from its own history: the CronJob from its runs' 300 MiB peaks (sharing the
    # Deployment's history, its "runs" were the Deployment's day at 3 GiB).
    assert _request(cron, "memory") < 512 * MIB
    assert _request(cron, "cpu") < 1000
    assert _request(web, "memory") >= 3 * GIB
    assert _request(web, "cpu") >= 1500


def test_history_of_an_unknown_kind_is_read_only_while_the_name_is_one_kinds() -> None:
    history = UsageHistory(step=60.0)
    times = np.arange(NOW - DAY, NOW, 300.0)
    # Rows from before kinds were kept (a migrated store): no kind.
    HistorySink(history).add_samples(
        [Sample(float(t), NS, "report", "p", "report", 1.0, GIB, UNKNOWN_KIND) for t in times]
    )
    alone, _, _ = _cluster(deployment=False)
    both, _, _ = _cluster()
    cron = HistoryWorkload("CronJob", "report")
    assert history_kinds(alone, NS, cron) == ("CronJob", UNKNOWN_KIND)
    assert history_kinds(both, NS, cron) == ("CronJob",)
    # A kind no workload shares keeps reading it: the CronJob alone takes the old rows.
    read = load_histories(
        history, NS, "report", ["report"], NOW, kinds=history_kinds(alone, NS, cron)
    )["report"]
    assert np.nanmax(read.memory) == GIB and read.first_seen == times[0]
    # Beside a Deployment of its name, the old rows are a mixture: neither reads them.
    read = load_histories(
        history, NS, "report", ["report"], NOW, kinds=history_kinds(both, NS, cron)
    )["report"]
    assert np.isnan(read.memory).all() and read.first_seen is None
    # Unknown history never hides the kind's own: both are read, the larger kept.
    HistorySink(history).add_samples(
        [Sample(float(t), NS, "report", "p", "report", 1.0, 2 * GIB, "CronJob") for t in times]
    )
    read = load_histories(
        history, NS, "report", ["report"], NOW, kinds=history_kinds(alone, NS, cron)
    )["report"]
    assert np.nanmax(read.memory) == 2 * GIB
