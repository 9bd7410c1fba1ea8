"""The simulated kubelet: in-place resize (allocation, conditions, actuation, retries),
OOM kills with crash back-off, and node-pressure eviction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.disruption import restarts_container
from foresize.core.cluster.model import (
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    REASON_DEFERRED,
    REASON_ERROR,
    REASON_INFEASIBLE,
    Pod,
    PodCondition,
    ResourceRequirements,
)
from foresize.core.cluster.qos import (
    allocated_requests,
    effective_requests,
    pod_qos_class,
    spec_requests,
)
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.objects import resizable_containers

if TYPE_CHECKING:
    from foresize.core.cluster.model import ContainerStatus, Node
    from foresize.shells.sim.cluster.controllers import Controllers
    from foresize.shells.sim.cluster.lifecycle import PodLifecycle
    from foresize.shells.sim.cluster.metering import Metering
    from foresize.shells.sim.cluster.scheduler import Scheduler
    from foresize.shells.sim.objects import PodMeta

_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


class Kubelet:
    """The kubelets of every node: resize, OOM kills, node-pressure eviction."""

    # Peers, connected by the facade once every part exists.
    metering: Metering
    scheduler: Scheduler
    lifecycle: PodLifecycle
    controllers: Controllers

    def __init__(
        self,
        clock: Clock,
        journal: Journal,
        store: ObjectStore,
        nodeset: NodeSet,
        *,
        delay: float,
        sync_period: float,
        actuation_delay: float,
    ) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.nodeset = nodeset
        self.delay = delay  # from a resize's patch to the kubelet acting on it
        self.sync_period = sync_period
        # Seconds between allocation and actuation (PodResizeInProgress with no reason).
        self.actuation_delay = actuation_delay
        self.resizing: set[str] = set()  # pods with a resize the kubelet has not finished

    def oom_kill(self, slot: int) -> None:
        key_t = self.metering.slot_keys.get(slot)
        if key_t is None:
            return
        key = f"{key_t.namespace}/{key_t.pod}"
        pod = self.store.pods.get(key)
        if pod is None:
            return
        meta = self.store.meta[key]
        u = self.metering.usage
        usage, limit = u.mem[slot], u.mem_lim[slot]
        pod = self.store.writable_pod(key)
        st = pod.status_of(key_t.container)
        if st is not None:
            st.restart_count += 1
            st.last_termination_reason = "OOMKilled"
            st.last_termination_time = self.clock.now
        # Crash back-off: 10s doubling to 5 minutes, reset after 10 minutes without a crash.
        if self.clock.now - meta.last_crash > 600:
            meta.crash_count = 0
        meta.crash_count += 1
        meta.last_crash = self.clock.now
        backoff = min(300.0, 10.0 * 2 ** (meta.crash_count - 1))
        u.started[slot] = self.clock.now + backoff
        u.down_until[slot] = self.clock.now + backoff
        # The restarted runtime reads its heap setting again, at the limit in force then.
        self.metering.start_heap(slot)
        u.mem[slot] = 0.0
        u.cpu_demand[slot] = u.cpu_used[slot] = 0.0
        self.journal.count(meta.top, "oom_kills")
        self.journal.log(
            "OOMKilled",
            f"Pod/{key}",
            "OOMKilled",
            f"container {key_t.container} exceeded its memory limit",
            container=key_t.container,
            usage_bytes=int(usage),
            limit_bytes=int(limit),
            restart_count=st.restart_count if st else 0,
            backoff_seconds=backoff,
        )
        self.lifecycle.unready(key)
        self.clock.at(
            self.clock.now + backoff + meta.readiness_delay,
            self.lifecycle.become_ready,
            key,
            pod.uid,
        )
        if meta.top is not None and self.store.wl_state[meta.top].rollout:
            self.controllers.queue_reconcile(meta.top)

    def node_pressure(self, node: str) -> None:
        u = self.metering.usage
        threshold = self.nodeset.node_mem_threshold[self.nodeset.node_index[node]]
        cands = []
        for k in self.nodeset.node_pods[node]:
            p = self.store.pods.get(k)
            meta = self.store.meta.get(k)
            if p is None or meta is None or not meta.slots or p.phase != "Running":
                continue
            use = float(sum(u.mem[s] for s in meta.slots))
            req = float(sum(u.mem_req[s] for s in meta.slots))
            cands.append((_QOS_RANK[pod_qos_class(p)], -(use - req), p.priority, k, use))
        total = float(sum(c[4] for c in cands))
        for rank, _, _, k, use in sorted(cands):
            if total <= threshold:
                break
            total -= use
            meta = self.store.meta[k]
            self.journal.count(meta.top, "evictions")
            self.journal.count(meta.top, "node_pressure_evictions")
            msg = "The node was low on resource: memory. "
            self.journal.log(
                "NodePressureEviction",
                f"Pod/{k}",
                "Evicted",
                msg,
                node=node,
                qos=["BestEffort", "Burstable", "Guaranteed"][rank],
                usage_bytes=int(use),
            )
            self.lifecycle.finish(k, "Failed", "Evicted", msg)

    def periodic(self) -> None:
        nodes = sorted(
            {
                node
                for k in self.resizing
                if k in self.store.pods and (node := self.store.pods[k].node_name) is not None
            }
        )
        for n in nodes:
            self.sync(n)  # type: ignore[arg-type]
        self.clock.at(self.clock.now + self.sync_period, self.periodic)

    def sync(self, node: str) -> None:
        """Retry pending resizes on `node`: downsizes first, then higher priority,
        Guaranteed before Burstable, then the oldest request."""
        keys = [
            k
            for k in self.resizing
            if k in self.store.pods and self.store.pods[k].node_name == node
        ]
        if not keys:
            return

        def order(k: str) -> tuple[int, int, int, float, str]:
            p = self.store.pods[k]
            return (
                0 if self.is_downsize(p) else 1,
                -p.priority,
                -_QOS_RANK[pod_qos_class(p)],
                self.store.meta[k].resize_requested_at or 0.0,
                k,
            )

        for k in sorted(keys, key=order):
            self.resize(k)

    def is_downsize(self, pod: Pod) -> bool:
        """The resize does not increase the pod's requests over its allocation
        (isResizeIncreasingRequests: PodRequests of the spec against the allocated pod)."""
        want, allocated = spec_requests(pod), allocated_requests(pod)
        return all(want.get(r, 0) <= allocated.get(r, 0) for r in (CPU, MEMORY))

    def is_downsize_of_actual(self, pod: Pod) -> bool:
        """Whether applying the spec lowers some request in force (frees capacity)."""
        for c in resizable_containers(pod):
            st = pod.status_of(c.name)
            want = effective_requests(c)
            if st is not None and any(
                want.get(r, 0) < st.resources.requests.get(r, 0) for r in (CPU, MEMORY)
            ):
                return True
        return False

    def set_condition(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        cond = pod.condition(type_)
        if cond is None:
            pod.conditions.append(PodCondition(type_, "True", reason, message, self.clock.now))
        elif cond.reason != reason or cond.message != message:
            cond.reason = reason
            cond.message = message
            cond.last_transition_time = self.clock.now

    def clear_condition(self, pod: Pod, type_: str) -> None:
        pod.conditions = [c for c in pod.conditions if c.type != type_]

    def stall(self, key: str, pod: Pod, kind: str, reason: str, message: str) -> None:
        meta = self.store.meta[key]
        if meta.stall_generation != pod.generation:
            meta.stall_generation = pod.generation
            self.journal.count(meta.top, "stalls")
            self.journal.log(kind, f"Pod/{key}", reason, message, generation=pod.generation)

    def resize(self, key: str) -> None:
        pod0 = self.store.pods.get(key)
        if (
            pod0 is None
            or pod0.node_name is None
            or pod0.phase != "Running"
            or pod0.deletion_time is not None
        ):
            self.resizing.discard(key)
            return
        meta = self.store.meta[key]
        node = self.nodeset.nodes[pod0.node_name]
        pod = self.store.writable_pod(key)
        desired = [
            (
                {r: v for r, v in effective_requests(c).items() if r in (CPU, MEMORY)},
                {r: v for r, v in c.resources.limits.items() if r in (CPU, MEMORY)},
            )
            for c in resizable_containers(pod)
        ]
        statuses = [pod.status_of(c.name) for c in resizable_containers(pod)]
        allocated_ok = all(
            s is not None and s.allocated == req
            for s, (req, _) in zip(statuses, desired, strict=True)
        )
        actual_ok = all(
            s is not None and s.resources.requests == req and s.resources.limits == lim
            for s, (req, lim) in zip(statuses, desired, strict=True)
        )
        pod.observed_generation = pod.generation
        if allocated_ok and actual_ok:
            self.clear_condition(pod, POD_RESIZE_PENDING)
            self.clear_condition(pod, POD_RESIZE_IN_PROGRESS)
            self.resizing.discard(key)
            self.nodeset.recharge(key)
            return
        if not allocated_ok and not self._allocate(key, pod, node, statuses, desired):
            return
        downsize = self.is_downsize_of_actual(pod)
        if self.actuation_delay > 0:
            # Allocated, not yet actuated: PodResizeInProgress with no reason meanwhile.
            if meta.actuate_at is None:
                meta.actuate_at = self.clock.now + self.actuation_delay
                self.set_condition(pod, POD_RESIZE_IN_PROGRESS, "", "")
                self.nodeset.recharge(key)
                self.clock.at(meta.actuate_at, self.resize_if_pending, key, pod.uid)
                return
            if self.clock.now < meta.actuate_at:
                return
        # Actuation: all or nothing. A memory limit below live usage cannot be set.
        u = self.metering.usage
        error = self._limit_below_usage(meta, statuses, desired)
        if error is not None:
            self.set_condition(pod, POD_RESIZE_IN_PROGRESS, REASON_ERROR, error)
            self.nodeset.recharge(key)
            self.stall(key, pod, "ResizeError", REASON_ERROR, error)
            return
        changes: dict[str, Any] = {}
        self.metering.account(self.clock.now)
        for i, (c, s, (req, lim)) in enumerate(
            zip(resizable_containers(pod), statuses, desired, strict=True)
        ):
            assert s is not None
            changed = {
                r
                for r in (CPU, MEMORY)
                if s.resources.requests.get(r) != req.get(r)
                or s.resources.limits.get(r) != lim.get(r)
            }
            if not changed:
                continue
            changes[c.name] = {
                "from": {
                    "requests": dict(s.resources.requests),
                    "limits": dict(s.resources.limits),
                },
                "to": {"requests": dict(req), "limits": dict(lim)},
            }
            s.resources = ResourceRequirements(dict(req), dict(lim))
            if i < len(meta.slots):
                self.metering.set_slot_resources(meta.slots[i], s.resources)
            if restarts_container(c, changed):
                s.restart_count += 1
                if i < len(meta.slots):
                    u.started[meta.slots[i]] = self.clock.now
                    self.metering.start_heap(meta.slots[i])  # the runtime starts again
                self.journal.count(meta.top, "resize_restarts")
                self.journal.log(
                    "ContainerRestarted",
                    f"Pod/{key}",
                    "ResizeRestart",
                    f"container {c.name} restarted to apply its resize "
                    "(resizePolicy RestartContainer)",
                    container=c.name,
                    resources=sorted(changed),
                )
        self.clear_condition(pod, POD_RESIZE_IN_PROGRESS)
        self.clear_condition(pod, POD_RESIZE_PENDING)
        self.resizing.discard(key)
        self.nodeset.recharge(key)
        self.journal.count(meta.top, "resizes")
        self.journal.log(
            "ResizeApplied",
            f"Pod/{key}",
            "Resized",
            "in-place resize applied",
            generation=pod.generation,
            containers=changes,
            waited_seconds=self.clock.now - (meta.resize_requested_at or self.clock.now),
        )
        meta.resize_requested_at = None
        meta.actuate_at = None
        if downsize:
            # Freed capacity: the kubelet retries the node's other pending resizes and the
            # scheduler its pending pods.
            self.clock.at(self.clock.now, self.sync, node.name)
            self.scheduler.queue()

    def _allocate(
        self,
        key: str,
        pod: Pod,
        node: Node,
        statuses: list[ContainerStatus | None],
        desired: list[tuple[dict[str, int], dict[str, int]]],
    ) -> bool:
        """Admit the resize against the node (allocating it), or mark it infeasible or
        deferred and return False."""
        want = spec_requests(pod)
        cpu_req, mem_req = want.get(CPU, 0), want.get(MEMORY, 0)
        cpu_cap, mem_cap = node.allocatable.get(CPU, 0), node.allocatable.get(MEMORY, 0)
        if cpu_req > cpu_cap or mem_req > mem_cap:
            if mem_req > mem_cap:
                msg = f"memory, requested: {mem_req}, capacity: {mem_cap}"
            else:
                msg = f"cpu, requested: {cpu_req}, capacity: {cpu_cap}"
            msg = "Node didn't have enough capacity: " + msg
            self.set_condition(pod, POD_RESIZE_PENDING, REASON_INFEASIBLE, msg)
            self.clear_condition(pod, POD_RESIZE_IN_PROGRESS)
            self.nodeset.recharge(key)
            self.stall(key, pod, "ResizeInfeasible", REASON_INFEASIBLE, msg)
            return False
        # The kubelet admits against every other pod at its allocated resources, sidecars,
        # init containers, pod-level requests and overhead included (canAdmitPod over
        # getAllocatedPods).
        used_cpu, used_mem = self._allocated_to_others(node.name, key)
        if cpu_req + used_cpu > cpu_cap or mem_req + used_mem > mem_cap:
            if mem_req + used_mem > mem_cap:
                msg = f"memory, requested: {mem_req}, used: {used_mem}, capacity: {mem_cap}"
            else:
                msg = f"cpu, requested: {cpu_req}, used: {used_cpu}, capacity: {cpu_cap}"
            msg = "Node didn't have enough resource: " + msg
            self.set_condition(pod, POD_RESIZE_PENDING, REASON_DEFERRED, msg)
            self.nodeset.recharge(key)
            self.stall(key, pod, "ResizeDeferred", REASON_DEFERRED, msg)
            return False
        for s, (req, _) in zip(statuses, desired, strict=True):
            assert s is not None
            s.allocated = dict(req)
        self.clear_condition(pod, POD_RESIZE_PENDING)
        return True

    def _allocated_to_others(self, node_name: str, key: str) -> tuple[int, int]:
        """CPU and memory allocated to the node's other live pods."""
        used_cpu = used_mem = 0
        for k in self.nodeset.node_pods[node_name]:
            if k == key:
                continue
            p = self.store.pods.get(k)
            if p is None or p.phase in ("Succeeded", "Failed"):
                continue
            used = allocated_requests(p)
            used_cpu += used.get(CPU, 0)
            used_mem += used.get(MEMORY, 0)
        return used_cpu, used_mem

    def _limit_below_usage(
        self,
        meta: PodMeta,
        statuses: list[ContainerStatus | None],
        desired: list[tuple[dict[str, int], dict[str, int]]],
    ) -> str | None:
        """Why the resize cannot be actuated: a memory limit lowered below the container's
        live usage (None when every new limit fits)."""
        u = self.metering.usage
        for i, (s, (_, lim)) in enumerate(zip(statuses, desired, strict=True)):
            assert s is not None
            new_lim = lim.get(MEMORY)
            old_lim = s.resources.limits.get(MEMORY)
            slot = meta.slots[i] if i < len(meta.slots) else None
            if (
                slot is not None
                and new_lim is not None
                and (old_lim is None or new_lim < old_lim)
                and u.mem[slot] > new_lim
            ):
                return (
                    f"container {s.name}: attempting to set memory limit ({new_lim}) "
                    f"below current usage ({int(u.mem[slot])})"
                )
        return None

    def request_resize(self, key: str, uid: str) -> None:
        """The pod's resize subresource was patched: the node's kubelet acts `delay` later."""
        self.resizing.add(key)
        self.clock.at(self.clock.now + self.delay, self.resize_if_pending, key, uid)

    def resize_if_pending(self, key: str, uid: str) -> None:
        pod = self.store.pods.get(key)
        if pod is not None and pod.uid == uid and key in self.resizing:
            self.resize(key)
