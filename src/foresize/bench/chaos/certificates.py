"""Fault scenarios of the webhook's serving certificate: renewed near expiry and served on
the same port, a cert-manager renewal reloaded, an expired one reported."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from foresize.bench.chaos.cluster import (
    NAMESPACE,
    Cluster,
    ScenarioResult,
    wait_until,
)
from foresize.shells.webhook.configurations import TLS_SECRET, WEBHOOK_SERVICE


async def served_certificate(port: int) -> bytes | None:
    """The certificate (DER) a fresh TLS handshake with the webhook port gets."""
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ctx), 2.0)
    except (OSError, TimeoutError):
        return None
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return bytes(der) if der else None


def _tls_secret(server: Any, age_days: float, days: int = 365) -> bytes:
    """Put a certificate issued `age_days` ago into the webhook Secret; returns its DER."""
    import datetime as dt
    import ssl

    from foresize.shells.webhook.certs import generate_self_signed, service_dns_names, tls_secret

    issued = dt.datetime.now(dt.UTC) - dt.timedelta(days=age_days)
    b = generate_self_signed(service_dns_names(WEBHOOK_SERVICE, NAMESPACE), now=issued, days=days)
    data = b.secret_data()
    if server.get("Secret", NAMESPACE, TLS_SECRET) is None:
        server.seed(tls_secret(b, TLS_SECRET, NAMESPACE))
    else:

        def put(secret: dict[str, Any]) -> None:
            secret["data"] = data

        server.update("Secret", NAMESPACE, TLS_SECRET, put)
    return ssl.PEM_cert_to_DER_cert(b.cert_pem.decode())


async def scenario_certificate(
    cert_manager: bool = False, *, workdir: Path | None = None
) -> ScenarioResult:
    """Self-managed: the Secret's certificate gets near expiry while the operator serves;
    it is renewed and the new one served on the same port, no restart.
    cert-manager: cert-manager renews the Secret; the new certificate is served.
    seconds = Secret change to the new certificate served."""
    from foresize.shells.webhook.configurations import webhook_configurations

    name = "certificate renewed by cert-manager" if cert_manager else "certificate near expiry"
    async with Cluster(pods=1, workdir=workdir) as c:
        for config in webhook_configurations(service=WEBHOOK_SERVICE, namespace=NAMESPACE):
            c.k.seed(config)
        first = _tls_secret(c.k, age_days=1)
        args = ["--tls-secret", TLS_SECRET, "--cert-check-interval", "0.5"]
        if cert_manager:
            args.append("--cert-manager")
        op = c.operator(args=args, webhook=True)
        await op.start()
        problems: list[str] = []

        async def serving(der: bytes) -> bool:
            return await served_certificate(op.webhook_port) == der

        if not await wait_until(lambda: serving(first), 30, step=0.2):
            return ScenarioResult(name, 0.0, False, problems=["never served", op.output()[-2000:]])
        pid = op.proc.pid if op.proc else None
        if op.leftovers():  # the key is loaded: no copy of it may stay on disk
            problems.append(f"on disk while serving: {', '.join(op.leftovers())}")
        # Time passes (the Secret now holds a certificate issued 300 of 365 days ago), or
        # cert-manager writes a fresh one.
        changed_to = _tls_secret(c.k, age_days=0 if cert_manager else 300)
        changed = time.monotonic()

        async def renewed() -> bool:
            der = await served_certificate(op.webhook_port)
            if cert_manager:
                return der == changed_to
            return der is not None and der not in (first, changed_to)

        ok = await wait_until(renewed, 20, step=0.2)
        took = time.monotonic() - changed
        if not ok:
            problems.append(f"the new certificate was not served ({op.output()[-1500:]})")
        if not op.running or (op.proc and op.proc.pid != pid):
            problems.append("the process restarted")
        writes = [e for e in c.proxy.log if e.method == "PATCH" and "/secrets/" in e.path]
        if cert_manager and writes:
            problems.append("wrote cert-manager's Secret")
        if not cert_manager and not writes:
            problems.append("the renewed certificate was not written to the Secret")
        return ScenarioResult(name, took, not problems, "", problems)


async def scenario_certificate_expired(*, workdir: Path | None = None) -> ScenarioResult:
    """cert-manager failed to renew: the Secret's certificate is expired. It is not served
    silently: the expiry metric goes negative and a Warning Event is posted.
    seconds = start to the Event."""
    name = "certificate expired"
    async with Cluster(pods=1, workdir=workdir) as c:
        _tls_secret(c.k, age_days=400)
        args = ["--tls-secret", TLS_SECRET, "--cert-check-interval", "0.5"]
        op = c.operator(args=[*args, "--cert-manager"], webhook=True)
        started = time.monotonic()
        await op.start()
        problems: list[str] = []

        def event_posted() -> bool:
            return any(
                e["reason"] == "WebhookCertificateExpired" for e in c.k.list("Event", NAMESPACE)
            )

        posted = await wait_until(event_posted, 30, step=0.2)
        took = time.monotonic() - started
        if not posted:
            problems.append("no WebhookCertificateExpired Event")
        metrics = ""
        try:
            import aiohttp

            async with aiohttp.ClientSession() as session:
                url = f"http://127.0.0.1:{op.metrics_port}/metrics"
                async with session.get(url) as r:
                    metrics = await r.text()
        except Exception as exc:
            problems.append(f"no /metrics: {exc}")
        line = next(
            (
                x
                for x in metrics.splitlines()
                if x.startswith("foresize_webhook_certificate_expiry_seconds ")
            ),
            "",
        )
        if not line or float(line.split()[1]) >= 0:
            problems.append(f"expiry metric not negative: {line!r}")
        if "expired" not in op.output():
            problems.append("no error logged")
        return ScenarioResult(name, took, not problems, line, problems)
