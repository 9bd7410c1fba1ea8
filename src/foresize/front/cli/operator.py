"""`foresize operator`: run the real-cluster shell (collector, recommender, vertical
worker, webhooks, metrics) from a kubeconfig or the in-cluster service account.

Every option can also come from the environment (`FORESIZE_*`, as the shipped Deployment
sets them: namespace and pod name from the downward API, ports, the webhook's Service,
configuration and TLS Secret, cert-manager)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from foresize.shells.webhook.configurations import WEBHOOK_SERVICE

if TYPE_CHECKING:
    from foresize.core.cluster.headroom import HeadroomConfig


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    def opt(default, *names, env: str | None = None, **kw):
        return typer.Option(default, *names, envvar=env, **kw)

    @app.command("operator")
    def operator(
        kubeconfig: str = opt(
            None,
            "--kubeconfig",
            env="KUBECONFIG",
            help="Kubeconfig file (default: in-cluster, then ~/.kube/config).",
        ),
        context: str = opt(None, "--context", help="Kubeconfig context."),
        server: str = opt(
            None, "--server", help="API server URL without auth (e.g. kubectl proxy)."
        ),
        namespace: str = opt(
            "foresize-system",
            "--namespace",
            env="FORESIZE_NAMESPACE",
            help="Namespace Foresize is installed in: Leases, TLS Secret (not a filter).",
        ),
        identity: str = opt(
            "",
            "--identity",
            env="FORESIZE_POD_NAME",
            help="Leader-election identity (default: hostname).",
        ),
        shards: int = opt(
            1, "--shards", env="FORESIZE_SHARDS", min=1, help="Target shards (one Lease each)."
        ),
        max_shards: int = opt(
            None,
            "--max-shards",
            env="FORESIZE_MAX_SHARDS",
            min=1,
            help="At most this many shards per replica (default: ceil(shards / live replicas)).",
        ),
        interval: str = opt(
            "30s",
            "--interval",
            env="FORESIZE_INTERVAL",
            help="Between control-loop passes.",
        ),
        collect_interval: str = opt(
            "1m",
            "--collect-interval",
            env="FORESIZE_COLLECT_INTERVAL",
            help="metrics-server poll period.",
        ),
        suggest_interval: str = opt(
            "15m",
            "--suggest-interval",
            env="FORESIZE_SUGGEST_INTERVAL",
            help="Between forecasts.",
        ),
        pause_configmap: str = opt(
            "foresize-pause",
            "--pause-configmap",
            env="FORESIZE_PAUSE_CONFIGMAP",
            help="ConfigMap (operator namespace) whose data.paused=true pauses Foresize.",
        ),
        history_db: str = opt(
            None,
            "--history-db",
            env="FORESIZE_HISTORY_DB",
            help="SQLite history file (survives restarts); default: in memory.",
        ),
        history_store: str = opt(
            None,
            "--history-store",
            env="FORESIZE_HISTORY_STORE",
            help="A shared Prometheus-compatible store (Prometheus, VictoriaMetrics, Thanos, "
            "Mimir) for the history: its query API base URL. Every replica reads it; the "
            "holder of shard 0 remote-writes what it collects.",
        ),
        history_store_write: str = opt(
            None,
            "--history-store-write",
            env="FORESIZE_HISTORY_STORE_WRITE",
            help="Remote-write URL of the history store (default: <--history-store>/api/v1/"
            "write; Mimir: .../api/v1/push; empty: never write).",
        ),
        history_store_tenant: str = opt(
            None,
            "--history-store-tenant",
            env="FORESIZE_HISTORY_STORE_TENANT",
            help="Tenant sent to the history store as X-Scope-OrgID (Mimir, Cortex, Thanos "
            "Receive with --receive.tenant-header=X-Scope-OrgID).",
        ),
        history_store_token_file: str = opt(
            None,
            "--history-store-token-file",
            env="FORESIZE_HISTORY_STORE_TOKEN_FILE",
            help="File holding a bearer token for the history store (read again for every "
            "request, so a rotated token is used without a restart).",
        ),
        history_store_username: str = opt(
            None,
            "--history-store-username",
            env="FORESIZE_HISTORY_STORE_USERNAME",
            help="Basic-auth username for the history store (with --history-store-password-file).",
        ),
        history_store_password_file: str = opt(
            None,
            "--history-store-password-file",
            env="FORESIZE_HISTORY_STORE_PASSWORD_FILE",
            help="File holding the basic-auth password for the history store.",
        ),
        prometheus: str = opt(
            None,
            "--prometheus",
            env="FORESIZE_PROMETHEUS_URL",
            help="Read history from Prometheus instead of metrics-server.",
        ),
        metrics_port: int = opt(
            8080, "--metrics-port", env="FORESIZE_METRICS_PORT", help="Port of /metrics."
        ),
        webhook_port: int = opt(
            8443,
            "--webhook-port",
            env="FORESIZE_WEBHOOK_PORT",
            help="Port of the admission webhooks.",
        ),
        no_webhook: bool = opt(False, "--no-webhook", help="Do not serve admission webhooks."),
        tls_cert: str = opt(None, "--tls-cert", help="Webhook serving certificate (PEM file)."),
        tls_key: str = opt(None, "--tls-key", help="Key of --tls-cert (PEM file)."),
        tls_secret: str = opt(
            None,
            "--tls-secret",
            env="FORESIZE_TLS_SECRET",
            help="Secret holding (or to hold) the webhook certificate.",
        ),
        webhook_service: str = opt(
            WEBHOOK_SERVICE,
            "--webhook-service",
            env="FORESIZE_WEBHOOK_SERVICE",
            help="Service of the webhooks.",
        ),
        webhook_configuration: str = opt(
            "foresize",
            "--webhook-configuration",
            env="FORESIZE_WEBHOOK_CONFIGURATION",
            help="Name of the webhook configurations (caBundle).",
        ),
        cert_manager: bool = opt(
            False,
            "--cert-manager",
            env="FORESIZE_CERT_MANAGER",
            help="cert-manager issues the certificate and injects the caBundle.",
        ),
        lease_duration: str = opt(
            "15s",
            "--lease-duration",
            env="FORESIZE_LEASE_DURATION",
            help="Leader Lease duration; a standby takes over after it.",
        ),
        lease_renew_deadline: str = opt(
            "10s",
            "--lease-renew-deadline",
            env="FORESIZE_LEASE_RENEW_DEADLINE",
            help="Stop acting when the Lease was not renewed for this long (< duration).",
        ),
        lease_retry: str = opt(
            "2s",
            "--lease-retry",
            env="FORESIZE_LEASE_RETRY",
            help="Between Lease renewals and acquisition attempts.",
        ),
        kube_api_qps: float = opt(
            50.0,
            "--kube-api-qps",
            env="FORESIZE_KUBE_API_QPS",
            min=0.0,
            help="Client-side API request rate limit (requests/s; 0 = none).",
        ),
        kube_api_burst: int = opt(
            100,
            "--kube-api-burst",
            env="FORESIZE_KUBE_API_BURST",
            min=1,
            help="Requests allowed at once above --kube-api-qps.",
        ),
        eviction_rate_limit: float = opt(
            0.0,
            "--eviction-rate-limit",
            env="FORESIZE_EVICTION_RATE_LIMIT",
            min=0.0,
            help="Evictions per second across all targets (0 = no cluster-wide limit; "
            "each target's max_disrupted/interval still apply).",
        ),
        eviction_rate_burst: int = opt(
            1,
            "--eviction-rate-burst",
            env="FORESIZE_EVICTION_RATE_BURST",
            min=1,
            help="Evictions allowed at once under --eviction-rate-limit.",
        ),
        node_autoscaler: str = opt(
            "auto",
            "--node-autoscaler",
            env="FORESIZE_NODE_AUTOSCALER",
            help="Does a node autoscaler add nodes for Pending pods: auto (yes where a node "
            "has Karpenter's karpenter.sh/nodepool label), on (e.g. Cluster Autoscaler), "
            "off. With one, an upsize no node has room for is recreated into Pending after "
            "the target's stall_timeout.",
        ),
        cert_check_interval: str = opt(
            "5m",
            "--cert-check-interval",
            env="FORESIZE_CERT_CHECK_INTERVAL",
            help="Between webhook certificate checks (renew, reload, expiry).",
        ),
        version_check_interval: str = opt(
            "1m",
            "--version-check-interval",
            env="FORESIZE_VERSION_CHECK_INTERVAL",
            help="Between reads of the API server's version (control-plane upgrades).",
        ),
        exclude_selector: str = opt(
            "",
            "--exclude-selector",
            env="FORESIZE_EXCLUDE_SELECTOR",
            help="Workloads (or targets) with these labels are never resized or evicted "
            "by the disruption worker: key=value[,key=value...].",
        ),
        liveness_timeout: str | None = opt(
            None,
            "--liveness-timeout",
            env="FORESIZE_LIVENESS_TIMEOUT",
            help="/healthz fails after the control loop made no progress for this long "
            "(default: 5 intervals, at least 120 s).",
        ),
        # The flag's old name, easy to mistake for spec.vertical.disruption.stall_timeout
        # (the resize-stall fallback): still read, with a warning, for one release.
        stall_timeout: str | None = opt(
            None, "--stall-timeout", env="FORESIZE_STALL_TIMEOUT", hidden=True
        ),
        headroom: bool = opt(
            False,
            "--headroom",
            env="FORESIZE_HEADROOM",
            help="Forecast-sized headroom: placeholder pods (PriorityClass -1) holding room "
            "for the upsizes of the coming window (docs/vertical.md).",
        ),
        headroom_namespace: str = opt(
            "foresize-headroom",
            "--headroom-namespace",
            env="FORESIZE_HEADROOM_NAMESPACE",
            help="Namespace of the placeholder pods (shipped with its Role).",
        ),
        headroom_pools: str = opt(
            "",
            "--headroom-pools",
            env="FORESIZE_HEADROOM_POOLS",
            help="Comma-separated node pools that get headroom (default: every pool).",
        ),
        headroom_window: str = opt(
            "1h",
            "--headroom-window",
            env="FORESIZE_HEADROOM_WINDOW",
            help="The coming window whose forecast upsizes the headroom holds room for.",
        ),
        headroom_pod: str = opt(
            "cpu=250m,memory=512Mi",
            "--headroom-pod",
            env="FORESIZE_HEADROOM_POD",
            help="One placeholder's requests.",
        ),
        headroom_max_pods: int = opt(
            40,
            "--headroom-max-pods",
            env="FORESIZE_HEADROOM_MAX_PODS",
            help="At most this many placeholders per node pool.",
        ),
        log_format: str = opt("json", "--log-format", env="FORESIZE_LOG_FORMAT", help="json|text"),
        log_level: str = opt(
            "info", "--log-level", env="FORESIZE_LOG_LEVEL", help="debug|info|warning|error"
        ),
    ) -> None:
        """Run the operator until SIGTERM."""
        import asyncio
        import os

        from foresize.adapters.telemetry.logs import setup_logging
        from foresize.core.errors import ForesizeError
        from foresize.shells.kube.operator import run_operator_process
        from foresize.shells.kube.options import OperatorOptions

        interval_s = _seconds(interval, "--interval", 0.1)
        collect_interval_s = _seconds(collect_interval, "--collect-interval", 5.0)
        suggest_interval_s = _seconds(suggest_interval, "--suggest-interval", 10.0)
        lease_duration_s = _seconds(lease_duration, "--lease-duration", 1.0)
        lease_renew_deadline_s = _seconds(lease_renew_deadline, "--lease-renew-deadline", 0.5)
        lease_retry_s = _seconds(lease_retry, "--lease-retry", 0.1)
        cert_check_interval_s = _seconds(cert_check_interval, "--cert-check-interval", 0.1)
        version_check_s = _seconds(version_check_interval, "--version-check-interval", 0.1)
        liveness_flag = "--liveness-timeout"
        if liveness_timeout is None and stall_timeout is not None:
            typer.echo(
                "warning: --stall-timeout (FORESIZE_STALL_TIMEOUT) is deprecated: it is the "
                "liveness timeout, now --liveness-timeout (FORESIZE_LIVENESS_TIMEOUT)",
                err=True,
            )
            liveness_timeout, liveness_flag = stall_timeout, "--stall-timeout"
        liveness = (
            None if liveness_timeout is None else _seconds(liveness_timeout, liveness_flag, 1.0)
        )
        if log_format not in ("json", "text"):
            raise ForesizeError(f"--log-format: must be json or text, not {log_format!r}")
        if log_level.lower() not in ("debug", "info", "warning", "error"):
            raise ForesizeError(f"--log-level: unknown level {log_level!r}")
        if lease_renew_deadline_s >= lease_duration_s:
            raise ForesizeError(
                f"--lease-renew-deadline: {lease_renew_deadline} must be shorter than "
                f"--lease-duration {lease_duration}"
            )
        if bool(tls_cert) != bool(tls_key):
            raise ForesizeError("--tls-cert and --tls-key go together")
        _check_history_store(history_store, history_store_write, history_db, prometheus)
        store_auth = _history_store_auth(
            history_store,
            history_store_tenant,
            history_store_token_file,
            history_store_username,
            history_store_password_file,
        )
        if kubeconfig and not server and not os.path.exists(kubeconfig.split(os.pathsep)[0]):
            raise ForesizeError(f"--kubeconfig: {kubeconfig}: no such file")
        from foresize.core.vertical.policy import parse_exclude_selector
        from foresize.core.vertical.provision import parse_node_autoscaler

        excluded = parse_exclude_selector(exclude_selector)
        provisioning = parse_node_autoscaler(node_autoscaler)
        room = (
            headroom_config(
                headroom_namespace,
                headroom_pools,
                headroom_window,
                headroom_pod,
                headroom_max_pods,
            )
            if headroom
            else None
        )
        setup_logging(log_level, json_format=log_format == "json")
        opts = OperatorOptions(
            kubeconfig=kubeconfig,
            context=context,
            server=server,
            namespace=namespace,
            identity=identity,
            shards=shards,
            max_shards=max_shards,
            interval=interval_s,
            collect_interval=collect_interval_s,
            suggest_interval=suggest_interval_s,
            metrics_port=metrics_port,
            webhook=not no_webhook,
            webhook_port=webhook_port,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_secret=tls_secret,
            webhook_service=webhook_service,
            webhook_configuration=webhook_configuration,
            cert_manager=cert_manager,
            prometheus=prometheus,
            history_db=history_db,
            history_store=history_store,
            history_store_write=history_store_write,
            history_store_interval=collect_interval_s,
            history_store_auth=store_auth,
            pause_configmap=pause_configmap,
            lease_duration=lease_duration_s,
            lease_renew_deadline=lease_renew_deadline_s,
            lease_retry=lease_retry_s,
            kube_api_qps=kube_api_qps,
            kube_api_burst=kube_api_burst,
            liveness_timeout=liveness,
            cert_check_interval=cert_check_interval_s,
            version_check_interval=version_check_s,
            exclude_selector=excluded,
            eviction_rate_limit=eviction_rate_limit or None,
            eviction_rate_burst=eviction_rate_burst,
            node_autoscaler=provisioning,
            headroom=room,
        )
        try:
            code = asyncio.run(run_operator_process(opts))
        except Exception as exc:
            from lightkube.core.exceptions import ConfigError

            if isinstance(exc, ConfigError | FileNotFoundError):
                raise ForesizeError(f"cannot load Kubernetes configuration: {exc}") from None
            raise
        if code:
            raise typer.Exit(code)


def _seconds(text: str, option: str, minimum: float) -> float:
    """A duration option (`30s`, `5m`; a bare number is seconds) with its lower bound."""
    from foresize.core.errors import ForesizeError
    from foresize.front.cli.options import duration, format_seconds

    seconds = duration(text, option, positive=False)
    if seconds < minimum:
        raise ForesizeError(f"{option}: must be at least {format_seconds(minimum)}, got {text!r}")
    return seconds


def headroom_config(
    namespace: str, pools: str, window: str, pod: str, max_pods: int
) -> HeadroomConfig:
    """The `--headroom-*` flags read into the core's configuration; a bad one is refused
    naming it."""
    from foresize.core.api.labels import label_value_error
    from foresize.core.api.names import dns_label_error
    from foresize.core.api.quantity import to_canonical
    from foresize.core.cluster.headroom import MAX_PLACEHOLDERS, MAX_WINDOW, HeadroomConfig
    from foresize.core.errors import ForesizeError
    from foresize.front.cli.options import format_seconds

    if dns_label_error(namespace):
        raise ForesizeError(f"--headroom-namespace: {namespace!r} is not a valid namespace")
    requests: dict[str, int] = {}
    for part in (p.strip() for p in pod.split(",") if p.strip()):
        name, _, value = (s.strip() for s in part.partition("="))
        if name not in ("cpu", "memory") or not value:
            raise ForesizeError(
                f"--headroom-pod: {part!r}: expected cpu=QUANTITY or memory=QUANTITY"
            )
        if name in requests:
            raise ForesizeError(f"--headroom-pod: {name} is given twice in {pod!r}")
        try:
            requests[name] = to_canonical(name, value)
        except ValueError as exc:
            raise ForesizeError(f"--headroom-pod: {name}: {exc}") from None
    for name in ("cpu", "memory"):
        if requests.get(name, 0) <= 0:
            raise ForesizeError(f"--headroom-pod: {name} must be given and positive, got {pod!r}")
    if not 0 <= max_pods <= MAX_PLACEHOLDERS:
        raise ForesizeError(
            f"--headroom-max-pods: must be from 0 to {MAX_PLACEHOLDERS}, got {max_pods}"
        )
    names = tuple(p.strip() for p in pools.split(",") if p.strip())
    for name in names:
        # A pool is a node label's value: anything else matches no node, and would turn
        # the headroom off for it without a word.
        why = label_value_error(name)
        if why is not None:
            raise ForesizeError(f"--headroom-pools: {name!r}: not a node pool name ({why})")
    seconds = _seconds(window, "--headroom-window", 60.0)
    if seconds > MAX_WINDOW:
        raise ForesizeError(
            f"--headroom-window: at most {format_seconds(MAX_WINDOW)} (the forecast reads "
            f"the same window one day earlier), got {window!r}"
        )
    return HeadroomConfig(
        namespace=namespace,
        pools=names or None,
        window=seconds,
        pod_requests=requests,
        max_replicas=max_pods,
    )


def _check_history_store(
    store: str | None, write: str | None, history_db: str | None, prometheus: str | None
) -> None:
    """--history-store and --history-store-write: URLs, and not beside another history."""
    from foresize.core.errors import ForesizeError

    if store is not None:
        if history_db or prometheus:
            other = "--history-db" if history_db else "--prometheus"
            raise ForesizeError(f"--history-store: give it or {other}, not both")
        if not store.startswith(("http://", "https://")):
            raise ForesizeError(f"--history-store: {store!r} is not an http:// or https:// URL")
    if write and not write.startswith(("http://", "https://")):
        raise ForesizeError(f"--history-store-write: {write!r} is not an http:// or https:// URL")
    if write is not None and store is None:
        raise ForesizeError("--history-store-write needs --history-store")


def _history_store_auth(
    store: str | None,
    tenant: str | None,
    token_file: str | None,
    username: str | None,
    password_file: str | None,
) -> object:
    """The shared store's tenant and credentials (None without any), the secret files read
    once here so a missing or empty one is refused at start, naming its option."""
    from foresize.adapters.history.store_auth import StoreAuth
    from foresize.core.errors import ForesizeError

    given = [
        name
        for name, value in (
            ("--history-store-tenant", tenant),
            ("--history-store-token-file", token_file),
            ("--history-store-username", username),
            ("--history-store-password-file", password_file),
        )
        if value is not None
    ]
    if not given:
        return None
    if store is None:
        raise ForesizeError(f"{given[0]} needs --history-store")
    auth = StoreAuth(tenant, token_file, username, password_file)
    auth.headers()
    return auth
