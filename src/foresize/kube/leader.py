"""Leader election and sharding over coordination.k8s.io/v1 Leases (Kopf has none).

Targets are spread over `shards` by a stable hash of "namespace/name". Each shard has one
Lease (`foresize-shard-<i>` in the operator namespace); only the replica holding a shard's
Lease acts on that shard's targets (AIScaleTargets and DaemonSetAutoscalers, by
"namespace/name"). Cluster-scoped work that must not be split — reconciling
ClusterAIScaleTemplates — is done by the holder of shard 0 alone. Every replica keeps
serving webhooks regardless.

The protocol follows client-go's resourcelock: create the Lease if missing; renew our own
record; take over a record that has expired, i.e. that we have watched stay unchanged
(same holder, renewTime and transitions) for a whole lease duration, or that has no
holder (released). Expiry is measured on our own clock, never by comparing the holder's
renewTime with it, so clock skew between replicas cannot steal a live lease. Every write carries the
`metadata.resourceVersion` we read, so two replicas racing for one Lease cannot both win:
the loser gets 409 Conflict. On shutdown the holder releases (clears `holderIdentity`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from foresize.kube.api import JSON, MERGE_PATCH, KubeApi

log = logging.getLogger(__name__)

LEASE_PREFIX = "foresize-shard"


def shard_of(key: str, shards: int) -> int:
    """Stable shard of a target key: the same on every replica, every run, every Python."""
    if shards <= 1:
        return 0
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def micro_time(epoch: float) -> str:
    """MicroTime as the API serialises it: `2026-01-02T03:04:05.123456Z`."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


@dataclass(slots=True)
class _Observed:
    record: tuple[Any, ...]
    seen_at: float


class LeaseElector:
    """One Lease: acquire, renew, take over when expired, release."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.clock = clock
        self.held = False
        self._observed: _Observed | None = None

    def _spec(self, now: float, transitions: int, acquire: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "renewTime": micro_time(now),
        }
        if acquire:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = transitions
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One election round. Returns True when this replica holds the Lease afterwards."""
        now = self.clock()
        resp = await self.api.request("GET", lease_path(self.namespace, self.name))
        if resp.code == 404:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, 0, acquire=True),
            }
            created = await self.api.request("POST", lease_path(self.namespace), body, JSON)
            self.held = created.ok
            if created.ok:
                log.info("acquired new lease %s as %s", self.name, self.identity)
            return self.held
        if not resp.ok or not isinstance(resp.body, dict):
            log.warning("lease %s: GET answered %s", self.name, resp.code)
            self.held = False
            return False
        lease = resp.body
        spec = lease.get("spec") or {}
        rv = (lease.get("metadata") or {}).get("resourceVersion")
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        if self._observed is None or self._observed.record != record:
            self._observed = _Observed(record, now)
        # Expiry is judged on our own clock only, from when we first saw this exact record
        # (client-go does the same): a replica whose clock runs ahead cannot steal a lease
        # that its holder keeps renewing.
        expired = not holder or (now - self._observed.seen_at > duration)
        if holder == self.identity:
            patch = {"metadata": {"resourceVersion": rv}, "spec": self._spec(now, 0, False)}
        elif expired:
            transitions = int(spec.get("leaseTransitions") or 0) + 1
            patch = {
                "metadata": {"resourceVersion": rv},
                "spec": self._spec(now, transitions, acquire=True),
            }
            log.info("taking over lease %s from %r", self.name, holder)
        else:
            self.held = False
            return False
        answer = await self.api.request(
            "PATCH", lease_path(self.namespace, self.name), patch, MERGE_PATCH
        )
        self.held = answer.ok
        if answer.code == 409:
            log.info("lease %s: lost the race (409 Conflict)", self.name)
        return self.held

    async def release(self) -> None:
        """Give the Lease up so another replica can take it at once (on shutdown)."""
        if not self.held:
            return
        resp = await self.api.request("GET", lease_path(self.namespace, self.name))
        if resp.ok and isinstance(resp.body, dict):
            spec = resp.body.get("spec") or {}
            if spec.get("holderIdentity") == self.identity:
                rv = (resp.body.get("metadata") or {}).get("resourceVersion")
                patch = {
                    "metadata": {"resourceVersion": rv},
                    "spec": {
                        "holderIdentity": None,
                        "leaseDurationSeconds": 1,
                        "renewTime": micro_time(self.clock()),
                    },
                }
                await self.api.request(
                    "PATCH", lease_path(self.namespace, self.name), patch, MERGE_PATCH
                )
                log.info("released lease %s", self.name)
        self.held = False


class ShardManager:
    """All shard Leases of this replica: which targets it may act on."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        identity: str,
        *,
        shards: int = 1,
        lease_duration: float = 15.0,
        renew_interval: float = 5.0,
        max_shards: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.shards = max(1, shards)
        self.renew_interval = renew_interval
        self.max_shards = max_shards if max_shards is not None else self.shards
        self.electors = [
            LeaseElector(
                api,
                namespace,
                f"{LEASE_PREFIX}-{i}",
                identity,
                lease_duration=lease_duration,
                clock=clock,
            )
            for i in range(self.shards)
        ]

    @property
    def owned(self) -> set[int]:
        return {i for i, e in enumerate(self.electors) if e.held}

    def owns(self, target_key: str) -> bool:
        return shard_of(target_key, self.shards) in self.owned

    def holds(self, shard: int) -> bool:
        """Whether this replica holds shard `shard`'s Lease (shard 0 also carries the
        cluster-scoped work: ClusterAIScaleTemplates)."""
        return 0 <= shard < len(self.electors) and self.electors[shard].held

    async def round(self) -> set[int]:
        """Renew held shards, then try to acquire free ones up to `max_shards`."""
        for elector in self.electors:
            if elector.held:
                await elector.try_acquire_or_renew()
        for elector in self.electors:
            if not elector.held and len(self.owned) < self.max_shards:
                await elector.try_acquire_or_renew()
        return self.owned

    async def run(self, stop: asyncio.Event) -> None:
        """Renew until `stop` is set, then release everything held."""
        try:
            while not stop.is_set():
                try:
                    await self.round()
                except Exception as exc:  # API hiccup: keep trying; leases expire safely
                    log.warning("lease round failed: %s", exc)
                    for e in self.electors:
                        e.held = False
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.renew_interval)
        finally:
            for elector in self.electors:
                with contextlib.suppress(Exception):
                    await elector.release()
