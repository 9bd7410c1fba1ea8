"""Leases per shard against kmock: acquire (create), renew, take over when expired, lose a
race (409), release on shutdown; and the stable shard hash.

kmock does not check resourceVersion (a known gap), so the test asserts that every write
carries the resourceVersion it read, and simulates the 409 a real server would send.
"""

from __future__ import annotations

import asyncio

import kmock
import pytest

from foresize.kube.api import KubeApi
from foresize.kube.leader import LeaseElector, ShardManager, micro_time, shard_of

LEASES = kmock.resource("coordination.k8s.io/v1/leases")
PATH = "/apis/coordination.k8s.io/v1/namespaces/foresize/leases"
T0 = 1_780_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api(kmock: kmock.KubernetesEmulator):
    client = KubeApi.from_url(str(kmock.url).rstrip("/"))
    yield client
    await client.close()


def _reqs(handler, method: str, path: str) -> list:
    return [r for r in handler[method] if r.url.path == path]


async def test_acquire_creates_the_lease_then_renews_it(kmock, api):
    clock = Clock()
    elector = LeaseElector(api, "foresize", "foresize-shard-0", "pod-a", clock=clock)
    assert await elector.try_acquire_or_renew()
    (create,) = _reqs(kmock, "post", PATH)
    assert create.headers["Content-Type"] == "application/json"
    assert create.data == {
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
    kmock.objects[LEASES, "foresize", "foresize-shard-0"].patch(
        {"metadata": {"resourceVersion": "7"}}
    )
    clock.now += 5
    assert await elector.try_acquire_or_renew()
    (renew,) = _reqs(kmock, "patch", f"{PATH}/foresize-shard-0")
    assert renew.headers["Content-Type"] == "application/merge-patch+json"
    assert renew.data == {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "holderIdentity": "pod-a",
            "leaseDurationSeconds": 15,
            "renewTime": micro_time(T0 + 5),
        },
    }


async def test_a_live_lease_of_another_holder_is_left_alone_then_taken_over_when_expired(
    kmock, api
):
    kmock.objects[LEASES, "foresize", "foresize-shard-1"] = {
        "metadata": {"name": "foresize-shard-1", "namespace": "foresize", "resourceVersion": "41"},
        "spec": {
            "holderIdentity": "pod-b",
            "leaseDurationSeconds": 15,
            "renewTime": micro_time(T0 - 2),
            "leaseTransitions": 3,
        },
    }
    clock = Clock()
    elector = LeaseElector(api, "foresize", "foresize-shard-1", "pod-a", clock=clock)
    assert not await elector.try_acquire_or_renew()
    assert _reqs(kmock, "patch", f"{PATH}/foresize-shard-1") == []
    # pod-b renews, but its clock is 10 minutes behind ours: its renewTime looks ancient,
    # yet the record changed, so the lease is alive and must not be stolen.
    kmock.objects[LEASES, "foresize", "foresize-shard-1"].patch(
        {"spec": {"renewTime": micro_time(T0 - 600)}}
    )
    clock.now += 20
    assert not await elector.try_acquire_or_renew()
    assert _reqs(kmock, "patch", f"{PATH}/foresize-shard-1") == []
    clock.now += 20  # pod-b stopped renewing: unchanged for more than 15 s
    assert await elector.try_acquire_or_renew()
    (takeover,) = _reqs(kmock, "patch", f"{PATH}/foresize-shard-1")
    assert takeover.data == {
        "metadata": {"resourceVersion": "41"},
        "spec": {
            "holderIdentity": "pod-a",
            "leaseDurationSeconds": 15,
            "renewTime": micro_time(T0 + 40),
            "acquireTime": micro_time(T0 + 40),
            "leaseTransitions": 4,
        },
    }
    assert (
        kmock.objects[LEASES, "foresize", "foresize-shard-1"]["spec"]["holderIdentity"] == "pod-a"
    )


async def test_losing_the_take_over_race_means_not_holding(kmock, api):
    kmock.objects[LEASES, "foresize", "foresize-shard-0"] = {
        "metadata": {"name": "foresize-shard-0", "namespace": "foresize", "resourceVersion": "9"},
        "spec": {"holderIdentity": "", "leaseDurationSeconds": 15},
    }
    # Another replica wrote first: a real server answers 409 to our stale resourceVersion.
    (
        kmock[f"patch {PATH}/foresize-shard-0"]
        << 409
        << {
            "kind": "Status",
            "code": 409,
            "reason": "Conflict",
            "message": "the object has been modified",
        }
    )
    elector = LeaseElector(api, "foresize", "foresize-shard-0", "pod-a", clock=Clock())
    assert not await elector.try_acquire_or_renew()
    assert not elector.held


async def test_shard_manager_acts_only_on_its_shards_and_releases_on_shutdown(kmock, api):
    clock = Clock()
    # Shard 1 is held by a live replica; shard 0 is free.
    kmock.objects[LEASES, "foresize", "foresize-shard-1"] = {
        "metadata": {"name": "foresize-shard-1", "namespace": "foresize", "resourceVersion": "5"},
        "spec": {
            "holderIdentity": "pod-b",
            "leaseDurationSeconds": 15,
            "renewTime": micro_time(T0),
        },
    }
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
    spec = kmock.objects[LEASES, "foresize", "foresize-shard-0"]["spec"]
    assert "holderIdentity" not in spec and spec["leaseDurationSeconds"] == 1
    assert (
        kmock.objects[LEASES, "foresize", "foresize-shard-1"]["spec"]["holderIdentity"] == "pod-b"
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
