"""The Foresize operator on the simulated cluster: the shell that runs the real core.

`SimOperator` wires itself into a `SimCluster` the way the kube shell wires itself into a
real API server, and runs the same pass (`foresize.core.reconcile.plan_pass`):

- a usage observer (`sim.on_usage`, `shells.sim.observer`) feeds the usage history
  (samples of a pod's first 2 minutes are left out, but for a Job's, and so are samples
  of a container that is down); OOM kills go into the history as events;
- every `loop_interval` it takes a snapshot, runs the core's pass (recommendations at each
  target's cadence or at once after an OOM kill, horizontal, lifecycle, templates, the
  in-place gate, the vertical planner) and sends its actions through the core's
  `ActionQueue` and `sim.apply`; status writes are reflected into the target objects, as
  a watch would deliver them;
- the CPU samples of pods with a start-up boost (their first minutes included) go into
  the pods' usage window the pass reads for a boost that ends when usage settles
  (`pod_usage`, as the kube shell's collector feeds it);
- the samples of DaemonSets that DaemonSetAutoscalers scale go into the pass's DaemonSet
  usage window (`dsa_usage`), every pod's sample as the kube shell's collector feeds it:
  the pass's DaemonSet step publishes each percentile suggestion into the DSA's status
  and resizes running pods in place;
- the admission pod hook (`foresize.shells.sim.admission`) gives recreated pods the suggested
  resources from the targets' (and DaemonSetAutoscalers') status; it can be switched off
  (`operator.admission.enabled = False`).

`restart()` drops the pass's in-memory state as an operator restart would: the state is
rebuilt from what the planners wrote into the targets' status.

The recommenders it runs are in `foresize.shells.sim.recommenders`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.adapters.collector import planned_without_cyclic_gc
from foresize.adapters.timezones import SYSTEM_ZONES
from foresize.core.api.cluster_policy import POLICY_LABEL
from foresize.core.api.jobs import JOB_GROUP, RUNS_KINDS
from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.api.vocabulary import DEFAULT_HPA_RESOURCE_POLICY
from foresize.core.cluster.actions import WriteTargetStatus
from foresize.core.cluster.boost import PodCpuWindow
from foresize.core.cluster.headroom import HeadroomConfig
from foresize.core.cluster.jobs import JOB, history_workload, job_group_of
from foresize.core.cluster.model import (
    ContainerSuggestion,
    Suggestion,
)
from foresize.core.cluster.pending import PendingDemand
from foresize.core.history import HistoryWorkload
from foresize.core.lifecycle.daemonset import UsageWindow
from foresize.core.recommend.suggestions import suggestion_uid
from foresize.core.reconcile import ActionQueue, ReconcileConfig, ReconcileState, plan_pass
from foresize.core.vertical import WorkerConfig, WorkerState
from foresize.core.vertical.modes import new_run_oom_kill
from foresize.shells.sim.observer import Sampling, UsageObserver
from foresize.shells.sim.recommenders import (
    FixedRecommender,
    ForesizeRecommender,
    Recommender,
    SeriesInfo,
    VPARecommender,
)

DEFAULT_MIN_LOOKBACK = 86400.0
"""The API default of `min_lookback_to_scale` (24 h): no autonomous action before."""


# --------------------------------------------------------------------------- admission


def _proportional_limits(containers: list[Any]) -> list[dict[str, Any]]:
    """Container policies with `limit.ratio` = the template's limit / request."""
    from foresize.core.api.quantity import format_quantity

    out = []
    for c in containers:
        entry: dict[str, Any] = {"name": c.name}
        for r, low in ((CPU, 10), (MEMORY, 32 * MIB)):
            req = c.resources.requests.get(r)
            lim = c.resources.limits.get(r)
            policy: dict[str, Any] = {"lowerbound": format_quantity(r, low)}
            if req and lim:
                policy["limit"] = {"ratio": max(1.0, lim / req)}
            entry[r] = policy
        out.append(entry)
    return out


def _install_admission(sim: Any, operator: SimOperator) -> Any:
    from foresize.shells.sim.admission import install

    # The */scale hook only matters where a target publishes a replica floor: the
    # coordinated mode (the simulated targets are never horizontally autonomous).
    return install(sim, scale=operator.opt.hpa_resource_policy == "coordinate")


# --------------------------------------------------------------------------- the operator


OOM_WATCH_DELAY = 1.0
"""Seconds from a run's OOM kill to the pass it brings forward: the pod watch delivering
the container's new status (`lastState.terminated.reason: OOMKilled`)."""


@dataclass(slots=True)
class OperatorOptions:
    update_mode: str = "in_place_or_recreate"
    loop_interval: float = 15.0
    recommend_interval: float = 900.0  # forecast_interval default = forecast_blocks (15 m)
    min_lookback: float = DEFAULT_MIN_LOOKBACK
    kinds: tuple[str, ...] = ("Deployment", "StatefulSet", "CronJob")
    # Hysteresis (scaling_behavior): up 5%, down 10%, the recommender's defaults.
    scale_up_percent: float = 5.0
    scale_down_percent: float = 10.0
    min_cpu: int = 10
    min_memory: int = 32 * MIB
    admission: bool = True
    disruption: dict[str, Any] = field(default_factory=dict)
    hpa_resource_policy: str = DEFAULT_HPA_RESOURCE_POLICY
    # The machine's zone database: the targets' maintenance windows read it as in a cluster.
    worker: WorkerConfig = field(default_factory=lambda: WorkerConfig(time_zones=SYSTEM_ZONES))
    vertical: dict[str, Any] | None = None  # more of the targets' spec.vertical (windows, ...)
    targets: list[str] | None = None  # workload keys Kind/ns/name; None = all of `kinds`
    # The targets keep limits proportional to the template (limit.ratio per resource), as
    # VPA does by default, so a memory leak can be followed above the template's limit.
    proportional_limits: bool = True
    min_lookback_to_scale: str | None = None  # the target's own (API default 24 h)
    min_replicas: int | None = None  # the targets' update_policy.min_replicas (API default 2)
    startup_boost: dict[str, Any] | None = None  # the targets' vertical.startup_boost
    headroom: HeadroomConfig | None = None  # forecast-sized placeholders (`--headroom`)


def _only_set(vertical: dict[str, Any], opt: OperatorOptions) -> None:
    """`vertical` without what the options left at their defaults (the update mode, the
    HPA resource policy): under a policy hierarchy those come from the levels above."""
    default = OperatorOptions()
    policy = vertical.get("update_policy") or {}
    if opt.update_mode == default.update_mode:
        policy.pop("update_mode", None)
    if policy:
        vertical["update_policy"] = policy
    else:
        vertical.pop("update_policy", None)
    if opt.hpa_resource_policy == default.hpa_resource_policy:
        vertical.pop("hpa_resource_policy", None)


class SimOperator(UsageObserver):
    """The Foresize operator (recommender + vertical worker + admission) on a SimCluster."""

    def __init__(
        self,
        sim: Any,
        recommender: Recommender | ForesizeRecommender,
        options: OperatorOptions | None = None,
    ) -> None:
        self.sim = sim
        self.rec = recommender
        self.opt = options or OperatorOptions()
        # Templates are reconciled here too; the simulator has no finalizers to hold.
        worker = self.opt.worker
        if worker.node_autoscaler is None:
            # The scenario says whether a node autoscaler provisions for Pending pods
            # (`core.vertical.provision`), as `--node-autoscaler` tells the operator.
            worker = dataclasses.replace(worker, node_autoscaler=sim.node_autoscaler is not None)
        self.config = ReconcileConfig(
            worker=worker,
            suggest_interval=self.opt.recommend_interval,
            headroom=self.opt.headroom,
        )
        self.pass_state = ReconcileState()
        self.series: dict[tuple[str, str, str], int] = {}
        self.info: list[SeriesInfo] = []
        self.suggestions: dict[str, Suggestion] = {}
        self.targets: dict[str, Any] = {}  # target key -> AIScaleTarget
        self.target_series: dict[str, dict[str, int]] = {}  # target -> container -> series
        # "Job/<name>" -> the history workload of its job group (`cluster.jobs`).
        self.history_names: dict[str, HistoryWorkload] = {}
        self.template: dict[str, dict[str, tuple[dict[str, int], dict[str, int]]]] = {}
        self.last_recommend = -math.inf
        self.oom_seen: dict[tuple[str, str], float] = {}
        self._oom_pass_due: float | None = None  # the pass a run's OOM kill brought forward
        self.admission: Any = None
        self.passes = 0
        self.record_actions = False
        self.applied: list[tuple[float, Any, Any]] = []
        self.versions = 0  # the last resourceVersion given to a target object
        self.dsa_usage = UsageWindow()  # DaemonSet usage, read by the pass's DSA step
        self._sampling: Sampling | None = None
        # Boosted pods' CPU samples (`cluster.boost`), read by the pass for `settle`.
        self.pod_usage = PodCpuWindow()
        self._boosted_at: tuple[np.ndarray, list[tuple[int, str, str]]] | None = None
        # What the last pass published for node autoscalers (`cluster.pending`; the kube
        # shell exports it as foresize_pending_upsize_demand), and its history: (time,
        # (node pool, resource) -> demand) each time it changed.
        self.pending = PendingDemand()
        self.pending_log: list[tuple[float, dict[tuple[str, str], int]]] = []

    def _next_version(self) -> int:
        """The next `metadata.resourceVersion` of a target this operator writes."""
        self.versions += 1
        return self.versions

    @property
    def state(self) -> WorkerState:
        """The vertical worker's state (inside the pass state)."""
        return self.pass_state.worker

    # ------------------------------------------------------------------ wiring
    def install(self) -> SimOperator:
        from foresize.core.api.types import parse_target

        sim = self.sim
        scenario = getattr(sim, "scenario", None)
        named = {
            (w.kind, w.namespace, w.name): w.policy
            for w in getattr(scenario, "workloads", ())
            if w.policy is not None
        }
        # Under a policy hierarchy the targets set only what differs from the options'
        # defaults, so the levels above show through (docs/policies.md).
        hierarchy = bool(
            getattr(sim, "policies", None)
            or any(POLICY_LABEL in labels for labels in getattr(sim, "namespaces", {}).values())
            or named
        )
        for key, wl in list(sim.workloads.items()):
            # A bare Job labelled with a job group is a run of the group, whose target
            # is the group's (`cluster.jobs`): one per group, every Job's usage under it.
            group = job_group_of(wl.template.labels) if wl.kind == JOB and not wl.owner else None
            kind, name = (JOB_GROUP, group) if group is not None else (wl.kind, wl.name)
            if kind not in self.opt.kinds:
                continue
            if self.opt.targets is not None and key not in self.opt.targets:
                continue
            if group is not None:
                self.history_names[f"{wl.kind}/{wl.name}"] = HistoryWorkload(
                    JOB_GROUP, history_workload(group)
                )
                if f"{wl.namespace}/{group}" in self.targets:  # the group's target exists
                    for c in wl.template.containers:
                        self._series(wl.namespace, f"{wl.kind}/{wl.name}", c.name, 0.0)
                    continue
            # A CronJob's or a job group's pods are sized at creation only (`api.jobs`):
            # no update mode but its own, no start-up boost.
            cronjob = kind in RUNS_KINDS
            vertical: dict[str, Any] = {
                "mode": "autonomous",
                "update_policy": {
                    **({} if cronjob else {"update_mode": self.opt.update_mode}),
                    **({"min_replicas": m} if (m := self.opt.min_replicas) is not None else {}),
                },
                "hpa_resource_policy": self.opt.hpa_resource_policy,
            }
            if self.opt.disruption:
                vertical["disruption"] = dict(self.opt.disruption)
            if self.opt.startup_boost is not None and not cronjob:
                vertical["startup_boost"] = dict(self.opt.startup_boost)
            if hierarchy:
                _only_set(vertical, self.opt)
            vertical.update(self.opt.vertical or {})
            if self.opt.proportional_limits:
                vertical["containers"] = _proportional_limits(wl.template.containers)
            spec_model: dict[str, Any] = {}
            if self.opt.min_lookback_to_scale is not None:
                spec_model["min_lookback_to_scale"] = self.opt.min_lookback_to_scale
            if isinstance(self.rec, ForesizeRecommender) and self.rec.mode is not None:
                spec_model["mode"] = self.rec.mode
            target = parse_target(
                {
                    "apiVersion": "foresize.io/v1",
                    "kind": "AIScaleTarget",
                    "metadata": {
                        "name": name,
                        "namespace": wl.namespace,
                        "uid": f"ast-{wl.namespace}-{name}",
                        "generation": 1,
                        "resourceVersion": str(self._next_version()),
                    },
                    "spec": {
                        "scaleTargetRef": {"kind": kind, "name": name},
                        "vertical": vertical,
                        **({"model": spec_model} if spec_model else {}),
                        **(
                            {"policy": policy}
                            if (policy := named.get((wl.kind, wl.namespace, wl.name)))
                            else {}
                        ),
                    },
                },
                source=f"simulated target for {key}",
            )
            tkey = f"{wl.namespace}/{name}"
            self.targets[tkey] = target
            sim.targets.append(target)
            self.template[tkey] = {
                c.name: (dict(c.resources.requests), dict(c.resources.limits))
                for c in wl.template.containers
            }
            self.target_series[tkey] = {
                c.name: self._series(wl.namespace, f"{wl.kind}/{wl.name}", c.name, 0.0)
                for c in wl.template.containers
            }
        if self.opt.admission:
            self.admission = _install_admission(sim, self)
        sim.on_usage(self._observe)
        sim.every(self.opt.loop_interval, self._tick)
        if isinstance(self.rec, ForesizeRecommender):
            sim.on_event("OOMKilled", self._on_oom_kill)
        return self

    def _on_oom_kill(self, event: Any) -> None:
        """A run's container OOM-killed (a pod of a Job) brings a pass forward to
        `OOM_WATCH_DELAY` after the kill, as the kube shell's pod watch does
        (`core.vertical.modes.new_run_oom_kill`): the kubelet restarts it after a 10 s back-off,
        sooner than the next pass, and the pass's in-place raise
        (`vertical.modes.decide_initial`) must land before the restart, or the run is
        killed again at the same limit."""
        pod = self.sim.pods.get(event.object.removeprefix("Pod/"))
        if pod is None or not new_run_oom_kill(None, pod):
            return
        if self._oom_pass_due is not None:
            return  # one pass for the kills of one moment
        self._oom_pass_due = self.sim.now + OOM_WATCH_DELAY
        self.sim.at(self._oom_pass_due, self._oom_pass)

    def _oom_pass(self) -> None:
        self._oom_pass_due = None
        self._tick(self.sim, self.sim.now)

    def restart(self) -> None:
        """An operator restart: the pass's memory is gone; the targets' status and the
        usage history remain."""
        self.pass_state = ReconcileState()
        self.pod_usage = PodCpuWindow()  # the collector's window is in the process too

    def set_suggestion(self, target_key: str, suggestion: Suggestion) -> None:
        """Publish a suggestion (to the worker and the admission hook). The admission
        decision itself leaves a resource an HPA scales on at its template value while the
        target leaves it to the HPA (as the worker does for running pods), so the whole
        suggestion is handed over."""
        self.suggestions[target_key] = suggestion
        if self.admission is not None:
            self.admission.suggestions[target_key] = suggestion

    def _series(self, ns: str, workload: str, container: str, now: float) -> int:
        k = (ns, workload, container)
        idx = self.series.get(k)
        if idx is None:
            idx = len(self.info)
            self.series[k] = idx
            self.info.append(SeriesInfo(ns, workload, container, now))
            if isinstance(self.rec, FixedRecommender):
                self.rec.names[idx] = container
        return idx

    # ------------------------------------------------------------------ the loop
    def _tick(self, sim: Any, now: float) -> None:
        """One pass: snapshot -> the core's `plan_pass` (the kube shell's very function)
        -> the actions through `ActionQueue` and `sim.apply` -> status reflected into the
        targets, as the API server would."""
        snap = sim.snapshot()
        if self.admission is not None and not self.admission.serving:
            snap = dataclasses.replace(snap, admission_healthy=False)
        oom = self._ooms(snap)
        history = None
        overrides = None
        if isinstance(self.rec, ForesizeRecommender):
            history = self.rec.history
        else:
            # A baseline recommender (VPA reference, fixed sizes) in place of Foresize's.
            if oom or now - self.last_recommend >= self.opt.recommend_interval:
                self._recommend(now)
            overrides = self.suggestions
        # As the kube shell runs it: the cyclic collector off for the pass (`adapters.collector`).
        decided = planned_without_cyclic_gc(
            functools.partial(
                plan_pass,
                snap,
                now,
                self.pass_state,
                history,
                self.config,
                dsa_usage=self.dsa_usage,
                suggestions=overrides,
                pod_usage=self.pod_usage,
            )
        )
        self.pass_state = decided.state
        self._record_pending(now, decided.pending)
        if decided.templates is not None:
            self._templates(decided.templates)
        queue = ActionQueue(decided.actions, self.pass_state.worker, now, self.config.worker)
        while (action := queue.next()) is not None:
            result = sim.apply(action)
            if self.record_actions:
                self.applied.append((now, action, result))
            queue.feed(action, result)
        self.pass_state.worker = queue.state
        self._reflect_status(queue.done)
        self.passes += 1

    def _record_pending(self, now: float, demand: PendingDemand) -> None:
        """The pass's pending upsize demand, kept as the kube shell's gauge would show it
        (the annotations go out with the pass's actions)."""
        self.pending = demand
        by_pool = {k: v for k, v in demand.by_pool.items() if v}
        if not self.pending_log or self.pending_log[-1][1] != by_pool:
            self.pending_log.append((now, by_pool))

    def _reflect_status(self, done: list[tuple[Any, Any]]) -> None:
        """The simulator keeps written status apart (`sim.target_status`); the AIScaleTarget
        and DaemonSetAutoscaler objects are replaced by copies carrying it, with a new
        resourceVersion, as a watch would deliver them, so the next snapshot and the
        admission hook read what was written."""
        written = {
            (a.kind, a.namespace, a.name)
            for a, r in done
            if isinstance(a, WriteTargetStatus)
            and a.kind in ("AIScaleTarget", "DaemonSetAutoscaler")
            and r is not None
            and r.ok
        }
        if not written:
            return
        for kind, objects in (
            ("AIScaleTarget", self.sim.targets),
            ("DaemonSetAutoscaler", self.sim.daemonset_autoscalers),
        ):
            for i, obj in enumerate(objects):
                key = (kind, obj.metadata.namespace or "default", obj.metadata.name)
                if key not in written:
                    continue
                status = self.sim.target_status.get(key)
                if status is None:
                    continue
                # A new object with a new resourceVersion, as the API server hands out
                # after a write (the planners' memo of target views is keyed by it).
                meta = obj.metadata.model_copy(
                    update={"resourceVersion": str(self._next_version())}
                )
                fresh = obj.model_copy(
                    update={"status": type(obj.status).model_validate(status), "metadata": meta}
                )
                objects[i] = fresh
                tkey = f"{key[1]}/{key[2]}"
                if kind == "AIScaleTarget" and tkey in self.targets:
                    self.targets[tkey] = fresh

    def _templates(self, tp: Any) -> None:
        """The AIScaleTargets ClusterAIScaleTemplates create, update and delete."""
        sim = self.sim
        for obj in [*tp.create, *tp.update]:
            key = (obj.metadata.namespace, obj.metadata.name)
            sim.targets = [
                t for t in sim.targets if (t.metadata.namespace, t.metadata.name) != key
            ] + [obj]
        for ns, name in tp.delete:
            sim.targets = [
                t for t in sim.targets if (t.metadata.namespace, t.metadata.name) != (ns, name)
            ]

    def _ooms(self, snap: Any) -> bool:
        """OOM kills since the last pass go to the recommender at once (architecture §3.1)."""
        found = False
        for pod in snap.pods:
            for st in pod.container_statuses:
                if st.last_termination_reason != "OOMKilled" or st.last_termination_time is None:
                    continue
                k = (pod.uid, st.name)
                if self.oom_seen.get(k) == st.last_termination_time:
                    continue
                self.oom_seen[k] = st.last_termination_time
                owner = snap.top_owner(pod)
                c = pod.container(st.name)
                if owner is None or c is None:
                    continue
                s = self.series.get((pod.namespace, f"{owner.kind}/{owner.name}", st.name))
                if s is None:
                    continue
                req = float(c.resources.requests.get(MEMORY, 0))
                usage = float(c.resources.limits.get(MEMORY, req))  # killed at its limit
                if isinstance(self.rec, ForesizeRecommender):
                    # Into the history, where the pass's OOM remediation reads it.
                    self.rec.record_oom(self._history_key(s), st.last_termination_time, usage)
                else:
                    self.rec.on_oom(st.last_termination_time, s, req, usage)
                found = True
        return found

    def _recommend(self, now: float) -> None:
        """A baseline recommender's suggestions (Foresize's own come from the pass)."""
        assert not isinstance(self.rec, ForesizeRecommender)
        self.last_recommend = now
        all_series = sorted({s for m in self.target_series.values() for s in m.values()})
        recs = self.rec.recommend(now, all_series)
        for tkey, cmap in self.target_series.items():
            prev = self.suggestions.get(tkey)
            containers: dict[str, ContainerSuggestion] = {}
            for cname, s in cmap.items():
                r = recs.get(s)
                if r is None or not all(math.isfinite(v) for v in r):
                    continue
                if now - self.info[s].first_seen < self.opt.min_lookback:
                    continue  # hasEnoughDataToScale is false: no autonomous action yet
                containers[cname] = self._container_suggestion(tkey, cname, r, prev)
            if not containers:
                continue
            uid = suggestion_uid(containers)
            if prev is not None and prev.uid == uid:
                continue
            self.set_suggestion(
                tkey, Suggestion(uid, now, containers, now, now + self.opt.recommend_interval)
            )

    def _container_suggestion(
        self, tkey: str, cname: str, rec: tuple[float, float], prev: Suggestion | None
    ) -> ContainerSuggestion:
        treq, tlim = self.template[tkey][cname]
        want = {
            CPU: max(self.opt.min_cpu, math.ceil(rec[0])),
            MEMORY: max(self.opt.min_memory, math.ceil(rec[1] / MIB) * MIB),
        }
        old = prev.containers.get(cname) if prev is not None else None
        requests: dict[str, int] = {}
        for r, v in want.items():
            if r not in treq:
                continue  # never add a request the template does not declare (QoS)
            cur = old.requests.get(r, treq[r]) if old is not None else treq[r]
            d = v - cur
            th = self.opt.scale_up_percent if d > 0 else self.opt.scale_down_percent
            requests[r] = v if abs(d) * 100.0 >= th * cur else cur
        # Limits proportional to the template, so the QoS class stays what it was.
        limits = {
            r: max(requests[r], math.ceil(requests[r] * tlim[r] / treq[r]))
            for r in tlim
            if r in requests and treq.get(r)
        }
        if MEMORY in limits:
            limits[MEMORY] = math.ceil(limits[MEMORY] / MIB) * MIB
        return ContainerSuggestion(cname, requests, limits)


# --------------------------------------------------------------------------- policies


SIM_LOOP_INTERVAL = 30.0
"""`foresize simulate` runs the worker every 30 s (the operator's resync period): a stall
is acted on within 30 s of its 2 minutes. Tests use 15 s for finer timing."""


def install_foresize(
    sim: Any,
    mode: str | None = None,
    hpa_resource_policy: str = DEFAULT_HPA_RESOURCE_POLICY,
    min_lookback_to_scale: str | None = None,
    headroom: HeadroomConfig | None = None,
    vertical: dict[str, Any] | None = None,
) -> SimOperator:
    """`--policy foresize[:MODE]`: forecasting recommender, disruption worker, admission;
    `foresize-coordinate`: the same with `hpa_resource_policy: coordinate`;
    `foresize+headroom`: the same with forecast-sized headroom placeholders.
    `min_lookback_to_scale`: the targets' own (API default 24 h; tests shorten it);
    `vertical`: more of their spec.vertical (`foresize-window`: a maintenance window)."""
    opts = OperatorOptions(
        loop_interval=SIM_LOOP_INTERVAL,
        hpa_resource_policy=hpa_resource_policy,
        min_lookback_to_scale=min_lookback_to_scale,
        headroom=headroom,
        vertical=vertical,
    )
    return SimOperator(sim, ForesizeRecommender(mode), opts).install()


def install_vpa(sim: Any, hpa_resource_policy: str = DEFAULT_HPA_RESOURCE_POLICY) -> SimOperator:
    """`--policy vpa`: the VPA reference recommender through the same worker. VPA's
    updater acts on a 10% move of its target in either direction. `hpa_resource_policy:
    override` has it size the HPA's resource too (`bench hpa`'s `hpa+vpa`: the fight)."""
    # The one hysteresis rule (foresize.core.api.hysteresis) at VPA's 10% both ways, where
    # Foresize's default is 5% up: a deliberate difference, the baseline sizes as VPA does
    # (VPA's out-of-[lowerBound, upperBound] trigger is not modelled).
    opts = OperatorOptions(
        loop_interval=SIM_LOOP_INTERVAL,
        scale_up_percent=10.0,
        scale_down_percent=10.0,
        hpa_resource_policy=hpa_resource_policy,
    )
    return SimOperator(sim, VPARecommender(), opts).install()
