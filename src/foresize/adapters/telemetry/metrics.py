"""Foresize's Prometheus metrics and the `/metrics` endpoint.

The names and labels below are an interface: the alerts in the shipped PrometheusRule
(`foresize manifests monitoring`, the Helm chart) query them. Change them only together.

| metric | type | labels |
|---|---|---|
| foresize_resizes_total | counter | target, resource, direction, outcome |
| foresize_request_changes_total | counter | target, resource, direction, source |
| foresize_evictions_total | counter | target, outcome |
| foresize_stalled_pods | gauge | target |
| foresize_breaker_open | gauge (0/1) | target |
| foresize_recommendation | gauge | target, container, resource, kind (request/limit) |
| foresize_provisioning_ratio | gauge | target, resource |
| foresize_oom_kills_total | counter | target, container |
| foresize_node_charge_gap | gauge | node, resource |
| foresize_pending_upsize_demand | gauge | node_pool, resource |
| foresize_pending_upsize_pods | gauge | node_pool, cause |
| foresize_webhook_duration_seconds | histogram | (none) |
| foresize_loop_duration_seconds | histogram | (none) |
| foresize_history_bad_values_total | counter | (none) |
| foresize_history_recoveries_total | counter | (none) |
| foresize_history_whole | gauge (0/1) | (none) |
| foresize_history_store_failures_total | counter | operation (read/write) |
| foresize_history_store_dropped_samples_total | counter | (none) |
| foresize_history_store_skew_seconds | gauge | (none) |
| foresize_webhook_bad_requests_total | counter | reason |
| foresize_leader | gauge (0/1) | shard |
| foresize_cache_synced | gauge (0/1) | (none) |
| foresize_webhook_certificate_expiry_seconds | gauge | (none) |

Per-target gauges are removed (`forget_targets`) once the target is deleted or its shard
is held by another replica, so an ex-leader exports nothing stale.

Per-target counters exist at 0 before their first change (`declare_targets`, each pass,
before its actions): a series first scraped at 1 shows no `increase()`, so an alert on the
first change after every start would never fire. Every label set knowable up front is
declared: both request-change sources for every target in the cluster (any replica's
webhook sizes pods of any target), and the in-place and resize-outcome sets for the
targets this replica's shards hold (only their owner resizes them). A deleted target's
counters are removed an hour later (`forget_counters`, `ChangeRecorder.declare`).

Outcomes: `success` (2xx), `deferred` (429: a PodDisruptionBudget or the API server's
rate limit said "later"), `rejected` (any other 4xx: 422 invalid, 403 NodeCapacity, 404
gone), `error` (5xx, or the API server could not be reached). Directions: `up`, `down`.
`foresize_request_changes_total` counts every container request Foresize changed, wherever:
`source` is `in_place` (a resize the API server accepted) or `admission` (the pod webhook
sized a new pod); `target` is the AIScaleTarget's or DaemonSetAutoscaler's "namespace/name".
Units: cpu in cores, memory in bytes (Prometheus base units).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

METRIC_NAMES = (
    "foresize_resizes_total",
    "foresize_request_changes_total",
    "foresize_evictions_total",
    "foresize_stalled_pods",
    "foresize_breaker_open",
    "foresize_recommendation",
    "foresize_provisioning_ratio",
    "foresize_shadow_score",
    "foresize_oom_kills_total",
    "foresize_node_charge_gap",
    "foresize_pending_upsize_demand",
    "foresize_pending_upsize_pods",
    "foresize_webhook_duration_seconds",
    "foresize_loop_duration_seconds",
    "foresize_history_bad_values_total",
    "foresize_history_recoveries_total",
    "foresize_history_whole",
    "foresize_history_store_failures_total",
    "foresize_history_store_dropped_samples_total",
    "foresize_history_store_skew_seconds",
    "foresize_webhook_bad_requests_total",
    "foresize_leader",
    "foresize_cache_synced",
    "foresize_webhook_certificate_expiry_seconds",
)

WEBHOOK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 3.0)
LOOP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# Every value the per-target counters' other labels take (`declare_targets` exports each
# combination at 0; the recorder only ever writes these).
RESOURCES = ("cpu", "memory")
DIRECTIONS = ("up", "down")
OUTCOMES = ("success", "deferred", "rejected", "error")
SOURCE_IN_PLACE = "in_place"
SOURCE_ADMISSION = "admission"


def outcome_of(code: int, ok: bool) -> str:
    """HTTP answer -> the `outcome` label."""
    if ok:
        return "success"
    if code == 429:
        return "deferred"
    if 400 <= code < 500:
        return "rejected"
    return "error"


def base_units(resource: str, amount: int) -> float:
    """Canonical int (millicores / bytes) -> Prometheus base unit (cores / bytes)."""
    return amount / 1000.0 if resource == "cpu" else float(amount)


class ForesizeMetrics:
    """The metric families on their own registry (one per operator; tests make fresh ones)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # (target, source) whose counter label sets `declare_targets` already exported.
        self._declared: set[tuple[str, str]] = set()
        # prometheus_client appends `_total` to counter names itself.
        self.resizes = Counter(
            "foresize_resizes",
            "In-place resizes sent to pods/resize, by outcome of the API call.",
            ["target", "resource", "direction", "outcome"],
            registry=r,
        )
        self.request_changes = Counter(
            "foresize_request_changes",
            "Container requests changed by Foresize, in place or at admission.",
            ["target", "resource", "direction", "source"],
            registry=r,
        )
        self.evictions = Counter(
            "foresize_evictions",
            "Evictions sent through the Eviction API, by outcome.",
            ["target", "outcome"],
            registry=r,
        )
        self.stalled = Gauge(
            "foresize_stalled_pods",
            "Pods of the target whose in-place resize is stalled (Deferred, Infeasible, Error).",
            ["target"],
            registry=r,
        )
        self.breaker = Gauge(
            "foresize_breaker_open",
            "1 while the target's eviction circuit breaker is open (or half open), else 0.",
            ["target"],
            registry=r,
        )
        self.recommendation = Gauge(
            "foresize_recommendation",
            "The latest recommendation per container (cores or bytes).",
            ["target", "container", "resource", "kind"],
            registry=r,
        )
        self.shadow_score = Gauge(
            "foresize_shadow_score",
            "A policy's score on the target's live history (status.shadow): the target's own "
            "policy (policy=active) and each shadow policy; metric slack, shortfall, under, "
            "events_per_series_day (memory: OOM kills) or changes_per_series_day.",
            ["target", "policy", "resource", "metric"],
            registry=r,
        )
        self.provisioning = Gauge(
            "foresize_provisioning_ratio",
            "Sum of the target's pods' requests divided by their usage (1 = exactly sized).",
            ["target", "resource"],
            registry=r,
        )
        self.oom_kills = Counter(
            "foresize_oom_kills",
            "OOM kills seen on the target's containers.",
            ["target", "container"],
            registry=r,
        )
        self.node_charge_gap = Gauge(
            "foresize_node_charge_gap",
            "Per node: the scheduler's charge (max of spec, allocated, actual requests) minus "
            "the sum of spec requests (cores or bytes). Non-zero while resizes are in flight.",
            ["node", "resource"],
            registry=r,
        )
        self.pending_upsize_demand = Gauge(
            "foresize_pending_upsize_demand",
            "Per node pool: the requests (cores or bytes) Foresize's pending upsizes will add "
            "that node autoscalers cannot see: pods it will recreate larger, in-place upsizes "
            "waiting for room or Deferred (each pod's foresize.io/coming-resources).",
            ["node_pool", "resource"],
            registry=r,
        )
        self.pending_upsize_pods = Gauge(
            "foresize_pending_upsize_pods",
            "Per node pool: how many pods wait for their coming size, by cause (recreate, "
            "waiting-for-room, deferred).",
            ["node_pool", "cause"],
            registry=r,
        )
        self.webhook_duration = Histogram(
            "foresize_webhook_duration_seconds",
            "Time to answer an AdmissionReview.",
            buckets=WEBHOOK_BUCKETS,
            registry=r,
        )
        self.loop_duration = Histogram(
            "foresize_loop_duration_seconds",
            "Duration of one control-loop pass (snapshot, plan, apply).",
            buckets=LOOP_BUCKETS,
            registry=r,
        )

        self.history_bad_values = Counter(
            "foresize_history_bad_values",
            "Samples read from the SQLite history and dropped as impossible (not finite, "
            "negative, or above any machine): damage the integrity check cannot see.",
            registry=r,
        )
        self.history_recoveries = Counter(
            "foresize_history_recoveries",
            "Damaged SQLite history files moved aside at start (an empty store replaced them).",
            registry=r,
        )
        self.history_whole = Gauge(
            "foresize_history_whole",
            "1 while the usage history reads whole; 0 while the shared history store cannot "
            "be read whole (down, refusing, partial, clock skew): suggestions are kept, not "
            "recomputed, and the targets' HistoryIncomplete condition says why.",
            registry=r,
        )
        self.history_whole.set(1)
        self.history_store_failures = Counter(
            "foresize_history_store_failures",
            "Reads (query API) and writes (remote write) of the shared history store that "
            "failed after their retries.",
            ["operation"],
            registry=r,
        )
        for operation in ("read", "write"):
            self.history_store_failures.labels(operation)
        self.history_store_dropped = Counter(
            "foresize_history_store_dropped_samples",
            "Collected samples dropped unsent: the shared store refused them for longer than "
            "the outbox holds.",
            registry=r,
        )
        self.history_store_skew = Gauge(
            "foresize_history_store_skew_seconds",
            "The shared history store's clock less this operator's, at its last read.",
            registry=r,
        )
        self.events_dropped = Counter(
            "foresize_events_dropped",
            "Events not sent (best effort, as client-go's): more were waiting than the queue "
            "holds (queue_full), or the operator stopped with them waiting (stopping).",
            ["reason"],
            registry=r,
        )
        for reason in ("queue_full", "stopping"):
            self.events_dropped.labels(reason)
        self.events_folded = Counter(
            "foresize_events_folded",
            "Events folded, while waiting to be sent, into one of the same object, type and "
            "reason already waiting (one write with the summed count).",
            registry=r,
        )
        self.webhook_bad_requests = Counter(
            "foresize_webhook_bad_requests",
            "Webhook requests refused or cut off before a review: too large (413), timed out "
            "reading, malformed HTTP, over the connection cap, or an internal review error.",
            ["reason"],
            registry=r,
        )

        self.leader = Gauge(
            "foresize_leader",
            "1 while this replica holds the shard's Lease (within its renew deadline).",
            ["shard"],
            registry=r,
        )
        self.cache_synced = Gauge(
            "foresize_cache_synced",
            "1 once every watched kind has been listed (the control loop acts only then).",
            registry=r,
        )
        self.certificate_expiry = Gauge(
            "foresize_webhook_certificate_expiry_seconds",
            "Seconds until the served webhook certificate expires (negative: expired).",
            registry=r,
        )

    def declare_targets(self, known: Iterable[str], owned: Iterable[str]) -> int:
        """Export at 0 every per-target counter label set not exported yet: the admission
        request changes of every `known` target, the in-place request changes and the
        resize outcomes of the `owned` ones. Returns how many label sets were added."""
        added = 0
        for target in known:
            if (target, SOURCE_ADMISSION) not in self._declared:
                self._declared.add((target, SOURCE_ADMISSION))
                for resource in RESOURCES:
                    for direction in DIRECTIONS:
                        self.request_changes.labels(target, resource, direction, SOURCE_ADMISSION)
                        added += 1
        for target in owned:
            if (target, SOURCE_IN_PLACE) in self._declared:
                continue
            self._declared.add((target, SOURCE_IN_PLACE))
            for resource in RESOURCES:
                for direction in DIRECTIONS:
                    self.request_changes.labels(target, resource, direction, SOURCE_IN_PLACE)
                    added += 1
                    for outcome in OUTCOMES:
                        self.resizes.labels(target, resource, direction, outcome)
                        added += 1
        return added

    def forget_counters(self, gone: Iterable[str]) -> int:
        """Remove every per-target counter label set of the `gone` targets (deleted from
        the cluster: their series end instead of being exported for ever); a target that
        comes back is declared again at 0. Returns how many label sets were removed."""
        gone = set(gone)
        removed = 0
        for counter in (self.request_changes, self.resizes, self.evictions, self.oom_kills):
            for labels in list(counter._metrics):  # prometheus_client keeps label tuples here
                if labels[0] in gone:
                    counter.remove(*labels)
                    removed += 1
        self._declared = {d for d in self._declared if d[0] not in gone}
        return removed

    def forget_targets(self, keep: set[str]) -> int:
        """Remove every per-target label set whose target is not in `keep` (deleted, or
        held by another replica); returns how many were removed."""
        removed = 0
        for gauge in (
            self.stalled,
            self.breaker,
            self.recommendation,
            self.provisioning,
            self.shadow_score,
        ):
            for labels in list(gauge._metrics):  # prometheus_client keeps label tuples here
                if labels[0] not in keep:
                    gauge.remove(*labels)
                    removed += 1
        return removed

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # -------------------------------------------------------------- aiohttp glue
    def webhook_middleware(self) -> Any:
        """An aiohttp middleware timing every admission request into the histogram."""
        from aiohttp import web

        histogram = self.webhook_duration

        @web.middleware
        async def timed(request: web.Request, handler: Any) -> web.StreamResponse:
            if request.method != "POST":
                return await handler(request)
            start = time.perf_counter()
            try:
                return await handler(request)
            finally:
                histogram.observe(time.perf_counter() - start)

        return timed

    def aiohttp_app(self) -> Any:
        """A tiny aiohttp application serving GET /metrics (and /healthz)."""
        from aiohttp import web

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(
                body=self.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
            )

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        return app
