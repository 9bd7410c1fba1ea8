"""The kube shell's control loop: snapshot -> core planners -> API calls -> records.

`KubeShell` implements `AsyncClusterPort` (snapshot, apply) over the watch-fed
`ClusterState` and the `KubeExecutor`. One `run_pass(now)`:

1. takes a snapshot and keeps only the AIScaleTargets and DaemonSetAutoscalers of the
   shards this replica holds: every per-target planner (recommendations, horizontal,
   DaemonSetAutoscalers, lifecycle reverts and finalizers, vertical) sees only those, so
   replicas holding different shard Leases never act on the same pods; lifecycle memory
   of targets now held by another replica is dropped (a revert in progress is continued
   by the new holder, which reads it back from `status.lifecycle`);
   ClusterAIScaleTemplates are cluster-wide (one template may claim workloads in every
   shard, and claims are decided across all templates and all existing targets), so
   only the holder of shard 0 reconciles them, against the unfiltered snapshot;
2. refuses in-place update modes on clusters without `pods/resize` (< 1.33) with a status
   condition and an event, and leaves those targets out of the vertical pass;
3. asks the vertical planner for actions, applies them in order, feeds every result back
   to the planner (`on_result`), skipping the remaining evictions of a target after a 429
   until its `retryAfterSeconds` (as the planner's own `execute` does in the sim shell);
4. records every (action, result) with the shared `ChangeRecorder` and emits its Events;
5. observes the snapshot for telemetry (node charge gap, OOM kills) and times the pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from foresize.api.access import get_path
from foresize.cluster.actions import (
    Action,
    ActionResult,
    EmitEvent,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.cluster.snapshot import ClusterSnapshot
from foresize.kube import version as kver
from foresize.kube.executor import KubeExecutor
from foresize.kube.leader import ShardManager
from foresize.kube.state import ClusterState
from foresize.telemetry.metrics import ForesizeMetrics
from foresize.telemetry.recorder import ChangeRecorder, target_key

log = logging.getLogger("foresize.operator")


def merged_conditions(target: Any, condition: dict[str, Any]) -> list[dict[str, Any]]:
    """The target's conditions with `condition` replacing the one of its type: a merge patch
    replaces the whole list, so the others must be written back unchanged."""
    out: list[dict[str, Any]] = []
    for c in get_path(target, "status", "conditions") or []:
        raw = c.model_dump(mode="json", exclude_none=True) if hasattr(c, "model_dump") else dict(c)
        if raw.get("type") != condition["type"]:
            out.append(raw)
    out.append(condition)
    return out


def _in_place_condition(target: Any, status: str, reason: str, message: str) -> WriteTargetStatus:
    """The status write that sets the target's InPlaceResizeUnsupported condition."""
    ns, name = target_key(target).split("/", 1)
    condition = {
        "type": kver.CONDITION_INPLACE_UNSUPPORTED,
        "status": status,
        "reason": reason,
        "message": message,
    }
    return WriteTargetStatus(ns, name, {"conditions": merged_conditions(target, condition)})


def update_mode_of(target: Any) -> str:
    return str(get_path(target, "spec", "vertical", "update_policy", "update_mode") or "recreate")


def vertical_mode_of(target: Any) -> str:
    return str(get_path(target, "spec", "vertical", "mode") or "")


class KubeShell:
    """The real-cluster shell around the core."""

    def __init__(
        self,
        state: ClusterState,
        executor: KubeExecutor,
        *,
        metrics: ForesizeMetrics | None = None,
        shards: ShardManager | None = None,
        clock: Callable[[], float] = time.time,
        worker_config: Any = None,
        history: Any = None,
        suggest_interval: float = 900.0,
    ) -> None:
        from foresize.vertical.state import WorkerState

        self.state = state
        self.executor = executor
        self.recorder = ChangeRecorder(metrics)
        self.metrics = self.recorder.metrics
        self.shards = shards
        self.clock = clock
        self.worker_state = WorkerState()
        self.worker_config = worker_config
        self._refused_reported: set[str] = set()
        self.passes = 0
        # The recommender's history (UsageHistory or the SQLite HistoryStore).
        self.history = history
        from foresize.kube.suggest import SuggestionState

        self.suggestion_state = SuggestionState()
        self.suggest_interval = suggest_interval
        self._last_suggest: dict[str, float] = {}
        self.lifecycle_state: Any = None
        self._last_horizontal: float | None = None
        self.dsa_window: Any = None  # lifecycle.daemonset.UsageWindow, fed by the collector
        self._last_dsa: dict[str, float] = {}
        self._finalized: set[str] = set()  # uids known to carry the revert finalizer

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
        if self.shards is None or self.lifecycle_state is None:
            return
        st = self.lifecycle_state
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

    # ------------------------------------------------------------------ the pass
    def _gate_in_place(self, snap: ClusterSnapshot) -> list[Action]:
        """Targets asking for in-place updates on a cluster that cannot do them."""
        refusal = kver.in_place_refusal(snap.server_version)
        if refusal is None:
            # Upgraded cluster: clear a refusal written before (once per target).
            cleared: list[Action] = []
            for target in snap.targets:
                cond = None
                status = get_path(target, "status")
                if hasattr(status, "condition"):
                    cond = status.condition(kver.CONDITION_INPLACE_UNSUPPORTED)
                key = target_key(target)
                if cond is not None and cond.status == "True" and key not in self._refused_reported:
                    self._refused_reported.add(key)
                    cleared.append(
                        _in_place_condition(
                            target,
                            "False",
                            "Supported",
                            f"Kubernetes {snap.server_version[0]}.{snap.server_version[1]} "
                            "serves pods/resize",
                        )
                    )
            return cleared
        actions: list[Action] = []
        kept = []
        for target in snap.targets:
            if (
                update_mode_of(target) in kver.IN_PLACE_MODES
                and vertical_mode_of(target) == "autonomous"
            ):
                key = target_key(target)
                if key not in self._refused_reported:
                    self._refused_reported.add(key)
                    write = _in_place_condition(target, "True", "ServerTooOld", refusal)
                    actions.append(write)
                    actions.append(
                        EmitEvent(
                            write.namespace,
                            "AIScaleTarget",
                            write.name,
                            "InPlaceUnsupported",
                            refusal,
                            "Warning",
                        )
                    )
                continue
            kept.append(target)
        snap.targets = kept
        return actions

    async def run_pass(self) -> list[tuple[Action, ActionResult | None]]:
        from foresize.vertical.planner import on_result, plan

        start = time.perf_counter()
        now = self.clock()
        full = self._full_snapshot(now)
        snap = self._owned(full)
        self._forget_unowned(full)
        # Recommendations, DaemonSets, horizontal and lifecycle work on every target of our
        # shards; only the vertical planner is kept from targets the server cannot serve.
        pre: list[Action] = []
        if self.history is not None:
            from foresize.kube.suggest import cadence_of, plan_suggestions

            def due(target: Any) -> bool:
                # Each target forecasts at its own cadence (forecast_interval, else
                # forecast_blocks; a cron cadence uses the operator's --suggest-interval).
                last = self._last_suggest.get(target_key(target))
                return last is None or now - last >= cadence_of(target, self.suggest_interval)

            writes = plan_suggestions(snap, self.history, now, due, self.suggestion_state)
            for write in writes:
                # Only a target that got a forecast waits for its next cadence (one whose
                # workload has not been seen yet is tried again on the next pass).
                self._last_suggest[f"{write.namespace}/{write.name}"] = now
            pre += writes
            pre += self._daemonsets(snap, now)
            if self._last_horizontal is None or now - self._last_horizontal >= min(
                self.suggest_interval, 900.0
            ):
                self._last_horizontal = now
                pre += self._horizontal(snap, now)
        done: list[tuple[Action, ActionResult | None]] = []
        pre += await self._lifecycle(snap, now, done)
        if self._reconciles_templates():
            await self._templates(full, done)
        all_targets = list(snap.targets)
        gate = self._gate_in_place(snap)
        actions, self.worker_state = plan(snap, now, self.worker_state, self.worker_config)
        snap.targets = all_targets
        for action in [*pre, *gate, *actions]:
            if isinstance(action, EvictPod):
                ts = self.worker_state.targets.get(action.target)
                if ts is not None and ts.evict_retry_at is not None and now < ts.evict_retry_at:
                    done.append((action, None))  # deferred after a 429: not sent
                    continue
            result = await self.executor.apply_guarded(action)
            done.append((action, result))
            if isinstance(action, EvictPod | ResizePod):
                self.worker_state = on_result(
                    self.worker_state, action, result, now, self.worker_config
                )
                # Events the planner queued while digesting the result (refusals, deferrals).
                ts = self.worker_state.targets.get(action.target)
                if ts is not None and ts.outbox:
                    for event in ts.outbox:
                        done.append((event, await self.executor.apply(event)))
                    ts.outbox = []
        events = self.recorder.record(done, snap)
        events += self.recorder.observe(snap)
        self._record_ooms(snap)
        self._provisioning(snap, now)
        for event in events:
            done.append((event, await self.executor.apply(event)))
        self.metrics.loop_duration.observe(time.perf_counter() - start)
        self.passes += 1
        return done

    def _daemonsets(self, snap: ClusterSnapshot, now: float) -> list[Action]:
        """DaemonSetAutoscalers: every scaleInterval, the percentile suggestion into status
        (the pod webhook seeds new pods from it) and in-place resizes of running pods."""
        if self.dsa_window is None or not snap.daemonset_autoscalers:
            return []
        from foresize.lifecycle.daemonset import dsa_suggestion, plan_dsa

        actions: list[Action] = []
        for dsa in snap.daemonset_autoscalers:
            if dsa is None or get_path(dsa, "metadata", "deletion_timestamp") is not None:
                continue
            ns, name = get_path(dsa, "metadata", "namespace"), get_path(dsa, "metadata", "name")
            key = f"{ns}/{name}"
            interval = float(get_path(dsa, "spec", "scaleInterval") or 900.0)
            last = self._last_dsa.get(key)
            if last is not None and now - last < interval:
                continue
            self._last_dsa[key] = now
            ds = get_path(dsa, "spec", "scaleTargetRef", "name")
            usage = self.dsa_window.samples(ns, ds)
            sugg = dsa_suggestion(
                dsa, usage, now, first_seen=self.dsa_window.first_seen.get((ns, ds))
            )
            status: dict[str, Any] = {"hasEnoughDataToScale": sugg is not None}
            if sugg is not None:
                from foresize.api.quantity import format_resource_map
                from foresize.cluster.kubejson import format_time

                status["suggestion"] = {
                    "uid": sugg.uid,
                    "containers": [
                        {"name": c.name, "requests": format_resource_map(c.requests)}
                        for c in sugg.containers.values()
                    ],
                    "forecast_window": {
                        "start": format_time(sugg.window_start),
                        "end": format_time(sugg.window_end),
                    },
                    "created_at": format_time(now),
                }
                dp = plan_dsa(snap, dsa, sugg, now)
                actions.extend(dp.actions)
                if dp.resized:
                    status["pods_resized"] = len(dp.resized)
            actions.append(WriteTargetStatus(ns, name, status, kind="DaemonSetAutoscaler"))
        return actions

    def _provisioning(self, snap: ClusterSnapshot, now: float) -> None:
        """foresize_provisioning_ratio: the target's pods' requests over their latest
        summed usage (the `__total__` history series of the workload)."""
        if self.history is None or not hasattr(self.history, "series"):
            return
        import numpy as np

        from foresize.cluster.qos import spec_requests
        from foresize.history.base import SeriesKey
        from foresize.history.metrics_server import TOTAL_CONTAINER
        from foresize.telemetry.metrics import base_units
        from foresize.telemetry.recorder import pods_by_target

        for key, pods in pods_by_target(snap).items():
            target = next((t for t in snap.targets if target_key(t) == key), None)
            ref = get_path(target, "spec", "scaleTargetRef")
            if ref is None or not pods:
                continue
            ns = key.split("/", 1)[0]
            total_key = SeriesKey(ns, get_path(ref, "name"), TOTAL_CONTAINER)
            for resource in ("cpu", "memory"):
                _, used = self.history.series(total_key, resource, now - 300.0, now + 1.0)
                used = np.asarray(used, dtype=np.float64)
                if not np.isfinite(used).any():
                    continue
                requested = sum(
                    base_units(resource, spec_requests(p).get(resource, 0))
                    for p in pods
                    if p.phase == "Running"
                )
                self.recorder.set_provisioning(
                    key, resource, requested, float(used[np.isfinite(used)][-1])
                )

    def _record_ooms(self, snap: ClusterSnapshot) -> None:
        """OOM kills seen this pass go into the history, where the recommender's OOM
        remediation reads them (keyed by workload and container, like usage)."""
        if self.history is None or not hasattr(self.history, "record_event"):
            return
        from foresize.history.base import SeriesKey

        for pod, container, when in self.recorder.new_ooms:
            owner = snap.top_owner(pod)
            workload = owner.name if owner is not None else pod.name
            status = pod.status_of(container)
            usage = 0.0
            if status is not None:
                usage = float(status.resources.limits.get("memory", 0))
            self.history.record_event(
                SeriesKey(pod.namespace, workload, container), "oom", when, usage
            )
        self.recorder.new_ooms.clear()

    def _horizontal(self, snap: ClusterSnapshot, now: float) -> list[Action]:
        """Scale up ahead of forecast peaks and publish predictions (horizontal planner)."""
        from foresize.horizontal.planner import plan_horizontal
        from foresize.kube.suggest import horizontal_forecasts

        forecasts = horizontal_forecasts(snap, self.history, now)
        if not forecasts:
            return []
        return list(plan_horizontal(snap, forecasts, now).actions)

    async def _lifecycle(
        self, snap: ClusterSnapshot, now: float, done: list[tuple[Action, ActionResult | None]]
    ) -> list[Action]:
        """Reverts on leaving autonomous mode or deletion (lifecycle planner), and the
        `foresize.io/revert` finalizer that holds a deletion until the revert is done."""
        from foresize.lifecycle.planner import LifecycleState, plan_lifecycle
        from foresize.lifecycle.revert import REVERT_FINALIZER

        if self.lifecycle_state is None:
            self.lifecycle_state = LifecycleState()
        for kind, objects in (
            ("AIScaleTarget", snap.targets),
            ("DaemonSetAutoscaler", snap.daemonset_autoscalers),
        ):
            for obj in objects:
                meta = get_path(obj, "metadata")
                uid = get_path(meta, "uid") or target_key(obj)
                finalizers = get_path(meta, "finalizers") or []
                deleting = get_path(meta, "deletion_timestamp") is not None
                if deleting or REVERT_FINALIZER in finalizers or uid in self._finalized:
                    continue
                result = await self.executor.add_finalizer(
                    kind, get_path(meta, "namespace"), get_path(meta, "name"), REVERT_FINALIZER
                )
                if result.ok:
                    self._finalized.add(uid)
        lp = plan_lifecycle(snap, now, self.lifecycle_state)
        self.lifecycle_state = lp.state
        for key in lp.finalizers_done:
            kind, ns, name = key.split("/", 2)
            result = await self.executor.remove_finalizer(kind, ns, name, REVERT_FINALIZER)
            if not result.ok:
                log.warning("could not release the finalizer of %s: %s", key, result.message)
        return list(lp.actions)

    async def _templates(
        self, snap: ClusterSnapshot, done: list[tuple[Action, ActionResult | None]]
    ) -> None:
        """ClusterAIScaleTemplates: create/update/delete their AIScaleTargets. `snap` is the
        unfiltered snapshot: which workloads a template may claim depends on every
        template and every existing AIScaleTarget, whichever shard the target is in."""
        if not snap.templates:
            return
        from foresize.cluster.actions import ActionResult as Result
        from foresize.lifecycle.templates import plan_templates

        tp = plan_templates(snap, snap.templates)
        for obj in tp.create:
            r = await self.executor.create_object("AIScaleTarget", _as_json(obj))
            self._log_object("create", obj, r)
        for obj in tp.update:
            r = await self.executor.update_object("AIScaleTarget", _as_json(obj))
            self._log_object("update", obj, r)
        for ns, name in tp.delete:
            r: Result = await self.executor.delete_object("AIScaleTarget", ns, name)
            log.info("template: delete AIScaleTarget %s/%s -> %s", ns, name, r.code)
        for tname, status in tp.status.items():
            action = WriteTargetStatus("", tname, status, kind="ClusterAIScaleTemplate")
            done.append((action, await self.executor.apply(action)))

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


def _as_json(obj: Any) -> dict[str, Any]:
    return obj.to_kube() if hasattr(obj, "to_kube") else dict(obj)
