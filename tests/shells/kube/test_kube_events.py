"""Events go out on their own budget, from a queue that never makes a pass wait
(`kube/events.py`, kube.md N6): the actions' rate limiter is not touched, a full queue
drops Normal Events (counted) and lets Warnings in, and a stop ends the delivery."""

from __future__ import annotations

import asyncio

from foresize.shells.kube.api import ApiResponse, NotSent
from foresize.shells.kube.events import EventAggregator, EventSink


class RecordingApi:
    """Answers every Event write; records the calls and whether they were throttled."""

    def __init__(self, refuse: Exception | None = None) -> None:
        self.calls: list[tuple[str, str, dict, bool]] = []
        self.refuse = refuse

    async def request(
        self, method, path, body=None, content_type=None, params=None, *, unthrottled=False
    ):
        if self.refuse is not None:
            raise self.refuse
        self.calls.append((method, path, body, unthrottled))
        name = f"e{len(self.calls)}"
        return ApiResponse(201 if method == "POST" else 200, {"metadata": {"name": name}})


def event(name: str, reason: str = "Resized", type_: str = "Normal") -> dict:
    return {
        "involvedObject": {"kind": "Pod", "namespace": "shop", "name": name},
        "reason": reason,
        "type": type_,
        "message": f"{reason} {name}",
        "count": 1,
    }


async def test_events_are_sent_later_on_their_own_budget_and_folded_while_queued() -> None:
    api = RecordingApi()
    sink = EventSink(EventAggregator(api), qps=1000.0, burst=5)  # type: ignore[arg-type]
    for _ in range(3):
        assert sink.submit("shop", event("web-1"))
    assert sink.submit("shop", event("web-2"))
    assert api.calls == []  # submitting never waits for a write
    await sink.flush()
    assert [(m, p) for m, p, _, _ in api.calls] == [
        ("POST", "/api/v1/namespaces/shop/events"),
        ("POST", "/api/v1/namespaces/shop/events"),
    ]
    assert api.calls[0][2]["count"] == 3  # three occurrences, one write
    assert all(unthrottled for *_, unthrottled in api.calls)  # not the actions' budget
    assert (sink.sent, sink.folded, sink.dropped) == (2, 2, 0)


async def test_a_full_queue_drops_normal_events_and_makes_room_for_warnings() -> None:
    api = RecordingApi()
    sink = EventSink(EventAggregator(api), qps=1000.0, burst=1, max_queued=2)  # type: ignore[arg-type]
    assert sink.submit("shop", event("a"))
    assert sink.submit("shop", event("b"))
    assert not sink.submit("shop", event("c"))  # full: a Normal one is dropped
    assert sink.submit("shop", event("d", "ResizeFailed", "Warning"))  # takes a's place
    await sink.flush()
    sent = [body["involvedObject"]["name"] for _, _, body, _ in api.calls]
    assert sent == ["b", "d"] and sink.dropped == 2


async def test_the_budget_paces_the_writes() -> None:
    api = RecordingApi()
    sink = EventSink(EventAggregator(api), qps=20.0, burst=1)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(5):
        sink.submit("shop", event(f"p{i}"))
    await sink.flush()
    assert len(api.calls) == 5
    assert loop.time() - start >= 4 / 20.0 * 0.9  # 1 at once, then 20/s


async def test_a_stop_ends_the_delivery_and_counts_what_was_not_sent() -> None:
    api = RecordingApi(refuse=NotSent("POST /events not sent: stopping"))
    sink = EventSink(EventAggregator(api), qps=1000.0, burst=10)  # type: ignore[arg-type]
    for i in range(4):
        sink.submit("shop", event(f"p{i}"))
    await sink.flush()
    assert sink.queued == 0 and sink.failed == 4 and sink.sent == 0


async def test_drops_past_the_bound_are_counted_in_metrics_and_logged_once_a_stretch(
    caplog,
) -> None:
    """A churn's Events outrun their budget (`bench shard`: about 44 a second against 5):
    the queue stays at its bound, every drop and fold is counted in the Prometheus
    counters, and the log says it twice a stretch of drops (its start, and its number once
    the queue has drained), not once an Event."""
    import logging

    from foresize.adapters.telemetry.metrics import ForesizeMetrics

    caplog.set_level(logging.INFO)
    api = RecordingApi()
    metrics = ForesizeMetrics()
    sink = EventSink(EventAggregator(api), qps=1000.0, burst=1, max_queued=10)  # type: ignore[arg-type]
    sink.metrics = metrics
    for i in range(50):  # distinct pods, as a churn's: none folds into another
        sink.submit("shop", event(f"p{i}"))
        assert sink.queued <= 10
    sink.submit("shop", event("p0"))  # waiting still: folded
    await sink.flush()
    dropped = metrics.events_dropped.labels("queue_full")._value.get()
    assert (sink.dropped, dropped, sink.sent) == (40, 40, 10)
    assert metrics.events_folded._value.get() == 1
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(lines) == 2 and "40 Event(s) dropped" in lines[1], lines
    for i in range(20):  # a second stretch: logged again, its own number
        sink.submit("shop", event(f"q{i}"))
    await sink.flush()
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(lines) == 4 and "10 Event(s) dropped" in lines[3], lines
    assert metrics.events_dropped.labels("queue_full")._value.get() == 50


async def test_events_waiting_at_a_stop_are_counted_as_dropped_for_stopping() -> None:
    from foresize.adapters.telemetry.metrics import ForesizeMetrics

    api = RecordingApi(refuse=NotSent("POST /events not sent: stopping"))
    metrics = ForesizeMetrics()
    sink = EventSink(EventAggregator(api), qps=1000.0, burst=10)  # type: ignore[arg-type]
    sink.metrics = metrics
    for i in range(4):
        sink.submit("shop", event(f"p{i}"))
    await sink.flush()
    assert metrics.events_dropped.labels("stopping")._value.get() == 4


async def test_the_delivery_does_not_answer_to_the_lease_check_of_the_first_event_queued() -> None:
    """The first Event is queued inside a gated call (its target's Lease check in the
    context); the delivery task must not carry that check to every Event after it: once
    that target's shard moved, they were all refused and dropped."""
    from foresize.shells.kube import gate

    class VetoingApi(RecordingApi):
        async def request(self, method, path, body=None, content_type=None, params=None, **kw):
            why = gate.still_allowed()  # what KubeApi's veto asks as the bytes go out
            if why is not None:
                raise NotSent(f"{method} {path} not sent: {why}")
            return await super().request(method, path, body, content_type, params, **kw)

    api = VetoingApi()
    sink = EventSink(EventAggregator(api), qps=1000.0, burst=10)  # type: ignore[arg-type]
    moved = False
    token = gate._ASKING.set(lambda: "shard 1 not held" if moved else None)
    try:
        sink.submit("shop", event("p0"))  # from inside the gated call
    finally:
        gate._ASKING.reset(token)
    moved = True  # that shard has moved since
    sink.submit("shop", event("p1"))
    await sink.flush()
    assert sink.sent == 2 and sink.failed == 0
