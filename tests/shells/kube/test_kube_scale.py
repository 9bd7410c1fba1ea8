"""What keeps the operator's writes and its event loop flat as the cluster grows (issue 26):
status writes that change nothing are not sent and the others carry only what changed; a
restarted operator on a cluster in its steady state writes nothing; a relist keeps the
pods whose resourceVersion did not change; a listing freezes the cache out of the
garbage collector; the walks over every target after a pass run off the event loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.bench.synthetic import synthetic_objects
from foresize.core.cluster.actions import WriteTargetStatus
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.handlers import WATCHED, parse_foresize
from foresize.shells.kube.informer import Informer, Informers
from foresize.shells.kube.shell import KubeShell, Locked
from foresize.shells.kube.state import ClusterState
from foresize.shells.kube.status_writes import (
    UNCHANGED,
    StatusWrites,
    changed_part,
    merge_patched,
)

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "5"},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}
        ]
    },
    "status": {"phase": "Running"},
}


def _target(version: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": version},
        "spec": {},
        "status": status,
    }


def test_merge_patch_and_the_part_that_changes() -> None:
    base = {"a": 1, "b": {"x": 1, "y": 2}, "c": [1]}
    assert merge_patched(base, {"a": None, "b": {"y": 3}}) == {"b": {"x": 1, "y": 3}, "c": [1]}
    # Equal values, nulls of absent keys and nested equal maps change nothing.
    assert changed_part(base, {"a": 1, "d": None, "b": {"x": 1}, "c": [1]}) == {}
    # A key that changes is sent whole, as the planner wrote it.
    assert changed_part(base, {"a": 1, "b": {"x": 1, "y": 9}, "c": [1, 2]}) == {
        "b": {"x": 1, "y": 9},
        "c": [1, 2],
    }
    assert changed_part(base, {"a": None}) == {"a": None}


def test_a_status_write_is_compared_with_the_cache_and_our_own_last_write() -> None:
    state = ClusterState()
    state.apply_event("AIScaleTarget", "ADDED", _target("7", {"pods_resized": 0, "n": 1}))
    writes = StatusWrites(state)
    same = WriteTargetStatus("shop", "web", {"pods_resized": 0})
    assert writes.trimmed(same) is None
    grown = WriteTargetStatus("shop", "web", {"pods_resized": 3, "n": 1})
    sent = writes.trimmed(grown)
    assert sent is not None and sent.status == {"pods_resized": 3}
    writes.landed(sent)
    # The watch has not brought our write back: the cache says 0, we said 3.
    assert writes.trimmed(WriteTargetStatus("shop", "web", {"pods_resized": 3})) is None
    back = WriteTargetStatus("shop", "web", {"pods_resized": 0})
    assert writes.trimmed(back) == back
    # A newer version on the watch replaces the overlay (whatever it says is the base).
    state.apply_event("AIScaleTarget", "MODIFIED", _target("9", {"pods_resized": 0, "n": 1}))
    assert writes.trimmed(back) is None
    # An object not cached is written as asked.
    other = WriteTargetStatus("shop", "api", {"pods_resized": 0})
    assert writes.trimmed(other) is other
    # Overlays are forgotten once the watch caught up, or the object is gone.
    sent = writes.trimmed(WriteTargetStatus("shop", "web", {"pods_resized": 4}))
    assert sent is not None
    writes.landed(sent)
    assert writes.prune() == 0  # not back on the watch yet: kept
    state.apply_event("AIScaleTarget", "DELETED", _target("10", {"pods_resized": 4}))
    assert writes.prune() == 1 and writes.prune() == 0


def test_the_relist_keeps_unchanged_pods_and_converts_changed_ones() -> None:
    state = ClusterState()
    state.replace("Pod", [POD])
    first = state.pods[("ns", "p")]
    state.replace("Pod", [POD])
    assert state.pods[("ns", "p")] is first  # same version: the same object
    changed = {**POD, "metadata": {**POD["metadata"], "resourceVersion": "6"}}
    changed["status"] = {"phase": "Succeeded"}
    state.replace("Pod", [changed])
    assert state.pods[("ns", "p")] is not first
    assert state.pods[("ns", "p")].phase == "Succeeded"
    # A watch event updates the version the next relist compares with.
    newer = {**changed, "metadata": {**POD["metadata"], "resourceVersion": "8"}}
    newer["status"] = {"phase": "Failed"}
    state.apply_event("Pod", "MODIFIED", newer)
    watched = state.pods[("ns", "p")]
    state.replace("Pod", [newer])
    assert state.pods[("ns", "p")] is watched and watched.phase == "Failed"
    state.apply_event("Pod", "DELETED", newer)
    state.replace("Pod", [newer])  # deleted, then listed again: a new object
    assert state.pods[("ns", "p")] is not watched


async def test_a_listing_freezes_the_cache_out_of_the_garbage_collector(apiserver) -> None:
    apiserver.seed(POD)
    state = ClusterState()
    api = KubeApi.from_url(apiserver.url)
    pods = next(w for w in WATCHED if w.kind == "Pod")
    try:
        # Start from nothing frozen: an earlier test in this worker may have frozen objects
        # that this listing frees, which would lower the count without anything unfreezing.
        gc.unfreeze()
        await Informer(api, state, pods).list()
        assert gc.get_freeze_count() == 0  # not the default: tests stay unfrozen
        await Informer(api, state, pods, freeze=True).list()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        await api.close()


async def test_a_listing_runs_without_the_cyclic_collector(apiserver) -> None:
    """With `freeze` (the operator's setting) every page is converted and the kind
    installed with the collector off (its full collections over a listing's objects
    stopped every thread), and it is back on after."""
    apiserver.seed(POD)
    seen: list[bool] = []

    class Recording(ClusterState):
        def convert(self, kind: str, obj: dict[str, Any]) -> Any:
            seen.append(gc.isenabled())
            return super().convert(kind, obj)

    api = KubeApi.from_url(apiserver.url)
    pods = next(w for w in WATCHED if w.kind == "Pod")
    was = gc.isenabled()
    gc.enable()
    try:
        await Informer(api, Recording(), pods, freeze=True).list()
        assert seen == [False]
        assert gc.isenabled()
        await Informer(api, Recording(), pods).list()  # without freeze: left as it is
        assert seen == [False, True]
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()
        await api.close()


async def _shell_on(apiserver: Any, now: float) -> tuple[KubeShell, Informers, asyncio.Event]:
    state = ClusterState(target_parser=parse_foresize)
    api = KubeApi.from_url(apiserver.url)
    shell = KubeShell(
        state,
        KubeExecutor(api, pod_lookup=state.pod),
        clock=lambda: now,
        history=Locked(UsageHistory()),
    )
    informers = Informers([Informer(api, state, w) for w in WATCHED if not w.optional])
    stop = asyncio.Event()
    informers.tasks(stop)
    assert await asyncio.wait_for(informers.wait_synced(stop), 20)
    return shell, informers, stop


# Starts of the process: two where two of the three targets had a round slot in the
# minute before it (their suggestions were "made a minute before" once, and such a start
# wrote both again from an empty history: a fifth of the starts, one full-suite run in
# six), and one with no slot in that minute.
@pytest.mark.parametrize(
    "now",
    [1796316941.2078745, 1796316000.0, 1796316500.0],
    ids=["slot-in-the-minute", "slot-on-the-grid", "no-slot-in-the-minute"],
)
async def test_a_restart_on_a_steady_cluster_writes_no_status(apiserver, now: float) -> None:
    """The cluster an operator leaves (its recommender's rounds at their last slots, the
    worker's and the lifecycle's status written): a fresh process's first pass writes
    nothing. Before: a recommendation round for every target (`hasEnoughDataToScale`
    recomputed from an empty history), the lifecycle record and the worker status, 3
    writes each."""
    for obj in synthetic_objects(12, 3, 2, now=now):
        apiserver.seed(obj)
    shell, _, stop = await _shell_on(apiserver, now)
    try:
        done = await shell.run_pass()
    finally:
        stop.set()
    writes = [r for r in apiserver.requests if r.method == "PATCH"]
    assert writes == [], [(r.path, r.body) for r in writes]
    statuses = [(a, r) for a, r in done if isinstance(a, WriteTargetStatus)]
    assert statuses and all(r == UNCHANGED for _, r in statuses)


async def test_the_walks_over_every_target_after_a_pass_run_off_the_loop(
    apiserver, monkeypatch
) -> None:
    now = time.time()
    for obj in synthetic_objects(4, 2, 1, now=now):
        apiserver.seed(obj)
    shell, _, stop = await _shell_on(apiserver, now)
    threads: dict[str, int] = {}
    for name in ("declare", "observe"):
        method = getattr(shell.recorder, name)

        def spy(*args: Any, _name: str = name, _method: Any = method, **kw: Any) -> Any:
            threads[_name] = threading.get_ident()
            return _method(*args, **kw)

        monkeypatch.setattr(shell.recorder, name, spy)
    provisioning = shell._provisioning

    def spy_provisioning(*args: Any) -> None:
        threads["provisioning"] = threading.get_ident()
        provisioning(*args)

    monkeypatch.setattr(shell, "_provisioning", spy_provisioning)
    try:
        await shell.run_pass()
    finally:
        stop.set()
    assert set(threads) == {"declare", "observe", "provisioning"}
    assert threading.get_ident() not in threads.values()
