"""The operator's history on a shared Prometheus-compatible store (Prometheus,
VictoriaMetrics, Thanos, Mimir), so every replica and a new leader see the same history.

What the operator collects itself (metrics-server polls: each workload container's usage
and the workload's `__total__`, OOM kills) goes to the store by remote write
(`adapters.history.remote_write`), by one replica: the holder of shard 0 (`writes`),
so no two replicas write one series. Every replica reads the store back through the query
API (`adapters.history.prometheus.PrometheusReader`, under its `QueryBudget`):

- `foresize_history_cpu_cores` and `foresize_history_memory_bytes` {namespace, workload,
  workload_kind, container}: one sample per poll; the workload totals under
  `container="__total__"`;
- `foresize_history_events` {namespace, workload, workload_kind, container, kind}: one
  sample per OOM kill or throttling observation (its value: the memory limit at the kill).

Reads are served from a local mirror in two tiers of `UsageHistory`: 1-minute buckets for
the last 2 days (what the yielding step reads at 1 minute) and 5-minute buckets for the
whole retention (the model grid); a 14-day mirror at 1 minute would be 160 KB a
container, 1.6 GB at 10,000. Each `fetch` reads what the store holds since the last one
(the first: the whole retention) as the maximum per bucket, `max_over_time(m[step]
offset 1ms)` on the step grid: the bucket [t - step, t) ends at the point t, as the
mirror's buckets do (Prometheus 2's windows are closed at both ends, VictoriaMetrics'
and Prometheus 3's open on the left: the 1 ms offset makes both hold the samples of
[t - step, t - 1 ms]). `apply` writes it into the mirror (the maximum is kept, so
re-reading an overlap changes nothing).

Whether the history is whole (`problem`): not before the first full read; not when the
last read failed (down, slow, 429/503 after the retries, a wrong shape, a series limit,
an answer with warnings, which is Thanos' and Mimir's partial response); not when the
store's clock and ours differ by more than `max_skew`; not when no read succeeded for
`stale_after`. A failed read applies nothing: the mirror never holds half of a read.
The operator then keeps its last suggestions, and says so (`foresize_history_whole`, the
target condition `HistoryIncomplete`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.prometheus_series import promql_duration
from foresize.adapters.history.remote_write import RemoteWriter, Series
from foresize.core.errors import ForesizeError
from foresize.core.history import (
    RESOURCES,
    UNKNOWN_KIND,
    SeriesKey,
    aligned_start,
    check_resource,
)

log = logging.getLogger("foresize.adapters.history")

USAGE_METRICS = {"cpu": "foresize_history_cpu_cores", "memory": "foresize_history_memory_bytes"}
EVENT_METRIC = "foresize_history_events"
FINE_STEP = 60.0
FINE_SPAN = 2 * 86400.0
COARSE_STEP = 300.0
DEFAULT_RETENTION = 14 * 86400.0
MAX_SKEW = 60.0
"""A store clock further than this from ours puts "now" in the wrong bucket for a step of
5 minutes; NTP keeps real clocks within milliseconds, so this is a broken clock."""
MAX_OUTBOX = 2_000_000
"""Samples held for the store while it does not take them (a few hours of 10,000
containers at 1 minute); beyond, the oldest are dropped and counted."""


@dataclass(slots=True)
class Fetched:
    """One read of the store, applied whole by `SharedHistory.apply` or not at all."""

    end: float
    # step -> (bucket start, keys, cpu, memory) rows of that tier
    tiers: dict[float, list[tuple[float, list[SeriesKey], np.ndarray, np.ndarray]]]
    events: dict[SeriesKey, set[tuple[float, str, float]]] = field(default_factory=dict)
    skew: float = 0.0


KIND_LABEL = "workload_kind"
"""The workload's kind (`SeriesKey.kind`; `kind` on the events is the event's). A series
written before kinds were kept has none: it reads as `UNKNOWN_KIND`, which a workload
reads only while its name is its kind's alone (`history.history_kinds`)."""


def _key(labels: dict[str, str]) -> SeriesKey | None:
    ns, wl, c = labels.get("namespace"), labels.get("workload"), labels.get("container")
    if not ns or not wl or not c:
        return None
    return SeriesKey(ns, wl, c, labels.get(KIND_LABEL) or UNKNOWN_KIND)


class SharedHistory:
    """`HistoryReader` and `HistoryWriter` over a Prometheus-compatible store."""

    def __init__(
        self,
        reader: PrometheusReader,
        writer: RemoteWriter | None = None,
        *,
        retention: float = DEFAULT_RETENTION,
        max_skew: float = MAX_SKEW,
        stale_after: float = 600.0,
        writes: Callable[[], bool] = lambda: True,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.retention = float(retention)
        self.max_skew = max_skew
        self.stale_after = stale_after
        self.writes = writes
        self.fine = UsageHistory(step=FINE_STEP, retention=FINE_SPAN)
        self.coarse = UsageHistory(step=COARSE_STEP, retention=self.retention)
        self._events: dict[SeriesKey, set[tuple[float, str, float]]] = {}
        self._outbox: list[Series] = []
        self._outbox_samples = 0
        self.dropped_samples = 0
        self.dropped_reported = 0  # of them, counted in the operator's metric
        self.loaded_until: float | None = None
        self.last_success: float | None = None
        self.failure: str | None = None
        self.skew = 0.0

    # ------------------------------------------------------------ HistoryReader
    def series(
        self, key: SeriesKey, resource: str, start: float, end: float
    ) -> tuple[np.ndarray, np.ndarray]:
        check_resource(resource)
        tier = self.fine if start >= end - FINE_SPAN + FINE_STEP else self.coarse
        return tier.series(key, resource, start, end)

    def window(
        self, keys: list[SeriesKey], resource: str, end: float, length: int, step: float
    ) -> np.ndarray:
        check_resource(resource)
        coarse = step >= COARSE_STEP and math.isclose(step / COARSE_STEP, round(step / COARSE_STEP))
        return (self.coarse if coarse else self.fine).window(keys, resource, end, length, step)

    def events(
        self, key: SeriesKey, kind: str | None, start: float, end: float
    ) -> list[tuple[float, str, float]]:
        return sorted(
            e
            for e in self._events.get(key, ())
            if start <= e[0] < end and (kind is None or e[1] == kind)
        )

    def first_seen(self, key: SeriesKey) -> float | None:
        seen = [t for t in (self.coarse.first_seen(key), self.fine.first_seen(key)) if t]
        return min(seen) if seen else None

    # ------------------------------------------------------------ HistoryWriter
    def write_poll(
        self, t: float, keys: Sequence[SeriesKey], cpu: np.ndarray, memory: np.ndarray
    ) -> None:
        self.fine.write_poll(t, keys, cpu, memory)
        self.coarse.write_poll(t, keys, cpu, memory)
        if self.writer is None or not self.writes():
            return
        t_ms = int(round(t * 1000))
        for resource, values in (("cpu", cpu), ("memory", memory)):
            name = USAGE_METRICS[resource]
            for key, value in zip(keys, np.asarray(values, dtype=np.float64), strict=True):
                if np.isfinite(value):
                    self._queue(self._labels(name, key), [(t_ms, float(value))])

    def record_event(self, key: SeriesKey, kind: str, t: float, value: float = 0.0) -> None:
        self._events.setdefault(key, set()).add((float(t), kind, float(value)))
        if self.writer is not None and self.writes():
            labels = {**self._labels(EVENT_METRIC, key), "kind": kind}
            self._queue(labels, [(int(round(t * 1000)), float(value))])

    @staticmethod
    def _labels(name: str, key: SeriesKey) -> dict[str, str]:
        return {
            "__name__": name,
            "namespace": key.namespace,
            "workload": key.workload,
            "container": key.container,
            # An empty label is no label (Prometheus drops it): an unknown kind stays one.
            **({KIND_LABEL: key.kind} if key.kind else {}),
        }

    def _queue(self, labels: dict[str, str], samples: list[tuple[int, float]]) -> None:
        self._outbox.append((labels, samples))
        self._outbox_samples += len(samples)
        if self._outbox_samples > MAX_OUTBOX:
            drop = len(self._outbox) // 10 or 1
            self.dropped_samples += sum(len(s) for _, s in self._outbox[:drop])
            self._outbox_samples -= sum(len(s) for _, s in self._outbox[:drop])
            del self._outbox[:drop]

    def take_outbox(self) -> list[Series]:
        """What is waiting for the store (the caller sends it, and gives it back with
        `requeue` if the store did not take it)."""
        out, self._outbox, self._outbox_samples = self._outbox, [], 0
        return out

    def requeue(self, series: list[Series]) -> None:
        for labels, samples in series:
            self._queue(dict(labels), list(samples))

    async def push(self, series: list[Series]) -> None:
        if self.writer is not None and series:
            await self.writer.write(series)

    # ------------------------------------------------------------ reading the store
    def problem(self, now: float) -> str | None:
        """Why the history is not whole now (None: it is)."""
        if self.failure is not None:
            return self.failure
        if self.last_success is None:
            return "the shared history store has not been read yet"
        if now - self.last_success > self.stale_after:
            # No number that grows each pass: the condition's text is written on change.
            return f"the shared history store was not read for more than {self.stale_after:g} s"
        return None

    def _usage_query(self, resource: str, step: float) -> str:
        return (
            f"max by (namespace, workload, container, {KIND_LABEL}) (max_over_time("
            f"{USAGE_METRICS[resource]}[{promql_duration(step)}] offset 1ms))"
        )

    async def fetch(self, now: float) -> Fetched:
        """Read what the store holds since the last read (ForesizeError naming the cause
        if any part fails: nothing of it is applied then)."""
        start = (
            now - self.retention
            if self.loaded_until is None
            else self.loaded_until - 2 * COARSE_STEP
        )
        async with self.reader._session() as session:
            store_now = await self.reader.store_time(session)
            skew = store_now - now
            if abs(skew) > self.max_skew:
                ahead = "ahead of" if skew > 0 else "behind"
                self.skew = skew  # the number is in foresize_history_store_skew_seconds
                raise ForesizeError(
                    f"the history store's clock is more than {self.max_skew:g} s {ahead} "
                    "this operator's: its buckets would be misread"
                )
            tiers: dict[float, list[tuple[float, list[SeriesKey], np.ndarray, np.ndarray]]] = {}
            plans = [
                (COARSE_STEP, start),
                (FINE_STEP, max(start, now - FINE_SPAN + FINE_STEP)),
            ]
            asks: list[Any] = []
            for step, begin in plans:
                # Up to the bucket `now` is in, unfinished: re-read by the next read's
                # overlap (the maximum is kept), so a new leader has the last minutes too.
                lo = aligned_start(begin, step) + step
                hi = aligned_start(now, step) + step
                for resource in RESOURCES:
                    asks.append(
                        self.reader.query_range(
                            self._usage_query(resource, step), lo, hi, step, session
                        )
                        if hi >= lo
                        else _nothing()
                    )
            span = promql_duration(max(now - start, 1.0))
            raw_events = self.reader.query(f"{EVENT_METRIC}[{span}]", now, session)
            *answers, kills = await asyncio.gather(*asks, raw_events)
        for i, (step, _) in enumerate(plans):
            tiers[step] = _rows(answers[2 * i], answers[2 * i + 1], step)
        events: dict[SeriesKey, set[tuple[float, str, float]]] = {}
        for item in kills:
            labels = item.get("metric", {})
            key = _key(labels) if isinstance(labels, dict) else None
            values = item.get("values")
            if key is None or not isinstance(values, list):
                continue
            for pair in values:
                try:
                    events.setdefault(key, set()).add(
                        (float(pair[0]), str(labels.get("kind", "")), float(pair[1]))
                    )
                except (TypeError, ValueError, IndexError):
                    raise self.reader._wrong_shape("/api/v1/query", EVENT_METRIC) from None
        return Fetched(now, tiers, events, skew)

    def apply(self, fetched: Fetched) -> None:
        """Write one read into the mirror (under the caller's lock)."""
        for step, rows in fetched.tiers.items():
            tier = self.coarse if step == COARSE_STEP else self.fine
            oldest = fetched.end - tier.max_rows * tier.step + step
            for t, keys, cpu, mem in rows:
                if t >= oldest:
                    tier.write_poll(t, keys, cpu, mem)
        for key, evs in fetched.events.items():
            self._events.setdefault(key, set()).update(evs)
        self.loaded_until = fetched.end
        self.last_success = fetched.end
        self.failure = None
        self.skew = fetched.skew

    def failed(self, problem: str) -> None:
        self.failure = problem


async def _nothing() -> list[tuple[dict[str, str], np.ndarray, np.ndarray]]:
    return []


def _rows(
    cpu: list[tuple[dict[str, str], np.ndarray, np.ndarray]],
    mem: list[tuple[dict[str, str], np.ndarray, np.ndarray]],
    step: float,
) -> list[tuple[float, list[SeriesKey], np.ndarray, np.ndarray]]:
    """Range answers -> one (bucket start, keys, cpu, memory) row per grid point: the
    point at t is the bucket [t - step, t)."""
    by: dict[SeriesKey, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for resource, answer in (("cpu", cpu), ("memory", mem)):
        for labels, ts, vs in answer:
            key = _key(labels)
            if key is not None:
                by.setdefault(key, {})[resource] = (ts, vs)
    if not by:
        return []
    keys = sorted(by)
    grid = np.unique(np.concatenate([ts for parts in by.values() for ts, _ in parts.values()]))
    mats = {r: np.full((grid.size, len(keys)), np.nan) for r in RESOURCES}
    for j, key in enumerate(keys):
        for resource, (ts, vs) in by[key].items():
            mats[resource][np.searchsorted(grid, ts), j] = vs
    return [(float(t) - step, keys, mats["cpu"][i], mats["memory"][i]) for i, t in enumerate(grid)]


async def refresh(history: Any, store: SharedHistory, now: float) -> str | None:
    """One read of the store into `history` (the store itself, or it behind the shell's
    lock): the problem if it failed (recorded in the store), None if whole."""
    try:
        fetched = await store.fetch(now)
    except ForesizeError as exc:
        history.failed(str(exc))
        return str(exc)
    except Exception as exc:  # the read must never take the operator down
        problem = f"reading the history store failed: {type(exc).__name__}: {exc}"
        history.failed(problem)
        return problem
    await asyncio.to_thread(history.apply, fetched)
    return None
