"""`foresize webhook`: run the admission webhook server on its own (the operator embeds
the same server in-process)."""

from __future__ import annotations

from pathlib import Path

import typer


# Complexity over 15 only through the nested command below (mccabe counts it here).
def register(app: typer.Typer, bench_app: typer.Typer) -> None:  # noqa: C901
    @app.command("webhook")
    # Not split yet (issue 12: complexity over 15 with no seam-free reason): a candidate to split.
    def webhook(  # noqa: C901
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
            None, help="With --self-signed: write ca.crt, tls.crt, tls.key here."
        ),
        service: str = typer.Option("foresize-webhook", help="Service name of the webhook."),
        namespace: str = typer.Option("foresize-system", help="Namespace of the service."),
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

        import yaml

        from foresize.admission.index import AdmissionIndex
        from foresize.errors import ForesizeError
        from foresize.webhook.certs import (
            generate_self_signed,
            server_ssl_context,
            service_dns_names,
        )
        from foresize.webhook.configurations import webhook_configurations
        from foresize.webhook.server import AdmissionState, run_server
        from foresize.webhook.state_file import load_state_file

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        if not 0 <= port <= 65535:
            raise ForesizeError(f"--port must be 0-65535, got {port}")
        if self_signed == (cert is not None):
            raise ForesizeError("give either --cert and --key, or --self-signed")
        ca_pem: bytes | None = None
        if self_signed:
            hosts = [h.strip() for h in tls_hosts.split(",") if h.strip()] or [
                *service_dns_names(service, namespace),
                "localhost",
                "127.0.0.1",
            ]
            bundle = generate_self_signed(hosts)
            import tempfile

            made_dir = cert_dir is None
            directory = cert_dir or Path(tempfile.mkdtemp(prefix="foresize-tls-"))
            try:
                _, cert, key = bundle.write(directory)
            except OSError as exc:
                raise ForesizeError(
                    f"--cert-dir {directory}: cannot write ({exc.strerror})"
                ) from None
            ca_pem = bundle.ca_pem
            typer.echo(f"self-signed CA and certificate written to {directory}", err=True)
        elif cert is None or key is None:  # cert is set here: checked with self_signed above
            raise ForesizeError("--cert needs --key")
        elif ca is not None:
            try:
                ca_pem = ca.read_bytes()
            except OSError as exc:
                raise ForesizeError(f"{ca}: cannot read ({exc.strerror})") from None
        ssl_context = server_ssl_context(cert, key)
        if webhook_config is not None:
            if ca_pem is None:
                raise ForesizeError("--webhook-config needs --self-signed or --ca")
            docs = webhook_configurations(service=service, namespace=namespace, ca_pem=ca_pem)
            try:
                webhook_config.write_text(yaml.safe_dump_all(docs, sort_keys=False))
            except OSError as exc:
                raise ForesizeError(f"--webhook-config {webhook_config}: {exc.strerror}") from None
            typer.echo(f"webhook configurations written to {webhook_config}", err=True)

        holder = AdmissionState(load_state_file(state) if state else AdmissionIndex())

        async def main() -> None:
            watcher = asyncio.create_task(_watch(state, holder)) if state else None
            try:
                await run_server(holder, host=host, port=port, ssl_context=ssl_context)
            finally:
                if watcher is not None:
                    watcher.cancel()

        try:
            asyncio.run(main())
        except OSError as exc:
            import errno
            import shutil

            if self_signed and made_dir:
                # The key and certificate were only for this run: do not leave them behind.
                shutil.rmtree(directory, ignore_errors=True)

            if exc.errno == errno.EADDRINUSE:
                raise ForesizeError(
                    f"--port {port}: {host}:{port} is already in use (another webhook, or "
                    "choose another --port)"
                ) from None
            if exc.errno in (errno.EACCES, errno.EADDRNOTAVAIL):
                raise ForesizeError(
                    f"--port {port} / --host {host}: cannot listen there ({exc.strerror})"
                ) from None
            raise


async def _watch(path: Path, holder) -> None:
    """Reload the state file when its modification time changes (bad edits are logged
    and the previous state kept), in a worker thread."""
    import asyncio
    import logging

    from foresize.errors import ForesizeError
    from foresize.webhook.state_file import load_state_file

    log = logging.getLogger("foresize.webhook")
    last = path.stat().st_mtime_ns
    while True:
        await asyncio.sleep(2.0)
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        if mtime == last:
            continue
        last = mtime
        try:
            # Off the event loop: a big file takes a while to parse, and the webhook keeps
            # answering meanwhile (the size, alias and depth caps live in the loader).
            holder.set(await asyncio.to_thread(load_state_file, path))
            log.info("reloaded %s", path)
        except ForesizeError as exc:
            log.error("keeping previous state: %s", exc)
