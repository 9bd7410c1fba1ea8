"""The Prometheus alerts shipped with the manifests (`foresize manifests monitoring`, the
chart's PrometheusRule), over the metrics `foresize.adapters.telemetry.metrics` exports:
every request change, the risks of a change, and the operator itself."""

from __future__ import annotations

from typing import Any

from foresize.shells.webhook.configurations import WEBHOOK_SERVICE


def changed_within(series: str, window: str, by: str) -> str:
    """PromQL true while `series` (a counter) counted anything within `window`, summed by
    `by`. `increase()` alone misses a series whose first scrape is already above 0 (it
    was created and counted between two scrapes, e.g. the first change after a start or a
    target created since the last pass): such a series counts in full while it is younger
    than the window (nothing at `offset window`)."""
    return (
        f"sum by ({by}) (increase({series}[{window}]) > 0 "
        f"or ({series} > 0 unless {series} offset {window})) > 0"
    )


def alert_rules() -> list[dict[str, Any]]:
    """Alerts over the metrics `foresize.adapters.telemetry.metrics` exports."""
    return [
        {
            # Every request change, as the seed's operators asked for: an info alert to
            # log and to check against the node charge-gap alerts below.
            "alert": "ForesizeRequestChanged",
            "expr": changed_within(
                "foresize_request_changes_total", "5m", "target, resource, source"
            ),
            "labels": {"severity": "info"},
            "annotations": {
                "summary": (
                    "Foresize changed {{ $labels.resource }} requests of {{ $labels.target }}"
                ),
                "description": (
                    "{{ $value }} {{ $labels.resource }} request changes ({{ $labels.source }}) "
                    "in the last 5 minutes; compare with foresize_node_charge_gap."
                ),
            },
        },
        {
            "alert": "ForesizeResizeChurn",
            "expr": (
                'sum by (target, resource) (increase(foresize_resizes_total{outcome="success",'
                'direction="up"}[1h])) > 3 and sum by (target, resource) '
                '(increase(foresize_resizes_total{outcome="success",direction="down"}[1h])) > 3'
            ),
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Foresize resizes {{ $labels.target }} up and down repeatedly",
                "description": (
                    "{{ $labels.resource }} of {{ $labels.target }} was resized up and down "
                    "more than 3 times each in the last hour: raise the hysteresis "
                    "(vertical.scaling_behavior) or the forecast horizon."
                ),
            },
        },
        {
            "alert": "ForesizeResizeRejected",
            "expr": changed_within(
                'foresize_resizes_total{outcome=~"rejected|error"}', "30m", "target"
            ),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The API server refuses Foresize's resizes of {{ $labels.target }}",
                "description": "Resizes were rejected (422/403) or failed in the last 30 minutes.",
            },
        },
        {
            "alert": "ForesizeResizeStalled",
            "expr": "max by (target) (foresize_stalled_pods) > 0",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $value }} pods of {{ $labels.target }} have stalled resizes",
                "description": (
                    "In-place resizes stay Deferred, Infeasible or in error for 10 minutes; "
                    "under in_place they wait, under in_place_or_recreate they are evicted."
                ),
            },
        },
        {
            "alert": "ForesizeCircuitBreakerOpen",
            "expr": "max by (target) (foresize_breaker_open) > 0",
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "Foresize stopped evicting pods of {{ $labels.target }}",
                "description": (
                    "Evicted pods came back without the suggested resources three times in a "
                    "row (is the admission webhook reachable?). Evictions are paused."
                ),
            },
        },
        {
            "alert": "ForesizeSchedulerChargeDivergence",
            "expr": 'max by (node) (foresize_node_charge_gap{resource="cpu"}) > 0.5',
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Scheduler charges {{ $labels.node }} {{ $value }} CPU beyond spec",
                "description": (
                    "The scheduler's charge (max of spec, allocated, actual) exceeds the sum "
                    "of spec requests: resizes that have not landed hold node capacity."
                ),
            },
        },
        {
            "alert": "ForesizeSchedulerChargeDivergenceMemory",
            "expr": 'max by (node) (foresize_node_charge_gap{resource="memory"}) > 1073741824',
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Scheduler charges {{ $labels.node }} over 1 GiB memory beyond spec",
                "description": (
                    "The scheduler's charge exceeds the sum of spec memory requests by more "
                    "than 1 GiB for 15 minutes."
                ),
            },
        },
        *operational_alerts(),
    ]


def operational_alerts(service: str = WEBHOOK_SERVICE) -> list[dict[str, Any]]:
    """The operator itself: down, no Lease holder, webhook errors, certificate expiry.
    (Every webhook fails open, so each of these is otherwise silent.)"""
    up = f'up{{job="{service}"}}'
    return [
        {
            "alert": "ForesizeOperatorDown",
            "expr": f"absent({up} == 1)",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No Foresize operator replica is up",
                "description": (
                    "Prometheus scrapes no live replica: nothing is resized and every "
                    "webhook fails open (pods are admitted unchanged)."
                ),
            },
        },
        {
            "alert": "ForesizeNoLeaseHeld",
            "expr": "sum by (shard) (foresize_leader) < 1",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No replica holds Foresize shard {{ $labels.shard }}",
                "description": (
                    "The targets of this shard are not acted on: no replica holds its Lease "
                    "(API errors, RBAC, or every replica lost it)."
                ),
            },
        },
        {
            "alert": "ForesizeWebhookErrors",
            "expr": (
                "sum(rate(foresize_webhook_bad_requests_total[5m])) > 0.05 or "
                'sum(rate(apiserver_admission_webhook_request_total{name=~".*foresize.io",'
                'code!="200"}[5m])) > 0.05'
            ),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Foresize's admission webhooks are failing",
                "description": (
                    "Requests to the webhooks are refused, cut off or answered with errors "
                    "(operator side), or the API server's calls to them fail: pods are "
                    "admitted unchanged (failurePolicy Ignore)."
                ),
            },
        },
        {
            "alert": "ForesizeWebhookCertificateExpiry",
            "expr": "min(foresize_webhook_certificate_expiry_seconds) < 7 * 86400",
            "for": "1h",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": (
                    "Foresize's webhook certificate expires in {{ $value | humanizeDuration }}"
                ),
                "description": (
                    "The served certificate is near or past its expiry and was not renewed: "
                    "once expired, the API server cannot call the webhooks and every one "
                    "fails open."
                ),
            },
        },
    ]
