"""Container usage at each step (cgroup view: limits, OOM, CFS contention) and the
per-workload accounting the summary reports."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.model import Pod, ResourceRequirements
from foresize.core.cluster.qos import pod_level_requests
from foresize.core.cluster.runtime import heap_ceiling
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.objects import (
    ContainerKey,
    PodMeta,
    resizable_containers,
)
from foresize.shells.sim.usage import GeneratorSpec, UsageState

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.kubelet import Kubelet
    from foresize.shells.sim.cluster.lifecycle import PodLifecycle
    from foresize.shells.sim.cluster.scheduler import Scheduler

UsageObserver = Callable[[float, np.ndarray, np.ndarray, np.ndarray], None]


class Metering:
    """Container usage slots, the usage step and the per-workload accounting."""

    # Peers, connected by the facade once every part exists.
    scheduler: Scheduler
    kubelet: Kubelet
    lifecycle: PodLifecycle

    def __init__(
        self,
        clock: Clock,
        store: ObjectStore,
        nodeset: NodeSet,
        *,
        step: float,
        rng: np.random.Generator,
        prng: random.Random,
    ) -> None:
        self.clock = clock
        self.store = store
        self.nodeset = nodeset
        self.step = step
        self.rng = rng  # usage noise
        self.prng = prng  # per-container jitter (shared with the generated names: one seed)
        self.usage = UsageState(capacity=256)
        self.slot_keys: dict[int, ContainerKey] = {}
        self._active_idx: np.ndarray | None = None
        self._active_keys: np.ndarray | None = None
        self._last_account = 0.0
        self.observers: list[UsageObserver] = []
        # Accounting, one row per top-level workload (row 0: bare pods).
        self.acc_names: list[str] = ["(bare pods)"]
        self.acc = {
            k: np.zeros(8)
            for k in (
                "cpu_req",
                "cpu_used",
                "cpu_demand",
                "mem_req",
                "mem_used",
                "throttled",
                "pending",
            )
        }
        self.wl_ready = np.zeros(8)
        # Seconds a container's program wanted more heap than its ceiling allowed (a real
        # runtime collects garbage without end there, or throws OutOfMemoryError), by
        # workload ("Kind/name") and in all: the price of a heap left too small.
        self.heap_capped_s: dict[str, float] = {}
        # When the metrics API last sampled every running container (the usage step):
        # a container started since has no metrics yet (the HPA counts its pod missing).
        self.sampled_at = -math.inf

    def acc_row(self, name: str) -> int:
        self.acc_names.append(name)
        idx = len(self.acc_names) - 1
        if idx >= self.acc["cpu_req"].size:
            for k, arr in self.acc.items():
                self.acc[k] = np.concatenate([arr, np.zeros(arr.size)])
            self.wl_ready = np.concatenate([self.wl_ready, np.zeros(self.wl_ready.size)])
        return idx

    def startup_of(self, meta: PodMeta, container: str) -> tuple[float, float]:
        """The container's start-up work (core-seconds) and the CPU rate it asks for."""
        if meta.top is not None:
            spec = self.store.wl_state[meta.top].spec
            for c in [*spec.containers, *spec.init_containers]:
                if c.name == container:
                    return c.startup_work, c.startup_cpu
        return 0.0, 0.0

    def heap_generator_of(self, meta: PodMeta, container: str) -> GeneratorSpec | None:
        """The container's scenario `usage.heap` (None: its memory is one generator)."""
        if meta.top is not None:
            for c in self.store.wl_state[meta.top].spec.containers:
                if c.name == container:
                    return c.heap
        return None

    def start_heap(self, slot: int) -> None:
        """The heap ceiling of the runtime in `slot` as it starts: read from the pod's
        container spec as admitted (so a heap setting the webhook rewrote is the one the
        runtime takes), at the memory limit in force now (a percentage is a share of the
        limit seen at start; an in-place resize later does not move it)."""
        u = self.usage
        if not u.heap_on[slot]:
            return
        key = self.slot_keys.get(slot)
        if key is None:
            return
        pod = self.store.pods.get(f"{key.namespace}/{key.pod}")
        spec = next((c for c in pod.containers if c.name == key.container), None) if pod else None
        if spec is None:
            return
        limit = u.mem_lim[slot]
        ceiling = heap_ceiling(spec.command, spec.args, dict(spec.env)).bytes_at(
            int(limit) if math.isfinite(limit) else None
        )
        u.heap_cap[slot] = float(ceiling) if ceiling is not None else math.inf

    def generator_for(self, meta: PodMeta, container: str) -> tuple[GeneratorSpec, GeneratorSpec]:
        if meta.top is not None:
            spec = self.store.wl_state[meta.top].spec
            for c in [*spec.containers, *spec.init_containers]:
                if c.name == container:
                    return c.cpu, c.memory
        return GeneratorSpec(), GeneratorSpec()

    def open_slots(self, key: str) -> None:
        pod = self.store.pods[key]
        meta = self.store.meta[key]
        u = self.usage
        self.account(self.clock.now)
        spec = self.store.wl_state[meta.top].spec if meta.top is not None else None
        top = self.store.workloads[meta.top] if meta.top is not None else None
        for c in resizable_containers(pod):
            s = pod.status_of(c.name)
            assert s is not None
            slot = u.allocate()
            meta.slots.append(slot)
            cpu_gen, mem_gen = self.generator_for(meta, c.name)
            u.set_generator(slot, "cpu", cpu_gen)
            u.set_generator(slot, "memory", mem_gen)
            heap_gen = self.heap_generator_of(meta, c.name)
            u.heap_on[slot] = heap_gen is not None
            if heap_gen is not None:
                u.set_generator(slot, "heap", heap_gen)
            u.active[slot] = True
            u.wl[slot] = meta.wl_index
            u.node[slot] = self.nodeset.node_index[pod.node_name or ""]
            u.started[slot] = self.clock.now
            j = spec.jitter if spec is not None else 0.0
            u.jitter[slot] = 1.0 + self.prng.uniform(-j, j) if j else 1.0
            u.share_ref[slot] = (
                float(spec.replicas) if spec is not None and spec.load_shared else 0.0
            )
            u.down_until[slot] = -math.inf
            u.startup_left[slot], u.startup_cpu[slot] = self.startup_of(meta, c.name)
            self.set_slot_resources(slot, s.resources)
            u.cpu_demand[slot] = u.cpu_used[slot] = u.mem[slot] = 0.0
            self.slot_keys[slot] = ContainerKey(
                pod.namespace, f"{top.kind}/{top.name}" if top is not None else "", pod.name, c.name
            )
            self.start_heap(slot)
        self._pod_level_shares(pod, meta.slots)
        self._active_idx = None

    def _pod_level_shares(self, pod: Pod, slots: list[int]) -> None:
        """Pod-level requests (`spec.resources`) are what the pod reserves, whatever its
        containers ask: the accounting (and the CPU weight under contention) gives each
        container its share of them, in proportion to the containers' own requests (equal
        shares where none asks). Pods with pod-level resources are never resized in place,
        so this holds for the pod's life."""
        pod_level = pod_level_requests(pod)
        u = self.usage
        for resource, arr, unit in ((CPU, u.cpu_req, 1000.0), (MEMORY, u.mem_req, 1.0)):
            if resource not in pod_level or not slots:
                continue
            own = [float(arr[s]) for s in slots]
            total = sum(own)
            for s, mine in zip(slots, own, strict=True):
                share = mine / total if total > 0 else 1.0 / len(slots)
                arr[s] = pod_level[resource] / unit * share

    def set_slot_resources(self, slot: int, res: ResourceRequirements) -> None:
        u = self.usage
        u.cpu_req[slot] = res.requests.get(CPU, 0) / 1000.0
        u.mem_req[slot] = float(res.requests.get(MEMORY, 0))
        u.cpu_lim[slot] = res.limits[CPU] / 1000.0 if res.limits.get(CPU) else math.inf
        u.mem_lim[slot] = float(res.limits[MEMORY]) if res.limits.get(MEMORY) else math.inf

    def close_slots(self, key: str) -> None:
        meta = self.store.meta[key]
        if not meta.slots:
            return
        self.account(self.clock.now)
        if meta.ready:
            self.wl_ready[meta.wl_index] -= 1
            meta.ready = False
        for slot in meta.slots:
            self.usage.release(slot)
            self.slot_keys.pop(slot, None)
        meta.slots = []
        self._active_idx = None

    def active(self) -> tuple[np.ndarray, np.ndarray]:
        if self._active_idx is None:
            idx = np.nonzero(self.usage.active[: self.usage.size])[0]
            self._active_idx = idx
            keys = np.empty(idx.size, dtype=object)
            for i, s in enumerate(idx.tolist()):
                keys[i] = self.slot_keys[s]
            self._active_keys = keys
        assert self._active_keys is not None
        return self._active_idx, self._active_keys

    def account(self, t: float) -> None:
        dt = t - self._last_account
        if dt <= 0:
            return
        self._last_account = t
        u = self.usage
        idx, _ = self.active()
        n = self.acc["cpu_req"].size
        if idx.size:
            wl = u.wl[idx]
            acc = self.acc
            acc["cpu_req"] += np.bincount(wl, u.cpu_req[idx], n) * dt
            acc["cpu_used"] += np.bincount(wl, u.cpu_used[idx], n) * dt
            acc["cpu_demand"] += np.bincount(wl, u.cpu_demand[idx], n) * dt
            acc["mem_req"] += np.bincount(wl, u.mem_req[idx], n) * dt
            acc["mem_used"] += np.bincount(wl, u.mem[idx], n) * dt
            throttled = u.cpu_demand[idx] > u.cpu_lim[idx]
            if throttled.any():
                acc["throttled"] += np.bincount(wl, throttled.astype(np.float64), n) * dt
        for k in self.scheduler.pending:
            self.acc["pending"][self.store.meta[k].wl_index] += dt

    def usage_step(self) -> None:
        t = self.clock.now
        self.account(t)
        u = self.usage
        idx, keys = self.active()
        if idx.size:
            share_ref = u.share_ref[idx]
            share = None
            if share_ref.any():
                ready = self.wl_ready[u.wl[idx]]
                share = np.where(share_ref > 0, share_ref / np.maximum(ready, 1.0), 1.0)
            cpu, mem = u.step(t, idx, share, self.rng)
            if u.heap_on[idx].any():
                mem = mem + self._heap_used(t, idx, keys)
            starting = u.startup_left[idx] > 0
            if starting.any():
                cpu = np.where(starting, np.maximum(cpu, u.startup_cpu[idx]), cpu)
            up = u.down_until[idx] <= t
            if not up.all():
                cpu = np.where(up, cpu, 0.0)
                mem = np.where(up, mem, 0.0)
            used = np.minimum(cpu, u.cpu_lim[idx])
            used = self.cpu_contention(idx, used)
            u.cpu_demand[idx] = cpu
            u.cpu_used[idx] = used
            u.mem[idx] = mem
            if starting.any():
                self._startup_work(idx[starting], used[starting])
            # Metrics never show a working set above the memory limit: the cgroup kills
            # the container at the limit (the kill is reported on its own, as OOMKilled).
            seen = np.minimum(mem, u.mem_lim[idx])
            for obs in self.observers:
                obs(t, keys, used, seen)
            oom = mem > u.mem_lim[idx]
            if oom.any():
                for s in idx[oom].tolist():
                    self.kubelet.oom_kill(s)
            node_mem = np.bincount(u.node[idx], mem, len(self.nodeset.node_names))
            over = node_mem > self.nodeset.node_mem_threshold
            if over.any():
                for ni in np.nonzero(over)[0].tolist():
                    self.kubelet.node_pressure(self.nodeset.node_names[ni])
        self.sampled_at = t
        if self.scheduler.pending:
            self.scheduler.queue()
        self.clock.at(t + self.step, self.usage_step)

    def _heap_used(self, t: float, idx: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """The heap slots `idx` hold: what their program wants, up to the ceiling their
        runtime started with; the time a ceiling cut it is counted (`heap_capped_s`)."""
        u = self.usage
        wanted = u.heap_wanted(t, idx, self.rng)
        cap = u.heap_cap[idx]
        short = (wanted > cap) & (u.down_until[idx] <= t)
        for i in np.nonzero(short)[0].tolist():
            name = keys[i].workload
            self.heap_capped_s[name] = self.heap_capped_s.get(name, 0.0) + self.step
        return np.minimum(wanted, cap)

    def _startup_work(self, slots: np.ndarray, used: np.ndarray) -> None:
        """Start-up work done at the CPU each starting container gets over the coming
        step; a pod whose containers have all finished theirs becomes Ready (after its
        readiness delay: `lifecycle.become_ready` checks both)."""
        u = self.usage
        u.startup_left[slots] = np.maximum(u.startup_left[slots] - used * self.step, 0.0)
        done = slots[u.startup_left[slots] <= 0]
        for s in done.tolist():
            key = self.slot_keys[s]
            pod_key = f"{key.namespace}/{key.pod}"
            pod = self.store.pods.get(pod_key)
            if pod is not None:
                when = self.clock.now + self.step
                self.clock.at(when, self.lifecycle.become_ready, pod_key, pod.uid)

    def cpu_contention(self, idx: np.ndarray, want: np.ndarray) -> np.ndarray:
        """CFS shares on an overcommitted node: when the containers of a node want more CPU
        than it has, each gets a share proportional to its CPU request (cpu.shares, at
        least 2m), and what the satisfied ones leave is shared again among the rest."""
        u = self.usage
        nodes = u.node[idx]
        n = len(self.nodeset.node_names)
        total = np.bincount(nodes, want, n)
        over = total > self.nodeset.node_cpu_cores
        if not over.any():
            return want
        hit = over[nodes]
        w = np.maximum(u.cpu_req[idx], 0.002)
        cap = self.nodeset.node_cpu_cores
        share = cap[nodes] * w / np.bincount(nodes, w, n)[nodes]
        got = np.where(hit, np.minimum(want, share), want)
        # One redistribution of the capacity the satisfied containers left unused.
        left = cap - np.bincount(nodes, np.where(hit, got, 0.0), n)
        hungry = hit & (want > got)
        w_h = np.where(hungry, w, 0.0)
        w_sum = np.bincount(nodes, w_h, n)
        extra = np.where(hungry, left[nodes] * w_h / np.maximum(w_sum[nodes], 1e-12), 0.0)
        return np.where(hit, np.minimum(want, got + extra), want)
