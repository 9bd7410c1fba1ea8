"""A CronJob's recommendation learned across its runs (`recommend.runs`, issue 25 item 3)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, Sample
from foresize.core.api.fields import format_timestamp
from foresize.core.api.quantity import GIB, MIB, to_canonical
from foresize.core.api.types import parse_target
from foresize.core.cluster.model import (
    Container,
    JobOutcome,
    OwnerRef,
    Pod,
    PodCondition,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.history import SeriesKey
from foresize.core.recommend.histories import ContainerHistory
from foresize.core.recommend.runs import MIN_RUNS, OOM_FACTOR, RUN_MARGIN, runs_of
from foresize.core.recommend.suggestions import SuggestionState, plan_suggestions

NOW = 1_780_000_000.0
DAY = 86400.0


def _target(vertical: dict[str, Any] | None = None, mode: str = "autonomous") -> Any:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "report", "namespace": "batch", "uid": "t-report"},
            "spec": {
                "scaleTargetRef": {"kind": "CronJob", "name": "report"},
                "vertical": {"mode": mode, **(vertical or {})},
            },
        }
    )


def _snapshot(
    target: Any, now: float = NOW, jobs: tuple[Workload, ...] = (), pods: tuple[Pod, ...] = ()
) -> ClusterSnapshot:
    template = PodTemplate(
        containers=[
            Container(
                "report",
                ResourceRequirements({"cpu": 2000, "memory": 4 * GIB}, {"memory": 4 * GIB}),
            )
        ]
    )
    cron = Workload("CronJob", "batch", "report", "uid-cron", template=template)
    job = Workload(
        "Job",
        "batch",
        "report-29666666",
        "uid-job",
        template=template,
        owner=OwnerRef("CronJob", "report", "uid-cron", "batch/v1"),
    )
    return ClusterSnapshot(
        now=now,
        workloads={w.key: w for w in (cron, job, *jobs)},
        targets=[target],
        pods=list(pods),
    )


def _nightly(
    history: UsageHistory,
    nights: int,
    *,
    cpu: float = 1.0,
    memory: float = 2 * GIB,
    spike: float | None = None,
    end: float = NOW - 3 * 3600,
) -> None:
    """`nights` runs of 40 minutes, one a day, the last ending at `end`: CPU at `cpu`
    cores; memory at half of `memory` but for one minute at `memory` (its peak), or
    at `spike` on the last night."""
    samples = []
    for k in range(nights):
        start = end - (nights - 1 - k) * DAY - 2400
        for i in range(41):
            peak = spike if (spike is not None and k == nights - 1) else memory
            mem = peak if i == 20 else memory / 2
            t = start + i * 60
            samples.append(Sample(t, "batch", "report", f"report-{k}-x", "report", cpu, mem))
    HistorySink(history).add_samples(samples)


def _status(history: UsageHistory, target: Any, state: SuggestionState | None = None) -> dict:
    (write,) = plan_suggestions(_snapshot(target), history, NOW, state=state)
    return write.status


def _steps(status: dict, resource: str = "memory") -> list[str]:
    (entry,) = status["explanation"]["containers"]
    return [s["step"] for s in entry["steps"] if s["resource"] == resource]


def _request(status: dict, resource: str) -> int:
    (entry,) = status["vertical_suggestion"]["containers"]
    return to_canonical(resource, entry["requests"][resource])


def test_runs_are_cut_at_gaps_and_the_run_in_progress_is_not_finished() -> None:
    step = 300.0
    cpu = np.full(40, np.nan)
    cpu[2:6] = 0.5  # a run
    cpu[5] = 2.0  # its peak
    cpu[20:25] = 0.7  # another
    cpu[38:] = 0.9  # the one running now
    history = ContainerHistory(cpu, np.full(40, np.nan), oom_times=[NOW - 17 * step])
    runs = runs_of(history, NOW, step)
    assert [(r.cpu_peak, r.in_progress) for r in runs] == [
        (2000.0, False),
        (700.0, False),
        (900.0, True),
    ]
    assert [r.oom_kills for r in runs] == [0, 1, 0]
    assert [r.clean for r in runs] == [True, False, False]


def test_the_request_follows_the_runs_peak_not_its_average() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS, memory=2 * GIB)  # 2Gi for one minute of each 40
    status = _status(history, _target())
    assert status["hasEnoughDataToScale"] is True
    memory = _request(status, "memory")
    assert memory == math.ceil(2 * GIB * (1 + RUN_MARGIN) / MIB) * MIB
    assert _request(status, "cpu") == 1100  # 1 core + 10%
    (entry,) = status["vertical_suggestion"]["containers"]
    # The template's limit/request ratio (1.0 for memory) is kept: the QoS class too.
    assert to_canonical("memory", entry["limits"]["memory"]) == memory
    assert "cpu" not in entry["limits"]
    assert status["job_runs"]["runs"] == MIN_RUNS
    assert status["job_runs"]["clean_runs"] == MIN_RUNS
    steps = _steps(status)
    assert steps[:2] == ["runs", "margin"]


def test_fewer_runs_than_needed_publish_nothing_in_autonomous_mode() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS - 1)
    status = _status(history, _target())
    assert status["hasEnoughDataToScale"] is False
    assert "vertical_suggestion" not in status
    assert "of the 3 needed" in status["job_runs"]["note"]
    # Recommendation mode shows what the runs say.
    shown = _status(history, _target(mode="recommendation"))
    assert _request(shown, "memory") > 2 * GIB


def test_an_oom_killed_run_raises_the_next_runs_memory_at_once() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS)
    # The last run was killed at its 2.5Gi limit, after the last clean one.
    history.record_event(
        SeriesKey("batch", "report", "report"), "oom", NOW - 3 * 3600 - 600, 2.5 * GIB
    )
    status = _status(history, _target())
    assert _request(status, "memory") == math.ceil(2.5 * GIB * OOM_FACTOR / MIB) * MIB
    assert status["job_runs"]["oom_killed_runs"] == 1
    steps = _steps(status)
    assert "oom" in steps
    # One run and an OOM kill: not enough runs, but remediation does not wait.
    young = UsageHistory(step=60.0)
    _nightly(young, 1)
    # Killed at the template's 4Gi limit.
    young.record_event(SeriesKey("batch", "report", "report"), "oom", NOW - 3 * 3600 - 600, 4 * GIB)
    early = _status(young, _target())
    assert early["hasEnoughDataToScale"] is False
    assert _request(early, "memory") == math.ceil(4 * GIB * OOM_FACTOR / MIB) * MIB


def test_a_cronjob_with_no_clean_run_says_what_it_assumed() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, 2, memory=2 * GIB)
    key = SeriesKey("batch", "report", "report")
    for k in range(2):  # both runs killed, the limit unknown at the kill (no usage)
        history.record_event(key, "oom", NOW - 3 * 3600 - (1 - k) * DAY - 600)
    status = _status(history, _target())
    runs = status["job_runs"]
    assert runs["clean_runs"] == 0 and runs["oom_killed_runs"] == 2
    assert runs["note"] == "no run completed cleanly: 2 OOM-killed"
    assert any("cpu kept at its current 2" in a for a in runs["assumed"])
    assert any("memory raised" in a for a in runs["assumed"])
    # Memory: 1.2 x the template's limit (what the killed runs had); CPU kept.
    assert _request(status, "memory") == math.ceil(4 * GIB * OOM_FACTOR / MIB) * MIB
    assert _request(status, "cpu") == 2000


def test_a_cronjob_that_never_ran_gets_no_suggestion() -> None:
    status = _status(UsageHistory(step=60.0), _target())
    assert "vertical_suggestion" not in status
    assert status["hasEnoughDataToScale"] is False
    assert "no finished run" in status["job_runs"]["note"]


def test_bounds_clamp_the_runs_peak() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS, memory=2 * GIB)
    vertical = {
        "containers": [{"name": "report", "memory": {"lowerbound": "64Mi", "upperbound": "1Gi"}}]
    }
    status = _status(history, _target(vertical))
    assert _request(status, "memory") == GIB
    steps = _steps(status)
    assert "bounds" in steps


def test_old_runs_stop_counting_after_a_week() -> None:
    history = UsageHistory(step=60.0)
    # A big run 9 nights ago, then 8 small ones: only the last 7 clean runs count.
    _nightly(history, 1, memory=4 * GIB, end=NOW - 3 * 3600 - 8 * DAY)
    _nightly(history, 8, memory=1 * GIB)
    status = _status(history, _target())
    assert _request(status, "memory") == math.ceil(GIB * (1 + RUN_MARGIN) / MIB) * MIB


def _failed_job(night: int, nights: int, reason: str, end: float = NOW - 3 * 3600) -> Workload:
    """The Job of run `night` (of `nights`, as `_nightly` lays them out), failed."""
    stop = end - (nights - 1 - night) * DAY
    return Workload(
        "Job",
        "batch",
        f"report-2966{night:04d}",
        f"uid-job-{night}",
        owner=OwnerRef("CronJob", "report", "uid-cron", "batch/v1"),
        job=JobOutcome(stop - 2400, stop, "Failed", reason),
    )


def test_a_run_whose_job_failed_is_skipped_not_read_as_a_peak_and_the_status_says_why() -> None:
    """Four nights; the last hit its activeDeadlineSeconds with a 6Gi spike: not a clean
    run (it did not finish, whatever its peak), so the request is the three clean runs'
    peak, and `job_runs.skipped` names the Job, when it ran and why. The next pass, the
    failed Job gone (the CronJob keeps one), still skips it: the status remembers."""
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS + 1, memory=2 * GIB, spike=6 * GIB)
    target = _target()
    job = _failed_job(MIN_RUNS, MIN_RUNS + 1, "DeadlineExceeded")
    (write,) = plan_suggestions(_snapshot(target, jobs=(job,)), history, NOW)
    status = write.status
    runs = status["job_runs"]
    assert runs["runs"] == MIN_RUNS + 1 and runs["clean_runs"] == MIN_RUNS
    assert runs["failed_runs"] == 1 and runs["oom_killed_runs"] == 0
    (skipped,) = runs["skipped"]
    assert skipped["job"] == job.name and skipped["reason"] == "DeadlineExceeded"
    assert skipped["end"] == format_timestamp(NOW - 3 * 3600)
    assert _request(status, "memory") == math.ceil(2 * GIB * (1 + RUN_MARGIN) / MIB) * MIB
    remembered = _target()
    remembered.status = type(remembered.status).model_validate({"job_runs": runs})
    (again,) = plan_suggestions(_snapshot(remembered), history, NOW + 60)
    assert again.status["job_runs"]["skipped"] == [skipped]
    assert _request(again.status, "memory") == _request(status, "memory")
    # Without the record the spike is a peak: the skip is what keeps it out.
    (blind,) = plan_suggestions(_snapshot(_target()), history, NOW)
    assert _request(blind.status, "memory") > 6 * GIB


def test_a_cronjob_whose_runs_all_failed_says_what_it_assumed_and_an_eviction_is_named() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, 2, memory=2 * GIB)
    jobs = (_failed_job(0, 2, "BackoffLimitExceeded"), _failed_job(1, 2, "BackoffLimitExceeded"))
    evicted = Pod(
        "batch",
        f"{jobs[1].name}-x",
        owner=OwnerRef("Job", jobs[1].name),
        phase="Failed",
        conditions=[PodCondition("DisruptionTarget", "True", "EvictionByEvictionAPI")],
    )
    (write,) = plan_suggestions(_snapshot(_target(), jobs=jobs, pods=(evicted,)), history, NOW)
    runs = write.status["job_runs"]
    assert runs["clean_runs"] == 0 and runs["failed_runs"] == 2
    assert runs["note"] == (
        "no run completed cleanly: 2 failed (BackoffLimitExceeded; "
        "BackoffLimitExceeded, after an eviction (EvictionByEvictionAPI))"
    )
    assert sorted(runs["assumed"]) == [
        "report: cpu kept at its current 2 cores",
        "report: memory kept at its current 4096Mi",
    ]
    # Nothing measured is presented as a need: autonomous mode publishes nothing, the
    # pods keep the template's requests.
    assert "vertical_suggestion" not in write.status


def test_skipped_entries_that_do_not_read_are_dropped_and_old_ones_forgotten() -> None:
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS)
    target = _target()
    target.status = type(target.status).model_validate(
        {
            "job_runs": {
                "skipped": [
                    {"job": "report-1", "end": "yesterday", "reason": "DeadlineExceeded"},
                    "not an entry",
                    {"job": "report-2", "end": format_timestamp(NOW - 60 * DAY), "reason": "x"},
                    {"job": "report-3", "end": format_timestamp(NOW - 3 * 3600)},
                ]
            }
        }
    )
    (write,) = plan_suggestions(_snapshot(target), history, NOW)
    assert write.status["job_runs"]["skipped"] == [
        {"job": "report-3", "end": format_timestamp(NOW - 3 * 3600), "reason": "failed"}
    ]
    assert write.status["job_runs"]["clean_runs"] == MIN_RUNS - 1


def _live_run(history: UsageHistory, memory: float) -> None:
    """A run in progress for the last 30 minutes, its memory now at `memory`."""
    samples = [
        Sample(NOW - 1800 + i * 60, "batch", "report", "report-live-x", "report", 1.0, m)
        for i, m in enumerate([memory / 2] * 30 + [memory])
    ]
    HistorySink(history).add_samples(samples)


def test_a_run_in_progress_near_its_request_is_raised_before_a_kill() -> None:
    # Three nights at a 2Gi peak: 2.2Gi asked. Tonight's run is at 2.1Gi, past 95% of
    # it (a night bigger than the week's, past the margin): raised by OOM_FACTOR now,
    # before the kill at 2.2Gi; at 2Gi it is left as it is.
    asked = 2 * GIB * (1 + RUN_MARGIN)
    near = UsageHistory(step=60.0)
    _nightly(near, MIN_RUNS)
    _live_run(near, 2.1 * GIB)
    status = _status(near, _target())
    assert _request(status, "memory") == math.ceil(asked * OOM_FACTOR / MIB) * MIB
    assert "run_in_progress" in _steps(status)
    assert status["job_runs"]["in_progress"] is True
    assert _request(status, "cpu") == 1100  # memory only
    below = UsageHistory(step=60.0)
    _nightly(below, MIN_RUNS)
    _live_run(below, 2 * GIB)
    status = _status(below, _target())
    assert _request(status, "memory") == math.ceil(asked / MIB) * MIB
    assert "run_in_progress" not in _steps(status)


def test_a_run_in_progress_before_enough_runs_publishes_no_raise() -> None:
    # Before MIN_RUNS the pods run at the template's 4Gi: a run near the runs' figure is
    # no reason to publish one (an OOM kill's raise is; `test_an_oom_killed_run...`).
    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS - 1)
    _live_run(history, 2.1 * GIB)
    status = _status(history, _target())
    assert status["hasEnoughDataToScale"] is False
    assert "vertical_suggestion" not in status


def test_a_run_in_progress_makes_the_runs_suggestion_due_every_pass() -> None:
    # A pod of a Job of the CronJob Pending or Running is a run in progress: the pass
    # recomputes the runs' suggestion each time (`rounds.plan_rounds`), not at the
    # 15-minute cadence a climbing run outpaces. A finished run's pod (Succeeded,
    # Failed, terminating) or none is not.
    from dataclasses import replace

    from foresize.core.recommend.rounds import run_in_progress

    target = _target()
    assert not run_in_progress(_snapshot(target), target)  # a Job, no pod
    job = OwnerRef("Job", "report-29666666")
    for phase, running in (("Pending", True), ("Running", True), ("Succeeded", False)):
        pod = Pod("batch", f"report-{phase}", owner=job, phase=phase)
        assert run_in_progress(_snapshot(target, pods=(pod,)), target) is running
    gone = replace(Pod("batch", "report-x", owner=job, phase="Running"), deletion_time=NOW)
    assert not run_in_progress(_snapshot(target, pods=(gone,)), target)
    other = parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "batch", "uid": "t-web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}},
        }
    )
    running = Pod("batch", "report-y", owner=job, phase="Running")
    assert not run_in_progress(_snapshot(target, pods=(running,)), other)


def test_a_run_in_progress_is_checked_each_pass_but_written_only_when_it_changes() -> None:
    # The pass checks a running run every time; while its request holds, the status is
    # not written again (it was once a pass, for nothing but its times); once the run
    # nears its request the raise is written.
    from foresize.core.cluster.actions import WriteTargetStatus
    from foresize.core.reconcile import ReconcileState, plan_pass

    history = UsageHistory(step=60.0)
    _nightly(history, MIN_RUNS)
    _live_run(history, 2 * GIB)
    pod = Pod("batch", "report-live-x", owner=OwnerRef("Job", "report-29666666"), phase="Running")

    def runs_writes(target: Any, now: float, state: ReconcileState) -> tuple[list[dict], Any]:
        plan = plan_pass(_snapshot(target, now, pods=(pod,)), now, state, history)
        writes = [
            a.status
            for a in plan.actions
            if isinstance(a, WriteTargetStatus) and a.name == "report" and "job_runs" in a.status
        ]
        return writes, plan.state

    target = _target()
    (first,), state = runs_writes(target, NOW, ReconcileState())
    published = parse_target({**target.model_dump(mode="json", by_alias=True), "status": first})
    later, state = runs_writes(published, NOW + 60, state)
    assert later == []
    HistorySink(history).add_samples(
        [Sample(NOW + 90, "batch", "report", "report-live-x", "report", 1.0, 2.1 * GIB)]
    )
    (raised,), _ = runs_writes(published, NOW + 120, state)
    assert _request(raised, "memory") > _request(first, "memory")
