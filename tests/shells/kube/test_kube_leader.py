"""Leases per shard against the strict API server: acquire (create), renew, take over when
expired, lose a race (a real 409 from a stale resourceVersion), release on shutdown; and
the stable shard hash."""

from __future__ import annotations

import asyncio

import pytest

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.leader import LeaseElector, ShardManager, micro_time, shard_of
from support.clocks import Clock
from support.kube_objects import namespace

PATH = "/apis/coordination.k8s.io/v1/namespaces/foresize/leases"
T0 = 1_780_000_000.0


@pytest.fixture
async def api(apiserver):
    apiserver.seed(namespace("foresize"))
    client = KubeApi.from_url(apiserver.url)
    yield client
    await client.close()


def lease(name: str, **spec) -> dict:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "foresize"},
        "spec": spec,
    }


def renew_by_other(apiserver, name: str, **spec) -> None:
    """Another replica's write (a new resourceVersion)."""
    apiserver.update("Lease", "foresize", name, lambda o: o["spec"].update(spec))


async def test_acquire_creates_the_lease_then_renews_it(apiserver, api):
    clock = Clock()
    elector = LeaseElector(api, "foresize", "foresize-shard-0", "pod-a", clock=clock)
    assert await elector.try_acquire_or_renew()
    (create,) = apiserver.calls("POST", f"^{PATH}$")
    assert create.code == 201 and create.content_type == "application/json"
    assert create.body == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "foresize-shard-0", "namespace": "foresize"},
        "spec": {
            "holderIdentity": "pod-a",
            "leaseDurationSeconds": 15,
            "renewTime": "2026-05-28T20:26:40.000000Z",
            "acquireTime": "2026-05-28T20:26:40.000000Z",
            "leaseTransitions": 0,
        },
    }
    rv = apiserver.get("Lease", "foresize", "foresize-shard-0")["metadata"]["resourceVersion"]
    clock.now += 5
    assert await elector.try_acquire_or_renew()
    (renew,) = apiserver.calls("PATCH", f"{PATH}/foresize-shard-0$")
    assert renew.code == 200 and renew.content_type == "application/merge-patch+json"
    assert renew.body == {
        "metadata": {"resourceVersion": rv},
        "spec": {
            "holderIdentity": "pod-a",
            "leaseDurationSeconds": 15,
            "renewTime": micro_time(T0 + 5),
        },
    }
    stored = apiserver.get("Lease", "foresize", "foresize-shard-0")
    assert int(stored["metadata"]["resourceVersion"]) > int(rv)


async def test_a_live_lease_of_another_holder_is_left_alone_then_taken_over_when_expired(
    apiserver, api
):
    apiserver.seed(
        lease(
            "foresize-shard-1",
            holderIdentity="pod-b",
            leaseDurationSeconds=15,
            renewTime=micro_time(T0 - 2),
            leaseTransitions=3,
        )
    )
    clock, mono = Clock(), Clock(100.0)
    elector = LeaseElector(
        api, "foresize", "foresize-shard-1", "pod-a", clock=clock, monotonic=mono
    )
    assert not await elector.try_acquire_or_renew()
    assert apiserver.calls("PATCH", f"{PATH}/foresize-shard-1$") == []
    # pod-b renews, but its clock is 10 minutes behind ours: its renewTime looks ancient,
    # yet the record changed, so the lease is alive and must not be stolen.
    renew_by_other(apiserver, "foresize-shard-1", renewTime=micro_time(T0 - 600))
    clock.now += 20
    mono.now += 20
    assert not await elector.try_acquire_or_renew()
    assert apiserver.calls("PATCH", f"{PATH}/foresize-shard-1$") == []
    rv = apiserver.get("Lease", "foresize", "foresize-shard-1")["metadata"]["resourceVersion"]
    clock.now += 20  # pod-b stopped renewing: unchanged for more than 15 s
    mono.now += 20
    assert await elector.try_acquire_or_renew()
    (takeover,) = apiserver.calls("PATCH", f"{PATH}/foresize-shard-1$")
    assert takeover.code == 200
    assert takeover.body == {
        "metadata": {"resourceVersion": rv},
        "spec": {
            "holderIdentity": "pod-a",
            "leaseDurationSeconds": 15,
            "renewTime": micro_time(T0 + 40),
            "acquireTime": micro_time(T0 + 40),
            "leaseTransitions": 4,
        },
    }
    assert apiserver.get("Lease", "foresize", "foresize-shard-1")["spec"]["holderIdentity"] == (
        "pod-a"
    )


async def test_a_step_of_the_wall_clock_does_not_expire_a_live_lease(apiserver, api):
    """Expiry is counted on the monotonic clock (client-go: Go's time.Now carries a
    monotonic reading, which its observedTime comparisons use): our wall clock stepping an
    hour ahead (NTP, a VM resumed) 3 s after we saw pod-b's record does not make that
    record 15 s old."""
    apiserver.seed(
        lease(
            "foresize-shard-0",
            holderIdentity="pod-b",
            leaseDurationSeconds=15,
            renewTime=micro_time(T0),
        )
    )
    clock, mono = Clock(), Clock(100.0)
    elector = LeaseElector(
        api, "foresize", "foresize-shard-0", "pod-a", clock=clock, monotonic=mono
    )
    assert not await elector.try_acquire_or_renew()
    clock.now += 3600
    mono.now += 3
    assert not await elector.try_acquire_or_renew()
    assert apiserver.calls("PATCH", f"{PATH}/foresize-shard-0$") == []
    assert apiserver.get("Lease", "foresize", "foresize-shard-0")["spec"]["holderIdentity"] == (
        "pod-b"
    )


async def test_losing_the_take_over_race_means_not_holding(apiserver, api):
    apiserver.seed(lease("foresize-shard-0", holderIdentity="", leaseDurationSeconds=15))
    elector = LeaseElector(api, "foresize", "foresize-shard-0", "pod-a", clock=Clock())
    # Another replica writes between our GET and our PATCH: our resourceVersion is stale.
    real_request = api.request

    async def racing(method, path, *args, **kwargs):
        if method == "PATCH":
            renew_by_other(apiserver, "foresize-shard-0", holderIdentity="pod-b")
        return await real_request(method, path, *args, **kwargs)

    api.request = racing
    assert not await elector.try_acquire_or_renew()
    assert not elector.held
    (patch,) = apiserver.calls("PATCH", f"{PATH}/foresize-shard-0$")
    assert patch.code == 409
    assert apiserver.get("Lease", "foresize", "foresize-shard-0")["spec"]["holderIdentity"] == (
        "pod-b"
    )


async def test_shard_manager_acts_only_on_its_shards_and_releases_on_shutdown(apiserver, api):
    clock = Clock()
    # Shard 1 is held by a live replica; shard 0 is free.
    apiserver.seed(
        lease(
            "foresize-shard-1",
            holderIdentity="pod-b",
            leaseDurationSeconds=15,
            renewTime=micro_time(T0),
        )
    )
    manager = ShardManager(api, "foresize", "pod-a", shards=2, renew_interval=0.05, clock=clock)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    for _ in range(100):
        await asyncio.sleep(0.01)
        if manager.owned:
            break
    assert manager.owned == {0}
    keys = [f"shop/web-{i}" for i in range(40)]
    mine = [k for k in keys if manager.owns(k)]
    assert mine and len(mine) < len(keys)
    assert all(shard_of(k, 2) == 0 for k in mine)
    stop.set()
    await asyncio.wait_for(task, 5)
    spec = apiserver.get("Lease", "foresize", "foresize-shard-0")["spec"]
    assert "holderIdentity" not in spec and spec["leaseDurationSeconds"] == 1
    assert apiserver.get("Lease", "foresize", "foresize-shard-1")["spec"]["holderIdentity"] == (
        "pod-b"
    )


def test_shard_hash_is_stable_and_spreads():
    # Fixed values: the hash must never change between versions or replicas.
    # (sha256 of the key, first 8 bytes big-endian, modulo the shard count.)
    assert [shard_of(f"ns/t{i}", 4) for i in range(8)] == [0, 1, 2, 2, 0, 1, 1, 3]
    assert shard_of("shop/web", 1) == 0
    counts = [0] * 4
    for i in range(4000):
        counts[shard_of(f"ns/target-{i}", 4)] += 1
    assert min(counts) > 900
