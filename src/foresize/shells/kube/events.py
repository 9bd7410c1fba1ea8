"""Events as client-go's EventRecorder sends them for the kubelet and controllers.

Aggregation (`EventAggregator`): the same (involved object, type, reason) seen again within
`window` does not create a new Event: the existing one gets its `count` raised, the new
`lastTimestamp` and the latest message (a merge patch). A PDB-blocked target retried every
pass is then one Event whose count grows, not one object per try. An Event the server no
longer has (Events expire after an hour by default; a 404 on the patch) is created again.

Delivery (`EventSink`): Events are queued and sent by a task of their own, on a budget of
their own (`EVENT_QPS`/`EVENT_BURST`, not the actions' `--kube-api-qps`), so they never
delay a resize or an eviction (kube.md N6: a pass's Events took most of the client's
budget). While queued, an Event of a series already waiting is folded into it (one write
with the summed count). The queue is bounded like client-go's broadcaster's (1,000, drop
when full): past it a Normal Event is dropped; a Warning makes room by dropping the oldest
queued Normal one. Events are best effort (client-go drops them the same way, and the API
server keeps them an hour); the changes log, the metrics and the targets' status are the
record. A drop is counted (`foresize_events_dropped_total{reason="queue_full"}`, and
`reason="stopping"` for those waiting at a stop) and logged once for each stretch of drops:
a warning at the first, one line with the number once the queue has drained. Folds are
counted too (`foresize_events_folded_total`).

Why no per-object spam filter (client-go's token bucket per source and object, a burst of
25): the Events that outrun the budget are of distinct pods, two for each resize (planned,
then done), so no object comes near a burst of 25; what bounds them is the queue. A churn
of 22 targets of 10 pods every 10 s asks for about 44 Events a second against the budget's
5 (`foresize bench shard`, docs/scale.md): the queue stays at its bound and the rest is
dropped and counted, without delaying an action.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from foresize.shells.kube.api import JSON, MERGE_PATCH, ApiResponse, KubeApi, NotSent, RateLimiter

log = logging.getLogger(__name__)

# client-go's EventCorrelator aggregates within a 10-minute window.
AGGREGATION_WINDOW = 600.0
# Series remembered at most (least recently used go first; client-go keeps 4096).
MAX_SERIES = 4096
# The Events' own client-side budget: a tenth of the actions' 50 QPS / 100 burst, so a
# pass's Events add at most that to the API server's load (client-go's event spam filter
# allows a burst of 25 per object).
EVENT_QPS = 5.0
EVENT_BURST = 25
# Events waiting to be sent (client-go's broadcaster: maxQueuedEvents 1000, drop if full).
MAX_QUEUED = 1000


@dataclass(slots=True)
class _Series:
    name: str
    count: int
    last: float


class EventAggregator:
    """POST the first Event of a series, PATCH its count afterwards."""

    def __init__(
        self,
        api: KubeApi,
        *,
        window: float = AGGREGATION_WINDOW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.window = window
        self.clock = clock
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self.created = 0
        self.patched = 0

    @staticmethod
    def key(namespace: str, body: dict[str, Any]) -> tuple[str, ...]:
        obj = body.get("involvedObject") or {}
        return (
            namespace,
            str(obj.get("kind", "")),
            str(obj.get("namespace", "")),
            str(obj.get("name", "")),
            str(obj.get("uid", "")),
            str(body.get("type", "")),
            str(body.get("reason", "")),
        )

    async def record(
        self, namespace: str, body: dict[str, Any], *, unthrottled: bool = False
    ) -> ApiResponse:
        """Create the Event `body` (its `count` occurrences), or raise the count of its
        series. `unthrottled`: the caller paces the calls (`EventSink`'s own budget)."""
        now = self.clock()
        key = self.key(namespace, body)
        series = self._series.get(key)
        times = int(body.get("count") or 1)
        if series is not None and now - series.last <= self.window:
            patch = {
                "count": series.count + times,
                "lastTimestamp": body.get("lastTimestamp"),
                "message": body.get("message", ""),
            }
            path = f"/api/v1/namespaces/{namespace}/events/{series.name}"
            resp = await self.api.request(
                "PATCH", path, patch, MERGE_PATCH, unthrottled=unthrottled
            )
            if resp.ok:
                series.count += times
                series.last = now
                self._series.move_to_end(key)
                self.patched += 1
                return resp
            if resp.code != 404:
                return resp
        resp = await self.api.request(
            "POST", f"/api/v1/namespaces/{namespace}/events", body, JSON, unthrottled=unthrottled
        )
        if resp.ok and isinstance(resp.body, dict):
            name = (resp.body.get("metadata") or {}).get("name")
            if name:
                self._series[key] = _Series(str(name), times, now)
                self._series.move_to_end(key)
                while len(self._series) > MAX_SERIES:
                    self._series.popitem(last=False)
            self.created += 1
        return resp


@dataclass(slots=True)
class _Queued:
    namespace: str
    body: dict[str, Any]
    count: int


class EventSink:
    """Queue Events and send them on their own budget (see the module doc)."""

    def __init__(
        self,
        aggregator: EventAggregator,
        *,
        qps: float = EVENT_QPS,
        burst: int = EVENT_BURST,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        self.aggregator = aggregator
        self.limiter = RateLimiter(qps, burst)
        self.max_queued = max_queued
        self._queue: OrderedDict[tuple[str, ...], _Queued] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        # ForesizeMetrics (its events_dropped / events_folded counters), set by the operator.
        self.metrics: Any = None
        self._dropping = 0  # dropped since the first drop of the current stretch
        self.sent = 0  # Events written (a create or a count raised)
        self.folded = 0  # Events folded into one of their series already queued
        self.dropped = 0  # Events dropped: the queue was full
        self.failed = 0  # writes the API server refused or that failed

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, namespace: str, body: dict[str, Any]) -> bool:
        """Queue one Event (returns at once); False when it was dropped."""
        key = EventAggregator.key(namespace, body)
        times = int(body.get("count") or 1)
        waiting = self._queue.get(key)
        if waiting is not None:
            waiting.count += times
            first = waiting.body.get("firstTimestamp")
            waiting.body = {**body, "firstTimestamp": first or body.get("firstTimestamp")}
            self.folded += 1
            if self.metrics is not None:
                self.metrics.events_folded.inc()
            return True
        if len(self._queue) >= self.max_queued and not self._make_room(body):
            self._drop()
            return False
        self._queue[key] = _Queued(namespace, body, times)
        if self._task is None or self._task.done():
            # In a context of its own: a task inherits its creator's, here the gated call
            # of the first Event queued, whose Lease check (`gate.still_allowed`) would then
            # answer for every Event after it (all dropped once that one's shard moved).
            # Events are records, not acts (`bench/shard_check.py`): only the stop holds
            # them back (the API client's veto).
            self._task = asyncio.get_running_loop().create_task(
                self._drain(), name="foresize:events", context=contextvars.Context()
            )
        return True

    def _make_room(self, body: dict[str, Any]) -> bool:
        """A Warning takes the place of the oldest queued Normal Event, if any."""
        if body.get("type") != "Warning":
            return False
        for key, waiting in self._queue.items():
            if waiting.body.get("type") != "Warning":
                del self._queue[key]
                self._drop()
                return True
        return False

    def _drop(self, count: int = 1, reason: str = "queue_full") -> None:
        """Count `count` Events dropped; the first of a stretch of drops is logged (the
        stretch's number is logged once the queue has drained, `_drained`)."""
        self.dropped += count
        if self.metrics is not None:
            self.metrics.events_dropped.labels(reason).inc(count)
        if reason == "queue_full":
            if not self._dropping:
                log.warning(
                    "Events dropped: more than %d waiting to be sent at %g/s (counted in "
                    "foresize_events_dropped_total; one line more once the queue has drained)",
                    self.max_queued,
                    self.limiter.qps,
                )
            self._dropping += count

    def _drained(self) -> None:
        if self._dropping:
            log.warning("%d Event(s) dropped while the queue was full", self._dropping)
            self._dropping = 0

    async def _drain(self) -> None:
        try:
            await self._send_queued()
        finally:
            if not self._queue:
                self._drained()

    async def _send_queued(self) -> None:
        while self._queue:
            await self.limiter.acquire()
            if not self._queue:
                return
            _, waiting = self._queue.popitem(last=False)
            body = dict(waiting.body, count=waiting.count)
            try:
                resp = await self.aggregator.record(waiting.namespace, body, unthrottled=True)
            except NotSent as exc:  # stopping: nothing more goes out
                log.info("%d Event(s) not sent: %s", 1 + len(self._queue), exc)
                self.failed += 1 + len(self._queue)
                if self.metrics is not None:
                    self.metrics.events_dropped.labels("stopping").inc(1 + len(self._queue))
                self._queue.clear()
                return
            except Exception as exc:  # a connection error: this Event is lost, go on
                log.debug("Event %s not sent: %s", body.get("reason"), exc)
                self.failed += 1
                continue
            if resp.ok:
                self.sent += 1
            else:
                self.failed += 1
                log.debug("Event %s refused: %s %s", body.get("reason"), resp.code, resp.body)

    async def flush(self) -> None:
        """Wait until every queued Event has been sent (tests, a clean shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
