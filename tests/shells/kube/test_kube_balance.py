"""Balanced shards against the strict API server: each replica holds at most
ceil(shards / live replicas), the replicas counted from their member Leases; a replica
above its share releases its highest shards (acting stops before the release is sent), a
new replica gets its share, one that leaves or dies gives its shards back; and no Lease is
taken before the caches have synced (a replica that has not listed owns nothing)."""

from __future__ import annotations

import asyncio

import pytest

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.leader import ShardManager
from foresize.shells.kube.members import MEMBER_LABEL, Members, member_lease_name
from support.clocks import Clock
from support.kube_objects import namespace

SHARDS = 3


@pytest.fixture
async def api(apiserver):
    apiserver.seed(namespace("foresize"))
    client = KubeApi.from_url(apiserver.url)
    yield client
    await client.close()


def replica(api: KubeApi, name: str, mono: Clock) -> ShardManager:
    members = Members(api, "foresize", name, monotonic=mono)
    return ShardManager(api, "foresize", name, shards=SHARDS, members=members, monotonic=mono)


def holders(apiserver) -> dict[int, str | None]:
    """Each shard's holder on the server (None: free or released)."""
    out: dict[int, str | None] = {}
    for i in range(SHARDS):
        lease = apiserver.get("Lease", "foresize", f"foresize-shard-{i}") or {}
        out[i] = (lease.get("spec") or {}).get("holderIdentity") or None
    return out


def assert_one_owner_each(replicas: dict[str, ShardManager]) -> None:
    """No shard claimed by two replicas at once (each replica's own view)."""
    for shard in range(SHARDS):
        claiming = [n for n, r in replicas.items() if r.holds(shard)]
        assert len(claiming) <= 1, (shard, claiming)


async def rounds(replicas: dict[str, ShardManager], mono: Clock, step: float = 2.0) -> None:
    """One election round of each replica, in order, the clock a retry period on."""
    for r in replicas.values():
        await r.round()
        assert_one_owner_each(replicas)
    mono.now += step


async def test_replicas_that_join_get_their_share_and_ones_that_leave_or_die_give_it_back(
    apiserver, api
):
    mono = Clock(1000.0)
    a = replica(api, "pod-a", mono)
    live = {"pod-a": a}
    await rounds(live, mono)
    assert a.owned == {0, 1, 2}  # alone: every shard (ceil(3 / 1))
    live["pod-b"] = b = replica(api, "pod-b", mono)
    for _ in range(3):
        await rounds(live, mono)
    # ceil(3 / 2) = 2: pod-a released its highest shard, pod-b took it.
    assert (a.owned, b.owned) == ({0, 1}, {2})
    live["pod-c"] = c = replica(api, "pod-c", mono)
    for _ in range(3):
        await rounds(live, mono)
    assert (a.owned, b.owned, c.owned) == ({0}, {2}, {1})
    assert holders(apiserver) == {0: "pod-a", 1: "pod-c", 2: "pod-b"}
    # pod-c shuts down: releases its shard and deletes its member Lease.
    for elector in c.electors:
        await elector.release()
    assert c.members is not None
    await c.members.leave()
    del live["pod-c"]
    assert apiserver.get("Lease", "foresize", member_lease_name("pod-c")) is None
    for _ in range(2):
        await rounds(live, mono)
    assert sorted(len(r.owned) for r in live.values()) == [1, 2]
    assert set(holders(apiserver).values()) == {"pod-a", "pod-b"}
    # pod-b is killed (no more rounds, its Leases stay): once its member Lease and its
    # shards' have stayed unchanged for the 15 s lease on pod-a's clock, pod-a takes all.
    del live["pod-b"]
    for _ in range(10):
        await rounds(live, mono)
    assert a.owned == {0, 1, 2}
    assert holders(apiserver) == {0: "pod-a", 1: "pod-a", 2: "pod-a"}


async def test_without_members_one_replica_takes_every_shard(apiserver, api):
    """The share needs the member Leases: without them (one shard, or a caller that gives
    none) the replica counts itself alone, as before; --max-shards still caps it."""
    mono = Clock(1000.0)
    alone = ShardManager(api, "foresize", "pod-a", shards=SHARDS, monotonic=mono)
    assert await alone.round() == {0, 1, 2}
    capped = ShardManager(api, "foresize", "pod-b", shards=SHARDS, max_shards=1, monotonic=mono)
    assert await capped.round() == set()  # every shard held (live) by pod-a
    assert apiserver.calls("GET", "labelSelector") == []


async def test_a_replica_counts_only_live_members_and_lists_them_by_label(apiserver, api):
    mono = Clock(1000.0)
    members = Members(api, "foresize", "pod-a", monotonic=mono)
    other = Members(api, "foresize", "pod-b", monotonic=mono)
    assert await members.round() == 1
    assert await other.round() == 2
    assert await members.round() == 2
    created = apiserver.get("Lease", "foresize", member_lease_name("pod-a"))
    assert created["metadata"]["labels"] == {MEMBER_LABEL: "true"}
    (listing, *_) = apiserver.calls("GET", "/leases$")
    assert listing.query == {"labelSelector": f"{MEMBER_LABEL}=true"}
    # pod-b stops renewing: its record, unchanged since pod-a first saw it, is live for the
    # 15 s lease on pod-a's monotonic clock, then no longer counted.
    mono.now += 14
    assert await members.round() == 2
    mono.now += 2
    assert await members.round() == 1


async def test_acting_stops_before_a_release_is_sent(apiserver, api):
    mono = Clock(1000.0)
    shards = ShardManager(api, "foresize", "pod-a", shards=1, monotonic=mono)
    assert await shards.round() == {0}
    elector = shards.electors[0]
    seen: list[bool] = []
    real_request = api.request

    async def spy(method, path, body=None, *args, **kwargs):
        spec = (body or {}).get("spec") or {}
        if method == "PATCH" and "holderIdentity" in spec and spec["holderIdentity"] is None:
            seen.append(elector.held)  # the release
        return await real_request(method, path, body, *args, **kwargs)

    api.request = spy
    await elector.release()
    assert seen == [False]  # the gate already refused every write when it went out
    assert holders(apiserver)[0] is None


async def test_no_lease_is_taken_before_the_caches_have_synced(apiserver, api):
    synced = asyncio.Event()
    stop = asyncio.Event()
    shards = ShardManager(api, "foresize", "pod-a", shards=1, renew_interval=0.05)

    async def ready() -> bool:
        await synced.wait()
        return True

    task = asyncio.create_task(shards.run(stop, ready))
    await asyncio.sleep(0.3)
    assert apiserver.calls(path="/leases") == []
    assert not shards.owned
    synced.set()
    for _ in range(100):
        await asyncio.sleep(0.02)
        if shards.owned:
            break
    assert shards.owned == {0}
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_a_stop_before_the_caches_synced_elects_nothing(apiserver, api):
    stop = asyncio.Event()
    shards = ShardManager(api, "foresize", "pod-a", shards=1)

    async def ready() -> bool:
        stop.set()
        return False

    await asyncio.wait_for(shards.run(stop, ready), 5)
    assert apiserver.calls(path="/leases") == []


async def test_the_shutdown_releases_every_shard_and_leaves_at_once(apiserver, api):
    """On a busy loop each request takes a while and the shutdown grace is 5 s: one after
    the other, a release missed it at 5k pods (bench shard) and the standby waited out the
    lease. The releases and the member Lease's deletion go out together."""
    mono = Clock(1000.0)
    a = replica(api, "pod-a", mono)
    assert await a.round() == {0, 1, 2}
    in_flight, most = 0, 0
    real_request = api.request

    async def slow(method, path, *args, **kwargs):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(0.05)  # a loaded loop
            return await real_request(method, path, *args, **kwargs)
        finally:
            in_flight -= 1

    api.request = slow
    stop = asyncio.Event()
    stop.set()
    await a.run(stop)  # stopped: straight to the shutdown
    assert most == SHARDS + 1  # three releases and the member Lease, side by side
    assert holders(apiserver) == {0: None, 1: None, 2: None}
    assert apiserver.get("Lease", "foresize", member_lease_name("pod-a")) is None


async def test_a_round_sends_nothing_more_once_stopping(apiserver, api):
    mono = Clock(1000.0)
    a = replica(api, "pod-a", mono)
    assert await a.round() == {0, 1, 2}
    before = len(apiserver.requests)
    stop = asyncio.Event()
    stop.set()
    assert await a.round(stop) == {0, 1, 2}
    assert len(apiserver.requests) == before


async def test_a_dead_holder_s_shard_is_adopted_before_its_member_lease_expires(apiserver, api):
    """pod-b's member Lease was renewed after its shard's (a round renews the shards
    first): its shard expires first. pod-a adopts it then, above its share, and keeps it
    until pod-b's member Lease has expired too, instead of leaving it unowned."""
    mono = Clock(1000.0)
    a, b = replica(api, "pod-a", mono), replica(api, "pod-b", mono)
    live = {"pod-a": a, "pod-b": b}
    for _ in range(3):
        await rounds(live, mono)
    assert (a.owned, b.owned) == ({0, 1}, {2})
    del live["pod-b"]
    await rounds(live, mono)  # pod-a has seen pod-b's last shard renewal
    assert b.members is not None
    await b.members.round()  # pod-b's last act: its member Lease renewed, 2 s later
    adopted_while_b_counted = False
    for _ in range(12):
        await rounds(live, mono)
        assert a.members is not None
        if a.owned == {0, 1, 2} and a.members.live == 2:  # type: ignore[attr-defined]
            adopted_while_b_counted = True
    assert adopted_while_b_counted
    assert a.owned == {0, 1, 2}
    assert holders(apiserver) == {0: "pod-a", 1: "pod-a", 2: "pod-a"}
