"""Bare Jobs grouped by `foresize.io/job-group` (`cluster.jobs`, issue 25 item 3): one
history per group across its Jobs, the request learned from past runs' peaks
(`recommend.runs`), applied by the pod webhook at creation, OOM-killed runs raising the
next run, and label values that name no group."""

from __future__ import annotations

import math
import random
import string
from typing import Any

import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, Sample
from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import decide_pod
from foresize.core.api.quantity import GIB, MIB, to_canonical
from foresize.core.api.types import parse_target
from foresize.core.cluster.jobs import (
    JOB_GROUP,
    JOB_GROUP_LABEL,
    history_workload,
    job_group_of,
    job_group_problem,
)
from foresize.core.cluster.model import (
    Container,
    JobOutcome,
    OwnerRef,
    Pod,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey, history_workload_of, workload_of_pod
from foresize.core.recommend.runs import MIN_RUNS, OOM_FACTOR, RUN_MARGIN
from foresize.core.recommend.suggestions import SuggestionState, plan_suggestions

NOW = 1_780_000_000.0
DAY = 86400.0
GROUP = "etl"
KEYED = history_workload(GROUP)


def _target(mode: str = "autonomous", status: dict[str, Any] | None = None, **spec: Any) -> Any:
    return parse_target(
        {
            **({"status": status} if status else {}),
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "etl", "namespace": "batch", "uid": "t-etl"},
            "spec": {
                "scaleTargetRef": {"kind": "JobGroup", "name": GROUP},
                "vertical": {"mode": mode},
                **spec,
            },
        }
    )


def _job(name: str, start: float, labels: dict[str, str] | None = None, **kw: Any) -> Workload:
    template = PodTemplate(
        labels={JOB_GROUP_LABEL: GROUP} if labels is None else labels,
        containers=[
            Container(
                "etl", ResourceRequirements({"cpu": 2000, "memory": 4 * GIB}, {"memory": 4 * GIB})
            )
        ],
    )
    return Workload("Job", "batch", name, f"u-{name}", template=template, **kw)


def _nightly(history: UsageHistory, nights: int, memory: float = 2 * GIB) -> None:
    """`nights` 40-minute runs, each a differently named bare Job of the group, peaking at
    `memory` for one minute."""
    samples = []
    end = NOW - 3 * 3600
    for k in range(nights):
        start = end - (nights - 1 - k) * DAY - 2400
        for i in range(41):
            mem = memory if i == 20 else memory / 2
            samples.append(Sample(start + i * 60, "batch", KEYED, f"etl-{k}-x", "etl", 1.0, mem))
    HistorySink(history).add_samples(samples)


def _status(history: UsageHistory, target: Any, jobs: tuple[Workload, ...]) -> dict[str, Any]:
    snap = ClusterSnapshot(now=NOW, workloads={w.key: w for w in jobs}, targets=[target])
    (write,) = plan_suggestions(snap, history, NOW, state=SuggestionState())
    return write.status


def _request(status: dict[str, Any], resource: str) -> int:
    (entry,) = status["vertical_suggestion"]["containers"]
    return to_canonical(resource, entry["requests"][resource])


def _pod(job: str, labels: dict[str, str]) -> Pod:
    container = Container("etl", ResourceRequirements({"cpu": 2000, "memory": 4 * GIB}))
    return Pod(
        "batch",
        f"{job}-x7k2p",
        labels=labels,
        owner=OwnerRef("Job", job, f"u-{job}", "batch/v1"),
        containers=[container],
    )


def test_a_group_is_a_dns_label_and_anything_else_names_none() -> None:
    assert job_group_of({JOB_GROUP_LABEL: "etl"}) == "etl"
    assert job_group_of({}) is None and job_group_of(None) is None
    for odd in ("ETL", "etl_nightly", "", "-etl", "a" * 64, "etl.daily"):
        assert job_group_of({JOB_GROUP_LABEL: odd}) is None
        assert job_group_problem(odd) is not None
    problem = job_group_problem("ETL_nightly")
    assert problem is not None and JOB_GROUP_LABEL in problem and "'ETL_nightly'" in problem


def test_bare_jobs_of_a_group_share_one_history_that_no_deployment_shares() -> None:
    labels = {JOB_GROUP_LABEL: GROUP}
    # Two bare Jobs of the group, named differently: one history, under `jobgroup:etl`.
    assert workload_of_pod("etl-a-x7k2p", ("Job", "etl-a"), labels) == (JOB_GROUP, KEYED)
    assert workload_of_pod("etl-b-x7k2p", ("Job", "etl-b"), labels) == (JOB_GROUP, KEYED)
    assert KEYED != GROUP  # a Deployment named `etl` keeps its own history
    # The CronJob controller's naming wins: a CronJob's run stays its CronJob's.
    assert workload_of_pod("rep-29666666-x", ("Job", "rep-29666666"), labels) == ("CronJob", "rep")
    # An odd value: the Job keeps a history of its own.
    assert workload_of_pod("j-x", ("Job", "j"), {JOB_GROUP_LABEL: "Bad_Group"}) == ("Job", "j")
    # As the shells key it from the snapshot's owner chain.
    bare = _job("etl-a", NOW)
    assert history_workload_of(_pod("etl-a", labels), bare) == (JOB_GROUP, KEYED)
    assert history_workload_of(_pod("etl-a", {}), bare) == ("Job", "etl-a")
    assert history_workload_of(_pod("etl-a", labels), None) == (JOB_GROUP, KEYED)
    owned = _job("rep-1", NOW, owner=OwnerRef("CronJob", "rep", "u-rep", "batch/v1"))
    cron = Workload("CronJob", "batch", "rep", "u-rep")
    assert history_workload_of(_pod("rep-1", labels), cron) == ("CronJob", "rep")
    assert history_workload_of(_pod("rep-1", labels), owned) == ("Job", "rep-1")


def test_a_job_group_is_sized_from_its_runs_peaks_on_the_newest_jobs_template() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS, memory=2 * GIB)
    old = _job("etl-old", NOW - 2 * DAY, labels={JOB_GROUP_LABEL: GROUP})
    other = _job("other", NOW, labels={JOB_GROUP_LABEL: "other"})
    status = _status(history, _target(), (old, other))
    assert status["hasEnoughDataToScale"] is True
    assert _request(status, "memory") == math.ceil(2 * GIB * (1 + RUN_MARGIN) / MIB) * MIB
    assert status["job_runs"]["clean_runs"] == MIN_RUNS
    # No Job of the group in the cluster: no template to size, the status is left alone.
    snap = ClusterSnapshot(now=NOW, workloads={other.key: other}, targets=[_target()])
    assert plan_suggestions(snap, history, NOW, state=SuggestionState()) == []


def test_an_oom_killed_run_of_a_group_raises_the_next_run() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS)
    history.record_event(SeriesKey("batch", KEYED, "etl"), "oom", NOW - 3 * 3600 - 600, 2.5 * GIB)
    status = _status(history, _target(), (_job("etl-3", NOW),))
    assert _request(status, "memory") == math.ceil(2.5 * GIB * OOM_FACTOR / MIB) * MIB
    assert status["job_runs"]["oom_killed_runs"] == 1


def test_a_group_with_no_successful_run_says_what_it_assumed() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, 2)
    failed = tuple(
        _job(
            f"etl-{k}",
            NOW - (1 - k) * DAY - 3 * 3600 - 2400,
            job=JobOutcome(
                NOW - (1 - k) * DAY - 3 * 3600 - 2400,
                NOW - (1 - k) * DAY - 3 * 3600,
                "Failed",
                "BackoffLimitExceeded",
            ),
        )
        for k in range(2)
    )
    status = _status(history, _target(), failed)
    runs = status["job_runs"]
    assert runs["clean_runs"] == 0 and runs["failed_runs"] == 2
    assert "BackoffLimitExceeded" in runs["note"]
    assert any("kept at its current" in a for a in runs["assumed"])
    assert {s["job"] for s in runs["skipped"]} == {"etl-0", "etl-1"}


def test_the_webhook_sizes_a_new_pod_of_the_group_and_warns_of_an_odd_label() -> None:
    suggested = [{"name": "etl", "requests": {"cpu": "1100m", "memory": "2253Mi"}}]
    target = _target(status={"vertical_suggestion": {"uid": "s1", "containers": suggested}})
    index = AdmissionIndex.build([target])
    pod = _pod("etl-manual-1", {JOB_GROUP_LABEL: GROUP})
    assert index.top_owner_ref("batch", pod.owner, pod.labels) == ("JobGroup", GROUP)
    decision = decide_pod(pod, None, index, NOW)
    assert decision.target is not None and decision.target.name == "etl"
    assert decision.containers["etl"].requests == {"cpu": 1100, "memory": 2253 * MIB}
    # A pod of another group, or of none, is not this target's.
    assert index.target_for_pod(_pod("x", {JOB_GROUP_LABEL: "other"})) is None
    odd = decide_pod(_pod("x", {JOB_GROUP_LABEL: "ETL"}), None, index, NOW)
    assert not odd.changed and odd.warnings
    assert "is not a group name" in odd.warnings[0] and "'ETL'" in odd.warnings[0]
    assert not decide_pod(_pod("x", {}), None, index, NOW).warnings


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"horizontal": {"mode": "autonomous", "minReplicas": 1, "maxReplicas": 2}}, "horizontal"),
        (
            {"vertical": {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}}},
            "update_mode",
        ),
    ],
)
def test_a_job_group_target_refuses_what_a_cronjob_target_refuses(
    spec: dict[str, Any], field: str
) -> None:
    with pytest.raises((ForesizeError, ValueError), match=field):
        _target(**spec)


def test_fuzzed_label_values_never_raise_and_only_dns_labels_group() -> None:
    rng = random.Random(25)
    alphabet = string.ascii_letters + string.digits + "-_.:/ \x00é"
    for _ in range(3000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        group = job_group_of({JOB_GROUP_LABEL: value})
        assert (group is None) == (job_group_problem(value) is not None)
        if group is not None:
            assert len(group) <= 63 and group == group.lower() and ":" not in group
            keyed = workload_of_pod("p", ("Job", "j"), {JOB_GROUP_LABEL: value})
            assert keyed == (JOB_GROUP, "jobgroup:" + group)
    assert job_group_of({JOB_GROUP_LABEL: 7}) is None  # type: ignore[dict-item]
