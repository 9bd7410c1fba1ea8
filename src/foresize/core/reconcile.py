"""One reconcile pass of the operator, for both shells (pure: no I/O, no clock).

`plan_pass(snapshot, now, state, history, config) -> PassPlan` decides everything one
pass does, in this order (what the kube shell and the simulated operator both run):

0. the policy hierarchy: every target replaced by its effective spec
   (`cluster.policies.resolve_snapshot`), so each step below reads the policy in force;
   an effective policy that changed joins the target's status write (step 7);
1. recommendations (`recommend.rounds.plan_rounds`): each due AIScaleTarget gets a fresh
   `status.vertical_suggestion` (`recommend.suggestions.plan_suggestions`); a target is
   due once in each slot of its own cadence, the slots offset by a hash of its key (the
   fleet's rounds spread over the cadence, not all in one pass), at once when its
   history holds an OOM kill newer than its last forecast (the x1.2 OOM floor must not
   wait), and every pass while a run of it is in progress (written when it changes);
2. DaemonSetAutoscalers, every `scaleInterval`: the percentile suggestion into status and
   in-place resizes of running pods (when the shell has a DaemonSet usage window);
3. horizontal: predictions and `*/scale` patches ahead of peaks;
4. lifecycle: reverts on leaving autonomous mode or deletion, and which objects need the
   revert finalizer added or released (the shell does that I/O);
5. ClusterAIScaleTemplates (only where `config.reconcile_templates`): the AIScaleTargets to
   create, update and delete (the shell does that I/O) and the templates' status;
6. the in-place gate: on a server without `pods/resize`, targets asking for an in-place
   update mode get a condition and an event once, and are left out of step 7;
7. the vertical planner (resizes, evictions, status);
8. headroom (only where `config.headroom`, `vertical.headroom`): the placeholders the
   capacity guard took for this pass's upsizes are released before any action is sent,
   and (by the replica that reconciles templates, over `full`) the placeholder
   Deployments are sized to the forecast upsize demand left.

Deciding and acting are separate, as in Karpenter's disruption controller: `ActionQueue`
hands the pass's actions out to a shell and digests each result (`on_result`; see there).
History is read only through `HistoryReader`, which the shell passes in.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import mutate_pod
from foresize.core.api.access import JSONValue
from foresize.core.api.fields import format_timestamp
from foresize.core.api.quantity import format_resource_map
from foresize.core.cluster.actions import (
    Action,
    ActionResult,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.boost import PodCpuWindow
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.coordination import Pair
from foresize.core.cluster.headroom import HeadroomConfig
from foresize.core.cluster.in_place_gate import gate_in_place, target_key
from foresize.core.cluster.model import OwnerRef, Pod, Suggestion, Workload
from foresize.core.cluster.pending import NODE_POOL_LABELS, PendingDemand, publish
from foresize.core.cluster.policies import fold_policy_writes, resolve_snapshot
from foresize.core.cluster.qos import spec_requests
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import TargetView, dsa_view, target_view
from foresize.core.cluster.target_fields import suggestion_from
from foresize.core.cluster.windows import UTC_ONLY, TimeZones
from foresize.core.history import HistoryReader, HistoryWorkload, history_kinds
from foresize.core.horizontal.coming import (
    COMING_STEP,
    ComingReplicas,
    forecast_hpa_replicas,
    hpa_resources,
    peak_totals,
)
from foresize.core.horizontal.coordinate import (
    coordinated_replicas_at,
    coordinating_targets,
    plan_coordination,
)
from foresize.core.horizontal.planner import plan_horizontal
from foresize.core.interruption import StopCheck, checkpoint
from foresize.core.lifecycle.daemonset import (
    DsaPlan,
    UsageWindow,
    dsa_suggestion,
    plan_dsa_across_passes,
)
from foresize.core.lifecycle.planner import LifecycleState, finalizers_to_add, plan_lifecycle
from foresize.core.lifecycle.templates import TemplatePlan, plan_templates
from foresize.core.recommend.horizontal import horizontal_forecasts
from foresize.core.recommend.rounds import plan_rounds
from foresize.core.recommend.suggestions import SuggestionState
from foresize.core.vertical.headroom import HeadroomState, headroom_actions
from foresize.core.vertical.planner import plan
from foresize.core.vertical.policy import WorkerConfig
from foresize.core.vertical.results import on_result, refreshed_status
from foresize.core.vertical.state import WorkerState, action_state_key
from foresize.core.vertical.yielding import yield_to_pending

HORIZONTAL_INTERVAL = 900.0
"""Seconds between horizontal passes at most: a forecast peak is scaled for ahead of time
by at least the forecast horizon (15 minutes by default), so a pass every 15 minutes
(or every forecast interval, if shorter) is never late."""

CENTRAL_PERCENTILE = 50.0
"""The coordinated mode sizes the HPA's target utilisation for the median forecast of the
workload's total: the HPA's own headroom (1 / target) covers the bursts above it, so the
mode's high quantile on top would pay for the same headroom twice."""

DSA_DEFAULT_INTERVAL = 900.0
"""A DaemonSetAutoscaler's `scaleInterval` when its object does not say (the API default)."""


@dataclass(slots=True)
class ReconcileConfig:
    """What a shell decides once: the worker's limits and the recommender's cadence."""

    worker: WorkerConfig | None = None
    suggest_interval: float = 900.0  # the cadence of a target whose own cadence is cron
    reconcile_templates: bool = True  # this replica reconciles ClusterAIScaleTemplates
    # The node labels a node's pool is read from, first present wins (`cluster.pending`).
    node_pool_labels: tuple[str, ...] = NODE_POOL_LABELS
    headroom: HeadroomConfig | None = None  # forecast-sized placeholders (off: None)


@dataclass(slots=True)
class ReconcileState:
    """Everything one pass hands to the next (the shells keep it in memory; what must
    survive a restart is also written into the targets' status by the planners)."""

    worker: WorkerState = field(default_factory=WorkerState)
    suggestions: SuggestionState = field(default_factory=SuggestionState)
    lifecycle: LifecycleState = field(default_factory=LifecycleState)
    last_suggest: dict[str, float] = field(default_factory=dict)  # target key -> time
    last_horizontal: float | None = None
    last_dsa: dict[str, float] = field(default_factory=dict)  # DSA key -> time
    # DSA key -> the suggestion whose restarting resizes wait for a next disruption batch,
    # and when the last batch went out (`lifecycle.daemonset.plan_dsa`).
    dsa_paced: dict[str, Suggestion] = field(default_factory=dict)
    dsa_batch_at: dict[str, float] = field(default_factory=dict)
    refused_reported: set[str] = field(default_factory=set)  # in-place refusals written
    # workload key -> (when read, resource -> its peak summed usage of the last day): the
    # coming replicas' forecast reads history once per model step, not every pass.
    coming_peaks: dict[str, tuple[float, dict[str, float]]] = field(default_factory=dict)
    # target key -> the (replicas, request) pair last published in coordinated mode.
    coordinated: dict[str, Pair] = field(default_factory=dict)
    finalized: set[str] = field(default_factory=set)  # uids known to carry the finalizer
    headroom: HeadroomState = field(default_factory=HeadroomState)


@dataclass(slots=True)
class PassPlan:
    """What one pass decided. `actions` go through an `ActionQueue` in this order; the
    finalizer and template changes are object writes the shell makes before that."""

    actions: list[Action]
    state: ReconcileState
    finalizers_to_add: list[tuple[str, str, str, str]] = field(default_factory=list)
    finalizers_done: list[str] = field(default_factory=list)  # "Kind/ns/name"
    templates: TemplatePlan | None = None
    # What Foresize will do that node autoscalers cannot see (`cluster.pending`): the kube
    # shell exports it as `foresize_pending_upsize_demand`, the simulator records it.
    pending: PendingDemand = field(default_factory=PendingDemand)


def plan_pass(
    snapshot: ClusterSnapshot,
    now: float,
    state: ReconcileState,
    history: HistoryReader | None,
    config: ReconcileConfig | None = None,
    *,
    full: ClusterSnapshot | None = None,
    dsa_usage: UsageWindow | None = None,
    suggestions: Mapping[str, Suggestion] | None = None,
    pod_usage: PodCpuWindow | None = None,
    stop: StopCheck | None = None,
) -> PassPlan:
    """One pass over `snapshot` (the targets of the shards this replica holds).

    `full` is the unfiltered snapshot (templates claim workloads across shards; defaults
    to `snapshot`). `history` is None when the shell has no usage history yet (no
    recommendations or horizontal then). `dsa_usage` is the DaemonSet usage
    window (`lifecycle.daemonset.UsageWindow`). `suggestions` overrides what the vertical
    planner reads from the targets' status (the simulator's baseline recommenders); the
    suggestions this shell's recommender published before are used likewise, so a new
    one is acted on in the pass that made it. `pod_usage` is the pods' recent CPU samples
    (`cluster.boost.PodCpuWindow`), read by a start-up boost that ends when usage settles.
    `stop`: the shell's "stop now?", asked between the steps and between targets of the
    vertical planner; yes ends the pass with `PassInterrupted` (`core.interruption`).
    """
    config = config or ReconcileConfig()
    state = dataclasses.replace(
        state,
        last_suggest=dict(state.last_suggest),
        last_dsa=dict(state.last_dsa),
        dsa_paced=dict(state.dsa_paced),
        dsa_batch_at=dict(state.dsa_batch_at),
        refused_reported=set(state.refused_reported),
        finalized=set(state.finalized),
        coming_peaks=dict(state.coming_peaks),
        coordinated=dict(state.coordinated),
    )
    # Every planner reads each target's effective spec: the policy hierarchy resolved
    # (`cluster.policies`). The templates compare the targets as written, so they keep
    # the snapshot as it came.
    written = full if full is not None else snapshot
    snapshot, policy_writes = resolve_snapshot(snapshot)
    full = resolve_snapshot(written)[0] if full is not None else snapshot
    actions: list[Action] = []
    checkpoint(stop)
    if history is not None:
        fresh = plan_rounds(
            snapshot, now, history, state.last_suggest, state.suggestions, config.suggest_interval
        )
        actions += fresh
        writes = [a for a in fresh if isinstance(a, WriteTargetStatus)]
        actions += _coordinate(snapshot, writes, now, state, history)
        checkpoint(stop)
    # One capacity guard for every resize of the pass (DaemonSets, reverts, vertical): an
    # upsize admitted on a node takes that room from the others, and none takes the room
    # of the replicas HPAs are forecast to add.
    expected: list[Pod] = []
    if history is not None:
        expected = coming_pods(
            snapshot,
            history,
            now,
            {**state.suggestions.latest, **(suggestions or {})},
            state.coming_peaks,
        )
    room = config.headroom  # its pools read by the pass's pool labels (one reading)
    if room is not None and room.pool_labels != config.node_pool_labels:
        room = dataclasses.replace(room, pool_labels=config.node_pool_labels)
    ledger = NodeLedger(
        snapshot,
        expected,
        room.namespace if room is not None else None,
        memo=state.worker.memo.ledger,
    )
    checkpoint(stop)
    if dsa_usage is not None:  # its own usage window: not the recommender's history
        zones = (config.worker or WorkerConfig()).time_zones
        actions += _daemonsets(snapshot, now, state, dsa_usage, ledger, zones)
        checkpoint(stop)
    if history is not None:
        interval = min(config.suggest_interval, HORIZONTAL_INTERVAL)
        if state.last_horizontal is None or now - state.last_horizontal >= interval:
            state.last_horizontal = now
            forecasts = horizontal_forecasts(snapshot, history, now)
            if forecasts:
                actions += plan_horizontal(snapshot, forecasts, now).actions
    checkpoint(stop)
    out = PassPlan([], state)
    out.finalizers_to_add = finalizers_to_add(snapshot, state.finalized)
    lp = plan_lifecycle(snapshot, now, state.lifecycle, ledger, state.worker.refusals)
    state.lifecycle = lp.state
    out.finalizers_done = list(lp.finalizers_done)
    actions += lp.actions
    template_status: list[Action] = []
    if config.reconcile_templates and written.templates:
        out.templates = plan_templates(written, written.templates)
        template_status = [
            WriteTargetStatus("", name, status, kind="ClusterAIScaleTemplate")
            for name, status in out.templates.status.items()
        ]
    checkpoint(stop)
    gate, kept = gate_in_place(snapshot, state.refused_reported)
    vertical_snapshot = dataclasses.replace(snapshot, targets=kept)
    published = {**state.suggestions.latest, **(suggestions or {})}
    # Upsizes yield to pods of equal or higher priority that cannot be scheduled for them.
    published = yield_to_pending(vertical_snapshot, published, history, now, ledger)
    vertical, state.worker = plan(
        vertical_snapshot,
        now,
        state.worker,
        config.worker,
        published,
        ledger=ledger,
        pod_usage=pod_usage,
        stop=stop,
    )
    checkpoint(stop)
    # What will happen that node autoscalers cannot see: the demand and the annotations.
    out.pending, published_sizes = publish(
        snapshot, state.worker.coming.values(), vertical, config.node_pool_labels
    )
    release: list[Action] = []  # placeholders this pass's resizes need gone: sent first
    if room is not None and not snapshot.paused:
        release, ensure = headroom_actions(
            snapshot, now, room, state.headroom, ledger, [*actions, *vertical], published,
            state.suggestions.schedule, history,
            full if config.reconcile_templates else None,
        )  # fmt: skip
        vertical += ensure
    # The effective policies that changed join the same targets' status writes.
    vertical = fold_policy_writes(vertical, policy_writes)
    out.actions = [*release, *template_status, *actions, *gate, *vertical, *published_sizes]
    return out


# --------------------------------------------------------------------- coordinated mode


def _coordinate(
    snapshot: ClusterSnapshot,
    writes: list[WriteTargetStatus],
    now: float,
    state: ReconcileState,
    history: HistoryReader,
) -> list[Action]:
    """The fresh suggestions of targets coordinating with their HPA, rewritten before they
    are published (`horizontal.coordinate`); the pass acts on what is published."""
    keys = {f"{w.namespace}/{w.name}" for w in writes}

    def wanted(target: TargetObject) -> bool:
        if target_key(target) not in keys:
            return False
        try:
            return target_view(target).coordinates
        except Exception:  # an unreadable spec: the worker reports it
            return False

    if not any(wanted(t) for t in snapshot.targets):
        return []
    # The load the HPA's utilisation is held at target for: the median forecast.
    central = horizontal_forecasts(snapshot, history, now, wanted, percentile=CENTRAL_PERCENTILE)
    # The day's peak of each workload's total (shared with the coming replicas' cache):
    # the coordinated request never drops below what carries it within maxReplicas.
    peaks: dict[str, dict[str, float]] = {}
    for target in snapshot.targets:
        if not wanted(target):
            continue
        view = target_view(target)
        wl = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
        hpa = snapshot.hpa_for(wl) if wl is not None else None
        if wl is None or hpa is None:
            continue
        cached = state.coming_peaks.get(wl.key)
        if cached is None or not 0 <= now - cached[0] < COMING_STEP:
            cached = state.coming_peaks[wl.key] = (
                now,
                peak_totals(history, wl, hpa_resources(hpa), now, _kinds_of(snapshot, wl)),
            )
        peaks[view.key] = cached[1]
    cp = plan_coordination(snapshot, writes, central, now, state.coordinated, peaks=peaks)
    for w in writes:
        key = f"{w.namespace}/{w.name}"
        if "coordination" in w.status:
            published = suggestion_from(w.status.get("vertical_suggestion"))
            if published is not None:
                state.suggestions.latest[key] = published
            if key not in cp.pairs:
                state.coordinated.pop(key, None)
    state.coordinated.update(cp.pairs)
    return cp.actions


# --------------------------------------------------------------------- coming replicas


def coming_pods(
    snapshot: ClusterSnapshot,
    history: HistoryReader,
    now: float,
    suggestions: Mapping[str, Suggestion],
    peaks: dict[str, tuple[float, dict[str, float]]] | None = None,
) -> list[Pod]:
    """The replicas each HPA is forecast to add within the day (`horizontal.coming`), as
    the pod webhook would admit them (the suggestions' sizes where a target sizes the
    workload): the capacity guard keeps their room free (seed 004). `peaks` caches each
    workload's peak usage for `COMING_STEP` (updated in place)."""
    if snapshot.paused or not snapshot.hpas:
        return []
    peaks = peaks if peaks is not None else {}
    index = AdmissionIndex.from_snapshot(snapshot, suggestions=suggestions)
    out: list[Pod] = []
    seen: set[str] = set()
    coordinated = coordinating_targets(snapshot)
    for hpa in snapshot.hpas:
        wl = snapshot.workload(hpa.target_kind, hpa.namespace, hpa.target_name)
        if wl is None:
            continue
        seen.add(wl.key)
        tmpl = wl.template
        pod = Pod(
            namespace=wl.namespace,
            name=wl.name,
            labels=dict(tmpl.labels),
            owner=OwnerRef(wl.kind, wl.name),
            priority=tmpl.priority,
            containers=list(tmpl.containers),
            init_containers=list(tmpl.init_containers),
            resources=tmpl.resources,
            overhead=dict(tmpl.overhead),
        )
        admitted, _ = mutate_pod(pod, wl, index, now)
        cached = peaks.get(wl.key)
        if cached is None or not 0 <= now - cached[0] < COMING_STEP:
            kinds = _kinds_of(snapshot, wl)
            cached = peaks[wl.key] = (now, peak_totals(history, wl, hpa_resources(hpa), now, kinds))
        n = forecast_hpa_replicas(hpa, wl, cached[1], spec_requests(admitted))
        # A coordinated request moves with each forecast: the count at the peak is the
        # pair's there, not the HPA's at the request published now.
        paired = coordinated_replicas_at(snapshot, wl, hpa, cached[1], coordinated)
        if paired is not None:
            n = max(n or 0, paired)
        if n is None:
            continue
        added = ComingReplicas(wl, hpa, n).added
        out += [dataclasses.replace(admitted, name=f"{wl.name}#{i}") for i in range(added)]
    for gone in set(peaks) - seen:
        del peaks[gone]
    return out


# --------------------------------------------------------------------- recommendations


def _kinds_of(snapshot: ClusterSnapshot, workload: Workload) -> tuple[str, ...]:
    """The kinds of history a workload reads (`history.history_kinds`)."""
    return history_kinds(
        snapshot, workload.namespace, HistoryWorkload(workload.kind, workload.name)
    )


# --------------------------------------------------------------------- DaemonSets


def _daemonsets(
    snapshot: ClusterSnapshot,
    now: float,
    state: ReconcileState,
    usage: UsageWindow,
    ledger: NodeLedger | None = None,
    zones: TimeZones = UTC_ONLY,
) -> list[Action]:
    """Every `scaleInterval`: each DaemonSetAutoscaler's percentile suggestion into status
    (the pod webhook seeds new pods from it) and in-place resizes of running pods; between
    intervals, the next disruption batch of restarting resizes that are still to go."""
    actions: list[Action] = []
    for obj in snapshot.daemonset_autoscalers:
        dsa = dsa_view(obj)
        if dsa.deleting:
            continue
        ns, name, key = dsa.namespace, dsa.name, dsa.key
        interval = dsa.scale_interval or DSA_DEFAULT_INTERVAL
        last = state.last_dsa.get(key)
        if last is not None and now - last < interval:
            paced = state.dsa_paced.get(key)
            if paced is not None:
                later = _dsa_resizes(snapshot, dsa, paced, now, state, ledger, zones)
                actions.extend(later.actions)
            continue
        state.last_dsa[key] = now
        ds = dsa.ref_name
        sugg = dsa_suggestion(
            dsa, usage.samples(ns, ds), now, first_seen=usage.first_seen.get((ns, ds))
        )
        status: dict[str, JSONValue] = {"hasEnoughDataToScale": sugg is not None}
        if sugg is not None:
            status["suggestion"] = {
                "uid": sugg.uid,
                "containers": [
                    {"name": c.name, "requests": format_resource_map(c.requests)}
                    for c in sugg.containers.values()
                ],
                "forecast_window": {
                    "start": format_timestamp(sugg.window_start),
                    "end": format_timestamp(sugg.window_end),
                },
                "created_at": format_timestamp(now),
            }
            dp = _dsa_resizes(snapshot, dsa, sugg, now, state, ledger, zones)
            actions.extend(dp.actions)
            if dp.resized:
                status["pods_resized"] = len(dp.resized)
        actions.append(WriteTargetStatus(ns, name, status, kind="DaemonSetAutoscaler"))
    return actions


def _dsa_resizes(
    snapshot: ClusterSnapshot,
    dsa: TargetView,
    suggestion: Suggestion,
    now: float,
    state: ReconcileState,
    ledger: NodeLedger | None,
    zones: TimeZones,
) -> DsaPlan:
    refusals = state.worker.refusals
    batches = (state.dsa_batch_at, state.dsa_paced)
    return plan_dsa_across_passes(snapshot, dsa, suggestion, now, ledger, refusals, zones, *batches)


# --------------------------------------------------------------------- the queue


class ActionQueue:
    """Hands a pass's actions out in order and digests their results; sends nothing. A
    shell loops `while (a := queue.next()) is not None: queue.feed(a, await send(a))`.
    Evictions of a target whose last one got a 429 are deferred (`deferred`); events the
    vertical planner queues while digesting a result go out right after it."""

    def __init__(
        self,
        actions: Iterable[Action],
        state: WorkerState,
        now: float,
        config: WorkerConfig | None = None,
    ) -> None:
        self._pending: deque[Action] = deque(actions)
        self.state = state
        self.now = now
        self.config = config
        self.done: list[tuple[Action, ActionResult | None]] = []

    def next(self) -> Action | None:
        while self._pending:
            action = self._pending.popleft()
            if not self.deferred(action):
                return action
        return None

    def prepared(self, action: Action) -> Action:
        """`action` to send now: a worker's status counts its pods' results so far."""
        if isinstance(action, WriteTargetStatus):
            return refreshed_status(self.state, action)
        return action

    def deferred(self, action: Action) -> bool:
        """An eviction of a target refused (429) until its `retryAfterSeconds`: recorded in
        `done` with result None, not sent (asked again of an action held back behind another)."""
        ts = (
            self.state.targets.get(action_state_key(action))
            if isinstance(action, EvictPod)
            else None
        )
        if ts is None or ts.evict_retry_at is None or self.now >= ts.evict_retry_at:
            return False
        self.done.append((action, None))
        return True

    def feed(self, action: Action, result: ActionResult) -> None:
        self.done.append((action, result))
        if isinstance(action, WriteTargetStatus):  # marked written only once it landed
            self.state = on_result(self.state, action, result, self.now, self.config)
        elif isinstance(action, EvictPod | ResizePod):
            self.state = on_result(self.state, action, result, self.now, self.config)
            ts = self.state.targets.get(action_state_key(action))
            if ts is not None and ts.outbox:
                self._pending.extendleft(reversed(ts.outbox))
                ts.outbox = []
