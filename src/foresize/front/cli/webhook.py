"""`foresize webhook`: run the admission webhook server on its own (the operator embeds
the same server in-process)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from foresize.shells.webhook.configurations import WEBHOOK_SERVICE

if TYPE_CHECKING:  # imported where used, so `foresize --help` stays quick
    from ssl import SSLContext

    from foresize.core.errors import ForesizeError
    from foresize.shells.webhook.server import AdmissionState


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("webhook")
    def webhook(
        host: str = typer.Option("0.0.0.0", help="Address to listen on."),
        port: int = typer.Option(8443, help="HTTPS port."),
        cert: Path | None = typer.Option(None, help="PEM serving certificate (with --key)."),
        key: Path | None = typer.Option(None, help="PEM private key of --cert."),
        self_signed: bool = typer.Option(
            False, "--self-signed", help="Generate a CA and serving certificate at start."
        ),
        tls_hosts: str = typer.Option(
            "",
            help="Comma-separated DNS names/IPs for the self-signed certificate "
            "(default: localhost, 127.0.0.1 and the service's cluster names).",
        ),
        cert_dir: Path | None = typer.Option(
            None,
            help="With --self-signed: write ca.crt, tls.crt, tls.key here (without it the "
            "private key is never left on disk).",
        ),
        service: str = typer.Option(WEBHOOK_SERVICE, help="Service name of the webhook."),
        namespace: str = typer.Option(
            "foresize-system",
            help="Namespace Foresize is installed in, of its Service (not a filter).",
        ),
        webhook_config: Path | None = typer.Option(
            None,
            help="Write the Mutating/ValidatingWebhookConfiguration (caBundle from the "
            "self-signed CA, or --ca) to this YAML file.",
        ),
        ca: Path | None = typer.Option(None, help="CA PEM for --webhook-config with --cert."),
        state: Path | None = typer.Option(
            None,
            help="YAML/JSON file of AIScaleTargets/DaemonSetAutoscalers (with status "
            "suggestions) and workloads to serve from; re-read when it changes.",
        ),
    ) -> None:
        """Serve /mutate-pods, /mutate-scale, /validate-targets, /healthz, /readyz over HTTPS."""
        import asyncio
        import logging

        from foresize.core.admission.index import AdmissionIndex
        from foresize.core.errors import ForesizeError
        from foresize.shells.webhook.server import AdmissionState
        from foresize.shells.webhook.state_file import load_state_file

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        if not 0 <= port <= 65535:
            raise ForesizeError(f"--port must be 0-65535, got {port}")
        if self_signed == (cert is not None):
            raise ForesizeError("give either --cert and --key, or --self-signed")
        tls = serving_certificate(
            self_signed=self_signed,
            cert=cert,
            key=key,
            ca=ca,
            tls_hosts=tls_hosts,
            cert_dir=cert_dir,
            service=service,
            namespace=namespace,
        )
        try:
            if webhook_config is not None:
                write_webhook_config(webhook_config, service, namespace, tls.ca_pem)
            holder = AdmissionState(load_state_file(state) if state else AdmissionIndex())
            asyncio.run(_serve(holder, state, host=host, port=port, ssl_context=tls.context))
        except OSError as exc:
            error = listen_error(exc, host, port)
            if error is None:
                raise
            raise error from None


@dataclass(frozen=True)
class ServingCertificate:
    """The TLS context the webhook serves with, and the CA PEM that signed its certificate
    when known (for the webhook configurations' caBundle)."""

    context: SSLContext
    ca_pem: bytes | None


def serving_certificate(
    *,
    self_signed: bool,
    cert: Path | None,
    key: Path | None,
    ca: Path | None,
    tls_hosts: str,
    cert_dir: Path | None,
    service: str,
    namespace: str,
) -> ServingCertificate:
    """With `--self-signed`: a new CA and serving certificate for `--tls-hosts` (default:
    the service's cluster names and localhost), written to `--cert-dir` if given, else
    held in memory: the key is on disk only while it is loaded (`load_pair`), so no exit,
    not even SIGKILL, leaves it behind; the CA is printed as a caBundle line instead.
    Otherwise `--cert` and `--key` (refused if expired or not yet valid), with the CA
    read from `--ca` if given."""
    import base64

    from foresize.core.errors import ForesizeError
    from foresize.shells.webhook.certs import (
        generate_self_signed,
        load_pair,
        server_ssl_context,
        service_dns_names,
    )

    if self_signed:
        hosts = [h.strip() for h in tls_hosts.split(",") if h.strip()] or [
            *service_dns_names(service, namespace),
            "localhost",
            "127.0.0.1",
        ]
        bundle = generate_self_signed(hosts)
        if cert_dir is None:
            context = load_pair(bundle.cert_pem, bundle.key_pem, source="--self-signed")
            # One line, as a webhook configuration's caBundle takes it (base64 of the PEM):
            # the only copy of this run's CA, which no file holds.
            ca_bundle = base64.b64encode(bundle.ca_pem).decode()
            typer.echo(
                "self-signed CA and certificate in memory only (--cert-dir to keep them); "
                f"caBundle: {ca_bundle}",
                err=True,
            )
            return ServingCertificate(context, bundle.ca_pem)
        try:
            _, cert_file, key_file = bundle.write(cert_dir)
        except OSError as exc:
            raise ForesizeError(f"--cert-dir {cert_dir}: cannot write ({exc.strerror})") from None
        typer.echo(f"self-signed CA and certificate written to {cert_dir}", err=True)
        return ServingCertificate(server_ssl_context(cert_file, key_file), bundle.ca_pem)
    if cert is None or key is None:
        raise ForesizeError("--cert needs --key")
    context = server_ssl_context(cert, key)
    refuse_unservable_certificate(cert)
    ca_pem: bytes | None = None
    if ca is not None:
        try:
            ca_pem = ca.read_bytes()
        except OSError as exc:
            raise ForesizeError(f"{ca}: cannot read ({exc.strerror})") from None
    return ServingCertificate(context, ca_pem)


def refuse_unservable_certificate(cert: Path) -> None:
    """An expired (or not yet valid) `--cert` is a one-line error: served, every API server
    call would fail its TLS handshake and, the webhooks failing open, nothing would say so."""
    import time

    from foresize.core.errors import ForesizeError
    from foresize.shells.webhook.certs import validity_problem

    problem = validity_problem(cert.read_bytes(), time.time())
    if problem is not None:
        raise ForesizeError(f"--cert {cert}: {problem}; renew it (or use --self-signed)")


def write_webhook_config(path: Path, service: str, namespace: str, ca_pem: bytes | None) -> None:
    """`--webhook-config`: the Mutating/ValidatingWebhookConfiguration for the service,
    with `ca_pem` as caBundle, as YAML."""
    import yaml

    from foresize.core.errors import ForesizeError
    from foresize.shells.webhook.configurations import webhook_configurations

    if ca_pem is None:
        raise ForesizeError("--webhook-config needs --self-signed or --ca")
    docs = webhook_configurations(service=service, namespace=namespace, ca_pem=ca_pem)
    try:
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    except OSError as exc:
        raise ForesizeError(f"--webhook-config {path}: {exc.strerror}") from None
    typer.echo(f"webhook configurations written to {path}", err=True)


async def _serve(
    holder: AdmissionState, state: Path | None, *, host: str, port: int, ssl_context: SSLContext
) -> None:
    """Serve until stopped, reloading the state file (if any) as it changes."""
    import asyncio

    from foresize.shells.webhook.server import run_server
    from foresize.shells.webhook.state_file import watch_state_file

    watcher = asyncio.create_task(watch_state_file(state, holder.set)) if state else None
    try:
        await run_server(holder, host=host, port=port, ssl_context=ssl_context)
    finally:
        if watcher is not None:
            watcher.cancel()


def listen_error(exc: OSError, host: str, port: int) -> ForesizeError | None:
    """A one-line error naming --port/--host for an address that is taken or not ours;
    None for any other failure."""
    import errno

    from foresize.core.errors import ForesizeError

    if exc.errno == errno.EADDRINUSE:
        return ForesizeError(
            f"--port {port}: {host}:{port} is already in use (another webhook, or "
            "choose another --port)"
        )
    if exc.errno in (errno.EACCES, errno.EADDRNOTAVAIL):
        return ForesizeError(f"--port {port} / --host {host}: cannot listen there ({exc.strerror})")
    return None
