"""The options of `foresize operator` (its flags, one field each; `front/cli/operator.py`
reads them from the command line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foresize.core.cluster.headroom import HeadroomConfig
from foresize.shells.webhook.configurations import WEBHOOK_SERVICE


@dataclass(slots=True)
class OperatorOptions:
    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    namespace: str = "foresize-system"
    identity: str = ""
    shards: int = 1
    max_shards: int | None = None
    interval: float = 30.0
    collect_interval: float = 60.0
    suggest_interval: float = 900.0
    lease_duration: float = 15.0  # client-go's LeaseDuration
    lease_renew_deadline: float = 10.0  # client-go's RenewDeadline: stop acting after this
    lease_retry: float = 2.0  # client-go's RetryPeriod: renew this often
    kube_api_qps: float = 50.0  # client-side rate limit (VPA's --kube-api-qps)
    kube_api_burst: int = 100
    cert_check_interval: float = 300.0  # webhook certificate expiry/renewal/reload check
    # GET /version this often: the resize API (and its rules) depend on the server's
    # version, and control planes are upgraded under a running operator.
    version_check_interval: float = 60.0
    liveness_timeout: float | None = None  # /healthz fails after this; default max(5 passes, 120 s)
    # Labels of workloads (or targets) the disruption worker never touches.
    exclude_selector: dict[str, str] = field(default_factory=dict)
    eviction_rate_limit: float | None = None  # evictions/s, all targets (VPA's flag)
    eviction_rate_burst: int = 1
    # `--node-autoscaler`: does one add nodes for Pending pods (None: read Karpenter's
    # label from the nodes; `core.vertical.provision`)
    node_autoscaler: bool | None = None
    headroom: HeadroomConfig | None = None  # `--headroom*`: forecast-sized placeholders
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    webhook: bool = True
    webhook_host: str = "0.0.0.0"
    webhook_port: int = 8443
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_secret: str | None = None  # shared Secret for the webhook certificate (in-cluster)
    webhook_service: str = WEBHOOK_SERVICE
    webhook_configuration: str = "foresize"
    cert_manager: bool = False
    prometheus: str | None = None
    history_db: str | None = None  # SQLite history file (default: in memory)
    # A shared Prometheus-compatible store for the history (HA, large clusters): its query
    # API base URL, and where remote write goes (default: <url>/api/v1/write; "" = none,
    # for a read-only store such as Thanos Query fed by other means).
    history_store: str | None = None
    history_store_write: str | None = None
    history_store_interval: float = 60.0  # between reads (and writes) of the store
    # Who the operator is to the store (Mimir's tenant, a proxy's token or password): an
    # `adapters.history.store_auth.StoreAuth`, its secrets read from files.
    history_store_auth: Any = None
    pause_configmap: str = "foresize-pause"
    shutdown_grace: float = 5.0  # seconds the tasks get to stop before they are cancelled
