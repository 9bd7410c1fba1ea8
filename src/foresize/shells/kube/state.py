"""The kube shell's in-memory picture of the cluster, kept current from watch events.

The informers (`kube/informer.py`) call `replace(kind, items)` with each full listing and
`apply_event` with each watch event; the control loop calls `snapshot(now)` to get a
`ClusterSnapshot` for the planners. Objects are converted once on arrival and replaced
(never mutated) on each event, so a snapshot handed to the planners stays consistent while
new events keep arriving. A listing replaces the kind entirely, so objects deleted while
no watch was open leave the cache (client-go's `Replace`). Every update and the snapshot
copy hold one lock, so a writer on another thread can never change a dict while the
snapshot iterates it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from foresize.core.cluster import kubejson as convert
from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    Node,
    Pod,
    PodDisruptionBudget,
    VerticalClaim,
    Workload,
)
from foresize.core.cluster.policies import namespace_labels
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.lifecycle.planner import PAUSE_CONFIGMAP, pause_flags
from foresize.core.vertical.modes import new_run_oom_kill

log = logging.getLogger(__name__)

FORESIZE_KINDS = (
    "AIScaleTarget",
    "DaemonSetAutoscaler",
    "ClusterAIScaleTemplate",
    "ClusterAIScalePolicy",
)
# ConfigMap in the operator namespace: data.paused == "true" pauses, data.revert == "true"
# also reverts every autonomous target's pods to their templates.

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class Converted:
    """One listed object converted for the cache: its key in its kind's store, the value
    (None: nothing to keep), and what the converters dropped (logged on install)."""

    key: Any
    value: Any
    dropped: tuple[str, ...] = ()
    version: str = ""  # metadata.resourceVersion (pods: the relist keeps unchanged ones)


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", "") or "", meta.get("name", "")


class ClusterState:
    """Pods, nodes, PDBs, HPAs, workloads, Namespaces' labels and Foresize objects as last
    seen on the watches."""

    def __init__(
        self,
        target_parser: Callable[[str, dict[str, Any]], Any] | None = None,
        *,
        pause_namespace: str | None = None,
        pause_configmap: str = PAUSE_CONFIGMAP,
    ) -> None:
        self.pods: dict[Key, Pod] = {}
        self.nodes: dict[str, Node] = {}
        self.pdbs: dict[Key, PodDisruptionBudget] = {}
        self.hpas: dict[Key, HorizontalPodAutoscaler] = {}
        # (kind, namespace, name) -> another vertical autoscaler's claim (VPA, MPA)
        self.vertical_claims: dict[tuple[str, str, str], VerticalClaim] = {}
        self.workloads: dict[str, Workload] = {}
        # Namespace name -> its labels (the policy hierarchy reads `foresize.io/policy`).
        self.namespaces: dict[str, dict[str, str]] = {}
        # Foresize objects: kind -> key -> parsed model (or the raw dict if no parser).
        self.foresize: dict[str, dict[Key, Any]] = {k: {} for k in FORESIZE_KINDS}
        self.raw_foresize: dict[str, dict[Key, dict[str, Any]]] = {k: {} for k in FORESIZE_KINDS}
        self.server_version: tuple[int, int] = (1, 35)
        self.paused = False
        self.revert_all = False
        # now -> is the pod webhook serving? (set by the operator; None: nothing to judge by)
        self.admission_health: Callable[[float], bool] | None = None
        self.events_seen = 0
        # Called when a watch event shows a run's container just OOM-killed
        # (`vertical.modes.new_run_oom_kill`): the control loop's pass is brought forward.
        self.on_run_oom_kill: Callable[[], None] | None = None
        self._target_parser = target_parser
        # The pause ConfigMap counts only in the operator's namespace (None: any).
        self.pause_namespace = pause_namespace
        self.pause_configmap = pause_configmap
        self._lock = threading.RLock()
        # Pod key -> (resourceVersion, the cached Pod), one entry so that one read gives a
        # matching pair from any thread. A relist keeps the cached
        # object of a pod whose version did not change instead of converting it again (at
        # 100k pods, a relist built 100k new objects with the old ones still cached: the
        # memory peak, and a garbage collector walking both).
        self._pod_versions: dict[Key, tuple[str, Pod]] = {}

    # ----------------------------------------------------------------- updates
    def replace(self, kind: str, items: list[dict[str, Any]]) -> int:
        """A full listing of `kind`: afterwards the cache holds exactly `items` of that
        kind. Returns how many cached objects were not in the listing (and are gone)."""
        return self.install(kind, [self.convert(kind, obj) for obj in items])

    def convert(self, kind: str, obj: dict[str, Any]) -> Converted:
        """One listed object as the cache keeps it, without touching the cache: safe in
        any thread (the informers convert a listing in a worker thread, off the loop that
        serves the webhooks and renews the Leases: 100k pods take seconds, kube.md N2)."""
        dropped: list[str] = []
        key = _key(obj)
        value: Any
        if kind == "Pod":
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            cached = self._pod_versions.get(key) if version else None  # one read: atomic
            if cached is not None and cached[0] == version:
                return Converted(key, cached[1], (), version)
            value = convert.pod_from(obj, dropped=dropped)
            return Converted(key, value, tuple(dropped), version)
        if kind == "Node":
            store_key: Any = key[1]
            value = convert.node_from(obj, dropped)
        elif kind == "PodDisruptionBudget":
            store_key, value = key, convert.pdb_from(obj)
        elif kind == "HorizontalPodAutoscaler":
            store_key, value = key, convert.hpa_from(obj, dropped)
        elif kind in convert.VERTICAL_CLAIM_KINDS:
            store_key, value = (kind, *key), convert.vertical_claim_from(kind, obj)
        elif kind in convert.WORKLOAD_KINDS:
            store_key = f"{kind}/{key[0]}/{key[1]}"
            value = convert.workload_from(kind, obj, dropped)
        elif kind in FORESIZE_KINDS:
            parsed = self._target_parser(kind, obj) if self._target_parser else obj
            store_key, value = key, (obj, parsed)
        elif kind == "Namespace":
            store_key, value = key[1], namespace_labels([obj])[key[1]]
        else:
            store_key, value = key, None
        return Converted(store_key, value, tuple(dropped))

    def install(self, kind: str, converted: list[Converted]) -> int:
        """Make the cache hold exactly `converted` of `kind` (from `convert`); returns how
        many cached objects are gone. Only dict updates under the lock: quick."""
        for entry in converted:
            for problem in entry.dropped:
                log.warning("%s", problem)
        with self._lock:
            before = self._keys(kind)
            self._clear(kind)
            for entry in converted:
                self.events_seen += 1
                if entry.value is None:
                    continue
                if kind in FORESIZE_KINDS:
                    raw, parsed = entry.value
                    self.raw_foresize[kind][entry.key] = raw
                    if parsed is not None:
                        self.foresize[kind][entry.key] = parsed
                    continue
                store = self._kind_store(kind)
                if store is not None:
                    store[entry.key] = entry.value
            if kind == "Pod":
                self._pod_versions = {
                    e.key: (e.version, e.value) for e in converted if e.version and e.value
                }
            return len(before - self._keys(kind))

    def _kind_store(self, kind: str) -> dict | None:
        if kind in convert.VERTICAL_CLAIM_KINDS:
            return self.vertical_claims
        if kind in convert.WORKLOAD_KINDS:
            return self.workloads
        return self._store(kind)

    def _store(self, kind: str) -> dict | None:
        if kind == "Pod":
            return self.pods
        if kind == "Node":
            return self.nodes
        if kind == "PodDisruptionBudget":
            return self.pdbs
        if kind == "HorizontalPodAutoscaler":
            return self.hpas
        if kind == "Namespace":
            return self.namespaces
        if kind in FORESIZE_KINDS:
            return self.raw_foresize[kind]
        return None

    def _keys(self, kind: str) -> set:
        if kind in convert.VERTICAL_CLAIM_KINDS:
            return {k for k in self.vertical_claims if k[0] == kind}
        if kind in convert.WORKLOAD_KINDS:
            return {k for k in self.workloads if k.startswith(f"{kind}/")}
        store = self._store(kind)
        return set(store) if store is not None else set()

    def _clear(self, kind: str) -> None:
        if kind in convert.VERTICAL_CLAIM_KINDS:
            for claim_key in [k for k in self.vertical_claims if k[0] == kind]:
                del self.vertical_claims[claim_key]
            return
        if kind in convert.WORKLOAD_KINDS:
            for k in [k for k in self.workloads if k.startswith(f"{kind}/")]:
                del self.workloads[k]
            return
        store = self._store(kind)
        if store is not None:
            store.clear()
        if kind in FORESIZE_KINDS:
            self.foresize[kind].clear()

    def apply_event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """Apply one watch event (`ADDED`/`MODIFIED`/`DELETED`, or None for a listing)."""
        with self._lock:
            self._apply(kind, event_type, obj)

    def _apply(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        self.events_seen += 1
        deleted = event_type == "DELETED"
        key = _key(obj)
        # What the converters dropped (a bad quantity or timestamp), logged here: the core
        # does no I/O.
        dropped: list[str] = []
        if kind == "Pod":
            pod = None if deleted else convert.pod_from(obj, dropped=dropped)
            wake = self.on_run_oom_kill
            if pod is not None and wake is not None and new_run_oom_kill(self.pods.get(key), pod):
                wake()
            self._put(self.pods, key, pod)
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            self._put(self._pod_versions, key, (version, pod) if pod and version else None)
        elif kind == "Node":
            self._put(self.nodes, key[1], None if deleted else convert.node_from(obj, dropped))
        elif kind == "PodDisruptionBudget":
            self._put(self.pdbs, key, None if deleted else convert.pdb_from(obj))
        elif kind == "HorizontalPodAutoscaler":
            self._put(self.hpas, key, None if deleted else convert.hpa_from(obj, dropped))
        elif kind in convert.VERTICAL_CLAIM_KINDS:
            claim = None if deleted else convert.vertical_claim_from(kind, obj)
            self._put(self.vertical_claims, (kind, *key), claim)
        elif kind in convert.WORKLOAD_KINDS:
            wkey = f"{kind}/{key[0]}/{key[1]}"
            workload = None if deleted else convert.workload_from(kind, obj, dropped)
            self._put(self.workloads, wkey, workload)
        elif kind == "Namespace":
            self._put(self.namespaces, key[1], None if deleted else namespace_labels([obj])[key[1]])
        elif kind in FORESIZE_KINDS:
            self._put(self.raw_foresize[kind], key, None if deleted else obj)
            parsed = None
            if not deleted:
                parsed = self._target_parser(kind, obj) if self._target_parser else obj
            self._put(self.foresize[kind], key, parsed)
        elif (
            kind == "ConfigMap"
            and key[1] == self.pause_configmap
            and (self.pause_namespace is None or key[0] == self.pause_namespace)
        ):
            self.paused, self.revert_all = (
                (False, False) if deleted else pause_flags(obj.get("data"))
            )
        else:
            log.debug("ignoring watch event for kind %s", kind)
        for problem in dropped:
            log.warning("%s", problem)

    @staticmethod
    def _put(store: dict, key: Any, value: Any) -> None:
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value

    # ----------------------------------------------------------------- reads
    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get((namespace, name))

    def raw_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Foresize object's JSON as last seen on its watch (never to be mutated)."""
        with self._lock:
            return self.raw_foresize.get(kind, {}).get((namespace, name))

    def target_keys(self) -> list[str]:
        """The "namespace/name" of every AIScaleTarget and DaemonSetAutoscaler cached (the
        per-target gauges' label), without a snapshot of the whole cluster."""
        with self._lock:
            return [
                f"{ns}/{name}"
                for kind in ("AIScaleTarget", "DaemonSetAutoscaler")
                for (ns, name), parsed in self.foresize[kind].items()
                if parsed is not None
            ]

    def snapshot(self, now: float) -> ClusterSnapshot:
        """A consistent point-in-time view for the planners (objects are shared, read-only)."""
        with self._lock:
            return self._snapshot(now)

    def _snapshot(self, now: float) -> ClusterSnapshot:
        return ClusterSnapshot(
            now=now,
            nodes=dict(self.nodes),
            pods=list(self.pods.values()),
            workloads=dict(self.workloads),
            pdbs=list(self.pdbs.values()),
            hpas=list(self.hpas.values()),
            vertical_claims=list(self.vertical_claims.values()),
            targets=[t for t in self.foresize["AIScaleTarget"].values() if t is not None],
            daemonset_autoscalers=[
                d for d in self.foresize["DaemonSetAutoscaler"].values() if d is not None
            ],
            templates=[
                t for t in self.foresize["ClusterAIScaleTemplate"].values() if t is not None
            ],
            # A policy that does not parse is handed on as its JSON: the hierarchy names
            # it in the targets' status and leaves it out (`cluster.policies`).
            policies=[
                self.foresize["ClusterAIScalePolicy"].get(key) or raw
                for key, raw in self.raw_foresize["ClusterAIScalePolicy"].items()
            ],
            namespaces=dict(self.namespaces),
            server_version=self.server_version,
            paused=self.paused,
            revert_all=self.revert_all,
            admission_healthy=self.admission_health(now) if self.admission_health else True,
        )
