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
holder (released). Expiry is measured on our own monotonic clock, never by comparing the
holder's renewTime with it, so neither clock skew between replicas nor a step of our own
wall clock (NTP, a VM resumed) can steal a live lease. Every write carries the
`metadata.resourceVersion` we read, so two replicas racing for one Lease cannot both win:
the loser gets 409 Conflict. On shutdown the holder releases (clears `holderIdentity`).

Timing is client-go's: a lease of 15 s, renewed every 2 s (the retry period), and a renew
deadline of 10 s. A replica counts as holding a shard only while its last successful
renewal is younger than the renew deadline, measured on its own monotonic clock from
before the renewal was sent; the deadline being shorter than the lease duration means a
replica whose renewals fail or hang has stopped acting (`held` is False) at least 5 s
before any other replica may take the Lease over. Callers check `held`/`owns` before each
action, not once per pass, and the API client asks again as each write's bytes go to the
socket (`kube/send_check.py`), so a stalled event loop cannot carry a stale check past the
deadline. Giving a Lease up (a release, a shutdown) stops the acting first, then clears the
holder.

Balance (`ShardManager`): each replica holds at most its share, ceil(shards / live
replicas), live replicas counted from their member Leases (`kube/members.py`); a replica
above its share releases its highest-numbered extra shards, so a replica that joins gets
its share at the others' next rounds; one that leaves (released or expired member Lease)
raises everyone's share. `--max-shards` caps the share further. A replica elects nothing
before its caches have synced (`run`'s `ready`): one that has not listed must not own a
shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from foresize.shells.kube.api import JSON, MERGE_PATCH, KubeApi

log = logging.getLogger(__name__)

LEASE_PREFIX = "foresize-shard"
# client-go leaderelection defaults (LeaseDuration, RenewDeadline, RetryPeriod).
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


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
class Observed:
    """A Lease record as first seen, at monotonic `seen_at` (expiry counts from there)."""

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
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.labels = labels  # on the Lease it creates
        self.lease_duration = lease_duration
        # Shorter than the lease: we stop acting before anyone else may take over.
        self.renew_deadline = (
            renew_deadline if renew_deadline is not None else lease_duration * 2 / 3
        )
        if self.renew_deadline >= lease_duration:
            raise ValueError("the renew deadline must be shorter than the lease duration")
        self.clock = clock  # only for the record's MicroTimes, never for expiry
        self.monotonic = monotonic
        self._held = False
        self._renewed_at: float | None = None  # monotonic() before the last successful write
        self._observed: Observed | None = None

    @property
    def held(self) -> bool:
        """Held, and renewed within the renew deadline (checked at every call)."""
        if not self._held or self._renewed_at is None:
            return False
        if self.monotonic() - self._renewed_at >= self.renew_deadline:
            self._held = False
            log.warning(
                "lease %s: not renewed within %.1fs; no longer acting on its targets",
                self.name,
                self.renew_deadline,
            )
            return False
        return True

    @held.setter
    def held(self, value: bool) -> None:
        self._held = value
        if not value:
            self._renewed_at = None

    def _won(self, ok: bool, started: float) -> bool:
        """Record the outcome of an acquire/renew write sent at monotonic `started`."""
        was = self._held
        self._held = ok
        self._renewed_at = started if ok else None
        if was and not ok:
            log.warning("lease %s: lost", self.name)
        return ok

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

    async def try_acquire_or_renew(self, *, take: bool = True) -> bool:
        """One election round. Returns True when this replica holds the Lease afterwards.
        `take=False`: only read the Lease and note its record, writing nothing. A replica
        at its share keeps watching the shards it may not take yet, so that when its share
        grows (a replica died) it takes a dead holder's shard one lease duration after the
        last renewal it saw, not one lease duration after it first looked."""
        now = self.clock()
        started = self.monotonic()
        resp = await self.api.request(
            "GET", lease_path(self.namespace, self.name), unthrottled=True
        )
        if resp.code == 404 and not take:
            return False
        if resp.code == 404:
            metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
            if self.labels:
                metadata["labels"] = dict(self.labels)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": metadata,
                "spec": self._spec(now, 0, acquire=True),
            }
            created = await self.api.request(
                "POST", lease_path(self.namespace), body, JSON, unthrottled=True
            )
            self._won(created.ok, started)
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
        seen = self.monotonic()
        if self._observed is None or self._observed.record != record:
            self._observed = Observed(record, seen)
        # Expiry is judged on our own monotonic clock only, from when we first saw this
        # exact record (client-go does the same, with Go's monotonic clock reading): a
        # replica whose clock runs ahead, or whose wall clock steps, cannot steal a lease
        # that its holder keeps renewing.
        expired = not holder or (seen - self._observed.seen_at > duration)
        if not take:
            return False
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
            "PATCH", lease_path(self.namespace, self.name), patch, MERGE_PATCH, unthrottled=True
        )
        self._won(answer.ok, started)
        if answer.code == 409:
            log.info("lease %s: lost the race (409 Conflict)", self.name)
        return self.held

    async def release(self) -> None:
        """Give the Lease up so another replica can take it at once (on shutdown, or a
        shard above this replica's share). Acting stops first: `held` is False before the
        release is sent, so no write of ours can follow it."""
        if not self._held:
            return
        self.held = False
        resp = await self.api.request(
            "GET", lease_path(self.namespace, self.name), unthrottled=True
        )
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
                    "PATCH",
                    lease_path(self.namespace, self.name),
                    patch,
                    MERGE_PATCH,
                    unthrottled=True,
                )
                log.info("released lease %s", self.name)


class LiveReplicas(Protocol):
    """How many replicas are live, this one included (`kube/members.py`)."""

    async def round(self, *, collect: bool = False) -> int: ...

    async def leave(self) -> None: ...


class ShardManager:
    """All shard Leases of this replica: which targets it may act on, and how many shards
    it may hold (its share, see the module docstring)."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        identity: str,
        *,
        shards: int = 1,
        lease_duration: float = LEASE_DURATION,
        renew_interval: float = RETRY_PERIOD,
        renew_deadline: float | None = None,
        max_shards: int | None = None,
        members: LiveReplicas | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shards = max(1, shards)
        self.renew_interval = renew_interval
        self.rounds = 0
        self.last_round_at: float | None = None  # monotonic() of the last finished round
        self.monotonic = monotonic
        self.max_shards = max_shards if max_shards is not None else self.shards
        self.electors = [
            LeaseElector(
                api,
                namespace,
                f"{LEASE_PREFIX}-{i}",
                identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                clock=clock,
                monotonic=monotonic,
            )
            for i in range(self.shards)
        ]
        # The live replicas the share is computed from; None: this replica alone counts
        # (it may take every shard, up to `max_shards`).
        self.members = members

    @property
    def owned(self) -> set[int]:
        return {i for i, e in enumerate(self.electors) if e.held}

    def owns(self, target_key: str) -> bool:
        return shard_of(target_key, self.shards) in self.owned

    def holds(self, shard: int) -> bool:
        """Whether this replica holds shard `shard`'s Lease (shard 0 also carries the
        cluster-scoped work: ClusterAIScaleTemplates)."""
        return 0 <= shard < len(self.electors) and self.electors[shard].held

    def share(self, live: int) -> int:
        """The most shards this replica may hold with `live` replicas (itself included)."""
        return min(self.max_shards, math.ceil(self.shards / max(1, live)))

    async def _attempt(self, elector: LeaseElector, *, take: bool = True) -> None:
        # One election call may not outlive the renew deadline (a hung GET/PATCH).
        try:
            await asyncio.wait_for(elector.try_acquire_or_renew(take=take), elector.renew_deadline)
        except TimeoutError:
            log.warning("lease %s: election call timed out", elector.name)

    async def round(self) -> set[int]:
        """Renew held shards, release those above this replica's share (highest numbers
        first), then try to acquire free ones up to it."""
        for elector in self.electors:
            if elector.held:
                await self._attempt(elector)
        live = 1
        if self.members is not None:
            live = await self.members.round(collect=self.holds(0))
        share = self.share(live)
        for shard in sorted(self.owned)[share:]:
            log.info(
                "shard %d: above this replica's share (%d of %d, %d live); releasing",
                shard,
                share,
                self.shards,
                live,
            )
            await self.electors[shard].release()
        for elector in self.electors:
            if elector.held:
                continue
            if len(self.owned) < share:
                await self._attempt(elector)
            else:
                await self._attempt(elector, take=False)  # only watch its record
        self.rounds += 1
        self.last_round_at = self.monotonic()
        return self.owned

    async def run(
        self, stop: asyncio.Event, ready: Callable[[], Awaitable[bool]] | None = None
    ) -> None:
        """Once `ready` (the caches synced; False: stopping first), renew until `stop` is
        set, then release everything held. Nothing is elected before: a replica that has
        not listed the cluster must not own a shard (nor count towards the shares)."""
        if ready is not None and not await ready():
            return
        try:
            while not stop.is_set():
                try:
                    await self.round()
                except Exception as exc:  # API hiccup: keep trying; the renew deadline
                    # ends our claim before the lease expires for the others.
                    log.warning("lease round failed: %s", exc)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.renew_interval)
        finally:
            for elector in self.electors:
                with contextlib.suppress(Exception):
                    await elector.release()
            if self.members is not None:
                with contextlib.suppress(Exception):
                    await self.members.leave()
