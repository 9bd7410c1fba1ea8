"""Collected history -> each target's `status.vertical_suggestion` (no I/O).

Every forecast interval the shell asks `plan_suggestions` for status writes. For each
AIScaleTarget in recommendation or autonomous mode, the history of its workload's
containers is read with the recommender's `load_histories`, and all due targets go to its
entry point `recommend_batch` together (forecast of the max over the horizon at the mode's
quantile, memory risk allocated across the batch, buffer, bounds, `limit.ratio`, QoS kept,
OOM floor, `hasEnoughDataToScale`), with the resources of the workload's template as the
current values. The OOM and forecast states are carried
between calls by the caller (`SuggestionState`).

What a target is read from: `recommend.sources`; the horizontal planner's input, the
forecast of each workload's total: `recommend.horizontal`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from foresize.core.api.access import get_path
from foresize.core.api.fields import format_timestamp, parse_timestamp
from foresize.core.api.jobs import RUNS_KINDS
from foresize.core.api.model import ModelSpec
from foresize.core.api.quantity import CPU, MEMORY, format_quantity, format_resource_map
from foresize.core.api.target import ACTIVE_POLICY, AIScaleTarget, ShadowPolicy
from foresize.core.cluster.actions import EmitEvent, WriteTargetStatus
from foresize.core.cluster.in_place_gate import target_key
from foresize.core.cluster.model import (
    Container,
    ContainerSuggestion,
    ResourceRequirements,
    Suggestion,
)
from foresize.core.cluster.runtime import HeapCeiling
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.cluster.target_fields import suggestion_from
from foresize.core.errors import ForesizeError
from foresize.core.history import HistoryReader
from foresize.core.recommend.explain import event_line, event_message, status_entries
from foresize.core.recommend.histories import HISTORY_WINDOW
from foresize.core.recommend.sources import (
    HistoryRead,
    history_source,
    merged_histories,
    running_heap_ceilings,
)

if TYPE_CHECKING:  # types only: the recommender itself is imported where it runs
    from foresize.core.forecast.select import OnlineScores
    from foresize.core.recommend.oom import OOMState
    from foresize.core.recommend.params import RecommendParams
    from foresize.core.recommend.request import (
        CachedSchedule,
        RecommendResult,
        TargetRequest,
    )
    from foresize.core.recommend.shadow import ShadowRun


def effective_model(
    target: TargetObject, direction: Literal["vertical", "horizontal"] = "vertical"
) -> ModelSpec | None:
    """The target's model for `direction` with its overrides applied (None for a manifest
    dict: its model is read by the API types only, so it gets the defaults)."""
    if isinstance(target, AIScaleTarget):
        return target.spec.effective_model(direction)
    return None


def cadence_of(target: TargetObject, default: float) -> float:
    """Seconds between forecasts for the target (a cron cadence falls back to `default`)."""
    cadence = getattr(effective_model(target), "cadence_seconds", None)
    return float(cadence) if cadence else default


@dataclass(slots=True)
class SuggestionState:
    """Per target: OOM floors and rolling forecast scores, carried between rounds."""

    # "ns/target" -> container -> OOM floor and recent memory targets.
    oom: dict[str, dict[str, OOMState]] = field(default_factory=dict)
    # "ns/target" -> "container/resource" -> rolling forecast scores.
    forecast: dict[str, dict[str, OnlineScores]] = field(default_factory=dict)
    # "ns/target/container" -> memory forecast at the mode's level (bytes), from the
    # target's latest round: the fleet's mean is the memory risk allocation's reference,
    # so targets due in different rounds are priced against the same fleet.
    memory_at_mode: dict[str, float] = field(default_factory=dict)
    # "ns/target" -> the suggestion last published into the target's status: the vertical
    # planner acts on it in the same pass (an OOM floor must not wait for the status
    # write to come back through the watch); after a restart it is read from status.
    latest: dict[str, Suggestion] = field(default_factory=dict)
    # "ns/target" -> container -> its CPU day schedule (`recommend.request.CachedSchedule`):
    # it changes once a day, so the passes within the day reuse it.
    schedule: dict[str, dict[str, CachedSchedule]] = field(default_factory=dict)
    # "ns/target" -> policy name -> its decisions and state (`recommend.shadow`): the
    # target's shadow policies and its own (`active`), scored in status.shadow.
    shadow: dict[str, dict[str, ShadowRun]] = field(default_factory=dict)


@dataclass(slots=True)
class _Due:
    """One target whose suggestion is due this round."""

    key: str  # "namespace/name"
    namespace: str
    name: str
    mode: str
    containers: list[str]
    current: dict[str, ResourceRequirements]
    # The HPA whose arithmetic the vertical worker leaves alone, and its resources
    # (`vertical.guards.hpa_left_alone`): a step of those resources' explanation.
    hpa: tuple[str, frozenset[str]] | None = None
    shadows: tuple[ShadowPolicy, ...] = ()  # `spec.shadow` (`recommend.shadow`)
    target: AIScaleTarget | None = None  # the API object (its shadows' models merge on it)
    workloads: list[HistoryRead] = field(default_factory=list)  # whose history it reads (`sources`)
    templates: list[Container] = field(default_factory=list)  # its containers' template
    params: RecommendParams | None = None  # read from the target once a round
    # Each container's heap ceiling as its running pods were started with it
    # (`sources.running_heap_ceilings`): what THE heap rule learns non-heap against.
    runtimes: dict[str, HeapCeiling] = field(default_factory=dict)


def _hpa_left_alone(
    snapshot: ClusterSnapshot, view: TargetView
) -> tuple[str, frozenset[str]] | None:
    """The HPA scaling the target's workload on a resource's utilisation, when the target
    leaves that resource to it (`hpa_resource_policy: leave`, the default)."""
    if not view.ref_kind:
        return None
    workload = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
    hpa = snapshot.hpa_for(workload) if workload is not None else None
    if hpa is None or not hpa.scaling_resources():
        return None
    if view.hpa_resource_policy != "leave":
        return None
    return hpa.name, frozenset(hpa.scaling_resources())


def plan_suggestions(
    snapshot: ClusterSnapshot,
    history: HistoryReader,
    now: float,
    due: Callable[[TargetObject], bool] | None = None,
    state: SuggestionState | None = None,
    events: list[EmitEvent] | None = None,
) -> list[WriteTargetStatus]:
    """Status writes with fresh vertical suggestions (for the targets `due` accepts), each
    with the steps that made its requests (`status.explanation`). `events`, where given,
    receives one Event per target whose published requests changed: one line naming
    every step of each changed request (`recommend.explain.event_line`)."""
    from foresize.core.recommend.runs import plan_run_suggestion
    from foresize.core.recommend.stream import recommend_stream

    state = state if state is not None else SuggestionState()
    due_targets: list[_Due] = []
    writes = []  # CronJob targets: learned from their runs' peaks (`recommend.runs`)
    for target in snapshot.targets:
        if due is not None and not due(target):
            continue
        if _is_cronjob_target(target):
            run_write = plan_run_suggestion(snapshot, history, now, target, state)
            if run_write is not None:
                writes.append(run_write)
            continue
        found = _due_target(snapshot, target, state)
        if found is not None:
            due_targets.append(found)
    # Every due target priced against the whole fleet of the shard (the latest mode-level
    # memory forecast of every target still here), as one batch, streamed by shards of
    # series (`recommend.stream`): a shard's histories are read, recommended and dropped.
    _forget_gone(snapshot, state)
    fleet = list(state.memory_at_mode.values())
    reference = sum(fleet) / len(fleet) if fleet else None

    def load(d: _Due) -> tuple[list[tuple[str, str]], tuple[list[TargetRequest], ...]]:
        request = _load_request(history, now, d, state)
        jobs = _shadow_jobs(d, request, state)
        return [(key, name) for key, name, _job in jobs], ([request], [j[2] for j in jobs])

    def size(d: _Due) -> int:
        return len(d.containers) * (1 + len(d.shadows))

    stream = recommend_stream(due_targets, load, size, now, memory_reference=reference)
    for d, names, (requests, jobs), (results, shadow_results) in stream:
        request, result = requests[0], results[0]
        shadows = _shadow_results(names, jobs, shadow_results, now, state)
        before = state.latest.get(d.key)
        status = _status(d, result, now, state)
        if d.shadows:
            status["shadow"] = _shadow_status(d, request, shadows.get(d.key, {}), now, state)
        writes.append(WriteTargetStatus(d.namespace, d.name, status))
        after = state.latest.get(d.key)
        if events is not None and after is not None and after is not before:
            event = _changed_event(d, result, before, after)
            if event is not None:
                events.append(event)
    return writes


def _is_cronjob_target(target: TargetObject) -> bool:
    try:
        return target_view(target).ref_kind in RUNS_KINDS
    except (ForesizeError, ValueError):
        return False  # the vertical planner reports the bad spec


def _shadow_jobs(
    d: _Due, request: TargetRequest, state: SuggestionState
) -> list[tuple[str, str, TargetRequest]]:
    """A due target's shadow policies as requests to the recommender, a batch of their
    own (their memory risk is priced against the same fleet and never moves the live
    suggestions): (target key, policy name, request). Forgets the runs of policies gone."""
    from foresize.core.recommend.request import TargetRequest
    from foresize.core.recommend.shadow import ShadowRun, shadow_params

    jobs: list[tuple[str, str, TargetRequest]] = []
    runs = state.shadow.setdefault(d.key, {}) if d.shadows else state.shadow.pop(d.key, {})
    names = {p.name for p in d.shadows}
    for gone in [n for n in runs if n not in names and n != ACTIVE_POLICY]:
        del runs[gone]
    if not d.shadows:
        return jobs
    base = request.params  # the target's own, read once (`_load_request`)
    for policy in d.shadows:
        run = runs.setdefault(policy.name, ShadowRun())
        try:
            params = shadow_params(d.target, policy, base)
        except (ForesizeError, ValueError):
            continue  # refused by the webhook and `foresize validate`
        current = _shadow_current(d.current, run.latest())
        jobs.append(
            (
                d.key,
                policy.name,
                TargetRequest(
                    params,
                    request.histories,
                    current,
                    run.oom,
                    run.forecast,
                    run.schedule,
                    runtimes=request.runtimes,
                ),
            )
        )
    return jobs


def _shadow_results(
    names: list[tuple[str, str]],
    jobs: list[TargetRequest],
    results: list[RecommendResult],
    now: float,
    state: SuggestionState,
) -> dict[str, dict[str, Any]]:
    """The shadow policies' results carried into their runs: target key -> policy name
    -> its result."""
    out: dict[str, dict[str, Any]] = {}
    for (key, name), job, result in zip(names, jobs, results, strict=True):
        run = state.shadow[key][name]
        run.oom = result.oom_state
        run.forecast = result.forecast_state or {}
        run.schedule = result.schedule_state or {}
        published = {}
        for cname, cs in result.suggestion.containers.items():
            req, _ = _hysteresis(job.current[cname], cs, result.changed.get(cname, {}))
            published[cname] = req
        run.record(now, published, HISTORY_WINDOW)
        out.setdefault(key, {})[name] = result
    return out


def _shadow_current(
    current: dict[str, ResourceRequirements], latest: dict[str, dict[str, int]] | None
) -> dict[str, ResourceRequirements]:
    """What a shadow's next recommendation is compared with: its own latest requests
    (the limits in force are the live ones), else the target's current values."""
    out = {}
    for cname, cur in current.items():
        mine = (latest or {}).get(cname)
        out[cname] = ResourceRequirements(
            dict(mine) if mine else dict(cur.requests), dict(cur.limits)
        )
    return out


def _shadow_status(
    d: _Due, request: TargetRequest, results: dict[str, Any], now: float, state: SuggestionState
) -> list[dict[str, Any]]:
    """`status.shadow`: the target's own policy (`active`, its published requests) and
    each shadow, scored on the same history by THE scoring (`recommend.score`)."""
    from foresize.core.recommend.histories import MODEL_STEP
    from foresize.core.recommend.shadow import ShadowRun, score_entry, score_run

    runs = state.shadow.setdefault(d.key, {})
    active = runs.setdefault(ACTIVE_POLICY, ShadowRun())
    published = state.latest.get(d.key)
    if published is not None:
        active.record(
            now,
            {c: dict(cs.requests) for c, cs in published.containers.items()},
            HISTORY_WINDOW,
        )
    out = []
    for name in [ACTIVE_POLICY, *(p.name for p in d.shadows)]:
        run = runs.get(name)
        if run is None or (name != ACTIVE_POLICY and name not in results):
            continue
        scores = score_run(run.decisions, request.histories, d.containers, now, MODEL_STEP)
        out.append(score_entry(name, run, scores))
    return out


def _changed_event(
    d: _Due, result: RecommendResult, before: Suggestion | None, after: Suggestion
) -> EmitEvent | None:
    """The Event of a published suggestion whose requests moved (None: none moved)."""
    lines = []
    for cname in d.containers:
        new = after.containers.get(cname)
        if new is None:
            continue
        old = before.containers.get(cname) if before is not None else None
        was = old.requests if old is not None else d.current[cname].requests
        ex = result.steps.get(cname)
        for res in (CPU, MEMORY):
            if res in new.requests and new.requests[res] != was.get(res) and ex is not None:
                lines.append(event_line(cname, res, was.get(res), ex.steps))
    if not lines:
        return None
    return EmitEvent(
        d.namespace, "AIScaleTarget", d.name, "SuggestionChanged", event_message(lines)
    )


def _due_target(
    snapshot: ClusterSnapshot, target: TargetObject, state: SuggestionState
) -> _Due | None:
    """A target that takes suggestions (None: it does not, or there is nothing to read its
    usage from), without its history (`_load_request` reads it)."""
    from foresize.core.recommend.params import RecommendParams

    # The recommender reads the API model (its forecast settings live on the API types).
    if not isinstance(target, AIScaleTarget):
        return None
    view = target_view(target)
    mode = view.vertical_mode
    if mode not in ("recommendation", "autonomous") or view.deleting:
        return None
    source = history_source(snapshot, target)
    if source is None:
        return None
    workloads, templates = source
    key = f"{view.namespace}/{view.name}"
    return _Due(
        key,
        view.namespace,
        view.name,
        mode,
        [c.name for c in templates],
        current_requests(templates, state.latest.get(key), target),
        _hpa_left_alone(snapshot, view),
        view.shadows,
        target,
        workloads,
        templates,
        RecommendParams.from_view(view),
        running_heap_ceilings(snapshot, target, templates),
    )


def _load_request(
    history: HistoryReader, now: float, d: _Due, state: SuggestionState
) -> TargetRequest:
    """The recommendation request of a due target: its workloads' histories read."""
    from foresize.core.recommend.histories import load_histories
    from foresize.core.recommend.request import TargetRequest

    assert d.params is not None  # `_due_target` reads them
    histories = merged_histories(
        [
            load_histories(
                history, d.namespace, wl, d.containers, now, kinds=kinds, window=HISTORY_WINDOW
            )
            for wl, kinds in d.workloads
        ]
    )
    # An empty forecast state (not None) starts the rolling backtest, carried from then
    # on; None would cold-start the backtest on every round.
    return TargetRequest(
        d.params,
        histories,
        d.current,
        state.oom.get(d.key),
        state.forecast.get(d.key, {}),
        state.schedule.get(d.key, {}),
        runtimes=d.runtimes,
    )


def resumed_rounds(
    targets: list[TargetObject], last_round: Mapping[str, float], now: float
) -> dict[str, float]:
    """The last recommendation round of each target, as a process that did not make it
    reads it back from the object: `status.vertical_suggestion.created_at`, for targets
    with no round in `last_round` (a restart, or a shard taken over). Without it every
    target is due at each start and its status is written again with a round its
    cadence did not ask for (and, from a history a restart emptied, a
    `hasEnoughDataToScale` flipped to false). A time unreadable or later than `now` is
    no round."""
    out: dict[str, float] = {}
    for target in targets:
        key = target_key(target)
        if key in last_round:
            continue
        created = get_path(target, "status", "vertical_suggestion", "created_at")
        if created is None:
            continue
        try:
            when = parse_timestamp(created)
        except ValueError:
            continue
        if when <= now:
            out[key] = when
    return out


def _forget_gone(snapshot: ClusterSnapshot, state: SuggestionState) -> None:
    """Drop the state of targets that are gone."""
    present = {target_view(t).key for t in snapshot.targets}
    for k in [k for k in state.memory_at_mode if k.rsplit("/", 1)[0] not in present]:
        del state.memory_at_mode[k]
    for k in [k for k in state.latest if k not in present]:
        del state.latest[k]
    for k in [k for k in state.schedule if k not in present]:
        del state.schedule[k]


def _status(d: _Due, result: RecommendResult, now: float, state: SuggestionState) -> dict[str, Any]:
    """The target's status patch from its recommendation (and the state carried on)."""
    for cname, value in result.at_mode.items():
        state.memory_at_mode[f"{d.key}/{cname}"] = value
    state.oom[d.key] = result.oom_state
    if result.forecast_state is not None:
        state.forecast[d.key] = result.forecast_state
    if result.schedule_state is not None:
        state.schedule[d.key] = result.schedule_state
    status: dict[str, Any] = {"hasEnoughDataToScale": bool(result.has_enough_data)}
    # What the heap rule read from each container's spec, what it assumed, or why it
    # could not (`recommend.heap`): rewritten whole each round, so it is never stale.
    # `non_heap` is the allowance it used, which the pod webhook's heap rewrite reads.
    status["runtime_notes"] = [
        {"container": cname, "note": result.runtime_notes[cname]}
        | (
            {"non_heap": format_quantity(MEMORY, result.non_heap[cname])}
            if cname in result.non_heap
            else {}
        )
        for cname in d.containers
        if cname in result.runtime_notes
    ]
    sugg = result.suggestion
    entries = []
    for cname in d.containers:
        cs = sugg.containers.get(cname)
        if cs is None:
            continue
        requests_, limits_ = _hysteresis(d.current[cname], cs, result.changed.get(cname, {}))
        entry: dict[str, Any] = {"name": cname, "requests": format_resource_map(requests_)}
        if limits_:
            entry["limits"] = format_resource_map(limits_)
        entries.append(entry)
    # Autonomous targets get no suggestion before min_lookback_to_scale of history,
    # unless an OOM kill raised a floor: remediation does not wait for the lookback.
    oom_floor = any(st.active(now) for st in result.oom_state.values())
    if entries and (result.has_enough_data or d.mode == "recommendation" or oom_floor):
        status["vertical_suggestion"] = {
            # Content-addressed: the same recommendation keeps its uid (the circuit
            # breaker and stall tracking are per suggestion).
            "uid": entries_uid(entries),
            "containers": entries,
            "forecast_window": {
                "start": format_timestamp(sugg.window_start),
                "end": format_timestamp(sugg.window_end),
            },
            "created_at": format_timestamp(now),
        }
        if d.hpa is not None and d.mode == "autonomous":
            hpa_name, hpa_resources = d.hpa
            for entry in entries:
                ex = result.steps.get(entry["name"])
                for res in sorted(hpa_resources):
                    if ex is not None and res in _published(entry, res):
                        ex.step(
                            "hpa",
                            res,
                            _published(entry, res)[res],
                            f"pods keep their {res} request: HorizontalPodAutoscaler"
                            f" {hpa_name} scales on its utilisation"
                            " (spec.vertical.hpa_resource_policy: leave)",
                        )
        # Why each request is what it is: the steps recorded as it was computed.
        status["explanation"] = {
            "created_at": format_timestamp(now),
            "containers": status_entries(
                {c: result.steps[c] for c in d.containers if c in result.steps}
            ),
        }
        published = suggestion_from(status["vertical_suggestion"])
        if published is not None:
            state.latest[d.key] = published
    return status


def _published(entry: dict[str, Any], res: str) -> dict[str, float]:
    """The canonical request of `res` in a status entry ({} when it has none)."""
    from foresize.core.api.quantity import to_canonical

    value = entry["requests"].get(res)
    return {} if value is None else {res: float(to_canonical(res, value))}


def entries_uid(entries: list[dict[str, Any]]) -> str:
    """A suggestion's uid, content-addressed: the same containers, requests and limits
    give the same uid (the circuit breaker and stall tracking are per suggestion, so an
    unchanged recommendation must not look new)."""
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:16]


def suggestion_uid(containers: Mapping[str, ContainerSuggestion]) -> str:
    """`entries_uid` of containers given as the core's values (the simulator's baselines)."""
    entries = []
    for c in containers.values():
        entry: dict[str, Any] = {"name": c.name, "requests": format_resource_map(c.requests)}
        if c.limits:
            entry["limits"] = format_resource_map(c.limits)
        entries.append(entry)
    return entries_uid(entries)


def current_requests(
    template: list[Container], published: Suggestion | None, target: TargetObject
) -> dict[str, ResourceRequirements]:
    """Per container, what a new recommendation is compared with: the suggestion published
    before (this process's, else the one in the target's status), else the template."""
    if published is None:
        published = target_view(target).suggestion
    out = {}
    for c in template:
        prev = published.containers.get(c.name) if published is not None else None
        if prev is not None and prev.requests:
            out[c.name] = ResourceRequirements(dict(prev.requests), dict(prev.limits))
        else:
            out[c.name] = c.resources.copy()
    return out


def _hysteresis(
    current: ResourceRequirements, proposed: ContainerSuggestion, changed: dict[str, bool]
) -> tuple[dict[str, int], dict[str, int]]:
    """The published requests and limits: a resource whose move the recommender judged
    significant (the target's `scaling_behavior`, `recommend.target`'s one rule) takes
    the new value; any other keeps the published one, so small moves neither change the
    suggestion's uid nor resize pods."""
    requests, limits = dict(current.requests), dict(current.limits)
    for resource in (CPU, MEMORY):
        if changed.get(resource) and resource in proposed.requests:
            requests[resource] = proposed.requests[resource]
            if resource in proposed.limits:
                limits[resource] = proposed.limits[resource]
    return requests, limits
