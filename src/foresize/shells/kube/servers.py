"""The operator's HTTP servers: `/metrics` and the probes on the metrics port, the admission
webhooks (and the probes) on the webhook port with their certificate."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from foresize.shells.kube.components import Components
from foresize.shells.kube.options import OperatorOptions
from foresize.shells.kube.probes import admission_health
from foresize.shells.kube.supervision import Supervisor
from foresize.shells.kube.tasks import refresh_admission_index

log = logging.getLogger("foresize.operator")


class Servers:
    """The operator's HTTP servers. Each is kept here as soon as it exists, so `stop`
    also cleans up one that failed to start."""

    def __init__(self) -> None:
        self.runners: list[Any] = []  # aiohttp AppRunners
        self.webhook: Any = None  # WebhookServer

    async def serve_metrics(self, parts: Components, opts: OperatorOptions) -> None:
        """/metrics, /healthz and /readyz on the metrics port."""
        from aiohttp import web

        metrics_app = parts.metrics.aiohttp_app()
        metrics_app.middlewares.append(parts.health.middleware())
        metrics_runner = web.AppRunner(metrics_app, access_log=None)
        await metrics_runner.setup()
        self.runners.append(metrics_runner)
        await web.TCPSite(metrics_runner, opts.metrics_host, opts.metrics_port).start()
        log.info("metrics on %s:%d/metrics", opts.metrics_host, opts.metrics_port)

    async def serve_webhook(
        self,
        supervisor: Supervisor,
        parts: Components,
        opts: OperatorOptions,
        stop: asyncio.Event,
    ) -> None:
        """The admission webhooks (and the probes) on the webhook port, with the tasks
        that keep their index and their certificate current."""
        from foresize.shells.webhook.server import AdmissionState, WebhookServer, create_app

        admission = AdmissionState()
        supervisor.start(
            refresh_admission_index(admission, parts.state, parts.health, stop),
            "admission index",
        )
        # AdmissionState is the state provider (callable); pods sized at admission are
        # counted and get an Event on their target, like every request change.
        metrics = parts.metrics
        app = create_app(
            admission,
            on_bad_request=lambda reason: metrics.webhook_bad_requests.labels(reason).inc(),
            on_pod_change=parts.shell.recorder.admitted,
        )
        app.middlewares.append(parts.health.middleware())
        app.middlewares.append(metrics.webhook_middleware())
        certificate = await webhook_tls(opts, parts.api, metrics, parts.executor)
        ssl_context = certificate.context if certificate is not None else None
        if certificate is not None:
            supervisor.start(certificate.run(stop, opts.cert_check_interval), "webhook certificate")
        self.webhook = WebhookServer(
            app, host=opts.webhook_host, port=opts.webhook_port, ssl_context=ssl_context
        )
        await self.webhook.start()
        parts.state.admission_health = admission_health(self.webhook, certificate)
        log.info(
            "webhooks on %s:%d (tls=%s)",
            opts.webhook_host,
            self.webhook.port,
            ssl_context is not None,
        )

    async def stop(self) -> None:
        if self.webhook is not None:
            await self.webhook.stop()
        for runner in self.runners:
            await runner.cleanup()


async def webhook_tls(opts: OperatorOptions, api: Any, metrics: Any, executor: Any) -> Any:
    """Files given on the command line, else the shared Secret, else None: plain HTTP
    (development only). Returns the `WebhookCertificate` that keeps it current."""
    from foresize.shells.kube.tls import WebhookCertificate

    if not (opts.tls_cert and opts.tls_key) and not opts.tls_secret:
        log.warning("no TLS configured: webhooks served over plain HTTP (development only)")
        return None
    certificate = WebhookCertificate(
        api,
        namespace=opts.namespace,
        secret=None if opts.tls_cert else opts.tls_secret,
        service=opts.webhook_service,
        configuration=opts.webhook_configuration,
        cert_manager=opts.cert_manager,
        cert_file=opts.tls_cert,
        key_file=opts.tls_key,
        metrics=metrics,
        emit=executor.apply,
    )
    await certificate.start()
    return certificate
