"""The operator's history on a shared Prometheus-compatible store (`adapters.history.
shared`): what one replica collects and remote-writes, another (a new leader) reads back
the same, from a real Prometheus and a real VictoriaMetrics started here, identically; and
against fake stores, every way a store can fail leaves the history marked not whole and
the mirror untouched."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest
from aiohttp import web

from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.query_budget import QueryBudget
from foresize.adapters.history.remote_write import RemoteWriter
from foresize.adapters.history.shared import (
    COARSE_STEP,
    FINE_STEP,
    SharedHistory,
    refresh,
)
from foresize.core.history import TOTAL_CONTAINER, SeriesKey
from foresize.testing.stores import real_store, store_missing
from support.http_stub import serve

DAYS = 3
KEYS = [
    SeriesKey("shop", "web", "app"),
    SeriesKey("shop", "web", "istio-proxy"),
    SeriesKey("shop", "web", TOTAL_CONTAINER),
    SeriesKey("db", "postgres", "postgres"),
    SeriesKey("db", "postgres", TOTAL_CONTAINER),
    # One name, two kinds: two histories (the `workload_kind` label keeps them apart).
    SeriesKey("batch", "report", "report", "CronJob"),
    SeriesKey("batch", "report", "report", "Deployment"),
]
MIB = 2**20


def now_minute() -> float:
    return math.floor(time.time() / 60.0) * 60.0


def collect(history: SharedHistory, end: float, seed: int = 3) -> None:
    """DAYS of 1-minute polls ending at `end`, as the metrics-server poller writes them
    (CPU in microcores, memory in bytes: values both stores keep exactly), an OOM kill."""
    rng = np.random.default_rng(seed)
    times = end - 60.0 * np.arange(DAYS * 1440)[::-1]
    for t in times:
        day = np.sin(2 * np.pi * (t % 86400) / 86400)
        cpu = np.round(rng.gamma(2.0, 0.1, len(KEYS)) * (1.5 + day), 6)
        mem = np.round(rng.normal(300, 20, len(KEYS)) * MIB)
        if rng.random() < 0.02:
            cpu[0] = np.nan  # a poll that missed a container
        history.write_poll(float(t), KEYS, cpu, mem)
    history.record_event(KEYS[1], "oom", float(times[-700]), 512.0 * MIB)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Both real stores holding the same collected history, and the collector's mirror."""
    for kind in ("prometheus", "victoria-metrics"):
        why = store_missing(kind)
        if why:
            pytest.skip(why)
    end = now_minute() - 60.0
    out = {}
    with (
        real_store("prometheus", tmp_path_factory.mktemp("p")) as prom,
        real_store("victoria-metrics", tmp_path_factory.mktemp("v")) as vm,
    ):
        for store in (prom, vm):
            writer = SharedHistory(PrometheusReader(store.url), RemoteWriter(store.write_url))
            collect(writer, end)
            asyncio.run(writer.push(writer.take_outbox()))
            store.flush()
            out[store.kind] = (store, writer)
        yield out, end


def reader_of(store) -> SharedHistory:
    return SharedHistory(PrometheusReader(store.url, refuse_partial=True))


@pytest.mark.parametrize("kind", ["prometheus", "victoria-metrics"])
def test_a_new_leader_reads_back_what_the_collector_saw(stores, kind):
    both, end = stores
    store, collector = both[kind]
    leader = reader_of(store)
    now = time.time()
    assert leader.problem(now) == "the shared history store has not been read yet"
    assert asyncio.run(refresh(leader, leader, now)) is None
    assert leader.problem(now) is None
    for step, length in ((COARSE_STEP, DAYS * 288 - 1), (FINE_STEP, 1440)):
        for resource in ("cpu", "memory"):
            mine = collector.window(KEYS, resource, end, length, step)
            read = leader.window(KEYS, resource, end, length, step)
            assert np.isfinite(mine).sum() > 0.9 * mine.size
            np.testing.assert_array_equal(read, mine, err_msg=f"{resource} at {step:g} s")
    assert leader.events(KEYS[1], "oom", 0, now) == collector.events(KEYS[1], "oom", 0, now)
    # The store is read by the bucket: the first sample is known to its 5 minutes.
    seen = collector.first_seen(KEYS[0])
    assert seen - COARSE_STEP < leader.first_seen(KEYS[0]) <= seen


def test_prometheus_and_victoria_metrics_give_identical_history(stores):
    both, end = stores
    now = time.time()
    readers = {kind: reader_of(store) for kind, (store, _) in both.items()}
    for r in readers.values():
        assert asyncio.run(refresh(r, r, now)) is None
    p, v = readers["prometheus"], readers["victoria-metrics"]
    for resource in ("cpu", "memory"):
        np.testing.assert_array_equal(
            p.window(KEYS, resource, end, DAYS * 288, COARSE_STEP),
            v.window(KEYS, resource, end, DAYS * 288, COARSE_STEP),
        )
        np.testing.assert_array_equal(
            p.window(KEYS, resource, end, 2880, FINE_STEP),
            v.window(KEYS, resource, end, 2880, FINE_STEP),
        )


def test_a_second_read_takes_only_what_is_new(stores):
    both, end = stores
    store, _ = both["prometheus"]
    leader = reader_of(store)
    now = time.time()
    assert asyncio.run(refresh(leader, leader, now)) is None
    first = leader.reader.stats.queries
    before = leader.window(KEYS, "cpu", end, 288, COARSE_STEP).copy()
    assert asyncio.run(refresh(leader, leader, now + 60)) is None
    # One day-chunk per range query (4), the events and the clock: 6, not a re-read.
    assert leader.reader.stats.queries - first == 6
    np.testing.assert_array_equal(leader.window(KEYS, "cpu", end, 288, COARSE_STEP), before)


# ------------------------------------------------------------------------ faults

T = 1_780_000_000.0


def fake_store(*, status=200, body=None, clock=T, delay=0.0, warnings=None, series=1):
    """A store answering `time()` with `clock` and every other query with `body` (a
    matrix of `series` series by default)."""

    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(delay)
        q = request.query.get("query", "")
        if q == "time()":
            return web.json_response(
                {
                    "status": "success",
                    "data": {"resultType": "scalar", "result": [clock, str(clock)]},
                }
            )
        if status != 200:
            return web.Response(status=status, text="no", headers={"Retry-After": "0"})
        answer = body or {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {
                        "metric": {"namespace": "a", "workload": f"w{i}", "container": "c"},
                        "values": [[T - 300, "1"]],
                    }
                    for i in range(series)
                ],
            },
        }
        if warnings:
            answer = {**answer, "warnings": warnings}
        return web.json_response(answer)

    return handler


def answer(result) -> dict:
    return {"status": "success", "data": {"result": result}}


def shared_on(url: str, **budget) -> SharedHistory:
    reader = PrometheusReader(
        url, timeout=0.5, refuse_partial=True, budget=QueryBudget(retries=1, **budget)
    )
    return SharedHistory(reader)


@pytest.mark.parametrize(
    ("store", "budget", "said"),
    [
        (fake_store(status=503), {}, "answered HTTP 503 2 times (retried with back-off)"),
        (fake_store(status=429), {}, "answered HTTP 429 2 times"),
        (fake_store(delay=2.0), {}, "did not answer within 0.5 s"),
        (fake_store(body=answer("x")), {}, "without a result list"),
        (
            fake_store(body=answer([{"metric": {}, "values": [[1]]}])),
            {},
            "with series that are not [time, value] pairs",
        ),
        (fake_store(series=5), {"max_series": 3}, "returned 5 series, over the budget of 3"),
        (fake_store(warnings=["store 10.0.0.3 unreachable"]), {}, "possibly partial data: store"),
        (fake_store(clock=T + 60 + 600), {}, "clock is more than 60 s ahead of this operator's"),
        (fake_store(clock=T + 60 - 300), {}, "clock is more than 60 s behind this operator's"),
    ],
    ids=["503", "429", "slow", "shape", "pairs", "series-limit", "partial", "ahead", "behind"],
)  # fmt: skip
def test_a_failing_store_leaves_the_history_not_whole_and_the_mirror_untouched(store, budget, said):
    key = SeriesKey("a", "w0", "c")
    with serve(fake_store()) as good_url:
        history = shared_on(good_url)
        assert asyncio.run(refresh(history, history, T)) is None
    before = history.window([key], "cpu", T, 4, COARSE_STEP).copy()
    assert np.isfinite(before).any()
    assert history.problem(T) is None
    with serve(store) as url:
        history.reader = shared_on(url, **budget).reader
        problem = asyncio.run(refresh(history, history, T + 60))
    assert problem is not None and said in problem, problem
    assert history.problem(T + 60) == problem
    np.testing.assert_array_equal(history.window([key], "cpu", T, 4, COARSE_STEP), before)
    assert history.loaded_until == T  # the next read starts where the last whole one ended


def test_a_store_that_is_down_is_not_whole():
    history = shared_on("http://127.0.0.1:9")
    problem = asyncio.run(refresh(history, history, T))
    assert problem is not None and "cannot reach Prometheus at http://127.0.0.1:9" in problem
    assert history.problem(T) == problem


def test_no_read_for_too_long_is_not_whole():
    with serve(fake_store()) as url:
        history = shared_on(url)
        assert asyncio.run(refresh(history, history, T)) is None
    assert history.problem(T + 599) is None
    assert history.problem(T + 601) == ("the shared history store was not read for more than 600 s")


def test_only_the_writer_queues_for_the_store_and_the_outbox_is_bounded(monkeypatch):
    import foresize.adapters.history.shared as shared

    writing = [False]
    history = SharedHistory(
        PrometheusReader("http://x"),
        RemoteWriter("http://x/api/v1/write"),
        writes=lambda: writing[0],
    )
    history.write_poll(T, KEYS[:2], np.array([0.1, np.nan]), np.array([1.0, 2.0]))
    assert history.take_outbox() == []  # not the writer: its mirror only
    assert np.isfinite(history.window(KEYS[:1], "cpu", T, 1, FINE_STEP)).all()
    writing[0] = True
    history.write_poll(T, KEYS[:2], np.array([0.1, np.nan]), np.array([1.0, 2.0]))
    sent = history.take_outbox()
    assert len(sent) == 3  # the NaN is no sample
    monkeypatch.setattr(shared, "MAX_OUTBOX", 10)
    for k in range(20):
        history.write_poll(T + 60 * k, KEYS[:1], np.array([0.1]), np.array([1.0]))
    assert history._outbox_samples <= 10 and history.dropped_samples > 0
