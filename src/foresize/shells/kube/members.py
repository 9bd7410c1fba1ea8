"""The live replicas, counted from their member Leases: what each replica's share of the
shards is computed from (`leader.ShardManager`).

A shard's Lease names only the replica that holds it, so a replica that has just started
(and holds nothing) would be invisible to the others, and they would never give it a
shard. So every replica that elects also holds a Lease of its own,
`foresize-replica-<identity>` (labelled `foresize.io/member`), created and renewed at each
of its election rounds like a shard's, and lists the others' at the same round. A member is
live while its record keeps changing: expiry is client-go's rule, the record unchanged for
its lease duration on our own monotonic clock from when we first saw it (never its
renewTime against our clock). The count includes this replica.

On shutdown a replica deletes its member Lease (so the others' shares grow at their next
round, without waiting for the expiry). A killed replica's Lease is left behind; the
holder of shard 0 deletes member Leases released or last renewed more than `STALE_MEMBER`
(an hour) ago, so a Deployment's rollouts do not pile them up. That one rule reads the
record's renewTime against our wall clock: it only tidies (a live member whose Lease it
deleted recreates it at its next round), it never decides who is live or who owns what.

This is the rule of controller-runtime-style shard controllers and of Kafka's consumer
groups (every member announces itself; each takes ceil(partitions / members)), kept simple:
no coordinator, each replica computes its own share from what it sees.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.leader import LEASE_DURATION, LeaseElector, Observed, lease_path

log = logging.getLogger(__name__)

MEMBER_PREFIX = "foresize-replica"
MEMBER_LABEL = "foresize.io/member"
STALE_MEMBER = 3600.0  # seconds since its renewTime before shard 0's holder deletes a member Lease
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def member_lease_name(identity: str) -> str:
    """`foresize-replica-<identity>`, or a hash of the identity when that would not be a
    valid name (an identity with dots or capitals, or too long)."""
    name = f"{MEMBER_PREFIX}-{identity}"
    if _DNS_LABEL.match(name) and len(name) <= 63:
        return name
    return f"{MEMBER_PREFIX}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


class Members:
    """This replica's member Lease and its view of the others'."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        identity: str,
        *,
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.clock = clock
        self.monotonic = monotonic
        self.own = LeaseElector(
            api,
            namespace,
            member_lease_name(identity),
            identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            clock=clock,
            monotonic=monotonic,
            labels={MEMBER_LABEL: "true"},
        )
        self._seen: dict[str, Observed] = {}
        self.live = 1  # the last count (kept when a listing fails)
        self.joined = False  # our member Lease was written at least once

    async def round(self, *, collect: bool = False) -> int:
        """Renew our member Lease, list the others'; the live replicas, us included.
        `collect`: delete member Leases released or renewed `STALE_MEMBER` s ago."""
        if await self.own.try_acquire_or_renew():
            self.joined = True
        resp = await self.api.request(
            "GET",
            lease_path(self.namespace),
            params={"labelSelector": f"{MEMBER_LABEL}=true"},
            unthrottled=True,
        )
        if not resp.ok or not isinstance(resp.body, dict):
            log.warning("member Leases: LIST answered %s; keeping %d live", resp.code, self.live)
            return self.live
        now = self.monotonic()
        live = {self.identity}
        listed: set[str] = set()
        for item in resp.body.get("items") or []:
            meta = item.get("metadata") or {}
            spec = item.get("spec") or {}
            name = str(meta.get("name") or "")
            listed.add(name)
            holder = spec.get("holderIdentity") or ""
            record = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
            seen = self._seen.get(name)
            if seen is None or seen.record != record:
                seen = self._seen[name] = Observed(record, now)
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if holder and now - seen.seen_at <= duration:
                live.add(holder)
            if collect and name != self.own.name and self._stale(holder, spec.get("renewTime")):
                await self._delete(name, meta.get("resourceVersion"))
        for name in set(self._seen) - listed:
            del self._seen[name]
        if len(live) != self.live:
            log.info("replicas live: %d (%s)", len(live), ", ".join(sorted(live)))
        self.live = len(live)
        return self.live

    def _stale(self, holder: str, renew_time: Any) -> bool:
        if not holder:
            return True
        try:
            renewed = datetime.fromisoformat(str(renew_time)).timestamp()
        except ValueError:
            return True  # no renewTime, or not one: not a record a replica keeps
        return self.clock() - renewed > STALE_MEMBER

    async def _delete(self, name: str, version: Any) -> None:
        """Delete a dead member's Lease, only as we last read it (a precondition)."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1"}
        body = {**options, "preconditions": {"resourceVersion": version}}
        resp = await self.api.request(
            "DELETE", lease_path(self.namespace, name), body, unthrottled=True
        )
        if resp.ok:
            log.info("deleted the member Lease %s of a replica gone", name)

    async def leave(self) -> None:
        """Delete our member Lease (on shutdown): the others count one replica fewer at
        their next round."""
        if not self.joined:
            return
        self.own.held = False
        self.joined = False
        await self.api.request(
            "DELETE", lease_path(self.namespace, self.own.name), unthrottled=True
        )
