"""What one reader may ask of a Prometheus-compatible store (Prometheus, VictoriaMetrics,
Thanos, Mimir), and what it does when the store refuses: the one budget every query of
`adapters.history.prometheus.PrometheusReader` runs under (`foresize recommend
--prometheus`, `foresize simulate --prometheus` and the operator's shared history).

KRR's reader crashed a 1,000-pod cluster's Prometheus and OOM-killed a 3 GiB one at 250k
series (robusta-dev/krr #332, #83) by asking for everything at once. So:

- bounded concurrency: at most `concurrency` queries in flight at once;
- range chunking: a range query covers at most `chunk_seconds` of time and `max_points`
  steps (Prometheus refuses more than 11,000 points per series), the chunks stitched;
- step alignment: every grid is multiples of the step since the epoch (`align`), so the
  same data give the same points whatever the second of the run, and the store's result
  cache (VictoriaMetrics, Thanos' query-frontend) serves repeated queries;
- a series limit per query: an answer with more than `max_series` series is an error
  naming the query (the store paid for it once; the reader will not hold it);
- retries with back-off on 429 and 503 (and a connection that dropped): `retries` more
  attempts, waiting `backoff` doubling up to `max_backoff`, or the store's Retry-After if
  it says (capped likewise); after the last, an error naming the query and the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from foresize.core.errors import ForesizeError

RETRIED_STATUSES = (429, 503)
"""Too Many Requests and Service Unavailable: the store's way of saying "later" (Thanos
and Mimir's query-frontend shed load with 429; VictoriaMetrics answers 503 while its
concurrent-request queue is full). Every other error is an answer, not retried."""


@dataclass(frozen=True, slots=True)
class QueryBudget:
    concurrency: int = 4
    """Queries in flight at once: VictoriaMetrics' default `-search.maxConcurrentRequests`
    is twice the cores, and a reader should take a share of a store, not all of it."""
    max_points: int = 10_000
    """Steps per series per query (Prometheus refuses more than 11,000)."""
    chunk_seconds: float = 86400.0
    """Time one range query covers: a day, so 14 days of history are 14 queries a
    metric, each a bounded load on the store, not one that loads 14 days at once."""
    max_series: int = 20_000
    """Series one answer may hold: 10,000 containers with a duplicate each."""
    retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        for name in ("concurrency", "max_points", "max_series"):
            if getattr(self, name) < 1:
                raise ForesizeError(f"query budget: {name} must be at least 1")
        if self.chunk_seconds <= 0 or self.backoff < 0 or self.max_backoff < 0:
            raise ForesizeError("query budget: chunk and back-off must be positive")
        if self.retries < 0:
            raise ForesizeError("query budget: retries must be 0 or more")

    def wait(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before retry number `attempt` (0-based): the store's
        Retry-After (seconds) if it gives one, else the doubling back-off, both capped."""
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_backoff)
            except ValueError:
                pass  # an HTTP date: fall back to our own back-off
        return min(self.backoff * 2.0**attempt, self.max_backoff)

    def range_chunk(self, step: float) -> float:
        """Seconds one range query may cover on a grid of `step`: a whole number of
        steps, at most `chunk_seconds` (never less than one step) and `max_points`."""
        steps = max(1, min(int(self.chunk_seconds // step), self.max_points - 1))
        return steps * step
