"""The last word on a write, asked as its bytes go to the socket (`kube/send_check.py`),
against the strict API server: a stall of the event loop after the gate and the veto said
yes, long enough for the shard's Lease to pass its renew deadline on the replica's own
monotonic clock, holds the write back (bench shard at 50k pods: ten writes arrived after
their sender's Lease had expired, docs/scale.md)."""

from __future__ import annotations

import asyncio
import copy

import pytest

from foresize.core.cluster.actions import ContainerResize, ResizePod
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.gate import GatedExecutor, api_veto
from foresize.shells.kube.leader import RENEW_DEADLINE, ShardManager
from support.clocks import Clock
from support.kube_objects import IMAGE, namespace, node
from support.kube_objects import pod as make_pod

RESIZE = "/api/v1/namespaces/shop/pods/web-1/resize"


@pytest.fixture
async def api(apiserver):
    apiserver.seed(namespace("shop"))
    apiserver.seed(namespace("foresize"))
    apiserver.seed(node())
    client = KubeApi.from_url(apiserver.url)
    yield client
    await client.close()


def seed_pod(apiserver) -> str:
    body = make_pod(
        "web-1",
        owner=None,
        containers=[{"name": "app", "image": IMAGE, "resources": {"requests": {"cpu": "250m"}}}],
    )
    return apiserver.seed(copy.deepcopy(body))["metadata"]["uid"]


def stall_before_the_socket(api: KubeApi, mono: Clock, seconds: float) -> list[str]:
    """An httpx request hook runs inside the client's send, after KubeApi's veto and before
    the connection pool: the loop stalls there (the fake monotonic clock jumps)."""
    stalled: list[str] = []

    async def stall(request) -> None:
        if request.method != "GET" and "/leases" not in request.url.path:
            mono.now += seconds
            stalled.append(request.url.path)

    api._generic._client.event_hooks = {"request": [stall], "response": []}
    return stalled


async def held_shard(api: KubeApi, mono: Clock) -> ShardManager:
    shards = ShardManager(api, "foresize", "pod-a", shards=1, monotonic=mono)
    assert await shards.round() == {0}
    return shards


def resize(uid: str) -> ResizePod:
    return ResizePod(
        "shop",
        "web-1",
        (ContainerResize("app", requests={"cpu": 500}),),
        uid=uid,
        target="shop/web",
    )


async def test_a_write_stalled_past_the_renew_deadline_after_the_veto_is_not_sent(apiserver, api):
    uid = seed_pod(apiserver)
    mono = Clock(1000.0)
    shards = await held_shard(api, mono)
    stalled = stall_before_the_socket(api, mono, RENEW_DEADLINE + 1)
    api.veto = api_veto(asyncio.Event())
    gated = GatedExecutor(KubeExecutor(api, server_version=(1, 34)), shards, asyncio.Event())
    result = await gated.apply(resize(uid))
    assert stalled == [RESIZE]  # the gate and the veto let it through, then the stall
    assert apiserver.calls("PATCH", RESIZE) == []  # nothing reached the server
    assert not result.ok and result.reason == "NotLeader", result
    assert "shard not held" in result.message
    assert not shards.holds(0)


async def test_a_write_stalled_within_the_renew_deadline_is_sent(apiserver, api):
    """The same stall, shorter than the renew deadline: the Lease is still ours."""
    uid = seed_pod(apiserver)
    mono = Clock(1000.0)
    shards = await held_shard(api, mono)
    stall_before_the_socket(api, mono, RENEW_DEADLINE - 1)
    api.veto = api_veto(asyncio.Event())
    gated = GatedExecutor(KubeExecutor(api, server_version=(1, 34)), shards, asyncio.Event())
    result = await gated.apply(resize(uid))
    assert result.ok, result
    (sent,) = apiserver.calls("PATCH", RESIZE)
    assert sent.code == 200


async def test_after_a_refusal_at_the_socket_the_next_write_goes_out(apiserver, api):
    """The refused write left its connection half-used (httpcore closes it); once the
    Lease is renewed, the next write goes out."""
    uid = seed_pod(apiserver)
    mono = Clock(1000.0)
    shards = await held_shard(api, mono)
    stall_before_the_socket(api, mono, RENEW_DEADLINE + 1)
    api.veto = api_veto(asyncio.Event())
    gated = GatedExecutor(KubeExecutor(api, server_version=(1, 34)), shards, asyncio.Event())
    assert not (await gated.apply(resize(uid))).ok
    api._generic._client.event_hooks = {"request": [], "response": []}
    assert await shards.round() == {0}  # renewed: the Lease was still ours on the server
    result = await gated.apply(resize(uid))
    assert result.ok, result
    assert len(apiserver.calls("PATCH", RESIZE)) == 1
