"""`foresize manifests [all|crds|rbac|operator|webhooks|monitoring|networkpolicy]`: the
install objects (the alerts in `alerts.py`; `foresize validate` in `validate.py`).

`foresize manifests | kubectl apply -f -` installs Foresize; the Helm chart in
deploy/helm/foresize renders the same objects (a test renders both and compares them).

Interface for the operator (names it can rely on; also set as environment variables on its
container):
- namespace `foresize-system`, ServiceAccount `foresize`;
- Service `foresize-webhook` (port 443 -> container port `webhook` 8443, HTTPS, serving
  /mutate-pods, /mutate-scale, /validate-targets, /healthz, /readyz) and port `metrics`
  8080 (HTTP /metrics);
- webhook configurations named `foresize` (Mutating and Validating) with no caBundle: the
  operator keeps its CA and serving certificate in the Secret `foresize-webhook-tls` (created
  by whichever replica starts first) and patches the caBundle in; the chart can instead use
  cert-manager (`certManager.enabled`);
- Leases `foresize-shard-<i>` and the pause ConfigMap `foresize-pause` in its namespace.
"""

from __future__ import annotations

from typing import Any

import typer

from foresize.core.api.names import dns_label_error, dns_subdomain_error
from foresize.front.cli.alerts import alert_rules
from foresize.front.cli.manifests_store import HISTORY_STORE_AUTH, HistoryStore, history_store_of
from foresize.shells.kube.rbac import (
    NAME,
    READ,
    operator_rbac,
    rule,
)
from foresize.shells.kube.state import PAUSE_CONFIGMAP
from foresize.shells.webhook.configurations import TLS_SECRET, WEBHOOK_SERVICE

SECTIONS = ("all", "crds", "rbac", "operator", "webhooks", "monitoring", "networkpolicy")
# Printed only when asked for (like the chart's networkPolicy.enabled, off by default): a
# cluster without a NetworkPolicy controller ignores it, one with a default-deny policy
# needs it, and the operator's egress (the API server) is left alone either way.
OPTIONAL_SECTIONS = ("networkpolicy",)

DEFAULT_NAMESPACE = "foresize-system"
PRIORITY_CLASS = "foresize-critical"
# Above every workload it resizes (default priority 0), below the system's own classes
# (system-cluster-critical is 2000000000): the webhook and the Lease holder are not
# preempted by the pods they size, and never preempt the control plane's.
PRIORITY_VALUE = 1_000_000
# On the data volume: a PersistentVolumeClaim per replica (the StatefulSet's claim
# template), so the history survives container restarts, rollouts, drains and reschedules;
# an emptyDir (`--no-history-volume`, for a cluster without a storage class) loses it at
# each of those but the first.
HISTORY_DB = "/var/lib/foresize/history.db"
# The claim's size: 14 days of 5-minute samples (the recommender's window) for ~1,000
# containers, CPU and memory, is ~8M rows, a few hundred MiB in SQLite; twice that.
HISTORY_SIZE = "2Gi"
WEBHOOK_PORT = 8443
METRICS_PORT = 8080

IMAGE_REQUIRED = (
    "--image is required for the operator StatefulSet (sections all and operator): no "
    "Foresize image is published. Build and push one from a checkout "
    "(docker build -t REGISTRY/foresize:TAG . && docker push REGISTRY/foresize:TAG; see "
    "docs/install.md) and pass --image REGISTRY/foresize:TAG"
)


def _labels(component: str | None = None) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/instance": NAME,
        "app.kubernetes.io/part-of": NAME,
    }
    if component:
        labels["app.kubernetes.io/component"] = component
    return labels


def _selector() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": NAME}


def _meta(name: str, namespace: str | None = None, component: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = _labels(component)
    return meta


# --------------------------------------------------------------------------------------
# RBAC
# --------------------------------------------------------------------------------------


# Namespaced Foresize kinds that namespace users manage (the cluster template is an admin's).
USER_KINDS = ["aiscaletargets", "daemonsetautoscalers"]


def aggregated_roles() -> list[dict[str, Any]]:
    """Rights on Foresize's kinds added to the built-in `view`, `edit` and `admin`
    ClusterRoles (aggregation labels), so namespace users need no hand-written RBAC."""
    out = []
    for role, verbs, aggregate in (
        ("view", READ, ["view", "edit", "admin"]),
        ("edit", ["create", "update", "patch", "delete", "deletecollection"], ["edit", "admin"]),
    ):
        meta = _meta(f"{NAME}-{role}", component="rbac")
        meta["labels"].update(
            {f"rbac.authorization.k8s.io/aggregate-to-{a}": "true" for a in aggregate}
        )
        rules = [rule(["foresize.io"], list(USER_KINDS), list(verbs))]
        if role == "view":
            rules.append(rule(["foresize.io"], [f"{k}/status" for k in USER_KINDS], ["get"]))
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": meta,
                "rules": rules,
            }
        )
    return out


def rbac(namespace: str) -> list[dict[str, Any]]:
    """The operator's ServiceAccount, roles and bindings (`foresize.shells.kube.rbac`, the one home
    of its rules), labelled, with the aggregated user roles before the RoleBinding."""
    objects = operator_rbac(namespace)
    for obj in objects:
        obj["metadata"]["labels"] = _labels("operator")
    return [*objects[:4], *aggregated_roles(), *objects[4:]]


# --------------------------------------------------------------------------------------
# The operator
# --------------------------------------------------------------------------------------


def history_claim(size: str = HISTORY_SIZE, storage_class: str | None = None) -> dict[str, Any]:
    """The claim template of the history volume: ReadWriteOnce (what every storage class
    offers; each replica has its own), the cluster's default class unless one is named."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": "data", "labels": _labels("operator")}, "spec": spec}


def operator(
    namespace: str,
    image: str,
    replicas: int = 2,
    history: dict[str, Any] | None = None,
    store: HistoryStore | None = None,
) -> list[dict[str, Any]]:
    """The operator's objects. `history`: the claim template of its history volume
    (`history_claim()` by default); None with `history_volume=False` in `build`: an emptyDir.
    `store`: a shared history store: the history is read from it, no SQLite file, no
    claim; its credentials Secret, if any, mounted read-only."""
    if store is not None:
        history = None
    history_env = (
        [{"name": "FORESIZE_HISTORY_DB", "value": HISTORY_DB}] if store is None else store.env()
    )
    auth_secret = store.auth_secret if store is not None else ""
    env = [
        {
            "name": "FORESIZE_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        },
        {"name": "FORESIZE_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "FORESIZE_WEBHOOK_SERVICE", "value": WEBHOOK_SERVICE},
        {"name": "FORESIZE_WEBHOOK_CONFIGURATION", "value": NAME},
        {"name": "FORESIZE_TLS_SECRET", "value": TLS_SECRET},
        {"name": "FORESIZE_PAUSE_CONFIGMAP", "value": PAUSE_CONFIGMAP},
        {"name": "FORESIZE_WEBHOOK_PORT", "value": str(WEBHOOK_PORT)},
        {"name": "FORESIZE_METRICS_PORT", "value": str(METRICS_PORT)},
        *history_env,
    ]
    # The probes go to the metrics port, a listener of its own: the webhook port's
    # connection cap is shared with whoever can reach it, and a client holding it full
    # would have the kubelet's probes refused and the replica restarted (reliability R-2).
    probe = {"httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}}
    container = {
        "name": "operator",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["operator"],
        "env": env,
        "ports": [
            {"name": "webhook", "containerPort": WEBHOOK_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "metrics", "scheme": "HTTP"},
            "periodSeconds": 5,
        },
        "livenessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 6},
        # Start-up may wait up to 120 s for cert-manager's Secret and lists every watched
        # kind first: liveness only counts once this has passed (5 s x 36 = 3 minutes).
        "startupProbe": {**probe, "periodSeconds": 5, "failureThreshold": 36},
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/foresize"},
            {"name": "tmp", "mountPath": "/tmp"},
            *(
                [{"name": "history-store-auth", "mountPath": HISTORY_STORE_AUTH, "readOnly": True}]
                if auth_secret
                else []
            ),
        ],
    }
    # A StatefulSet, for one history claim per replica that follows it through rollouts
    # and drains. Parallel: both replicas start (and serve the webhooks) at once, not one
    # after the other's readiness; rolling updates still go one replica at a time.
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(NAME, namespace, "operator"),
        "spec": {
            "replicas": replicas,
            "serviceName": WEBHOOK_SERVICE,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": _selector()},
            "template": {
                "metadata": {"labels": _labels("operator")},
                "spec": {
                    "serviceAccountName": NAME,
                    "priorityClassName": PRIORITY_CLASS,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "fsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": 30,
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "topologyKey": "kubernetes.io/hostname",
                                        "labelSelector": {"matchLabels": _selector()},
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [container],
                    "volumes": [
                        *([] if history is not None else [{"name": "data", "emptyDir": {}}]),
                        {"name": "tmp", "emptyDir": {}},
                        *(
                            [{"name": "history-store-auth", "secret": {"secretName": auth_secret}}]
                            if auth_secret
                            else []
                        ),
                    ],
                },
            },
            **({"volumeClaimTemplates": [history]} if history is not None else {}),
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(WEBHOOK_SERVICE, namespace, "operator"),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(),
            "ports": [
                {"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"},
                {
                    "name": "metrics",
                    "port": METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                },
            ],
        },
    }
    # maxUnavailable, not minAvailable: with 2 replicas a drain takes one at a time, and
    # with 1 replica (allowed) the drain is not blocked forever.
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(NAME, namespace, "operator"),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector()}},
    }
    priority = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _meta(PRIORITY_CLASS, component="operator"),
        "value": PRIORITY_VALUE,
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "Foresize's operator: its webhooks and Lease holder outrank the "
        "workloads it sizes.",
    }
    # Pod Security admission: the operator's pod meets the restricted profile (non-root,
    # no privilege escalation, all capabilities dropped, RuntimeDefault seccomp).
    namespace_meta = _meta(namespace)
    namespace_meta["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": namespace_meta},
        priority,
        statefulset,
        service,
        pdb,
    ]


# --------------------------------------------------------------------------------------
# Webhooks
# --------------------------------------------------------------------------------------


def webhooks(namespace: str) -> list[dict[str, Any]]:
    """The admission part's configurations (`webhook.configurations.webhook_configurations`: paths,
    rules, failurePolicy Ignore, 3 s, the system namespaces and the operator's own excluded,
    its pods excluded, matchConditions) with this install's labels."""
    from foresize.shells.webhook.configurations import webhook_configurations

    docs = webhook_configurations(service=WEBHOOK_SERVICE, namespace=namespace, port=443)
    for doc in docs:
        doc["metadata"] = _meta(NAME, component="webhook")
    return docs


# --------------------------------------------------------------------------------------
# Monitoring
# --------------------------------------------------------------------------------------
def monitoring(namespace: str) -> list[dict[str, Any]]:
    """PrometheusRule and ServiceMonitor. prometheus-operator picks them up only when their
    labels match its `ruleSelector`/`serviceMonitorSelector` (kube-prometheus-stack: the
    label `release: <its release>`): add those with `kubectl label`, or the chart's
    `monitoring.labels`."""
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": _meta(NAME, namespace, "monitoring"),
            "spec": {"groups": [{"name": "foresize", "rules": alert_rules()}]},
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": _meta(NAME, namespace, "monitoring"),
            "spec": {
                "selector": {"matchLabels": _labels("operator")},
                "namespaceSelector": {"matchNames": [namespace]},
                "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}],
            },
        },
    ]


# --------------------------------------------------------------------------------------
# NetworkPolicy
# --------------------------------------------------------------------------------------

MONITORING_NAMESPACE = "monitoring"


def network_policy(
    namespace: str, monitoring_namespace: str = MONITORING_NAMESPACE
) -> list[dict[str, Any]]:
    """Ingress to the operator pods: the webhook port (the API server calls it; its source
    addresses are the control plane's, which no pod selector can name, so any source is
    admitted unless you add an ipBlock) and the metrics port from the monitoring namespace
    only. Every other port of the pods is closed."""
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(NAME, namespace, "operator"),
            "spec": {
                "podSelector": {"matchLabels": _selector()},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {"ports": [{"protocol": "TCP", "port": WEBHOOK_PORT}]},
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {
                                        "kubernetes.io/metadata.name": monitoring_namespace
                                    }
                                }
                            }
                        ],
                        "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
                    },
                ],
            },
        }
    ]


def build(
    section: str = "all",
    *,
    namespace: str = DEFAULT_NAMESPACE,
    image: str | None = None,
    replicas: int = 2,
    history_volume: bool = True,
    history_size: str = HISTORY_SIZE,
    history_storage_class: str = "",
    history_store: str = "",
    history_store_write: str = "",
    history_store_tenant: str = "",
    history_store_token_secret: str = "",
    history_store_basic_auth_secret: str = "",
) -> list[dict[str, Any]]:
    """The objects of one section (or all of them, CRDs first)."""
    from foresize.core.api.crd import all_crds
    from foresize.core.errors import ForesizeError

    if section not in SECTIONS:
        raise ForesizeError(f"unknown section {section!r}: choose one of {', '.join(SECTIONS)}")
    if replicas < 1:
        raise ForesizeError("--replicas must be at least 1")
    # The API server refuses every namespaced object of a bad name, after the CRDs and
    # cluster-scoped objects were already applied: refuse it before printing anything.
    if dns_label_error(namespace):
        raise ForesizeError(
            f"--namespace: {namespace!r} is not a valid namespace (lowercase letters, digits "
            "and '-', starting and ending with a letter or digit, at most 63 characters)"
        )
    if section in ("all", "operator") and not image:
        raise ForesizeError(IMAGE_REQUIRED)
    history = _history_claim(history_volume, history_size, history_storage_class)
    for flag, url in (
        ("--history-store", history_store),
        ("--history-store-write", history_store_write),
    ):
        if url and not url.startswith(("http://", "https://")):
            raise ForesizeError(f"{flag}: {url!r} is not an http:// or https:// URL")
    store = history_store_of(
        history_store,
        history_store_write,
        history_store_tenant,
        history_store_token_secret,
        history_store_basic_auth_secret,
    )
    parts = {
        "crds": all_crds,
        "rbac": lambda: rbac(namespace),
        "operator": lambda: operator(namespace, image or "", replicas, history, store),
        "webhooks": lambda: webhooks(namespace),
        "monitoring": lambda: monitoring(namespace),
        "networkpolicy": lambda: network_policy(namespace),
    }
    if section == "all":
        return [
            doc for name in SECTIONS[1:] if name not in OPTIONAL_SECTIONS for doc in parts[name]()
        ]
    return parts[section]()


def _history_claim(wanted: bool, size: str, storage_class: str) -> dict[str, Any] | None:
    """The history's claim template from the options, refused with the option named."""
    from foresize.core.api.quantity import parse_quantity
    from foresize.core.errors import ForesizeError

    if not wanted:
        return None
    try:
        if parse_quantity(size) <= 0:
            raise ValueError("not positive")
    except (ValueError, TypeError):
        raise ForesizeError(
            f"--history-size: {size!r} is not a storage size (a quantity such as 2Gi)"
        ) from None
    if storage_class and dns_subdomain_error(storage_class):
        raise ForesizeError(
            f"--history-storage-class: {storage_class!r} is not a valid StorageClass name: "
            f"{dns_subdomain_error(storage_class)}"
        )
    return history_claim(size, storage_class or None)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("manifests")
    def manifests(
        section: str = typer.Argument(
            "all",
            help="What to print: all, crds, rbac, operator, webhooks, monitoring, or "
            "networkpolicy (not part of all).",
        ),
        namespace: str = typer.Option(
            DEFAULT_NAMESPACE,
            help="Namespace Foresize is installed in (not a filter; recommend -n filters).",
        ),
        image: str = typer.Option(
            "",
            help="Operator image you built and pushed (REGISTRY/foresize:TAG); required for "
            "all and operator: no image is published (docs/install.md).",
        ),
        replicas: int = typer.Option(2, help="Operator replicas."),
        history_volume: bool = typer.Option(
            True,
            help="The history on a PersistentVolumeClaim per replica (the cluster's default "
            "StorageClass unless --history-storage-class). --no-history-volume: an emptyDir, "
            "for a cluster without a storage class (the history is lost at each rollout).",
        ),
        history_size: str = typer.Option(HISTORY_SIZE, help="Size of each history claim."),
        history_storage_class: str = typer.Option(
            "", help="StorageClass of the history claims (default: the cluster's default)."
        ),
        history_store: str = typer.Option(
            "",
            help="The history on a shared Prometheus-compatible store (its query API URL) "
            "instead of a SQLite file per replica: no claims (docs/operator.md).",
        ),
        history_store_write: str = typer.Option(
            "", help="Remote-write URL of that store (default: <URL>/api/v1/write)."
        ),
        history_store_tenant: str = typer.Option(
            "", help="Tenant sent to that store as X-Scope-OrgID (Mimir, Cortex, Thanos Receive)."
        ),
        history_store_token_secret: str = typer.Option(
            "",
            help="Secret (in --namespace) whose key `token` is that store's bearer token, "
            "mounted read-only and read for every request.",
        ),
        history_store_basic_auth_secret: str = typer.Option(
            "",
            help="Secret (in --namespace) with keys `username` and `password`: basic auth "
            "for that store (the password mounted read-only).",
        ),
    ) -> None:
        """Print the install manifests as YAML (`foresize manifests | kubectl apply -f -`)."""
        import yaml

        docs = build(
            section,
            namespace=namespace,
            image=image or None,
            replicas=replicas,
            history_volume=history_volume,
            history_size=history_size,
            history_storage_class=history_storage_class,
            history_store=history_store,
            history_store_write=history_store_write,
            history_store_tenant=history_store_tenant,
            history_store_token_secret=history_store_token_secret,
            history_store_basic_auth_secret=history_store_basic_auth_secret,
        )
        typer.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)
