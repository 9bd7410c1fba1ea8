"""A listing is decoded and converted off the event loop (kube.md N2): the loop that
answers the webhooks and renews the Leases keeps running while a big LIST is converted,
and the cache takes the kind in one swap.

The conversion is made slow by waiting for an event that only a coroutine on the loop
sets: if the conversion ran on the loop, the loop could not run that coroutine and the
conversion would give up after HOLD seconds (then the test fails on the flag)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from foresize.shells.kube.api import ApiResponse
from foresize.shells.kube.informer import Informer, WatchedKind
from foresize.shells.kube.state import ClusterState
from support.kube_objects import pod

PODS = WatchedKind("", "v1", "pods", "Pod")
HOLD = 10.0


class PagedApi:
    """Answers LIST pages as KubeApi does: bytes when asked `raw`, a dict otherwise."""

    def __init__(self, pages: list[dict]) -> None:
        self.pages = pages
        self.params: list[dict] = []

    async def request(self, method, path, body=None, content_type=None, params=None, *, raw=False):
        assert method == "GET" and path == PODS.path
        self.params.append(dict(params or {}))
        page = self.pages.pop(0)
        return ApiResponse(200, json.dumps(page).encode() if raw else page)


def pages_of(names: list[str], size: int) -> list[dict]:
    chunks = [names[i : i + size] for i in range(0, len(names), size)]
    return [
        {
            "metadata": {
                "resourceVersion": "7",
                **({"continue": f"c{i}"} if i < len(chunks) - 1 else {}),
            },
            "items": [pod(n) for n in chunk],
        }
        for i, chunk in enumerate(chunks)
    ]


async def test_the_loop_runs_while_a_listing_is_converted() -> None:
    state = ClusterState()
    state.replace("Pod", [pod("old")])  # deleted while unwatched: the listing drops it
    loop_ran = threading.Event()
    convert = state.convert
    threads: set[int] = set()

    def slow_convert(kind, obj):
        threads.add(threading.get_ident())
        loop_ran.wait(HOLD)
        return convert(kind, obj)

    state.convert = slow_convert  # type: ignore[method-assign]

    async def on_the_loop() -> None:
        await asyncio.sleep(0.05)
        loop_ran.set()

    api = PagedApi(pages_of([f"web-{i}" for i in range(5)], 2))
    informer = Informer(api, state, PODS)  # type: ignore[arg-type]
    ticker = asyncio.create_task(on_the_loop())
    version = await asyncio.wait_for(informer.list(), HOLD * 2)
    await ticker

    assert loop_ran.is_set()
    assert threading.get_ident() not in threads  # never converted on the loop's thread
    assert version == "7" and len(api.params) == 3
    assert api.params[1] == {"limit": "500", "continue": "c0"}
    assert sorted(n for _, n in state.pods) == [f"web-{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>", "the answer is not JSON"),
        (b"[1, 2]", "the answer is not a list object"),
        (b'{"items": {"a": 1}}', "items is not a list"),
    ],
)
async def test_a_listing_of_the_wrong_shape_names_the_path(body: bytes, problem: str) -> None:
    class Broken:
        async def request(self, *args, raw=False, **kwargs):
            return ApiResponse(200, body)

    informer = Informer(Broken(), ClusterState(), PODS)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError) as err:
        await informer.list()
    assert str(err.value).startswith("LIST /api/v1/pods: " + problem)
