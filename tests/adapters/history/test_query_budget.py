"""The query budget every Prometheus-compatible read runs under (`adapters.history.
query_budget`), against fake stores: bounded concurrency, range chunking on the aligned
grid, a series limit per answer, 429/503 retried with back-off (Retry-After honoured), and
every limit hit an error naming the query."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from aiohttp import web

from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.query_budget import QueryBudget
from foresize.core.errors import ForesizeError
from support.http_stub import serve

DAY = 86400.0
STEP = 300.0
START = 1_780_000_200.0  # a multiple of the step


def matrix(n_series: int, start: float, end: float, step: float) -> dict:
    times = []
    t = start
    while t <= end:
        times.append(t)
        t += step
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"pod": f"p{i}"}, "values": [[x, "1"] for x in times]}
                for i in range(n_series)
            ],
        },
    }


def answering(log: list, *, series: int = 1, delay: float = 0.0, live: list | None = None):
    async def handler(request: web.Request) -> web.Response:
        q = request.query
        log.append((float(q["start"]), float(q["end"]), float(q["step"])))
        if live is not None:
            live[0] += 1
            live[1] = max(live[1], live[0])
        try:
            await asyncio.sleep(delay)
        finally:
            if live is not None:
                live[0] -= 1
        return web.json_response(
            matrix(series, float(q["start"]), float(q["end"]), float(q["step"]))
        )

    return handler


def test_range_queries_are_chunked_on_the_step_grid_and_stitched():
    log: list = []
    end = START + 3.5 * DAY
    with serve(answering(log)) as url:
        reader = PrometheusReader(url, budget=QueryBudget(chunk_seconds=DAY))
        rows = asyncio.run(reader.query_range("up", START, end, STEP))
    spans = sorted(log)
    assert len(spans) == 4
    for a, b, step in spans:
        assert step == STEP and b - a <= DAY and a % STEP == 0
    # The chunks tile the range: no step asked twice, none left out.
    assert spans[0][0] == START and spans[-1][1] == end
    assert all(nxt[0] == prev[1] + STEP for prev, nxt in itertools.pairwise(spans))
    ((_, ts, _),) = rows
    assert ts.size == int((end - START) / STEP) + 1


def test_no_more_queries_in_flight_than_the_budget():
    log: list = []
    live = [0, 0]
    with serve(answering(log, delay=0.1, live=live)) as url:
        reader = PrometheusReader(url, budget=QueryBudget(chunk_seconds=DAY, concurrency=3))
        asyncio.run(reader.query_range("up", START, START + 10 * DAY, STEP))
    assert len(log) == 10
    assert live[1] == 3  # the store saw at most 3 at once, and the budget was used
    assert reader.stats.peak_in_flight == 3


def test_429_and_503_are_retried_with_the_stores_retry_after():
    calls = []

    async def busy_then_fine(request: web.Request) -> web.Response:
        calls.append(request.query["query"])
        if len(calls) == 1:
            return web.Response(status=429, text="slow down", headers={"Retry-After": "0"})
        if len(calls) == 2:
            return web.Response(status=503, text="queue full", headers={"Retry-After": "0"})
        return web.json_response(matrix(2, START, START, STEP))

    with serve(busy_then_fine) as url:
        reader = PrometheusReader(url, budget=QueryBudget(retries=2, backoff=60.0))
        rows = asyncio.run(reader.query_range("up", START, START, STEP))
    assert len(rows) == 2 and len(calls) == 3 and reader.stats.retries == 2


def test_retries_give_up_with_an_error_naming_the_query():
    async def always_busy(request: web.Request) -> web.Response:
        return web.Response(status=429, text="too many", headers={"Retry-After": "0"})

    with serve(always_busy) as url:
        reader = PrometheusReader(url, budget=QueryBudget(retries=1))
        with pytest.raises(ForesizeError) as err:
            asyncio.run(reader.query_range('rate(cpu{ns="shop"}[5m])', START, START, STEP))
    assert "answered HTTP 429 2 times (retried with back-off)" in str(err.value)
    assert "query 'rate(cpu{ns=\"shop\"}[5m])'" in str(err.value)


def test_back_off_doubles_up_to_its_cap():
    budget = QueryBudget(backoff=0.5, max_backoff=3.0)
    assert [budget.wait(k, None) for k in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert budget.wait(0, "2") == 2.0 and budget.wait(0, "600") == 3.0
    assert budget.wait(1, "Wed, 21 Oct 2026 07:28:00 GMT") == 1.0


def test_an_answer_over_the_series_limit_is_an_error_naming_the_query():
    with serve(answering([], series=5)) as url:
        reader = PrometheusReader(url, budget=QueryBudget(max_series=3))
        with pytest.raises(ForesizeError) as err:
            asyncio.run(
                reader.query_range("container_memory_working_set_bytes", START, START, STEP)
            )
    message = str(err.value)
    assert "query 'container_memory_working_set_bytes' returned 5 series" in message
    assert "over the budget of 3 a query" in message


def test_the_stores_own_limit_is_an_error_naming_the_query():
    async def too_many(request: web.Request) -> web.Response:
        return web.json_response(
            {"status": "error", "errorType": "execution",
             "error": "query processing would load too many samples into memory"},
            status=422,
        )  # fmt: skip

    with serve(too_many) as url:
        reader = PrometheusReader(url)
        with pytest.raises(ForesizeError) as err:
            asyncio.run(reader.query_range("big", START, START, STEP))
    assert "answered HTTP 422 to query 'big': " in str(err.value)
    assert "too many samples" in str(err.value)


@pytest.mark.parametrize(
    "result",
    [
        [{"metric": {"pod": "a"}, "values": [["x", "y", "z"]]}],
        [{"metric": {"pod": "a"}, "values": "1,2"}],
        [{"metric": "pod=a", "values": []}],
        [{"metric": {"pod": "a"}, "values": [[1, "not a number"]]}],
    ],
)
def test_a_wrong_shape_is_an_error_naming_the_query(result):
    async def odd(request: web.Request) -> web.Response:
        return web.json_response({"status": "success", "data": {"result": result}})

    shape = r"answered query 'odd' with series that are not"
    with serve(odd) as url, pytest.raises(ForesizeError, match=shape):
        asyncio.run(PrometheusReader(url).query_range("odd", START, START, STEP))


def test_a_budget_that_cannot_work_is_refused():
    for bad in ({"concurrency": 0}, {"max_series": 0}, {"chunk_seconds": 0}, {"retries": -1}):
        with pytest.raises(ForesizeError, match="query budget"):
            QueryBudget(**bad)
