"""A pod's life: creation through admission, binding, readiness, graceful deletion and
the end of finished pods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import (
    READY,
    ContainerStatus,
    Pod,
    PodCondition,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.qos import effective_requests
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.objects import (
    PodMeta,
    resizable_containers,
)

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.controllers import Controllers
    from foresize.shells.sim.cluster.disruption import Disruption
    from foresize.shells.sim.cluster.facade import AdmissionHook
    from foresize.shells.sim.cluster.kubelet import Kubelet
    from foresize.shells.sim.cluster.metering import Metering
    from foresize.shells.sim.cluster.scheduler import Scheduler


class PodLifecycle:
    """Creates, binds, readies, terminates and removes pods."""

    # Peers, connected by the facade once every part exists.
    scheduler: Scheduler
    metering: Metering
    kubelet: Kubelet
    controllers: Controllers
    disruption: Disruption

    def __init__(
        self,
        clock: Clock,
        journal: Journal,
        store: ObjectStore,
        nodeset: NodeSet,
        *,
        admission_hook: AdmissionHook | None,
        failed_pod_ttl: float,
    ) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.nodeset = nodeset
        self.admission_hook = admission_hook  # every pod CREATE goes through it
        self.failed_pod_ttl = failed_pod_ttl
        # (pod key, seconds from start to its first Ready), in order, and the uids seen.
        self.time_to_ready: list[tuple[str, float]] = []
        self.ready_seen: set[str] = set()

    def create_pod(self, pod: Pod, *, grace: float = 30.0, readiness_delay: float = 0.0) -> Pod:
        """Create a bare pod (no controller) through admission, as `kubectl run` would."""
        meta = PodMeta(None, None, 0, readiness_delay=readiness_delay, grace=grace)
        if not pod.uid:
            pod.uid = self.store.new_uid()
        created = self.admit(pod, meta, None)
        assert created is not None
        return created

    def admit(self, pod: Pod, meta: PodMeta, wl: Workload | None) -> Pod | None:
        pod.creation_time = self.clock.now
        before = [c.resources.copy() for c in pod.containers]
        if self.admission_hook is not None:
            pod = self.admission_hook(pod, wl, self.clock.now)
        mutated = [c.resources for c in pod.containers] != before
        key = pod.key
        if key in self.store.pods:
            self.journal.log(
                "PodCreateFailed",
                f"Pod/{key}",
                "AlreadyExists",
                f'pods "{pod.name}" already exists',
            )
            return None
        pod.phase = "Pending"
        pod.node_name = None
        pod.conditions = [PodCondition(READY, "False", "", "", self.clock.now)]
        self.store.pods[key] = pod
        self.store.meta[key] = meta
        self.store.pod_epoch[key] = self.store.epoch
        self.disruption.index(pod)
        if meta.top is not None:
            self.store.wl_state[meta.top].pods.add(key)
        self.scheduler.pending.add(key)
        self.journal.log(
            "PodCreated",
            f"Pod/{key}",
            "SuccessfulCreate",
            f"created pod {pod.name}",
            owner=meta.top or "",
            mutated=mutated,
            annotations=dict(pod.annotations),
        )
        self.scheduler.queue()
        return pod

    def bind(self, key: str, node: str) -> None:
        pod = self.store.writable_pod(key)
        meta = self.store.meta[key]
        self.scheduler.pending.discard(key)
        meta.nominated_node = None
        pod.node_name = node
        pod.phase = "Running"
        pod.conditions = [c for c in pod.conditions if c.type != "PodScheduled"]
        pod.start_time = self.clock.now
        # The kubelet admits the pod and reports allocated and actual resources for every
        # container it keeps running: regular containers and sidecars (init containers that
        # ran to completion are not resized and carry no allocation here).
        pod.container_statuses = []
        pod.init_container_statuses = []
        for c in resizable_containers(pod):
            reqs = {k: v for k, v in effective_requests(c).items() if k in (CPU, MEMORY)}
            lims = {k: v for k, v in c.resources.limits.items() if k in (CPU, MEMORY)}
            status = ContainerStatus(
                c.name, dict(reqs), ResourceRequirements(dict(reqs), lims), ready=False
            )
            if c.is_sidecar:
                pod.init_container_statuses.append(status)
            else:
                pod.container_statuses.append(status)
        pod.observed_generation = pod.generation
        self.nodeset.node_pods[node].add(key)
        self.nodeset.recharge(key)
        self.metering.open_slots(key)
        self.journal.log(
            "PodScheduled",
            f"Pod/{key}",
            "Scheduled",
            f"Successfully assigned {key} to {node}",
            node=node,
        )
        self.clock.at(self.clock.now + meta.readiness_delay, self.become_ready, key, pod.uid)
        if meta.top is not None and self.store.wl_state[meta.top].spec.kind in ("Job", "CronJob"):
            meta.run_until = self.clock.now + self.store.wl_state[meta.top].spec.run_time
            self.clock.at(meta.run_until, self.job_pod_done, key, pod.uid)

    def still_running(self, key: str, uid: str) -> bool:
        """A scheduled event for pod `key` (uid `uid`) still applies: the same pod is
        Running and not terminating."""
        pod = self.store.pods.get(key)
        return (
            pod is not None
            and pod.uid == uid
            and pod.phase == "Running"
            and pod.deletion_time is None
        )

    def become_ready(self, key: str, uid: str) -> None:
        if not self.still_running(key, uid):
            return
        meta = self.store.meta[key]
        usage = self.metering.usage
        if meta.ready or any(
            usage.down_until[s] > self.clock.now or usage.startup_left[s] > 0 for s in meta.slots
        ):
            return  # crashed, or start-up work left: the usage step calls again when done
        pod = self.store.pods[key]
        if pod.start_time is not None and self.clock.now < pod.start_time + meta.readiness_delay:
            return  # the scheduled call at the readiness delay comes later
        pod = self.store.writable_pod(key)
        cond = pod.condition(READY)
        if cond is not None:
            cond.status = "True"
            cond.last_transition_time = self.clock.now
        for s in pod.container_statuses:
            s.ready = True
        if pod.start_time is not None and pod.uid not in self.ready_seen:
            # Time-to-Ready of each pod's first readiness (start-up benchmarks read it).
            self.ready_seen.add(pod.uid)
            self.time_to_ready.append((key, self.clock.now - pod.start_time))
        meta.ready = True
        self.metering.wl_ready[meta.wl_index] += 1
        self.metering.usage.ready[meta.slots] = True
        if meta.top is not None:
            st = self.store.wl_state[meta.top]
            if st.rollout or st.spec.kind == "StatefulSet" or st.spec.kind == "DaemonSet":
                self.controllers.queue_reconcile(meta.top)

    def unready(self, key: str) -> None:
        meta = self.store.meta[key]
        pod = self.store.writable_pod(key)
        cond = pod.condition(READY)
        if cond is not None and cond.status == "True":
            cond.status = "False"
            cond.last_transition_time = self.clock.now
        for s in pod.container_statuses:
            s.ready = False
        if meta.ready:
            meta.ready = False
            self.metering.wl_ready[meta.wl_index] -= 1
            self.metering.usage.ready[meta.slots] = False

    def delete(self, key: str, grace: float, reason: str) -> None:
        """Graceful deletion: terminating now, gone after the grace period."""
        pod = self.store.pods.get(key)
        if pod is None or pod.deletion_time is not None:
            return
        meta = self.store.meta[key]
        if pod.node_name is None or pod.phase in ("Succeeded", "Failed"):
            self.remove(key, pod.uid)
            return
        self.unready(key)
        pod = self.store.writable_pod(key)
        pod.deletion_time = self.clock.now
        self.journal.log(
            "PodTerminating", f"Pod/{key}", reason, f"grace period {grace:g}s", grace=grace
        )
        self.clock.at(self.clock.now + grace, self.remove, key, pod.uid)
        self.controllers.queue_reconcile(meta.top)

    def remove(self, key: str, uid: str) -> None:
        pod = self.store.pods.get(key)
        if pod is None or pod.uid != uid:
            return
        meta = self.store.meta[key]
        self.metering.close_slots(key)
        self.scheduler.pending.discard(key)
        self.kubelet.resizing.discard(key)
        node = pod.node_name
        del self.store.pods[key]
        self.nodeset.recharge(key)
        if node is not None:
            self.nodeset.node_pods[node].discard(key)
        if meta.top is not None:
            self.store.wl_state[meta.top].pods.discard(key)
        del self.store.meta[key]
        self.store.pod_epoch.pop(key, None)
        for pdb in self.disruption.pdbs.values():
            pdb.members.discard(key)
        self.journal.log("PodDeleted", f"Pod/{key}", "Deleted", "", node=node or "")
        self.controllers.queue_reconcile(meta.top)
        self.scheduler.queue()
        if node is not None:
            self.clock.at(self.clock.now, self.kubelet.sync, node)

    def finish(self, key: str, phase: str, reason: str, message: str) -> None:
        """The pod ends (Succeeded, or Failed by node-pressure eviction): it stops being
        charged, its controller replaces it, and it is garbage-collected later."""
        self.unready(key)
        self.metering.close_slots(key)
        pod = self.store.writable_pod(key)
        pod.phase = phase
        self.nodeset.recharge(key)
        self.kubelet.resizing.discard(key)
        meta = self.store.meta[key]
        self.journal.log("PodFinished", f"Pod/{key}", reason, message, phase=phase)
        self.clock.at(self.clock.now + self.failed_pod_ttl, self.remove, key, pod.uid)
        self.controllers.queue_reconcile(meta.top)
        self.scheduler.queue()
        if pod.node_name is not None:
            self.clock.at(self.clock.now, self.kubelet.sync, pod.node_name)

    def job_pod_done(self, key: str, uid: str) -> None:
        if not self.still_running(key, uid):
            return
        meta = self.store.meta[key]
        if meta.top is not None:
            self.store.wl_state[meta.top].succeeded += 1
        self.finish(key, "Succeeded", "Completed", "job pod completed")
