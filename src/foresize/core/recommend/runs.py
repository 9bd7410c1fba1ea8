"""A CronJob's recommendation, learned across its runs (issue 25 item 3).

Each run of a CronJob is a new Job with new pods and no history of its own; the runs of
one CronJob share one history (`cluster.jobs`, `history.workload_of_pod`). What sizes a
run is its *peak*: a job that needs 3Gi for five minutes of an hour is killed at 2Gi,
whatever its average. So the forecasting pipeline (a forecast of the maximum over the
next 15 minutes on a continuous series) is not used: the history is cut into runs and
each container's request is the highest peak of its recent runs plus a margin.

The rule, per container and resource the template declares:

- Runs are the spans of the 5-minute grid with samples, separated by `RUN_GAP` empty
  columns; a span that reaches `now` is the run in progress (its peak is not known yet)
  and is not counted. An OOM kill belongs to the run it fell in, or is a run of its own
  (a pod killed before its first sample).
- A *clean* run finished without an OOM kill: its peak is its need. The request is the
  highest peak of the last `RUNS_CONSIDERED` clean runs x (1 + `RUN_MARGIN`).
- A run OOM-killed after the last clean run raises memory to `OOM_FACTOR` x the memory
  it was killed at (architecture §3.1's factor): the next run gets it, before
  `MIN_RUNS` (remediation does not wait), and it compounds while runs keep being killed.
- Bounds (`spec.vertical.containers[].<resource>.lowerbound/upperbound`) clamp it;
  limits keep the template's limit/request ratio (so the QoS class is kept), CPU is
  rounded up to 1m and memory to 1Mi.
- A run whose Job failed for another reason (its Failed condition: BackoffLimitExceeded,
  DeadlineExceeded, PodFailurePolicy, ...; "after an eviction" where a pod of it carried
  a DisruptionTarget condition) is not clean either: it did not finish, so its peak is
  not a finished run's need. It is skipped, not counted, and `status.job_runs.skipped`
  names the Job, when it ran and why. The CronJob controller keeps one failed Job
  (`failedJobsHistoryLimit`), so what the runs learned of failures is kept in that status
  field and read back each pass (the history has no Job outcomes).
- No clean run (every run was killed or failed, or none finished yet): nothing measured is
  presented as a need. Memory is the OOM raise where runs were killed, CPU keeps its
  current request, and `status.job_runs.assumed` says so; with no run at all there is no
  suggestion.

`hasEnoughDataToScale` is `MIN_RUNS` clean runs. The vertical worker never evicts a
CronJob's pods (`api.jobs`: update mode `initial`): the pod webhook applies the
suggestion when the next run's pods are created. The one in-place change is a memory raise of
a run in progress (`vertical.modes.decide_initial`): after an OOM kill (the kill raises
the suggestion and brings the pass forward, `vertical.modes.new_run_oom_kill`), or before
one, where the run's memory reaches `NEAR_REQUEST` of its request (`_in_run_raise`; the
runs' suggestion is due every pass while a run is in progress, `rounds.run_in_progress`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from foresize.core.api.access import first as get
from foresize.core.api.fields import format_timestamp, parse_timestamp
from foresize.core.api.jobs import CRONJOB, JOB_GROUP
from foresize.core.api.quantity import CPU, MEMORY, MIB, format_resource_map
from foresize.core.cluster.actions import WriteTargetStatus
from foresize.core.cluster.jobs import JOB, history_workload, job_group_of
from foresize.core.cluster.model import DISRUPTION_TARGET, Container, Workload
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.cluster.target_fields import suggestion_from
from foresize.core.history import HistoryReader, HistoryWorkload, history_kinds
from foresize.core.recommend.explain import Explanation, amount, status_entries
from foresize.core.recommend.histories import MODEL_STEP, TO_CANONICAL, ContainerHistory
from foresize.core.recommend.oom import OOM_FACTOR

if TYPE_CHECKING:
    from foresize.core.recommend.suggestions import SuggestionState

RUN_GAP = 2
"""Empty 5-minute columns (10 minutes) that end a run: a container restarting after an
OOM kill is back within its back-off (10 s doubling, 5 minutes at most), so it stays in
its run; runs of a CronJob scheduled more often than every 10 minutes merge, which only
makes their peak the higher of theirs."""
MIN_RUNS = 3
"""Clean runs before the recommendation acts (`hasEnoughDataToScale`): one run does not
show how much its peak moves from run to run; three do (the fourth run is sized)."""
RUNS_CONSIDERED = 7
"""The peaks of the last 7 clean runs (a week of a nightly job): old enough runs stop
counting, so a job whose input shrank is sized down within a week."""
MAX_SKIPPED = 14
"""Failed Jobs remembered in `status.job_runs.skipped` (two weeks of a nightly job; the
oldest go first, and none older than the history window)."""
RUN_MARGIN = 0.10
"""10% above the highest recent peak: a run's peak moves with its input from night to
night; the margin covers that movement (a peak 10% above the week's highest is an OOM
kill, which then raises the next run by `OOM_FACTOR`)."""

NEAR_REQUEST = 0.95
"""A run in progress whose memory reaches 95% of the memory asked is raised in place
before it is killed (`_in_run_raise`): a night bigger than any of the week's, past the
margin. The kill comes at the limit (at or above the request), so this is early where the
limit is above the request; a run above its request is also the first evicted under
node memory pressure. 5% of a nightly job's climb to its peak (30 minutes from 30% to its
peak in `bench runtimes`) is about 2 minutes: two passes at 60 s, with the history's
sample a minute late."""


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a container as its history shows it (canonical units: millicores,
    bytes; NaN: no sample of that resource)."""

    start: float
    end: float
    cpu_peak: float
    memory_peak: float
    oom_kills: int = 0
    oom_usage: float = math.nan  # the highest memory a kill of this run happened at
    in_progress: bool = False
    failed: str = ""  # its Job failed: why (`FailedJob.reason`)

    @property
    def clean(self) -> bool:
        return self.oom_kills == 0 and not self.in_progress and not self.failed

    def peak(self, resource: str) -> float:
        return self.cpu_peak if resource == CPU else self.memory_peak


@dataclass(frozen=True, slots=True)
class FailedJob:
    """A run of the CronJob whose Job failed (not by an OOM kill alone): its name, when it
    ran (`start` None: not known) and why."""

    job: str
    start: float | None
    end: float
    reason: str

    def entry(self) -> dict[str, object]:
        out: dict[str, object] = {"job": self.job, "end": format_timestamp(self.end)}
        if self.start is not None:
            out["start"] = format_timestamp(self.start)
        out["reason"] = self.reason
        return out


def failed_jobs(
    snapshot: ClusterSnapshot, view: TargetView, status: object, now: float, window: float
) -> list[FailedJob]:
    """The CronJob's failed runs: its Jobs in the snapshot whose Failed condition holds,
    and those the target's `status.job_runs.skipped` remembers (entries that do not read
    are dropped), newest `MAX_SKIPPED` within `window` of `now`, oldest first."""
    found: dict[str, FailedJob] = {}
    for entry in get(get(status, "job_runs"), "skipped", default=()) or ():
        try:
            start = get(entry, "start")
            found[str(get(entry, "job"))] = FailedJob(
                str(get(entry, "job")),
                parse_timestamp(start) if start else None,
                parse_timestamp(get(entry, "end")),
                str(get(entry, "reason", default="") or "failed"),
            )
        except (ValueError, TypeError, AttributeError):
            continue
    for w in snapshot.workloads.values():
        if (
            not is_run_of(w, view)
            or w.job is None
            or w.job.outcome != "Failed"
            or w.job.end is None
        ):
            continue
        reason = w.job.reason or "Failed"
        evicted = _evicted(snapshot, w.namespace, w.name)
        if evicted:
            reason += f", after an eviction ({evicted})"
        found[w.name] = FailedJob(w.name, w.job.start, w.job.end, reason)
    kept = sorted((f for f in found.values() if f.end >= now - window), key=lambda f: f.end)
    return kept[-MAX_SKIPPED:]


def is_run_of(w: Workload, view: TargetView) -> bool:
    """Whether Job `w` is a run of the target's CronJob (its owner), or of its job group
    (a bare Job whose pod template carries the group label, `cluster.jobs`)."""
    if w.kind != JOB or w.namespace != view.namespace:
        return False
    if view.ref_kind == JOB_GROUP:
        return w.owner is None and job_group_of(w.template.labels) == view.ref_name
    return w.owner is not None and (w.owner.kind, w.owner.name) == (CRONJOB, view.ref_name)


def runs_template(
    snapshot: ClusterSnapshot, view: TargetView
) -> tuple[HistoryWorkload, Workload | None]:
    """(the history workload, the workload whose template the runs' pods are made from) of
    a CronJob or JobGroup target: a group's template is its newest Job's (None: no Job of
    the group in the snapshot)."""
    if view.ref_kind != JOB_GROUP:
        cronjob = snapshot.workload(CRONJOB, view.namespace, view.ref_name)
        return HistoryWorkload(CRONJOB, view.ref_name), cronjob
    jobs = [w for w in snapshot.workloads.values() if is_run_of(w, view)]
    newest = max(
        jobs,
        key=lambda w: (w.job.start or 0.0 if w.job is not None else 0.0, w.name),
        default=None,
    )
    return HistoryWorkload(JOB_GROUP, history_workload(view.ref_name)), newest


def _evicted(snapshot: ClusterSnapshot, namespace: str, job: str) -> str:
    """The DisruptionTarget reason of a pod of Job `job` ("": none was evicted)."""
    for pod in snapshot.pods:
        owner = pod.owner
        if owner is None or (owner.kind, owner.name, pod.namespace) != (JOB, job, namespace):
            continue
        cond = pod.condition(DISRUPTION_TARGET)
        if cond is not None and cond.status == "True":
            return cond.reason or "DisruptionTarget"
    return ""


def _spans(have: np.ndarray) -> list[tuple[int, int]]:
    """[first, last] columns of the runs of True separated by at least RUN_GAP False."""
    cols = np.flatnonzero(have)
    if cols.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(cols) > RUN_GAP)
    starts = np.concatenate([[cols[0]], cols[breaks + 1]])
    ends = np.concatenate([cols[breaks], [cols[-1]]])
    return [(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]


def runs_of(
    history: ContainerHistory,
    now: float,
    step: float = MODEL_STEP,
    failed: Sequence[FailedJob] = (),
) -> list[Run]:
    """The container's runs, oldest first; a run that overlaps a failed Job (`failed`,
    within a grid step) is that Job's failure."""
    cpu = np.asarray(history.cpu, dtype=float) * TO_CANONICAL[CPU]
    mem = np.asarray(history.memory, dtype=float) * TO_CANONICAL[MEMORY]
    n = max(len(cpu), len(mem))
    cpu = np.concatenate([np.full(n - len(cpu), np.nan), cpu])
    mem = np.concatenate([np.full(n - len(mem), np.nan), mem])
    have = np.isfinite(cpu) | np.isfinite(mem)

    def at(col: int) -> float:
        return now - (n - 1 - col) * step

    runs: list[dict[str, float]] = []
    for a, b in _spans(have):
        with np.errstate(all="ignore"):
            c = float(np.nanmax(cpu[a : b + 1])) if np.isfinite(cpu[a : b + 1]).any() else math.nan
            m = float(np.nanmax(mem[a : b + 1])) if np.isfinite(mem[a : b + 1]).any() else math.nan
        runs.append(
            {"start": at(a) - step, "end": at(b), "cpu": c, "mem": m, "kills": 0, "usage": math.nan}
        )
    usages = list(history.oom_usage) + [math.nan] * len(history.oom_times)
    for t, usage in zip(history.oom_times, usages, strict=False):
        home = next((r for r in runs if r["start"] - step <= t <= r["end"] + step), None)
        if home is None:  # killed before its first sample: a run of its own
            home = {"start": t, "end": t, "cpu": math.nan, "mem": math.nan, "kills": 0}
            home["usage"] = math.nan
            runs.append(home)
        home["kills"] += 1
        if math.isfinite(usage):
            home["usage"] = usage if not math.isfinite(home["usage"]) else max(home["usage"], usage)
    runs.sort(key=lambda r: r["start"])
    out = []
    for r in runs:
        running = r["end"] >= now - RUN_GAP * step
        why = next(
            (
                f.reason
                for f in failed
                if (f.start if f.start is not None else f.end) <= r["end"] + step
                and f.end >= r["start"] - step
            ),
            "",
        )
        out.append(
            Run(r["start"], r["end"], r["cpu"], r["mem"], int(r["kills"]), r["usage"], running, why)
        )
    return out


@dataclass(slots=True)
class ContainerRuns:
    """One container's recommendation from its runs."""

    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    explanation: Explanation = field(default_factory=Explanation)
    runs: list[Run] = field(default_factory=list)
    clean: int = 0
    oom_killed: int = 0
    failed: int = 0  # runs whose Job failed, not OOM-killed
    raised: bool = False  # an OOM kill since the last clean run raised memory
    assumed: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        history: ContainerHistory,
        now: float,
        step: float = MODEL_STEP,
        failed: Sequence[FailedJob] = (),
    ) -> ContainerRuns:
        """The runs of a container's history, counted, before any request is made."""
        runs = runs_of(history, now, step, failed)
        return cls(
            runs=runs,
            clean=sum(1 for r in runs if r.clean),
            oom_killed=sum(1 for r in runs if r.oom_kills),
            failed=sum(1 for r in runs if r.failed and not r.oom_kills),
        )


def _oom_need(runs: list[Run], current_limit: int | None) -> tuple[float, int] | None:
    """(memory need, kills) from the runs OOM-killed since the last clean run (None: none)."""
    last_clean = max((r.end for r in runs if r.clean), default=-math.inf)
    killed = [r for r in runs if r.oom_kills and r.start >= last_clean]
    if not killed:
        return None
    at = [r.oom_usage for r in killed if math.isfinite(r.oom_usage)]
    hit = max(at) if at else float(current_limit or 0)
    if hit <= 0:
        return None
    return hit * OOM_FACTOR, sum(r.oom_kills for r in killed)


def _in_run_raise(out: ContainerRuns, value: float) -> float:
    """`value` (memory) raised ahead of a kill where the run in progress has come within
    `NEAR_REQUEST` of it: by `OOM_FACTOR`, as a kill would raise it, compounding until the
    run's memory so far is below `NEAR_REQUEST` of it again (steps, not the usage itself,
    so a climbing run is resized once or twice, not every pass)."""
    live = out.runs[-1] if out.runs and out.runs[-1].in_progress else None
    if live is None or not math.isfinite(live.memory_peak) or value <= 0:
        return value
    raised = value
    while live.memory_peak >= NEAR_REQUEST * raised:
        raised *= OOM_FACTOR
    if raised == value:
        return value
    # Not `out.raised`: before `MIN_RUNS` the pods run at the template's request, which
    # this is no raise of (an OOM kill's raise is published at once; this is not).
    return out.explanation.moved(
        "run_in_progress",
        MEMORY,
        value,
        raised,
        f"the run in progress is at {amount(MEMORY, live.memory_peak)}, within "
        f"{1 - NEAR_REQUEST:.0%} of the request: raised by {OOM_FACTOR:g} before a kill",
    )


def request_from_runs(
    out: ContainerRuns,
    resource: str,
    current: int | None,
    current_limit: int | None,
    bounds: tuple[int | None, int | None] = (None, None),
) -> int | None:
    """THE request of `resource` from a container's runs (`ContainerRuns.of`), each step
    recorded in `out.explanation` and what was assumed in `out.assumed`; None where no
    run finished clean and nothing is in force to keep (`foresize recommend` on history
    without the workload's requests)."""
    ex = out.explanation
    clean = [r for r in out.runs if r.clean][-RUNS_CONSIDERED:]
    peaks = [r.peak(resource) for r in clean if math.isfinite(r.peak(resource))]
    if peaks:
        top = max(peaks)
        ex.step(
            "runs",
            resource,
            top,
            f"the highest peak of the last {len(peaks)} run(s) that finished without an OOM "
            f"kill: {amount(resource, top)}",
        )
        value = ex.moved(
            "margin", resource, top, top * (1 + RUN_MARGIN), f"+{RUN_MARGIN:.0%} above that peak"
        )
    elif current is None:
        return None
    else:
        value = float(current)
        ex.step(
            "current",
            resource,
            value,
            "no run completed cleanly (OOM-killed or failed): the current request is kept "
            "(assumed, not measured)",
        )
        out.assumed.append(f"{resource} kept at its current {amount(resource, current)}")
    if resource == MEMORY:
        need = _oom_need(out.runs, current_limit)
        if need is not None and need[0] > value:
            out.raised = True
            value = ex.moved(
                "oom",
                resource,
                value,
                need[0],
                f"{need[1]} OOM kill(s) since the last clean run: {OOM_FACTOR:g} x the memory "
                "they were killed at",
            )
            if not peaks:
                out.assumed[-1] = (
                    f"memory raised to {amount(MEMORY, value)} from the OOM kills (the need "
                    "is above what the killed runs had, by an amount no run has shown)"
                )
        value = _in_run_raise(out, value)
    lower, upper = bounds
    bounded = min(value, upper) if upper is not None else value
    bounded = max(bounded, lower) if lower is not None else bounded
    if bounded != value:
        value = ex.moved("bounds", resource, value, bounded, "clamped to the container's bounds")
    unit = 1 if resource == CPU else MIB
    rounded = math.ceil(value / unit) * unit
    return int(ex.moved("rounding", resource, value, rounded, "rounded up"))


def recommend_runs(
    container: Container,
    history: ContainerHistory,
    view: TargetView,
    current: dict[str, int],
    now: float,
    failed: Sequence[FailedJob] = (),
) -> ContainerRuns:
    """The container's requests and limits from its runs (`current`: the requests in
    force, what is kept where nothing was measured; `failed`: the CronJob's failed Jobs)."""
    out = ContainerRuns.of(history, now, failed=failed)
    policy = view.policy_for(container.name)
    template = container.resources
    for resource in (CPU, MEMORY):
        if resource not in template.requests:
            continue  # never add a request the template does not declare (QoS)
        rpolicy = policy.for_resource(resource) if policy is not None else None
        bounds = (rpolicy.lower, rpolicy.upper) if rpolicy is not None else (None, None)
        request = request_from_runs(
            out,
            resource,
            current.get(resource, template.requests[resource]),
            template.limits.get(resource),
            bounds,
        )
        assert request is not None  # the template's request is kept where none is measured
        out.requests[resource] = request
        limit = template.limits.get(resource)
        if limit is not None:
            ratio = limit / template.requests[resource] if template.requests[resource] else 1.0
            unit = 1 if resource == CPU else MIB
            out.limits[resource] = max(request, math.ceil(request * ratio / unit) * unit)
    return out


def runs_status(
    view: TargetView,
    containers: list[Container],
    results: dict[str, ContainerRuns],
    now: float,
    failed: Sequence[FailedJob] = (),
) -> dict[str, object]:
    """The target's status patch: `job_runs` (what the runs showed, what was skipped and
    what was assumed), `hasEnoughDataToScale`, and the suggestion with its explanation
    where one is due."""
    names = [c.name for c in containers]
    first = results[names[0]] if names else ContainerRuns()
    observed = [r for r in first.runs if not r.in_progress]
    enough = bool(names) and all(results[n].clean >= MIN_RUNS for n in names)
    assumed = [f"{n}: {a}" for n in names for a in results[n].assumed]
    job_runs: dict[str, object] = {
        "runs": len(observed),
        "clean_runs": first.clean,
        "oom_killed_runs": first.oom_killed,
        "failed_runs": first.failed,
        "in_progress": any(r.in_progress for r in first.runs),
        "containers": [_peaks_entry(n, results[n]) for n in names],
    }
    if failed:  # remembered across passes: the CronJob controller keeps one failed Job
        job_runs["skipped"] = [f.entry() for f in failed]
    if observed:
        job_runs["last_run_end"] = format_timestamp(observed[-1].end)
    if not observed:
        job_runs["note"] = (
            "no finished run in the history window: the pods keep the template's requests"
        )
    elif assumed:
        job_runs["note"] = _no_clean_run(first)
        job_runs["assumed"] = assumed
    elif not enough:
        job_runs["note"] = (
            f"{first.clean} clean run(s) of the {MIN_RUNS} needed to act; the suggestion "
            "is shown, not applied"
        )
    status: dict[str, object] = {"hasEnoughDataToScale": enough, "job_runs": job_runs}
    raised = any(results[n].raised for n in names)
    # As for every target: autonomous mode acts after MIN_RUNS clean runs, or at once on
    # an OOM kill (remediation does not wait); recommendation mode shows what it has.
    if not (observed or raised) or not (enough or raised or view.vertical_mode == "recommendation"):
        return status
    entries = []
    for n in names:
        r = results[n]
        entry: dict[str, object] = {"name": n, "requests": format_resource_map(r.requests)}
        if r.limits:
            entry["limits"] = format_resource_map(r.limits)
        entries.append(entry)
    from foresize.core.recommend.suggestions import entries_uid

    status["vertical_suggestion"] = {
        "uid": entries_uid(entries),
        "containers": entries,
        # A run's request holds until the next run's data: the window is the pass's.
        "forecast_window": {"start": format_timestamp(now), "end": format_timestamp(now)},
        "created_at": format_timestamp(now),
    }
    status["explanation"] = {
        "created_at": format_timestamp(now),
        "containers": status_entries({n: results[n].explanation for n in names}),
    }
    return status


def _no_clean_run(result: ContainerRuns) -> str:
    """What the finished runs were, none of them clean."""
    parts = []
    if result.oom_killed:
        parts.append(f"{result.oom_killed} OOM-killed")
    if result.failed:
        reasons = sorted({r.failed for r in result.runs if r.failed and not r.oom_kills})
        parts.append(f"{result.failed} failed ({'; '.join(reasons)})")
    return "no run completed cleanly" + (f": {', '.join(parts)}" if parts else "")


def _peaks_entry(name: str, result: ContainerRuns) -> dict[str, object]:
    """A container's peaks over the runs the recommendation read (canonical quantities)."""
    clean = [r for r in result.runs if r.clean][-RUNS_CONSIDERED:]
    entry: dict[str, object] = {"name": name}
    for resource, key in ((CPU, "cpu_peaks"), (MEMORY, "memory_peaks")):
        values = [r.peak(resource) for r in clean if math.isfinite(r.peak(resource))]
        if values:
            entry[key] = [amount(resource, v) for v in values]
    return entry


def plan_run_suggestion(
    snapshot: ClusterSnapshot,
    history: HistoryReader,
    now: float,
    target: TargetObject,
    state: SuggestionState,
) -> WriteTargetStatus | None:
    """The status write of a CronJob or JobGroup target from its runs (None: the target
    takes no suggestions, or its CronJob, or no Job of its group, is in the snapshot: the
    suggestion in status is kept)."""
    from foresize.core.recommend.histories import HISTORY_WINDOW, load_histories
    from foresize.core.recommend.suggestions import current_requests

    view = target_view(target)
    if view.vertical_mode not in ("recommendation", "autonomous") or view.deleting:
        return None
    keyed, workload = runs_template(snapshot, view)
    if workload is None or not workload.template.containers:
        return None
    containers = list(workload.template.containers)
    names = [c.name for c in containers]
    kinds = history_kinds(snapshot, view.namespace, keyed)
    histories = load_histories(
        history, view.namespace, keyed.name, names, now, kinds=kinds, window=HISTORY_WINDOW
    )
    current = current_requests(containers, state.latest.get(view.key), target)
    failed = failed_jobs(snapshot, view, get(target, "status"), now, HISTORY_WINDOW)
    results = {
        c.name: recommend_runs(c, histories[c.name], view, current[c.name].requests, now, failed)
        for c in containers
    }
    status = runs_status(view, containers, results, now, failed)
    published = suggestion_from(status.get("vertical_suggestion"))
    if published is not None:
        state.latest[view.key] = published
    return WriteTargetStatus(view.namespace, view.name, status)
