"""What the operator's probes answer (`/healthz`, `/readyz`, on the metrics and the webhook
ports), and whether this replica's webhook serves with a valid certificate."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Health:
    """What the probes answer: liveness = the control loop makes progress; readiness =
    every cache synced and a pass finished recently."""

    def __init__(self, liveness_timeout: float, clock: Any = time.monotonic) -> None:
        self.liveness_timeout = liveness_timeout
        self.clock = clock
        self.started = clock()
        self.progress_at = self.started  # last sign of life of the control loop
        self.pass_at: float | None = None  # end of the last control-loop pass
        self.synced = False
        self.failed: str | None = None  # a supervised task that ended

    def beat(self) -> None:
        self.progress_at = self.clock()

    def passed(self) -> None:
        self.pass_at = self.progress_at = self.clock()

    def live(self) -> tuple[bool, str]:
        if self.failed:
            return False, f"task ended: {self.failed}"
        stalled = self.clock() - self.progress_at
        if stalled > self.liveness_timeout:
            return False, f"control loop stalled for {stalled:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        live, why = self.live()
        if not live:
            return False, why
        if not self.synced:
            return False, "caches not synced"
        if self.pass_at is None or self.clock() - self.pass_at > self.liveness_timeout:
            return False, "no recent control-loop pass"
        return True, "ok"

    def middleware(self) -> Any:
        """aiohttp middleware answering GET /healthz and /readyz from this object (put on
        both the metrics and the webhook application)."""
        from aiohttp import web

        @web.middleware
        async def probes(request: web.Request, handler: Any) -> web.StreamResponse:
            if request.method == "GET" and request.path in ("/healthz", "/readyz"):
                ok, why = self.live() if request.path == "/healthz" else self.ready()
                return web.Response(text=why, status=200 if ok else 503)
            return await handler(request)

        return probes


def admission_health(webhook: Any, certificate: Any) -> Callable[[float], bool] | None:
    """now -> is this replica's pod webhook serving with a valid certificate? The vertical
    worker holds evictions while it is not (`ClusterSnapshot.admission_healthy`). Every
    replica serves the same certificate from the shared Secret, so this replica's server
    stands for the Service's. None without a webhook here (served elsewhere): the circuit
    breaker is then the only guard."""
    if webhook is None:
        return None

    def healthy(now: float) -> bool:
        if not webhook.serving:
            return False
        not_after = getattr(certificate, "not_after", 0.0) if certificate is not None else 0.0
        return not not_after or now < not_after

    return healthy
