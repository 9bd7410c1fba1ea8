"""`foresize operator`: run the real-cluster shell (collector, recommender, vertical
worker, webhooks, metrics) from a kubeconfig or the in-cluster service account."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("operator")
    def operator(
        kubeconfig: str = typer.Option(
            None, "--kubeconfig", help="Kubeconfig file (default: in-cluster, then ~/.kube/config)."
        ),
        context: str = typer.Option(None, "--context", help="Kubeconfig context."),
        server: str = typer.Option(
            None, "--server", help="API server URL without auth (kubectl proxy)."
        ),
        namespace: str = typer.Option(
            None,
            "--namespace",
            help="Operator namespace (Leases); default $POD_NAMESPACE or foresize-system.",
        ),
        identity: str = typer.Option(
            "", "--identity", help="Leader-election identity (default $POD_NAME)."
        ),
        shards: int = typer.Option(1, "--shards", min=1, help="Target shards (one Lease each)."),
        max_shards: int = typer.Option(
            None, "--max-shards", min=1, help="At most this many shards per replica."
        ),
        interval: float = typer.Option(
            30.0, "--interval", min=1.0, help="Seconds between control-loop passes."
        ),
        collect_interval: float = typer.Option(
            60.0, "--collect-interval", min=5.0, help="metrics-server poll period."
        ),
        suggest_interval: float = typer.Option(
            900.0, "--suggest-interval", min=10.0, help="Seconds between forecasts."
        ),
        prometheus: str = typer.Option(
            None, "--prometheus", help="Read history from Prometheus instead of metrics-server."
        ),
        metrics_port: int = typer.Option(8080, "--metrics-port", help="Port of /metrics."),
        webhook_port: int = typer.Option(
            8443, "--webhook-port", help="Port of the admission webhooks."
        ),
        no_webhook: bool = typer.Option(
            False, "--no-webhook", help="Do not serve admission webhooks."
        ),
        tls_cert: str = typer.Option(None, "--tls-cert", help="Webhook serving certificate (PEM)."),
        tls_key: str = typer.Option(None, "--tls-key", help="Key of --tls-cert (PEM)."),
        log_format: str = typer.Option("json", "--log-format", help="json|text"),
        log_level: str = typer.Option("info", "--log-level", help="debug|info|warning|error"),
    ) -> None:
        """Run the operator until SIGTERM."""
        import asyncio
        import os

        from foresize.errors import ForesizeError
        from foresize.kube.operator import OperatorOptions, run_operator
        from foresize.telemetry.logs import setup_logging

        if log_format not in ("json", "text"):
            raise ForesizeError(f"--log-format: must be json or text, not {log_format!r}")
        if log_level.lower() not in ("debug", "info", "warning", "error"):
            raise ForesizeError(f"--log-level: unknown level {log_level!r}")
        if bool(tls_cert) != bool(tls_key):
            raise ForesizeError("--tls-cert and --tls-key go together")
        if kubeconfig and not os.path.exists(kubeconfig):
            raise ForesizeError(f"--kubeconfig: {kubeconfig}: no such file")
        setup_logging(log_level, json_format=log_format == "json")
        opts = OperatorOptions(
            kubeconfig=kubeconfig,
            context=context,
            server=server,
            namespace=namespace or os.environ.get("POD_NAMESPACE") or "foresize-system",
            identity=identity,
            shards=shards,
            max_shards=max_shards,
            interval=interval,
            collect_interval=collect_interval,
            suggest_interval=suggest_interval,
            metrics_port=metrics_port,
            webhook=not no_webhook,
            webhook_port=webhook_port,
            tls_cert=tls_cert,
            tls_key=tls_key,
            prometheus=prometheus,
        )
        try:
            asyncio.run(run_operator(opts))
        except Exception as exc:
            from lightkube.core.exceptions import ConfigError

            if isinstance(exc, ConfigError | FileNotFoundError):
                raise ForesizeError(f"cannot load Kubernetes configuration: {exc}") from None
            raise
