"""The kube shell's control loop: snapshot -> the core's reconcile pass -> API calls -> records.

`KubeShell` implements `AsyncClusterPort` (snapshot, apply) over the watch-fed
`ClusterState` and the `KubeExecutor`. One `run_pass()`:

1. takes a snapshot and keeps only the AIScaleTargets and DaemonSetAutoscalers of the
   shards this replica holds: every per-target planner sees only those, so replicas
   holding different shard Leases never act on the same pods; lifecycle memory of targets
   now held by another replica is dropped (a revert in progress is continued by the new
   holder, which reads it back from `status.lifecycle`). ClusterAIScaleTemplates are
   cluster-wide, so only the holder of shard 0 reconciles them, against the unfiltered
   snapshot;
2. runs the core's pass (`foresize.core.reconcile.plan_pass`: recommendations, DaemonSets,
   horizontal, lifecycle, templates, the in-place gate, vertical), the same function the
   simulated operator runs, in a worker thread: a pass over 10k pods takes most of a
   second, and the admission webhooks and the Lease renewals share this event loop. The
   snapshot is copied from the cache on the loop (under the cache's lock, objects never
   mutated), and the pass state is touched by nobody else while the pass runs; the usage
   history it reads is the shared, locked one (`Locked`, below);
3. makes the object writes the pass asked for (revert finalizers, template-owned
   AIScaleTargets), then sends the pass's actions through the core's `ActionQueue` (429
   deferral, results fed back to the vertical planner);
4. records every (action, result) with the shared `ChangeRecorder` and emits its Events;
5. observes the snapshot for telemetry (node charge gap, OOM kills) and times the pass.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from foresize.adapters.collector import planned_without_cyclic_gc
from foresize.adapters.telemetry.metrics import ForesizeMetrics
from foresize.adapters.telemetry.recorder import ChangeRecorder, target_key
from foresize.adapters.timezones import SYSTEM_ZONES
from foresize.core.api.access import get_path
from foresize.core.cluster.actions import (
    Action,
    ActionResult,
    WriteTargetStatus,
)
from foresize.core.cluster.headroom import HeadroomConfig
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.interruption import PassInterrupted, checkpoint
from foresize.core.lifecycle.revert import REVERT_FINALIZER
from foresize.core.lifecycle.templates import TemplatePlan
from foresize.core.recommend.suggestions import resumed_rounds
from foresize.core.reconcile import (
    ActionQueue,
    PassPlan,
    ReconcileConfig,
    ReconcileState,
    plan_pass,
)
from foresize.core.vertical.policy import WorkerConfig
from foresize.shells.kube.leader import ShardManager
from foresize.shells.kube.state import ClusterState
from foresize.shells.kube.status_writes import UNCHANGED, StatusWrites

log = logging.getLogger("foresize.operator")

# Calls of a pass in flight at once, across targets (one target's are sent in order). With
# a round trip of 0.05-0.2 s, 10 keep the client's 50 QPS limit the pace; more would only
# queue behind it (kube-controller-manager's controllers run 5-10 workers).
ACTION_CONCURRENCY = 10


def lane_of(action: Action) -> str:
    """Actions of one lane are sent one after the other, in the order planned: those of
    one target (its resizes, evictions, status, Events), else those of one object."""
    target = getattr(action, "target", "") or ""
    if target:
        return f"target:{target}"
    kind = getattr(action, "kind", "") or type(action).__name__
    if kind in ("AIScaleTarget", "DaemonSetAutoscaler"):
        return f"target:{action.namespace}/{action.name}"
    return f"{kind}:{action.namespace}/{action.name}"


class ShellExecutor(Protocol):
    """What the shell sends its calls through: `kube.executor.KubeExecutor`, or the
    operator's `GatedExecutor` around it (the Lease and stop checks before each call)."""

    @property
    def server_version(self) -> tuple[int, int]: ...

    async def apply(self, action: Action) -> ActionResult: ...

    async def apply_guarded(self, action: Action) -> ActionResult: ...

    async def add_finalizer(
        self, kind: str, ns: str, name: str, finalizer: str
    ) -> ActionResult: ...

    async def remove_finalizer(
        self, kind: str, ns: str, name: str, finalizer: str
    ) -> ActionResult: ...

    async def create_object(self, kind: str, obj: dict[str, Any]) -> ActionResult: ...

    async def update_object(self, kind: str, obj: dict[str, Any]) -> ActionResult: ...

    async def delete_object(self, kind: str, ns: str, name: str) -> ActionResult: ...


class KubeShell:
    """The real-cluster shell around the core."""

    def __init__(
        self,
        state: ClusterState,
        executor: ShellExecutor,
        *,
        metrics: ForesizeMetrics | None = None,
        shards: ShardManager | None = None,
        clock: Callable[[], float] = time.time,
        worker_config: Any = None,
        history: Any = None,
        suggest_interval: float = 900.0,
        planner: Callable[..., PassPlan] | None = None,
        headroom: HeadroomConfig | None = None,
    ) -> None:
        self.state = state
        self.executor = executor
        self.recorder = ChangeRecorder(metrics)
        self.metrics = self.recorder.metrics
        self.shards = shards
        self.clock = clock
        self.passes = 0
        # The recommender's history (UsageHistory or the SQLite HistoryStore).
        self.history = history
        # The machine's zone database for the maintenance windows, unless the caller's
        # worker settings name one.
        worker_config = worker_config or WorkerConfig(time_zones=SYSTEM_ZONES)
        self.config = ReconcileConfig(
            worker=worker_config, suggest_interval=suggest_interval, headroom=headroom
        )
        self.pass_state = ReconcileState()
        self.dsa_window: Any = None  # lifecycle.daemonset.UsageWindow, fed by the collector
        # cluster.boost.PodCpuWindow: boosted pods' CPU samples, fed by the collector
        self.pod_usage: Any = None
        # The core's pass (tests inject a slow one), and where it runs: a worker thread,
        # so that the webhooks and Lease renewals on this loop are answered meanwhile
        # (False only for `foresize bench loop`'s baseline).
        self.planner = planner or plan_pass
        self.plan_off_loop = True
        self.concurrency = ACTION_CONCURRENCY
        self.status_writes = StatusWrites(state)

    # ------------------------------------------------------------ AsyncClusterPort
    async def snapshot(self) -> ClusterSnapshot:
        """The snapshot restricted to the Foresize objects of the shards held."""
        return self._owned(self._full_snapshot(self.clock()))

    def _full_snapshot(self, now: float) -> ClusterSnapshot:
        snap = self.state.snapshot(now)
        snap.server_version = self.executor.server_version
        return snap

    def _owns(self, obj: Any) -> bool:
        return self.shards is None or self.shards.owns(target_key(obj))

    def _owned(self, full: ClusterSnapshot) -> ClusterSnapshot:
        """`full` with only the targets and DaemonSetAutoscalers this replica's shards
        hold (pods, nodes and workloads stay: the planners need them all for capacity
        and owner chains, and only act through the targets they are given)."""
        if self.shards is None:
            return full
        return dataclasses.replace(
            full,
            targets=[t for t in full.targets if self._owns(t)],
            daemonset_autoscalers=[d for d in full.daemonset_autoscalers if self._owns(d)],
            _by_node=None,
            _by_owner=None,
        )

    def _reconciles_templates(self) -> bool:
        """ClusterAIScaleTemplates are reconciled by exactly one replica: the holder of
        shard 0 (or the only replica when unsharded)."""
        return self.shards is None or self.shards.holds(0)

    def _forget_unowned(self, full: ClusterSnapshot) -> None:
        """Drop lifecycle memory of targets that exist but are held by another replica, so
        a shard handed over is not reverted by both (and a later take-back starts from
        what status says, not from stale memory)."""
        if self.shards is None:
            return
        st = self.pass_state.lifecycle
        for kind, objects in (
            ("AIScaleTarget", full.targets),
            ("DaemonSetAutoscaler", full.daemonset_autoscalers),
        ):
            for obj in objects:
                if self._owns(obj):
                    continue
                key = f"{kind}/{target_key(obj)}"
                st.modes.pop(key, None)
                st.jobs.pop(key, None)
                st.written.pop(key, None)

    async def apply(self, action: Action) -> ActionResult:
        return await self.executor.apply(action)

    def _provisioning(self, snap: ClusterSnapshot, now: float) -> None:
        """foresize_provisioning_ratio: the target's pods' requests over their latest
        summed usage (the `__total__` history series of the workload)."""
        if self.history is None or not hasattr(self.history, "series"):
            return
        import numpy as np

        from foresize.adapters.telemetry.metrics import base_units
        from foresize.adapters.telemetry.recorder import pods_by_target
        from foresize.core.cluster.qos import spec_requests
        from foresize.core.cluster.target_fields import normalise_kind
        from foresize.core.history import (
            TOTAL_CONTAINER,
            HistoryWorkload,
            history_kinds,
            trace_series,
        )

        # One lookup per target, not a scan of every target per target (10k targets:
        # 50 million comparisons, and this ran on the event loop).
        by_key = {target_key(t): t for t in snap.targets}
        for key, pods in pods_by_target(snap).items():
            ref = get_path(by_key.get(key), "spec", "scaleTargetRef")
            if ref is None or not pods:
                continue
            ns = key.split("/", 1)[0]
            workload = HistoryWorkload(normalise_kind(get_path(ref, "kind")), get_path(ref, "name"))
            total = trace_series(
                self.history,
                workload.key(ns, TOTAL_CONTAINER),
                now - 300.0,
                now + 1.0,
                history_kinds(snap, ns, workload),
            )
            if total is None:
                continue
            for resource in ("cpu", "memory"):
                used = total.cpu if resource == "cpu" else total.memory
                if used is None or not np.isfinite(used).any():
                    continue
                requested = sum(
                    base_units(resource, spec_requests(p).get(resource, 0))
                    for p in pods
                    if p.phase == "Running"
                )
                self.recorder.set_provisioning(
                    key, resource, requested, float(used[np.isfinite(used)][-1])
                )

    def _history_for_pass(self, now: float) -> Any:
        """The history the pass reads, or None while it cannot be read whole (a shared
        store down, refusing, partial, skewed: `adapters.history.shared`): the pass then
        makes no new suggestion and no horizontal decision from it, the vertical planner
        acts on the last suggestions, each target's HistoryIncomplete condition says why,
        and `foresize_history_whole` is 0. The embedded stores are always whole."""
        problem = self.history.problem(now) if hasattr(self.history, "problem") else None
        worker = self.config.worker or WorkerConfig(time_zones=SYSTEM_ZONES)
        if problem != worker.history_problem:
            if problem is not None:
                log.warning("usage history not whole, keeping the last suggestions: %s", problem)
            else:
                log.info("usage history reads whole again")
        self.config.worker = dataclasses.replace(worker, history_problem=problem)
        self.metrics.history_whole.set(0 if problem else 1)
        return None if problem is not None else self.history

    def _record_ooms(self, snap: ClusterSnapshot) -> None:
        """OOM kills seen this pass go into the history, where the recommender's OOM
        remediation reads them (keyed by workload and container, like usage)."""
        if self.history is None or not hasattr(self.history, "record_event"):
            return
        from foresize.core.history import history_workload_of

        for pod, container, when in self.recorder.new_ooms:
            # A Job the state no longer holds: its CronJob or job group from its naming
            # and labels (`history.history_workload_of`).
            workload = history_workload_of(pod, snap.top_owner(pod))
            status = pod.status_of(container)
            usage = 0.0
            if status is not None:
                usage = float(status.resources.limits.get("memory", 0))
            self.history.record_event(workload.key(pod.namespace, container), "oom", when, usage)
        self.recorder.new_ooms.clear()

    # ------------------------------------------------------------------ the pass
    def stopping(self) -> bool:
        """Is the operator stopping? Read by the pass's worker thread too (a flag read):
        the pass is given up at its next checkpoint (`core.interruption`)."""
        return _stopping(self.executor)

    async def run_pass(self) -> list[tuple[Action, ActionResult | None]]:
        """One pass (the module doc). A stop while it plans gives the planning up at its
        next checkpoint, with nothing sent (a stopping process must not wait for a pass
        over a large cluster, minutes on a loaded machine); a stop while it sends starts
        no further call. Returns what was sent, with the results."""
        if self.stopping():
            return []
        try:
            return await self._run_pass()
        except PassInterrupted:
            log.info("stopping: the pass was given up before sending anything")
            return []

    async def _run_pass(self) -> list[tuple[Action, ActionResult | None]]:
        start = time.perf_counter()
        now = self.clock()
        full = self._full_snapshot(now)
        snap = self._owned(full)
        # Walks over every target before the pass, in the worker thread with it.
        before = functools.partial(self._before_plan, full, snap, now)
        await asyncio.to_thread(before) if self.plan_off_loop else before()
        self.config.reconcile_templates = self._reconciles_templates()
        history = self._history_for_pass(now)
        plan = functools.partial(
            self.planner,
            snap,
            now,
            self.pass_state,
            history,
            self.config,
            full=full,
            dsa_usage=self.dsa_window,
            pod_usage=self.pod_usage,
            stop=self.stopping,
        )
        # The cyclic collector off for the pass (`adapters.collector`: its full collections
        # walked the whole cache, a third of a pass's CPU at 10k pods).
        planned = functools.partial(planned_without_cyclic_gc, plan)
        decided = await asyncio.to_thread(planned) if self.plan_off_loop else planned()
        self.pass_state = decided.state
        # What Foresize will do that node autoscalers cannot see (the annotations are
        # among the actions): foresize_pending_upsize_demand / _pods.
        self.recorder.pending(decided.pending)
        await self._finalizers(decided)
        if decided.templates is not None:
            await self._templates(decided.templates)
        queue = ActionQueue(decided.actions, self.pass_state.worker, now, self.config.worker)
        self.status_writes.prune()
        await self._send(queue)
        self.pass_state.worker = queue.state
        done = queue.done
        # The records of thousands of actions and the charge-gap walk over every pod are
        # the other long stretches (0.05 s and 0.2 s at 10k pods); the recorder's state
        # they touch is not the webhook's (its admissions have their own lock).
        telemetry = functools.partial(self._telemetry, done, snap)
        events = await asyncio.to_thread(telemetry) if self.plan_off_loop else telemetry()
        events += self.recorder.drain_admissions()
        for event in events:
            if _stopping(self.executor):
                break  # refused unsent; the line above, or the next leader, says it
            done.append((event, await self.executor.apply(event)))
        self.metrics.loop_duration.observe(time.perf_counter() - start)
        self.passes += 1
        return done

    def _before_plan(self, full: ClusterSnapshot, snap: ClusterSnapshot, now: float) -> None:
        """What precedes the pass, each a walk over every target (the first pass declares
        24 counter label sets a target: 240k at 10k targets, seconds the loop would not
        answer the webhooks or renew the Leases). The pass state is nobody else's now."""
        self._forget_unowned(full)
        checkpoint(self.stopping)
        # Before any action: every counter this pass may count first exists at 0.
        self.recorder.declare(full, snap, now)
        checkpoint(self.stopping)
        # A round the process before this one made counts as the last (its cadence holds
        # across restarts and handovers: no status rewrite at every start).
        self.pass_state.last_suggest.update(
            resumed_rounds(snap.targets, self.pass_state.last_suggest, now)
        )

    async def _send(self, queue: ActionQueue) -> None:
        """Send the pass's actions, up to `self.concurrency` at once: one target's in the
        order planned (its resizes before its status, an eviction after the 429 of the one
        before), different targets' side by side. One at a time, a call's round trip
        (~0.1 s on a busy server) and not the client's rate limit set the pace: 1,000
        resizes took 2 minutes at "50 QPS" (kube.md N6)."""
        inflight: dict[str, asyncio.Task[tuple[Action, ActionResult]]] = {}
        held: dict[str, collections.deque[Action]] = {}
        stopped = False
        refused = 0  # refused unsent once stopping

        async def send(action: Action) -> tuple[Action, ActionResult]:
            if isinstance(action, WriteTargetStatus):
                return action, await self._send_status(action)
            # Evictions go through the executor's 429 guard (its own deferral memory).
            return action, await self.executor.apply_guarded(action)

        def start(action: Action) -> None:
            # A target's status goes after its pods' actions, counting their results.
            action = queue.prepared(action)
            inflight[lane_of(action)] = asyncio.create_task(send(action))

        while True:
            # Between sends, not only after a refusal: once stopping, no call is started.
            stopped = stopped or self.stopping()
            while not stopped and len(inflight) < self.concurrency:
                action = queue.next()
                if action is None:
                    break
                if lane_of(action) in inflight:
                    held.setdefault(lane_of(action), collections.deque()).append(action)
                else:
                    start(action)
            if not inflight:
                break
            finished, _ = await asyncio.wait(inflight.values(), return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                action, result = task.result()
                lane = lane_of(action)
                del inflight[lane]
                if result.reason == "NotLeader" and _stopping(self.executor):
                    stopped = True
                    refused += 1
                    continue
                queue.feed(action, result)  # sent, even if the stop came meanwhile
                stopped = stopped or self.stopping()
                waiting = held.get(lane) if not stopped else None
                while waiting:
                    nxt = waiting.popleft()
                    if not queue.deferred(nxt):
                        start(nxt)
                        break
        if stopped:
            left = sum(len(w) for w in held.values()) + sum(1 for _ in iter(queue.next, None))
            self._not_sent(refused + left)

    async def _send_status(self, action: WriteTargetStatus) -> ActionResult:
        """Only what changes the object's status is sent (`status_writes`); the planners
        are fed the write they asked for, so their memory matches the object."""
        part = self.status_writes.trimmed(action)
        if part is None:
            return UNCHANGED
        result = await self.executor.apply_guarded(part)
        if result.ok:
            self.status_writes.landed(part)
        return result

    def _not_sent(self, count: int) -> None:
        """A stop mid-pass: the rest of the pass is not sent. One line says so; the
        changes log (what users read as the audit trail) gets no "failed" line for each
        action never sent (kube.md N5), only the ones sent; the next leader plans the
        rest again."""
        log.info("stopping: %d planned action(s) of this pass not sent", count)

    def _telemetry(
        self, done: list[tuple[Action, ActionResult | None]], snap: ClusterSnapshot
    ) -> list[Any]:
        """The records, the OOM kills into the history and the provisioning ratio: walks
        over every pod and target, so in the worker thread with the pass (the history takes
        its lock per call, `Locked`). Once stopping, only the records of what was sent (the
        changes log): the walks are the next pass's, and no Event goes out any more."""
        records = self.recorder.record(done, snap)
        if self.stopping():
            return []
        events = [*records, *self.recorder.observe(snap)]
        self._record_ooms(snap)
        self._provisioning(snap, snap.now)
        return events

    async def _finalizers(self, decided: PassPlan) -> None:
        """The `foresize.io/revert` finalizer holds a deletion until the revert is done:
        added to every Foresize object that lacks it, released when the pass says so."""
        for kind, ns, name, uid in decided.finalizers_to_add:
            result = await self.executor.add_finalizer(kind, ns, name, REVERT_FINALIZER)
            if result.ok:
                self.pass_state.finalized.add(uid)
        for key in decided.finalizers_done:
            kind, ns, name = key.split("/", 2)
            result = await self.executor.remove_finalizer(kind, ns, name, REVERT_FINALIZER)
            if not result.ok:
                log.warning("could not release the finalizer of %s: %s", key, result.message)

    async def _templates(self, tp: TemplatePlan) -> None:
        """ClusterAIScaleTemplates: create/update/delete their AIScaleTargets (the pass
        decided against the unfiltered snapshot: which workloads a template may claim
        depends on every template and every existing AIScaleTarget, whichever shard)."""
        for obj in tp.create:
            r = await self.executor.create_object("AIScaleTarget", _as_json(obj))
            self._log_object("create", obj, r)
        for obj in tp.update:
            r = await self.executor.update_object("AIScaleTarget", _as_json(obj))
            self._log_object("update", obj, r)
        for ns, name in tp.delete:
            r = await self.executor.delete_object("AIScaleTarget", ns, name)
            log.info("template: delete AIScaleTarget %s/%s -> %s", ns, name, r.code)

    @staticmethod
    def _log_object(verb: str, obj: Any, result: ActionResult) -> None:
        log.info(
            "template: %s AIScaleTarget %s -> %s %s",
            verb,
            target_key(obj),
            result.code,
            result.message,
        )

    async def run(self, stop: asyncio.Event, interval: float = 30.0) -> None:
        """Plan and act every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            try:
                await self.run_pass()
            except Exception:  # one bad pass must not stop the operator
                log.exception("control-loop pass failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


class Locked:
    """`inner` with every method call made under one lock: the usage history and the
    DaemonSet usage window are written by the collector on the event loop while the pass
    reads them in its worker thread (a write can regrow the history's arrays or add a key
    to a dict the pass iterates). Each call is atomic; a pass may see a sample that arrived
    after it started, as it would have on the next pass. Attributes that are not methods
    are passed through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()

    @property
    def inner(self) -> Any:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return value(*args, **kwargs)

        return locked


def _as_json(obj: Any) -> dict[str, Any]:
    return obj.to_kube() if hasattr(obj, "to_kube") else dict(obj)


def _stopping(executor: Any) -> bool:
    """Is the executor refusing every call because the operator is stopping (the operator's
    `GatedExecutor`; a plain executor never stops)?"""
    stop = getattr(executor, "stop", None)
    return isinstance(stop, asyncio.Event) and stop.is_set()
