"""When a target's recommendation round is due: once in each of its slots, and at once
after an OOM kill of its workload or, for a run in progress, at every pass (`plan_rounds`).

A target's slots are `offset + k * cadence` (k = ..., -1, 0, 1, ...), its offset a stable
hash of its key. A round is due once the pass is past the first slot after the target's
last round. Without the offset every target of one cadence stays in step from the pass
that first saw them all, and every one is due in the same pass: a round of the whole fleet
at once, its histories on the model grid in memory together (at 10k pods, 21.8 KiB a pod
over the cache, issue 26). With it, the rounds of N targets spread evenly over the cadence
and a pass at interval i recommends about N * i / cadence of them, while each target still
gets one round a cadence.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import MutableMapping

from foresize.core.api.access import JSONValue
from foresize.core.api.access import first as get
from foresize.core.api.jobs import CRONJOB, JOB_GROUP
from foresize.core.cluster.actions import Action, EmitEvent
from foresize.core.cluster.in_place_gate import target_key
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import target_view
from foresize.core.history import OOM, HistoryReader, HistoryWorkload, history_kinds
from foresize.core.recommend.histories import MODEL_STEP
from foresize.core.recommend.runs import is_run_of
from foresize.core.recommend.suggestions import SuggestionState, cadence_of, plan_suggestions

_HASH_SPAN = float(2**64)


def round_offset(key: str, cadence: float) -> float:
    """Where in each cadence the target's rounds fall, in [0, cadence): the same in every
    process, replica and run (a hash of the key, not Python's salted `hash`), so a restart
    or a handover keeps the target's place. On the model grid (`MODEL_STEP`) when the
    cadence spans more than one step: the forecast's decisions are on that grid, and with
    rounds between two of its steps the simulator's 15-minute 2,000m daily spike was met
    at 1,614m (tests/shells/sim/test_daily_spike_sim.py). The price: a 15-minute cadence
    has three places, so a pass recommends up to a third of the fleet, not a thirtieth."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    offset = int.from_bytes(digest, "big") / _HASH_SPAN * cadence
    if cadence >= 2 * MODEL_STEP:
        offset = math.floor(offset / MODEL_STEP) * MODEL_STEP
    return offset


def round_due(key: str, last: float | None, now: float, cadence: float) -> bool:
    """Whether `key`'s round is due at `now`: it has had none (`last` None), or a slot of
    its own lies in (last, now]. A first round comes at once (a new target is not kept
    waiting for its slot); the next at its first slot after it, then one a cadence."""
    if last is None or cadence <= 0:
        return True
    offset = round_offset(key, cadence)
    return math.floor((now - offset) / cadence) > math.floor((last - offset) / cadence)


def last_slot(key: str, now: float, cadence: float) -> float:
    """The latest of `key`'s slots at or before `now` (`now` itself for no cadence): when
    a process that kept the cadence last recommended the target."""
    if cadence <= 0:
        return now
    offset = round_offset(key, cadence)
    return offset + math.floor((now - offset) / cadence) * cadence


RUNNING_PHASES = ("Pending", "Running")
"""The phases of a run's pod while its run is in progress."""


def plan_rounds(
    snapshot: ClusterSnapshot,
    now: float,
    history: HistoryReader,
    last_round: MutableMapping[str, float],
    suggestions: SuggestionState,
    default_cadence: float,
) -> list[Action]:
    """The pass's recommendation rounds (`suggestions.plan_suggestions`) of the targets
    due, each round's time recorded in `last_round`: a target is due in each slot of its
    cadence (`round_due`), once its history holds an OOM kill newer than its last round
    (the x1.2 OOM floor must not wait), and every pass while a run of it is in progress."""
    # Targets due only because a run of theirs is in progress: checked every pass, their
    # status written only when the suggestion changes (else a running CronJob's status
    # was written every pass for nothing but its times, 30-60 writes a nightly run).
    checked: dict[str, TargetObject] = {}

    def due(target: TargetObject) -> bool:
        key = target_key(target)
        last = last_round.get(key)
        if round_due(key, last, now, cadence_of(target, default_cadence)):
            return True
        assert last is not None  # `round_due` is true without a last round
        if oom_since(snapshot, target, history, last, now):
            return True
        if run_in_progress(snapshot, target):
            checked[key] = target
            return True
        return False

    events: list[EmitEvent] = []
    writes = plan_suggestions(snapshot, history, now, due, suggestions, events)
    kept: list[Action] = []
    for write in writes:
        key = f"{write.namespace}/{write.name}"
        if key in checked and _suggestion_uid(write.status) == _suggestion_uid(
            get(checked[key], "status")
        ):
            continue  # the run's request holds: its round keeps its cadence
        # Only a target that got a forecast waits for its next cadence (one whose
        # workload has not been seen yet is tried again on the next pass).
        last_round[key] = now
        kept.append(write)
    return [*kept, *events]


def _suggestion_uid(status: JSONValue) -> object:
    """The content-addressed uid of a status's vertical suggestion (None: it has none)."""
    return get(get(status, "vertical_suggestion"), "uid")


def run_in_progress(snapshot: ClusterSnapshot, target: TargetObject) -> bool:
    """Whether a run of a CronJob or JobGroup target is in progress (a pod of one of its
    Jobs Pending or Running): its runs' suggestion is then due every pass, so that a run
    nearing its request is raised ahead of a kill (`_in_run_raise`) within a pass, not at
    the target's cadence (15 minutes: a climbing run is killed well before). The pods,
    not the Jobs' status: that is read once a Job has one, and a finished run's pods are
    gone or Succeeded/Failed in either shell."""
    try:
        view = target_view(target)
    except (ValueError, TypeError):
        return False
    if view.ref_kind == CRONJOB:
        cronjob = snapshot.workload(CRONJOB, view.namespace, view.ref_name)
        owners = [cronjob] if cronjob is not None else []
    elif view.ref_kind == JOB_GROUP:
        owners = [w for w in snapshot.workloads.values() if is_run_of(w, view)]
    else:
        return False
    return any(
        p.phase in RUNNING_PHASES and not p.terminating for w in owners for p in snapshot.pods_of(w)
    )


def oom_since(
    snapshot: ClusterSnapshot,
    target: TargetObject,
    history: HistoryReader,
    since: float,
    now: float,
) -> bool:
    """Whether the history holds an OOM kill of the target's workload newer than `since`."""
    view = target_view(target)
    if not view.ref_kind:  # a selector target: no one workload
        return False
    workload = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
    if workload is None:
        return False
    own = HistoryWorkload(workload.kind, workload.name)
    kinds = history_kinds(snapshot, view.namespace, own)
    for c in workload.template.containers:
        key = own.key(view.namespace, c.name)
        if any(history.events(key.of_kind(k), OOM, since + 1e-9, now + 1e-9) for k in kinds):
            return True
    return False
