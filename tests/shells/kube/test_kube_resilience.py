"""The operator's defences, one unit at a time: relist pruning and the sync barrier of the
informers, the Lease renew deadline, the per-call gate of the executor, the client's rate
limit and retries, token-file logins, probes and stale gauges, and supervision."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
import socket
import subprocess
import sys
import time

import pytest

from foresize.adapters.telemetry.metrics import ForesizeMetrics
from foresize.core.cluster.actions import ActionResult, ResizePod, WriteTargetStatus
from foresize.shells.kube.api import KubeApi, RateLimiter, retryable
from foresize.shells.kube.gate import GatedExecutor
from foresize.shells.kube.informer import Informer, Informers, WatchedKind
from foresize.shells.kube.leader import LeaseElector, ShardManager
from foresize.shells.kube.probes import Health
from foresize.shells.kube.state import ClusterState
from foresize.shells.kube.supervision import drain_other_tasks
from foresize.testing.ports import free_port
from support.kube_objects import namespace, pod, target

PODS = WatchedKind("", "v1", "pods", "Pod")


class ScriptedApi:
    """Answers LISTs from `lists` and watch streams from `watches` (one per call)."""

    def __init__(self, lists: list[dict], watches: list[list[dict]]) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[tuple[str, dict]] = []

    async def request(self, method, path, body=None, content_type=None, params=None, *, raw=False):
        import json

        from foresize.shells.kube.api import ApiResponse

        self.calls.append(("list", dict(params or {})))
        page = self.lists.pop(0)
        # As KubeApi answers: a 2xx body left undecoded when asked `raw`.
        return ApiResponse(200, json.dumps(page).encode() if raw else page)

    async def stream(self, path, params, read_timeout):
        self.calls.append(("watch", dict(params)))
        events = self.watches.pop(0) if self.watches else []
        for e in events:
            yield e
        if not self.watches and not events:
            await asyncio.sleep(3600)


def listing(rv: str, *names: str) -> dict:
    return {"metadata": {"resourceVersion": rv}, "items": [pod(n) for n in names]}


def test_a_listing_replaces_the_kind_and_prunes_what_is_gone():
    state = ClusterState()
    for name in ("web-1", "web-2"):
        state.apply_event("Pod", "ADDED", pod(name))
    assert state.replace("Pod", [pod("web-1")]) == 1
    assert sorted(state.pods) == [("shop", "web-1")]


async def test_a_410_relists_and_the_object_deleted_meanwhile_leaves_the_cache():
    state = ClusterState()
    api = ScriptedApi(
        lists=[listing("5", "web-1", "web-2"), listing("9", "web-1")],
        watches=[
            [{"type": "MODIFIED", "object": pod("web-1") | {"metadata": pod("web-1")["metadata"]}}],
            [{"type": "ERROR", "object": {"kind": "Status", "code": 410}}],
        ],
    )
    # The first stream ends (server timeout): re-watch from the last version; the next
    # answers 410 Gone: LIST again. web-2 was deleted while nothing watched.
    informer = Informer(api, state, PODS, rng=random.Random(1))
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    for _ in range(100):
        await asyncio.sleep(0.01)
        if informer.lists == 2:
            break
    stop.set()
    task.cancel()
    assert informer.relists_after_gone == 1
    assert sorted(state.pods) == [("shop", "web-1")]
    watch_versions = [p["resourceVersion"] for kind, p in api.calls if kind == "watch"]
    assert watch_versions[:2] == ["5", "5"]  # pods carry no resourceVersion: the list's
    assert [p.get("limit") for kind, p in api.calls if kind == "list"] == ["500", "500"]


async def test_sync_barrier_waits_for_every_kind():
    state = ClusterState()
    slow = ScriptedApi(lists=[listing("1", "web-1")], watches=[])
    never = Informer(
        ScriptedApi(lists=[], watches=[]),
        state,
        WatchedKind("apps", "v1", "deployments", "Deployment"),
    )
    informers = Informers([Informer(slow, state, PODS), never])
    stop = asyncio.Event()
    tasks = [asyncio.create_task(informers.informers[0].run(stop))]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(informers.wait_synced(stop), 0.2)
    assert not informers.synced and informers.unsynced() == ["Deployment"]
    never.synced.set()
    assert await asyncio.wait_for(informers.wait_synced(stop), 1)
    stop.set()
    for t in tasks:
        t.cancel()


async def test_a_sync_wait_cut_short_by_the_interval_leaves_no_error_behind():
    """kube.md N4: the control loop bounds the sync wait by --interval; each cut-short wait
    left a cancelled gather nobody retrieved: an asyncio ERROR with a traceback every
    interval while the API was unreachable."""
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context["message"]))
    try:
        state = ClusterState()
        kinds = (PODS, WatchedKind("apps", "v1", "deployments", "Deployment"))
        never = Informers([Informer(ScriptedApi(lists=[], watches=[]), state, k) for k in kinds])
        stop = asyncio.Event()
        for _ in range(3):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(never.wait_synced(stop), 0.02)
        gc.collect()
        await asyncio.sleep(0.01)
        assert errors == []
        stop.set()
        assert await never.wait_synced(stop) is False  # stop ends the wait at once
    finally:
        loop.set_exception_handler(handler)


async def test_an_informer_on_a_quiet_kind_stops_at_once():
    """kube.md N3: a watch that sees no event (kube-apiserver sends a bookmark about once
    a minute) is ended by stop, not by its next event: a shutdown no longer waits out the
    whole grace and warns once per kind."""
    from foresize.shells.kube.api import KubeApi
    from foresize.testing.apiserver import StrictApiServer

    async with StrictApiServer(bookmark_interval=60.0) as server:
        server.seed(namespace("shop"))
        api = KubeApi.from_url(server.url)
        informer = Informer(api, ClusterState(), PODS)
        stop = asyncio.Event()
        task = asyncio.create_task(informer.run(stop))
        try:
            await asyncio.wait_for(informer.synced.wait(), 5)
            while not server.calls("GET", "/pods$") or len(server.calls("GET", "/pods$")) < 2:
                await asyncio.sleep(0.01)  # the list, then the watch is open
            await asyncio.sleep(0.1)
            stopped_at = time.monotonic()
            stop.set()
            await asyncio.wait_for(task, 2)
            assert time.monotonic() - stopped_at < 0.5
        finally:
            task.cancel()
            await api.close()


def test_state_is_safe_to_mutate_from_another_thread_while_snapshotting():
    """Kopf ran handlers in threads: a snapshot iterating a dict another thread grows
    failed with 'dictionary changed size during iteration'."""
    import threading

    from foresize.shells.kube.handlers import parse_foresize
    from support.kube_objects import SUGGESTION

    TARGET = target(suggestion=SUGGESTION)

    state = ClusterState(target_parser=parse_foresize)
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        i = 0
        while not done.is_set():
            t = dict(TARGET)
            t["metadata"] = dict(TARGET["metadata"], name=f"t{i % 500}")
            state.apply_event("AIScaleTarget", "ADDED", t)
            state.apply_event("Pod", "ADDED", pod(f"p{i % 500}"))
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            try:
                state.snapshot(0.0)
            except RuntimeError as exc:
                errors.append(exc)
                break
    finally:
        done.set()
        thread.join()
    assert not errors


def test_kopf_logs_in_with_the_rotated_service_account_token(tmp_path):
    """In a pod lightkube's config has the token read at start AND the file: the file
    wins, so Kopf's re-login after a 401 gets the token the kubelet rotated in."""
    from lightkube import KubeConfig

    from foresize.shells.kube.handlers import connection_from_lightkube

    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("token-at-startup")
    (sa / "namespace").write_text("foresize")
    (sa / "ca.crt").write_text("CA")
    import os

    os.environ.setdefault("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    os.environ.setdefault("KUBERNETES_SERVICE_PORT", "443")
    config = KubeConfig.from_service_account(sa).get()
    assert connection_from_lightkube(config).token == "token-at-startup"
    (sa / "token").write_text("rotated-token")
    assert connection_from_lightkube(config).token == "rotated-token"


class Mono:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class LeaseApi:
    """A Lease store that answers like the API server (create, RV-checked patch)."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.hang = False

    async def request(self, method, path, body=None, content_type=None, params=None, **_):
        from foresize.shells.kube.api import ApiResponse

        if self.hang:
            await asyncio.sleep(3600)
        if method == "GET":
            return ApiResponse(404, {}) if self.lease is None else ApiResponse(200, self.lease)
        if method == "POST":
            self.lease = dict(body, metadata=dict(body["metadata"], resourceVersion="1"))
            return ApiResponse(201, self.lease)
        rv = self.lease["metadata"]["resourceVersion"]
        if body["metadata"].get("resourceVersion") != rv:
            return ApiResponse(409, {"reason": "Conflict"})
        self.lease["spec"] = dict(self.lease["spec"], **body["spec"])
        self.lease["metadata"]["resourceVersion"] = str(int(rv) + 1)
        return ApiResponse(200, self.lease)


async def test_a_lease_not_renewed_within_the_deadline_is_not_held():
    api, mono = LeaseApi(), Mono()
    elector = LeaseElector(
        api, "fs", "foresize-shard-0", "a", lease_duration=15, renew_deadline=10, monotonic=mono
    )
    assert await elector.try_acquire_or_renew() and elector.held
    mono.now += 9.9
    assert elector.held
    mono.now += 0.2  # 10.1 s since the last renewal was sent: stop acting
    assert not elector.held
    with pytest.raises(ValueError):
        LeaseElector(api, "fs", "x", "a", lease_duration=10, renew_deadline=10)


async def test_a_hung_renewal_is_given_up_within_the_deadline():
    api = LeaseApi()
    manager = ShardManager(api, "fs", "a", lease_duration=0.9, renew_deadline=0.3)
    await manager.round()
    assert manager.owned == {0}
    api.hang = True
    renewing = asyncio.create_task(manager.round())
    await asyncio.sleep(0.35)  # the renewal still hangs, but the deadline has passed
    assert manager.owned == set()
    await asyncio.wait_for(renewing, 1.0)  # and the hung call itself is given up


class Recording:
    def __init__(self) -> None:
        self.calls: list = []

    async def apply(self, action):
        self.calls.append(action)
        return ActionResult(ok=True, code=200)

    async def apply_guarded(self, action):
        return await self.apply(action)

    async def delete_object(self, kind, ns, name):
        self.calls.append(("delete", ns, name))
        return ActionResult(ok=True, code=200)


class Shards:
    def __init__(self, owned: set[int], n: int = 1) -> None:
        self.owned = owned
        self.shards = n

    def owns(self, key: str) -> bool:
        return 0 in self.owned

    def holds(self, shard: int) -> bool:
        return shard in self.owned


async def test_the_executor_refuses_every_call_after_stop_or_lease_loss():
    inner, stop, shards = Recording(), asyncio.Event(), Shards({0})
    gated = GatedExecutor(inner, shards, stop)
    resize = ResizePod("shop", "web-1", (), target="shop/web")
    assert (await gated.apply_guarded(resize)).ok
    shards.owned = set()  # the Lease is lost mid-pass: the next call is not sent
    refused = await gated.apply_guarded(resize)
    assert not refused.ok and refused.reason == "NotLeader"
    assert not (await gated.delete_object("AIScaleTarget", "shop", "web")).ok
    shards.owned = {0}
    stop.set()
    assert not (await gated.apply(WriteTargetStatus("shop", "web", {}))).ok
    assert len(inner.calls) == 1


async def test_rate_limit_spaces_requests_after_the_burst():
    limiter = RateLimiter(qps=20.0, burst=2)
    started = time.monotonic()
    for _ in range(6):
        await limiter.acquire()
    assert time.monotonic() - started >= 0.19  # 4 tokens beyond the burst at 20/s


class ScriptedKubeApi(KubeApi):
    """KubeApi's retry loop over scripted answers (the transport is not under test)."""

    def __init__(self, answers: list, **kw) -> None:
        super().__init__(None, **kw)
        self.answers = answers
        self.sent: list[str] = []
        self.slept: list[float] = []

    async def _send_once(self, method, path, body, content_type, params, **_):
        from foresize.shells.kube.api import ApiResponse

        self.sent.append(f"{method} {path}")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        code, headers = answer
        return ApiResponse(code, {}, headers)


async def test_retries_5xx_429_and_connection_errors_with_backoff_but_not_evictions(
    monkeypatch,
):
    from foresize.shells.kube.api import _httpx

    httpx = _httpx()  # the library lightkube is built on (httpx2)

    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds):
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("foresize.shells.kube.api.asyncio.sleep", sleep)
    api = ScriptedKubeApi(
        [(503, {}), (429, {"retry-after": "2"}), httpx.ConnectError("refused"), (200, {})],
        rng=random.Random(3),
    )
    assert (await api.request("GET", "/api/v1/nodes")).ok
    assert api.retries == 3 and len(api.sent) == 4
    assert slept[1] == 2.0  # Retry-After honoured
    assert 0 <= slept[0] <= 0.25 and 0 <= slept[2] <= 1.0  # full jitter, doubling
    api = ScriptedKubeApi([(500, {}), (500, {}), (500, {}), (500, {})])
    assert (await api.request("GET", "/x")).code == 500 and len(api.sent) == 4  # gives up
    api = ScriptedKubeApi([(429, {}), (200, {})])
    evict = await api.request("POST", "/api/v1/namespaces/x/pods/p/eviction", {})
    assert evict.code == 429 and api.retries == 0  # a PDB's answer: the planner decides
    api = ScriptedKubeApi([(429, {"retry-after": "120"}), (200, {})])
    assert (await api.request("GET", "/x")).code == 429  # too long to wait here
    assert retryable("GET", "/x", 500) and not retryable("GET", "/x", 404)


async def test_a_create_is_sent_again_only_when_it_surely_was_not_served(monkeypatch):
    """kube.md N7: a POST answered 5xx, or cut off after it was sent (read timeout, a
    dropped connection), may have been stored: sending it again made a second Event
    (generateName) or met itself as 409. It is retried only on 429 (API priority and
    fairness refuses before serving) or when no connection was made; idempotent calls
    keep every retry."""
    from foresize.shells.kube.api import _httpx

    httpx = _httpx()

    async def no_sleep(_seconds):
        return None

    monkeypatch.setattr("foresize.shells.kube.api.asyncio.sleep", no_sleep)
    events = "/api/v1/namespaces/shop/events"
    for answer in ((500, {}), (503, {}), (504, {})):
        api = ScriptedKubeApi([answer, (201, {})])
        assert (await api.request("POST", events, {})).code == answer[0] and api.retries == 0
    for cut in (httpx.ReadTimeout("read"), httpx.RemoteProtocolError("closed")):
        api = ScriptedKubeApi([cut, (201, {})])
        with pytest.raises(type(cut)):
            await api.request("POST", events, {})
        assert len(api.sent) == 1
    for unserved in ((429, {}), httpx.ConnectError("refused"), httpx.ConnectTimeout("slow")):
        api = ScriptedKubeApi([unserved, (201, {})])
        assert (await api.request("POST", events, {})).code == 201 and api.retries == 1
    for method in ("GET", "PATCH", "PUT", "DELETE"):
        api = ScriptedKubeApi([(500, {}), httpx.ReadTimeout("read"), (200, {})])
        assert (await api.request(method, f"{events}/e1", {})).ok and api.retries == 2


def test_probes_fail_on_a_stall_and_are_not_ready_before_sync():
    clock = Mono()
    health = Health(liveness_timeout=30.0, clock=clock)
    assert health.live()[0] and not health.ready()[0]
    health.synced = True
    health.passed()
    assert health.ready()[0]
    clock.now += 31
    assert not health.live()[0] and not health.ready()[0]
    health.beat()
    health.failed = "informer:pods"
    assert not health.live()[0]


def test_gauges_of_targets_gone_or_held_elsewhere_are_removed():
    metrics = ForesizeMetrics()
    metrics.stalled.labels("shop/web").set(3)
    metrics.breaker.labels("shop/db").set(1)
    metrics.recommendation.labels("shop/db", "app", "cpu", "request").set(1)
    assert metrics.forget_targets({"shop/web"}) == 2
    text = metrics.exposition().decode()
    assert 'target="shop/db"' not in text and 'target="shop/web"' in text


async def test_an_internal_task_dying_stops_the_operator_with_exit_code_1(
    apiserver, monkeypatch, operator_options
):
    """Before, nothing watched the tasks: a dead one left a healthy-looking process."""
    import foresize.shells.kube.operator as operator_module
    from foresize.shells.kube.operator import run_operator

    apiserver.seed(namespace("foresize"))

    async def dies(*_a, **_k):
        await asyncio.sleep(0.5)
        raise RuntimeError("boom")

    monkeypatch.setattr(operator_module, "watch_pause", dies)
    opts = operator_options(server=apiserver.url)
    code = await asyncio.wait_for(run_operator(opts), 20)
    assert code == 1


async def test_repeated_events_are_one_event_with_a_count(apiserver):
    """A PDB-blocked target retried every pass: one Event whose count grows (was one
    new Event per try). Repeats queued together are one write; a repeat after the first
    was sent raises its count (a merge patch)."""
    from foresize.core.cluster.actions import EmitEvent
    from foresize.shells.kube.executor import KubeExecutor
    from support.kube_objects import namespace

    apiserver.seed(namespace("shop"))
    api = KubeApi.from_url(apiserver.url)
    try:
        executor = KubeExecutor(api)
        deferred = EmitEvent("shop", "AIScaleTarget", "web", "EvictionDeferred", "PDB says no")
        for _ in range(5):
            assert (await executor.apply(deferred)).ok
        other = EmitEvent("shop", "AIScaleTarget", "web", "Resized", "ok")
        assert (await executor.apply(other)).ok
        await executor.events.flush()
        assert (await executor.apply(deferred)).ok
        await executor.events.flush()
    finally:
        await api.close()
    assert len(apiserver.calls("POST", "/events$")) == 2
    assert len(apiserver.calls("PATCH", "/events/")) == 1
    events = {e["reason"]: e for e in apiserver.list("Event", "shop")}
    assert events["EvictionDeferred"]["count"] == 6 and events["Resized"]["count"] == 1


async def test_a_task_that_ignores_the_stop_flag_is_cancelled_after_the_grace(
    apiserver, monkeypatch, operator_options, caplog
):
    import foresize.shells.kube.operator as operator_module
    from foresize.shells.kube.operator import run_operator

    apiserver.seed(namespace("foresize"))

    cancelled = []

    async def deaf(*_a, **_k):
        try:
            await asyncio.sleep(3600)  # never looks at the stop flag
        except asyncio.CancelledError:
            cancelled.append("pause flag")
            raise

    monkeypatch.setattr(operator_module, "watch_pause", deaf)
    opts = operator_options(server=apiserver.url, shutdown_grace=1.0)
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    await asyncio.sleep(1.0)
    stop.set()
    started = asyncio.get_running_loop().time()
    with caplog.at_level(logging.WARNING, logger="foresize.operator"):
        code = await asyncio.wait_for(task, 10)
    assert code == 0  # asked to stop: not a failure
    assert asyncio.get_running_loop().time() - started < 4
    assert "pause flag did not stop within 1s; cancelled" in caplog.text
    assert cancelled == ["pause flag"]


async def test_a_metrics_port_in_use_fails_the_start_with_exit_code_1(
    apiserver, operator_options, caplog
):
    from foresize.shells.kube.operator import run_operator

    apiserver.seed(namespace("foresize"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        opts = operator_options(server=apiserver.url, metrics_port=taken.getsockname()[1])
        with caplog.at_level(logging.ERROR, logger="foresize.operator"):
            code = await asyncio.wait_for(run_operator(opts), 20)
    assert code == 1
    assert "operator failed to start" in caplog.text


async def test_with_prometheus_the_operator_reads_no_metrics_server(
    apiserver, operator_options, caplog
):
    from foresize.shells.kube.operator import run_operator

    apiserver.seed(namespace("foresize"))
    nowhere = f"http://127.0.0.1:{free_port()}"
    opts = operator_options(server=apiserver.url, prometheus=nowhere, collect_interval=0.2)
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="foresize.operator"):
        task = asyncio.create_task(run_operator(opts, stop))
        await asyncio.sleep(2.0)
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0
    assert "Prometheus history refresh failed" in caplog.text
    assert not apiserver.calls("GET", "metrics.k8s.io")
    assert apiserver.calls(None, "/leases")  # it ran: it took its Lease


def test_a_shutdown_that_hangs_ends_the_process_with_every_threads_stack():
    # A stuck thread (as a pass in `to_thread` would be): asyncio.run's cleanup would
    # wait for it forever; the bound ends the process with exit 1 and says where it hung.
    program = (
        "import threading\n"
        "from foresize.shells.kube.supervision import exit_if_shutdown_hangs\n"
        "def stuck_pass():\n"
        "    threading.Event().wait()\n"
        "exit_if_shutdown_hangs(0.5)\n"
        "stuck_pass()\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 20
    assert "stuck_pass" in done.stderr  # the stack of what hung


async def test_the_real_process_bounds_its_shutdown_from_the_stop_on(
    apiserver, monkeypatch, operator_options
):
    import foresize.shells.kube.operator as operator_module
    from foresize.shells.kube.operator import run_operator
    from foresize.shells.kube.supervision import HUNG_SHUTDOWN_SLACK

    apiserver.seed(namespace("foresize"))
    armed: list[float] = []
    monkeypatch.setattr(operator_module, "exit_if_shutdown_hangs", armed.append)
    opts = operator_options(server=apiserver.url, shutdown_grace=1.0)
    for bounded, expected in ((False, []), (True, [1.0 + HUNG_SHUTDOWN_SLACK])):
        stop = asyncio.Event()
        task = asyncio.create_task(run_operator(opts, stop, bounded_exit=bounded))
        await asyncio.sleep(1.0)
        assert armed == []  # not while running
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0
        assert armed == expected


# Kopf stopping under load, as the operator returns: a watcher (the shape of Kopf's
# `queueing.watcher`, with Kopf's own worker pool) waits for its worker to finish (its
# "depletion", 2 s at most) before closing the pool; the worker is in one of our handlers,
# which are sync: Kopf runs them in a thread and holds a cancellation back until it returns.
KOPF_STOPPING = """
import asyncio, contextlib, sys, time
from kopf._cogs.aiokits.aiotasks import Scheduler
from foresize.shells.kube.supervision import drain_other_tasks

async def worker(handling):
    future = asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.5)
    handling.set()
    cancelled = None
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError as e:
            cancelled = e
    if cancelled:
        raise cancelled

async def watcher(handling):
    pool = Scheduler()
    await pool.spawn(worker(handling), name="worker")
    try:
        await asyncio.sleep(3600)
    finally:
        depletion = asyncio.create_task(asyncio.wait_for(pool.wait(), 2.0))
        while not depletion.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(depletion)
        closing = asyncio.create_task(pool.close())
        while not closing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(closing)

async def operator():
    handling = asyncio.Event()
    kopf = asyncio.create_task(watcher(handling), name="kopf watcher")
    await handling.wait()
    kopf.cancel()
    await asyncio.sleep(0)
    print("left:", await drain_other_tasks(grace=3.0), flush=True)

asyncio.run(operator())
print("exited", flush=True)
"""


def test_kopf_stopping_as_the_operator_returns_does_not_hang_the_exit():
    # Left to asyncio.run, the depletion, the worker and the pool's helper task are cancelled
    # at once; the watcher then closes the pool, which waits forever for the helper to see
    # the worker gone: the process hangs, its Leases released. Drained first, it exits.
    done = subprocess.run(
        [sys.executable, "-c", KOPF_STOPPING], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["left: []", "exited"]


def test_the_tasks_still_running_after_the_drain_are_named_with_where_they_wait():
    async def run() -> list[str]:  # in a loop of its own: every other task is this test's
        release = asyncio.Event()

        async def stubborn() -> None:
            while not release.is_set():  # swallows every cancellation
                with contextlib.suppress(asyncio.CancelledError):
                    await release.wait()

        task = asyncio.create_task(stubborn(), name="stubborn")
        left = await drain_other_tasks(grace=0.2)
        release.set()
        await task
        return left

    started = time.monotonic()
    (left,) = asyncio.run(run())
    assert time.monotonic() - started < 5  # the grace, then one second after the cancel
    assert left.startswith("stubborn: wait (") and "<- stubborn (" in left, left
    assert "test_kube_resilience.py:" in left
