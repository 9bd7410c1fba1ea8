"""The workload controllers: Deployment (through ReplicaSets, rolling update), StatefulSet
(OrderedReady), DaemonSet (one pod per node), Job (optionally periodic), CronJob (a new
Job on its schedule, `concurrencyPolicy: Forbid`, the last 3 Jobs kept), and scale."""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING

from foresize.core.cluster.model import (
    OwnerRef,
    Pod,
    Workload,
)
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.objects import (
    PodMeta,
    WorkloadState,
    clone_workload,
    template_from_spec,
)
from foresize.shells.sim.scenario import WorkloadSpec

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.facade import ScaleHook
    from foresize.shells.sim.cluster.lifecycle import PodLifecycle
    from foresize.shells.sim.cluster.metering import Metering

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of generated name suffixes
JOBS_HISTORY_LIMIT = 3
"""A CronJob keeps its last 3 Jobs (`successfulJobsHistoryLimit`'s default); older ones go
with their pods, as the CronJob controller deletes them."""


class Controllers:
    """The workload controllers (Deployment, StatefulSet, DaemonSet, Job)."""

    # Peers, connected by the facade once every part exists.
    lifecycle: PodLifecycle
    metering: Metering

    def __init__(
        self,
        clock: Clock,
        journal: Journal,
        store: ObjectStore,
        nodeset: NodeSet,
        *,
        scale_hook: ScaleHook | None = None,
    ) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.nodeset = nodeset
        # Replicas go through it when set (where a scale webhook plugs in).
        self.scale_hook = scale_hook
        self._reconcile_queued: set[str] = set()

    def rs_name(self, name: str, revision: int) -> str:
        digest = hashlib.sha256(f"{name}/{revision}".encode()).digest()
        return f"{name}-" + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:10])

    def add_workload(self, spec: WorkloadSpec) -> None:
        key = f"{spec.kind}/{spec.namespace}/{spec.name}"
        uid = self.store.new_uid()
        wl = Workload(
            spec.kind,
            spec.namespace,
            spec.name,
            uid,
            dict(spec.labels),
            dict(spec.labels),
            spec.replicas if spec.kind not in ("Job", "CronJob") else spec.parallelism,
            template_from_spec(spec),
        )
        self.store.workloads[key] = wl
        st = WorkloadState(spec, self.metering.acc_row(f"{spec.kind}/{spec.namespace}/{spec.name}"))
        st.owner_ref = OwnerRef(
            spec.kind, spec.name, uid, "batch/v1" if spec.kind == "CronJob" else "apps/v1"
        )
        self.store.wl_state[key] = st
        self.journal.counters.setdefault(key, {})
        if spec.kind == "Deployment":
            self.new_replicaset(key)
        if spec.kind == "CronJob":
            st.job_done = True  # no run before the first scheduled one
            self.clock.at(spec.first_run, self.cronjob_run, key)

    def new_replicaset(self, key: str) -> None:
        st = self.store.wl_state[key]
        dep = self.store.workloads[key]
        st.rs_name = self.rs_name(dep.name, st.revision)
        rs = Workload(
            "ReplicaSet",
            dep.namespace,
            st.rs_name,
            self.store.new_uid(),
            dict(dep.labels),
            dict(dep.selector),
            0,
            clone_workload(dep).template,
            owner=OwnerRef("Deployment", dep.name, dep.uid, "apps/v1"),
        )
        self.store.workloads[f"ReplicaSet/{dep.namespace}/{st.rs_name}"] = rs

    def queue_reconcile(self, key: str | None) -> None:
        if key is None or key in self._reconcile_queued or key not in self.store.wl_state:
            return
        self._reconcile_queued.add(key)
        self.clock.at(self.clock.now, self.reconcile, key)

    def reconcile(self, key: str) -> None:
        self._reconcile_queued.discard(key)
        st = self.store.wl_state[key]
        kind = st.spec.kind
        if kind == "Deployment":
            self.reconcile_deployment(key, st)
        elif kind == "StatefulSet":
            self.reconcile_statefulset(key, st)
        elif kind == "DaemonSet":
            self.reconcile_daemonset(key, st)
        elif kind in ("Job", "CronJob"):
            self.reconcile_job(key, st)

    def live(self, st: WorkloadState) -> list[Pod]:
        """Pods of the workload that are neither finished nor terminating (stable order)."""
        out = []
        for k in sorted(st.pods):
            p = self.store.pods.get(k)
            if p is not None and p.phase not in ("Succeeded", "Failed") and p.deletion_time is None:
                out.append(p)
        return out

    def deletion_rank(self, p: Pod) -> tuple[int, int, float, str]:
        # ReplicaSet scale-down order: unscheduled, then not ready, then newest first.
        return (
            0 if p.node_name is None else 1,
            0 if not self.store.meta[p.key].ready else 1,
            -p.creation_time,
            p.name,
        )

    def reconcile_deployment(self, key: str, st: WorkloadState) -> None:
        dep = self.store.workloads[key]
        desired = dep.replicas
        live = self.live(st)
        new = [p for p in live if self.store.meta[p.key].revision == st.revision]
        old = [p for p in live if self.store.meta[p.key].revision != st.revision]
        if not old:
            st.rollout = False
            if len(new) < desired:
                for _ in range(desired - len(new)):
                    self.create_for(key, st)
            elif len(new) > desired:
                for p in sorted(new, key=self.deletion_rank)[: len(new) - desired]:
                    self.lifecycle.delete(p.key, self.store.meta[p.key].grace, "ScaledDown")
        else:
            st.rollout = True
            surge = math.ceil(0.25 * desired)
            unavailable = math.floor(0.25 * desired)
            if surge == 0 and unavailable == 0:
                unavailable = 1
            total = len(new) + len(old)
            create = min(desired + surge - total, desired - len(new))
            for _ in range(max(0, create)):
                self.create_for(key, st)
            ready = sum(1 for p in live if self.store.meta[p.key].ready)
            budget = ready - (desired - unavailable)
            for p in sorted(old, key=self.deletion_rank):
                if not self.store.meta[p.key].ready:
                    self.lifecycle.delete(p.key, self.store.meta[p.key].grace, "RollingUpdate")
                elif budget > 0:
                    budget -= 1
                    self.lifecycle.delete(p.key, self.store.meta[p.key].grace, "RollingUpdate")
        self._sync_replica_sets(dep, st, desired)

    def _sync_replica_sets(self, dep: Workload, st: WorkloadState, desired: int) -> None:
        """ReplicaSet replica counts for snapshots; drop emptied old ReplicaSets."""
        counts: dict[str, int] = {}
        for k in st.pods:
            member = self.store.pods.get(k)
            if (
                member is not None
                and member.owner is not None
                and member.phase not in ("Succeeded", "Failed")
            ):
                name = member.owner.name
                counts[name] = counts.get(name, 0) + (member.deletion_time is None)
        for rs_key in [
            k
            for k, w in self.store.workloads.items()
            if w.kind == "ReplicaSet"
            and w.owner is not None
            and w.owner.name == dep.name
            and w.namespace == dep.namespace
        ]:
            rs = self.store.workloads[rs_key]
            want = desired if rs.name == st.rs_name else counts.get(rs.name, 0)
            if rs.name != st.rs_name and rs.name not in counts:
                del self.store.workloads[rs_key]
                continue
            if rs.replicas != want:
                self.store.writable_workload(rs_key).replicas = want

    def reconcile_statefulset(self, key: str, st: WorkloadState) -> None:
        sts = self.store.workloads[key]
        existing: dict[int, Pod] = {}
        for k in sorted(st.pods):
            p = self.store.pods.get(k)
            if p is None:
                continue
            if p.phase in ("Succeeded", "Failed"):
                # The StatefulSet controller deletes a failed pod to recreate its ordinal.
                self.lifecycle.remove(k, p.uid)
                continue
            existing[self.store.meta[k].ordinal] = p
        if any(p.deletion_time is not None for p in existing.values()):
            return  # OrderedReady: one change at a time
        # Scale down from the highest ordinal.
        extra = sorted((i for i in existing if i >= sts.replicas), reverse=True)
        if extra:
            if all(self.store.meta[existing[i].key].ready for i in existing if i < sts.replicas):
                self.lifecycle.delete(
                    existing[extra[0]].key,
                    self.store.meta[existing[extra[0]].key].grace,
                    "ScaledDown",
                )
            return
        for i in range(sts.replicas):
            p = existing.get(i)
            if p is None:
                self.create_for(key, st, ordinal=i)
                return
            if not self.store.meta[p.key].ready:
                return
        # Rolling update: replace the highest-ordinal pod of an old revision.
        stale = [i for i, p in existing.items() if self.store.meta[p.key].revision != st.revision]
        st.rollout = bool(stale)
        if stale:
            p = existing[max(stale)]
            self.lifecycle.delete(p.key, self.store.meta[p.key].grace, "RollingUpdate")

    def reconcile_daemonset(self, key: str, st: WorkloadState) -> None:
        by_node: dict[str, list[Pod]] = {}
        for p in self.live(st):
            by_node.setdefault(self.store.meta[p.key].pinned_node or "", []).append(p)
        for name, node in self.nodeset.nodes.items():
            if not node.ready:
                continue
            if name not in by_node:
                terminating = [
                    k
                    for k in st.pods
                    if k in self.store.pods
                    and self.store.meta[k].pinned_node == name
                    and self.store.pods[k].deletion_time is not None
                ]
                if not terminating:  # maxSurge 0: the old pod goes first
                    self.create_for(key, st, node=name)
        for name, pods in by_node.items():
            if name not in self.nodeset.nodes:
                for p in pods:
                    self.lifecycle.delete(p.key, self.store.meta[p.key].grace, "NodeGone")
        ready_nodes = sum(1 for n in self.nodeset.nodes.values() if n.ready)
        if self.store.workloads[key].replicas != ready_nodes:
            self.store.writable_workload(key).replicas = ready_nodes  # desiredNumberScheduled
        # Rolling update, maxUnavailable 1.
        live = self.live(st)
        stale = [p for p in live if self.store.meta[p.key].revision != st.revision]
        st.rollout = bool(stale)
        busy = any(
            self.store.pods[k].deletion_time is not None for k in st.pods if k in self.store.pods
        ) or any(not self.store.meta[p.key].ready for p in live)
        if stale and not busy:
            self.lifecycle.delete(
                stale[0].key, self.store.meta[stale[0].key].grace, "RollingUpdate"
            )

    def reconcile_job(self, key: str, st: WorkloadState) -> None:
        spec = st.spec
        if st.job_done:
            return
        live = self.live(st)
        if st.succeeded >= spec.completions:
            st.job_done = True
            self.journal.log(
                "JobCompleted",
                key,
                "Completed",
                f"{st.succeeded} completions",
            )
            if spec.every and spec.kind == "Job":
                self.clock.at(st.job_round_started + spec.every, self.job_restart, key)
            return
        need = min(spec.parallelism, spec.completions - st.succeeded) - len(live)
        for _ in range(max(0, need)):
            self.create_for(key, st)

    def job_restart(self, key: str) -> None:
        st = self.store.wl_state[key]
        for k in sorted(st.pods):
            p = self.store.pods.get(k)
            if p is not None and p.phase == "Succeeded":
                self.lifecycle.remove(k, p.uid)
        st.succeeded = 0
        st.job_done = False
        st.job_round_started = self.clock.now
        self.queue_reconcile(key)

    def cronjob_run(self, key: str) -> None:
        """The CronJob's schedule fires: a new Job `<cronjob>-<scheduled minute>` owned by
        the CronJob (its pods are the Job's), unless the last run is still active
        (`concurrencyPolicy: Forbid`); the next run is scheduled one period on."""
        st = self.store.wl_state[key]
        spec = st.spec
        assert spec.every is not None
        self.clock.at(self.clock.now + spec.every, self.cronjob_run, key)
        if not st.job_done:
            self.journal.log("JobSkipped", key, "JobAlreadyActive", st.rs_name)
            return
        cron = self.store.workloads[key]
        name = f"{spec.name}-{int(self.clock.now // 60):08d}"
        job = Workload(
            "Job",
            cron.namespace,
            name,
            self.store.new_uid(),
            dict(cron.labels),
            {"batch.kubernetes.io/job-name": name},
            spec.parallelism,
            clone_workload(cron).template,
            owner=OwnerRef("CronJob", cron.name, cron.uid, "batch/v1"),
        )
        self.store.workloads[f"Job/{cron.namespace}/{name}"] = job
        st.rs_name = name  # the run in progress (a Deployment's field: its current child)
        st.succeeded = 0
        st.job_done = False
        st.job_round_started = self.clock.now
        self.journal.log("JobCreated", key, "SuccessfulCreate", f"created Job {name}")
        self._forget_old_jobs(cron)
        self.queue_reconcile(key)

    def _forget_old_jobs(self, cron: Workload) -> None:
        jobs = sorted(
            k
            for k, w in self.store.workloads.items()
            if w.kind == "Job"
            and w.namespace == cron.namespace
            and w.owner is not None
            and w.owner.kind == "CronJob"
            and w.owner.name == cron.name
        )
        for old in jobs[:-JOBS_HISTORY_LIMIT]:
            name = old.rsplit("/", 1)[1]
            for pkey, pod in list(self.store.pods.items()):
                owner = pod.owner
                if (
                    owner is not None
                    and (owner.kind, owner.name, pod.namespace) == ("Job", name, cron.namespace)
                    and pod.phase in ("Succeeded", "Failed")
                ):
                    self.lifecycle.remove(pkey, pod.uid)
            del self.store.workloads[old]

    def create_for(
        self, key: str, st: WorkloadState, *, ordinal: int = -1, node: str | None = None
    ) -> Pod | None:
        wl = self.store.workloads[key]
        spec = st.spec
        owner: OwnerRef | None
        if spec.kind == "Deployment":
            owner = OwnerRef(
                "ReplicaSet",
                st.rs_name,
                self.store.workloads[f"ReplicaSet/{wl.namespace}/{st.rs_name}"].uid,
                "apps/v1",
            )
            name = f"{st.rs_name}-{self.store.name_suffix()}"
        elif spec.kind == "StatefulSet":
            owner = st.owner_ref
            name = f"{spec.name}-{ordinal}"
        elif spec.kind == "CronJob":  # the pods of the run in progress: its Job's
            job = self.store.workloads[f"Job/{wl.namespace}/{st.rs_name}"]
            owner = OwnerRef("Job", job.name, job.uid, "batch/v1")
            name = f"{job.name}-{self.store.name_suffix()}"
        else:
            owner = OwnerRef(
                spec.kind, spec.name, wl.uid, "batch/v1" if spec.kind == "Job" else "apps/v1"
            )
            name = f"{spec.name}-{self.store.name_suffix()}"
        tmpl = clone_workload(wl).template
        pod = Pod(
            namespace=wl.namespace,
            name=name,
            uid=self.store.new_uid(),
            labels=dict(tmpl.labels),
            annotations=dict(tmpl.annotations),
            owner=owner,
            priority=tmpl.priority,
            containers=tmpl.containers,
            init_containers=tmpl.init_containers,
            restart_policy="OnFailure" if spec.kind in ("Job", "CronJob") else "Always",
            resources=tmpl.resources,
            # The RuntimeClass admission plugin copies the runtime's overhead into the pod.
            overhead=dict(tmpl.overhead),
        )
        if spec.kind == "Deployment":
            pod.labels["pod-template-hash"] = st.rs_name.rsplit("-", 1)[1]
        elif spec.kind in ("StatefulSet", "DaemonSet"):
            pod.labels["controller-revision-hash"] = f"{spec.name}-{st.revision}"
        elif spec.kind == "CronJob":
            pod.labels["batch.kubernetes.io/job-name"] = st.rs_name
            pod.labels["job-name"] = st.rs_name
        meta = PodMeta(
            top=key,
            owner_key=f"{owner.kind}/{wl.namespace}/{owner.name}" if owner else None,
            wl_index=st.index,
            revision=st.revision,
            pinned_node=node,
            readiness_delay=spec.readiness_delay,
            grace=spec.termination_grace,
            ordinal=ordinal,
        )
        return self.lifecycle.admit(pod, meta, wl)

    def set_replicas(self, wkey: str, replicas: int, *, source: str) -> int:
        wl = self.store.workloads[wkey]
        if self.scale_hook is not None:
            replicas = self.scale_hook(wl, replicas, self.clock.now)
        if replicas != wl.replicas:
            self.store.writable_workload(wkey).replicas = replicas
            self.journal.log(
                "Scaled",
                wkey,
                "ScalingReplicaSet",
                f"scaled to {replicas}",
                replicas=replicas,
                source=source,
            )
            self.queue_reconcile(wkey)
        return replicas
