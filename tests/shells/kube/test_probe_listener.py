"""The operator's probes and /metrics never wait behind the webhook port's connection cap
(reliability.md R-2): the cap is shared by whoever can reach the webhook port, so the
kubelet's probes go to the metrics port, a listener of its own."""

from __future__ import annotations

import asyncio

from aiohttp import web

from foresize.adapters.telemetry.metrics import ForesizeMetrics
from foresize.core.admission.index import AdmissionIndex
from foresize.front.cli.manifests import build
from foresize.shells.kube.probes import Health
from foresize.shells.webhook.server import ServerLimits, WebhookServer, create_app


def _operator_container() -> dict:
    docs = {
        (d["kind"], d["metadata"]["name"]): d for d in build("operator", image="reg/foresize:1")
    }
    (container,) = docs[("StatefulSet", "foresize")]["spec"]["template"]["spec"]["containers"]
    return container


def test_every_probe_goes_to_the_metrics_port_not_the_capped_webhook_port():
    container = _operator_container()
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] == "metrics" and get["scheme"] == "HTTP", probe
    assert {"webhook", "metrics"} == {p["name"] for p in container["ports"]}


async def _get(port: int, path: str) -> bytes:
    """The raw answer; b"" when the server aborts the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        return b""
    finally:
        writer.close()


async def test_a_full_webhook_cap_leaves_the_probes_and_metrics_answering():
    # The audit's demonstration: with the cap held full, /healthz on the webhook port got
    # an aborted connection; the operator's metrics listener (as `_Servers.serve_metrics`
    # builds it) keeps answering the probes and /metrics.
    webhook = WebhookServer(
        create_app(lambda: AdmissionIndex(), limits=ServerLimits(max_connections=20)),
        host="127.0.0.1",
        port=0,
    )
    webhook_port = await webhook.start()
    health = Health(60.0)  # the liveness timeout, positional: its keyword is being renamed
    health.synced = True
    health.passed()
    metrics_app = ForesizeMetrics().aiohttp_app()
    metrics_app.middlewares.append(health.middleware())
    runner = web.AppRunner(metrics_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    metrics_port = site._server.sockets[0].getsockname()[1]
    held = []
    try:
        assert (await _get(webhook_port, "/healthz")).startswith(b"HTTP/1.1 200")
        held = [await asyncio.open_connection("127.0.0.1", webhook_port) for _ in range(20)]
        await asyncio.sleep(0.1)
        assert await _get(webhook_port, "/healthz") == b""  # refused at accept
        for path in ("/healthz", "/readyz", "/metrics"):
            assert (await _get(metrics_port, path)).startswith(b"HTTP/1.1 200"), path
    finally:
        for _, writer in held:
            writer.close()
        await runner.cleanup()
        await webhook.stop()
