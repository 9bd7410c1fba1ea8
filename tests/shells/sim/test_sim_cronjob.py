"""The simulated CronJob (issue 25 item 3): a Job per schedule, pods that work and complete,
and Foresize sizing each new run at creation through the pod webhook from past runs."""

from __future__ import annotations

from typing import Any

import pytest

from foresize.core.admission.pod import MANAGED_ANNOTATION
from foresize.core.api.quantity import GIB, MIB
from foresize.core.errors import ForesizeError
from foresize.core.recommend.runs import MIN_RUNS
from foresize.shells.sim.operator import ForesizeRecommender, OperatorOptions, SimOperator
from support.sim import container, make_sim, workload

HOUR = 3600.0


def _cronjob(**kw) -> dict:
    fields = {"every": "2h", "first_run": "10m", "run_time": "20m", **kw}
    return workload(
        "report",
        kind="CronJob",
        containers=[
            container(
                "report",
                req={"cpu": "2", "memory": "4Gi"},
                lim={"memory": "4Gi"},
                cpu="500m",
                memory="1Gi",
            )
        ],
        **fields,
    )


def _job_pods(sim) -> list:
    return sorted(
        (p for p in sim.pods.values() if p.owner is not None and p.owner.kind == "Job"),
        key=lambda p: p.creation_time,
    )


def test_a_cronjob_creates_a_job_per_run_whose_pods_complete() -> None:
    sim = make_sim([_cronjob()], settle=0)
    sim.run(4 * 2 * HOUR + 15 * 60)  # five minutes into the fifth run
    jobs = sorted(k for k, w in sim.workloads.items() if w.kind == "Job")
    # Five runs, the last three Jobs kept (successfulJobsHistoryLimit), named by the
    # scheduled minute and owned by the CronJob.
    assert len(sim.events.query("JobCreated")) == 5
    assert jobs == [f"Job/default/report-{int(m):08d}" for m in (250, 370, 490)]
    for key in jobs:
        owner = sim.workloads[key].owner
        assert owner is not None and (owner.kind, owner.name) == ("CronJob", "report")
    (running,) = _job_pods(sim)
    assert running.owner.name == "report-00000490" and running.phase == "Running"
    assert running.labels["batch.kubernetes.io/job-name"] == "report-00000490"
    assert running.restart_policy == "OnFailure"
    assert sim.pods_of("CronJob", "default", "report") == [running]
    sim.run(20 * 60)
    done = sim.events.query("PodFinished")
    assert len(done) == 5 and {e.reason for e in done} == {"Completed"}


def test_a_run_still_active_when_the_schedule_fires_is_skipped() -> None:
    sim = make_sim([_cronjob(run_time="3h")], settle=0)
    sim.run(3 * HOUR)
    assert len(sim.events.query("JobCreated")) == 1
    assert len(sim.events.query("JobSkipped")) == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"every": None}, r"workloads\[0\]\.every: a CronJob needs its schedule's period"),
        ({"kind": "Deployment"}, r"workloads\[0\]\.first_run: only a CronJob has a first_run"),
    ],
)
def test_bad_cronjob_fields_are_named(change, field) -> None:
    w = _cronjob()
    for k, v in change.items():
        if v is None:
            w.pop(k)
        else:
            w[k] = v
    with pytest.raises(ForesizeError, match=field):
        make_sim([w], settle=0)


def test_foresize_sizes_the_next_runs_at_creation_from_past_peaks() -> None:
    sim = make_sim([_cronjob()], settle=0, memory="16Gi", cpu="8")
    opts = OperatorOptions(loop_interval=60.0, kinds=("CronJob",))
    SimOperator(sim, ForesizeRecommender(), opts).install()
    seen: dict[str, object] = {}  # every run's pod as it ran (finished pods are collected)

    def capture(_sim, _now) -> None:
        for p in _job_pods(sim):
            seen.setdefault(p.owner.name, p)

    sim.every(60.0, capture)
    sim.run((MIN_RUNS + 2) * 2 * HOUR)
    pods = [seen[k] for k in sorted(seen)]
    assert len(pods) == MIN_RUNS + 2
    first, last = pods[0], pods[-1]
    assert first.containers[0].resources.requests == {"cpu": 2000, "memory": 4 * GIB}
    assert MANAGED_ANNOTATION not in first.annotations
    # Sized by the webhook when created: the runs' peak (500m, 1Gi) + 10%.
    assert last.annotations.get(MANAGED_ANNOTATION) == "true"
    requests = last.containers[0].resources.requests
    assert requests["cpu"] == 550
    assert 1 * GIB < requests["memory"] <= 1.1 * GIB + MIB
    # Never resized in place nor evicted: a running job is left to finish.
    assert not sim.events.query("Evicted")
    assert not sim.events.query("ResizeApplied")
    assert sim.events.count("OOMKilled") == 0
    target = next(t for t in sim.targets if t.metadata.name == "report")
    assert target.status.hasEnoughDataToScale is True
    runs = target.status.model_extra["job_runs"]
    assert runs["clean_runs"] >= MIN_RUNS


def test_foresize_sizes_the_runs_of_a_bare_job_group_from_past_peaks() -> None:
    """Two bare Jobs labelled `foresize.io/job-group: etl` (no CronJob): one target for the
    group, one history for both, and each new run sized at creation from past runs."""
    from foresize.core.cluster.jobs import JOB_GROUP_LABEL

    def bare(name: str) -> dict:
        spec = _cronjob(every="2h", run_time="20m", labels={JOB_GROUP_LABEL: "etl"})
        spec.pop("first_run")
        return {**spec, "kind": "Job", "name": name}

    sim = make_sim([bare("etl-a"), bare("etl-b")], settle=0, memory="16Gi", cpu="8")
    opts = OperatorOptions(loop_interval=60.0, kinds=("JobGroup",))
    operator = SimOperator(sim, ForesizeRecommender(), opts).install()
    assert list(operator.targets) == ["default/etl"]
    seen: dict[tuple[str, float], object] = {}

    def capture(_sim, _now) -> None:
        for p in _job_pods(sim):
            seen.setdefault((p.owner.name, p.creation_time), p)

    sim.every(60.0, capture)
    sim.run((MIN_RUNS + 2) * 2 * HOUR)
    pods = [seen[k] for k in sorted(seen, key=lambda k: k[1])]
    assert pods[0].containers[0].resources.requests == {"cpu": 2000, "memory": 4 * GIB}
    last = pods[-1]
    assert last.annotations.get(MANAGED_ANNOTATION) == "true"
    assert last.containers[0].resources.requests["cpu"] == 550  # the runs' 500m peak + 10%
    assert not sim.events.query("Evicted") and not sim.events.query("ResizeApplied")
    (target,) = sim.targets
    assert target.spec.scaleTargetRef.kind == "JobGroup"
    assert target.status.hasEnoughDataToScale is True
    assert target.status.model_extra["job_runs"]["clean_runs"] >= MIN_RUNS


def _run_over_its_limit(needs: str) -> Any:
    """A CronJob's 30-minute run asked 500m and 1Gi (limit 1Gi) that needs `needs` of
    memory, under Foresize's operator passing every 60 s."""
    job = _cronjob(run_time="30m")
    job["containers"][0].update(requests={"cpu": "500m", "memory": "1Gi"}, limits={"memory": "1Gi"})
    job["containers"][0]["usage"]["memory"] = needs
    sim = make_sim([job], settle=0, memory="16Gi", cpu="8")
    opts = OperatorOptions(loop_interval=60.0, kinds=("CronJob",))
    SimOperator(sim, ForesizeRecommender(), opts).install()
    return sim


def test_a_run_killed_for_memory_is_raised_in_place_and_finishes() -> None:
    """A run that needs more memory than its limit: the OOM kill raises the runs'
    suggestion, and the running pod (restarting in place, `OnFailure`) gets the raise in
    place at the next pass instead of being killed at the same limit until its Job
    fails. Memory only, never an eviction."""
    sim = _run_over_its_limit("1300Mi")
    seen: list = []
    sim.every(60.0, lambda _s, _n: seen.extend(_job_pods(sim)))
    sim.run(50 * 60)  # the first run (from 10m, 30 minutes of work) and a margin
    kills = sim.events.query("OOMKilled")
    (pod,) = {e.object for e in kills}
    resizes = sim.events.query("ResizeApplied")
    assert resizes and {e.object for e in resizes} == {pod}
    # The raise compounds (x1.2 of the limit killed at) until it covers the 1300Mi the
    # run needs; no kill after it lands (at the same limit it is killed to the end).
    assert max(e.time for e in kills) <= max(e.time for e in resizes)
    last = seen[-1].containers[0].resources
    assert last.limits["memory"] >= 1300 * MIB and last.requests["cpu"] == 500
    assert not sim.events.query("Evicted")
    done = sim.events.query("PodFinished")
    assert [(e.object, e.reason) for e in done] == [(pod, "Completed")]


def test_a_runs_oom_kill_brings_the_pass_forward_so_the_raise_lands_before_the_restart() -> None:
    """The kubelet restarts a killed run's container after 10 s, sooner than the next
    pass (60 s here): the kill brings a pass forward (the pod watch, `OOM_WATCH_DELAY`),
    whose in-place raise lands before the restart, so the run is killed once, not again
    at the same limit. A run needing 1100Mi at a 1Gi limit: one kill, raised to 1.2Gi."""
    sim = _run_over_its_limit("1100Mi")
    sim.run(50 * 60)
    (kill,) = sim.events.query("OOMKilled")
    (resize,) = sim.events.query("ResizeApplied")
    assert resize.object == kill.object
    assert resize.time < kill.time + kill.details["backoff_seconds"]
    assert resize.details["containers"]["report"]["to"]["limits"]["memory"] >= 1100 * MIB
    done = sim.events.query("PodFinished")
    assert [(e.object, e.reason) for e in done] == [(kill.object, "Completed")]


def test_a_run_bigger_than_the_weeks_is_raised_in_place_before_it_is_killed(tmp_path) -> None:
    """Three runs at a 1000Mi peak size the fourth at 1100Mi; the fourth climbs from 600Mi
    to 1150Mi over its 20 minutes (a bigger night than any before). Its runs' suggestion
    is due every pass while it runs (`recommend.rounds.run_in_progress`); at 95% of its
    request it is raised in place by 1.2 (`_in_run_raise`, `decide_initial`), minutes
    before the kill it was heading for: no OOM kill, and the run completes."""
    from foresize.shells.sim.cluster import SimCluster
    from foresize.shells.sim.scenario import parse_scenario

    every, first, run_time = 3600, 600, 1200
    rows = ["ts,value"]
    for t in range(0, first + 4 * every, 60):
        run, age = divmod(t - first, every)
        inside = t >= first and age <= run_time + 120
        if not inside:
            value = 0.0
        elif run < 3:
            value = 1000.0
        else:
            value = 600.0 + 550.0 * min(age, run_time) / run_time
        rows.append(f"{t},{value * MIB:.0f}")
    (tmp_path / "memory.csv").write_text("\n".join(rows) + "\n")
    job = _cronjob(every="1h", first_run="10m", run_time="20m")
    job["containers"][0].update(requests={"cpu": "500m", "memory": "2Gi"}, limits={"memory": "2Gi"})
    job["containers"][0]["usage"]["memory"] = {
        "generator": "trace",
        "file": "memory.csv",
        "step": "60s",
    }
    data = {"name": "t", "nodes": [{"name": "n", "cpu": "8", "memory": "16Gi"}], "workloads": [job]}
    sim = SimCluster(parse_scenario(data, "<test>", base_dir=tmp_path), seed=1, step=60.0)
    opts = OperatorOptions(loop_interval=60.0, kinds=("CronJob",))
    SimOperator(sim, ForesizeRecommender(), opts).install()
    sim.run(first + 3 * every + run_time + 300)
    pods = _job_pods(sim)
    fourth = pods[-1]
    asked = fourth.containers[0].resources  # as admitted, before the raise
    assert not sim.events.query("OOMKilled")
    (resize,) = sim.events.query("ResizeApplied")
    assert resize.object == f"Pod/default/{fourth.name}"
    moved = resize.details["containers"]["report"]
    assert moved["from"]["limits"]["memory"] == 1100 * MIB  # as admitted: 1000Mi + 10%
    to = moved["to"]
    assert to["limits"]["memory"] >= 1150 * MIB and to["requests"]["cpu"] == asked.requests["cpu"]
    done = sim.events.query("PodFinished", object=resize.object)
    assert [e.reason for e in done] == ["Completed"]
