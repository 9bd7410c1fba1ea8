"""The simulated API server's objects: pods (with the simulator's own record of each),
workloads, the custom resources the core reads, and the copy-on-write bookkeeping that
keeps every snapshot a faithful point-in-time view."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, TypeVar

from foresize.core.cluster.model import Pod, VerticalClaim, Workload
from foresize.shells.sim.objects import PodMeta, WorkloadState, clone_pod, clone_workload

_T = TypeVar("_T")

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of generated name suffixes


class ObjectStore:
    """Pods by `namespace/name` (and their `PodMeta`), workloads by `Kind/namespace/name`
    (and their `WorkloadState`), the custom resources, uids and generated names."""

    def __init__(self, prng: random.Random, vertical_claims: list[VerticalClaim]) -> None:
        self.prng = prng  # generated name suffixes (shared with the usage jitter: one seed)
        self.pods: dict[str, Pod] = {}
        self.meta: dict[str, PodMeta] = {}
        self.workloads: dict[str, Workload] = {}
        self.wl_state: dict[str, WorkloadState] = {}
        self.target_status: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.targets: list[Any] = []
        self.daemonset_autoscalers: list[Any] = []
        self.templates: list[Any] = []
        self.vertical_claims = vertical_claims
        self.paused = False
        self.revert_all = False  # the pause's "revert everything now" (pauses too)
        self.server_version: tuple[int, int] = (1, 35)  # (1, 36): NodeCapacity refusals
        # Copy-on-write: an object is cloned once after each snapshot (`epoch`).
        self.epoch = 0
        self.pod_epoch: dict[str, int] = {}
        self.wl_epoch: dict[str, int] = {}
        self._uid = 0

    def _writable(
        self, objects: dict[str, _T], epochs: dict[str, int], key: str, clone: Callable[[_T], _T]
    ) -> _T:
        """`objects[key]`, safe to mutate: cloned once after each snapshot, since the
        snapshot may hold the old object."""
        obj = objects[key]
        if epochs.get(key, -1) < self.epoch:
            obj = clone(obj)
            objects[key] = obj
            epochs[key] = self.epoch
        return obj

    def writable_pod(self, key: str) -> Pod:
        """The pod `key`, safe to mutate."""
        return self._writable(self.pods, self.pod_epoch, key, clone_pod)

    def writable_workload(self, key: str) -> Workload:
        """The workload `key`, safe to mutate."""
        return self._writable(self.workloads, self.wl_epoch, key, clone_workload)

    def pods_of(self, kind: str, namespace: str, name: str) -> list[Pod]:
        st = self.wl_state.get(f"{kind}/{namespace}/{name}")
        if st is None:
            return []
        return [self.pods[k] for k in sorted(st.pods) if k in self.pods]

    def new_uid(self) -> str:
        self._uid += 1
        return f"sim-{self._uid:08d}"

    def name_suffix(self, n: int = 5) -> str:
        return "".join(self.prng.choice(NAME_ALPHABET) for _ in range(n))
