"""`foresize manifests [all|crds|rbac|operator|webhooks|monitoring]`: the install objects;
and `foresize validate FILE...`: check Foresize objects in YAML files offline.

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

import re
from typing import Any

import typer

from foresize.core.api.duration import shown
from foresize.core.api.names import dns_label_error, dns_subdomain_error
from foresize.shells.kube.rbac import NAME, READ, TLS_SECRET, operator_rbac, rule
from foresize.shells.kube.state import PAUSE_CONFIGMAP

SECTIONS = ("all", "crds", "rbac", "operator", "webhooks", "monitoring", "networkpolicy")
# Printed only when asked for (like the chart's networkPolicy.enabled, off by default): a
# cluster without a NetworkPolicy controller ignores it, one with a default-deny policy
# needs it, and the operator's egress (the API server) is left alone either way.
OPTIONAL_SECTIONS = ("networkpolicy",)

DEFAULT_NAMESPACE = "foresize-system"
WEBHOOK_SERVICE = "foresize-webhook"
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


# No Foresize image is published: the install names the one its user built and pushed.
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
    return [*objects[:4], *aggregated_roles(), objects[4]]


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
) -> list[dict[str, Any]]:
    """The operator's objects. `history`: the claim template of its history volume
    (`history_claim()` by default); None with `history_volume=False` in `build`: an emptyDir."""
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
        {"name": "FORESIZE_HISTORY_DB", "value": HISTORY_DB},
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


def _changed_within(series: str, window: str, by: str) -> str:
    """PromQL true while `series` (a counter) counted anything within `window`, summed by
    `by`. `increase()` alone misses a series whose first scrape is already above 0 (it
    was created and counted between two scrapes, e.g. the first change after a start or a
    target created since the last pass): such a series counts in full while it is younger
    than the window (nothing at `offset window`)."""
    return (
        f"sum by ({by}) (increase({series}[{window}]) > 0 "
        f"or ({series} > 0 unless {series} offset {window})) > 0"
    )


def alert_rules() -> list[dict[str, Any]]:
    """Alerts over the metrics `foresize.adapters.telemetry.metrics` exports."""
    return [
        {
            # Every request change, as the seed's operators asked for: an info alert to
            # log and to check against the node charge-gap alerts below.
            "alert": "ForesizeRequestChanged",
            "expr": _changed_within(
                "foresize_request_changes_total", "5m", "target, resource, source"
            ),
            "labels": {"severity": "info"},
            "annotations": {
                "summary": (
                    "Foresize changed {{ $labels.resource }} requests of {{ $labels.target }}"
                ),
                "description": (
                    "{{ $value }} {{ $labels.resource }} request changes ({{ $labels.source }}) "
                    "in the last 5 minutes; compare with foresize_node_charge_gap."
                ),
            },
        },
        {
            "alert": "ForesizeResizeChurn",
            "expr": (
                'sum by (target, resource) (increase(foresize_resizes_total{outcome="success",'
                'direction="up"}[1h])) > 3 and sum by (target, resource) '
                '(increase(foresize_resizes_total{outcome="success",direction="down"}[1h])) > 3'
            ),
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Foresize resizes {{ $labels.target }} up and down repeatedly",
                "description": (
                    "{{ $labels.resource }} of {{ $labels.target }} was resized up and down "
                    "more than 3 times each in the last hour: raise the hysteresis "
                    "(vertical.scaling_behavior) or the forecast horizon."
                ),
            },
        },
        {
            "alert": "ForesizeResizeRejected",
            "expr": _changed_within(
                'foresize_resizes_total{outcome=~"rejected|error"}', "30m", "target"
            ),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The API server refuses Foresize's resizes of {{ $labels.target }}",
                "description": "Resizes were rejected (422/403) or failed in the last 30 minutes.",
            },
        },
        {
            "alert": "ForesizeResizeStalled",
            "expr": "max by (target) (foresize_stalled_pods) > 0",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $value }} pods of {{ $labels.target }} have stalled resizes",
                "description": (
                    "In-place resizes stay Deferred, Infeasible or in error for 10 minutes; "
                    "under in_place they wait, under in_place_or_recreate they are evicted."
                ),
            },
        },
        {
            "alert": "ForesizeCircuitBreakerOpen",
            "expr": "max by (target) (foresize_breaker_open) > 0",
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "Foresize stopped evicting pods of {{ $labels.target }}",
                "description": (
                    "Evicted pods came back without the suggested resources three times in a "
                    "row (is the admission webhook reachable?). Evictions are paused."
                ),
            },
        },
        {
            "alert": "ForesizeSchedulerChargeDivergence",
            "expr": 'max by (node) (foresize_node_charge_gap{resource="cpu"}) > 0.5',
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Scheduler charges {{ $labels.node }} {{ $value }} CPU beyond spec",
                "description": (
                    "The scheduler's charge (max of spec, allocated, actual) exceeds the sum "
                    "of spec requests: resizes that have not landed hold node capacity."
                ),
            },
        },
        {
            "alert": "ForesizeSchedulerChargeDivergenceMemory",
            "expr": 'max by (node) (foresize_node_charge_gap{resource="memory"}) > 1073741824',
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Scheduler charges {{ $labels.node }} over 1 GiB memory beyond spec",
                "description": (
                    "The scheduler's charge exceeds the sum of spec memory requests by more "
                    "than 1 GiB for 15 minutes."
                ),
            },
        },
        *operational_alerts(),
    ]


def operational_alerts(service: str = WEBHOOK_SERVICE) -> list[dict[str, Any]]:
    """The operator itself: down, no Lease holder, webhook errors, certificate expiry.
    (Every webhook fails open, so each of these is otherwise silent.)"""
    up = f'up{{job="{service}"}}'
    return [
        {
            "alert": "ForesizeOperatorDown",
            "expr": f"absent({up} == 1)",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No Foresize operator replica is up",
                "description": (
                    "Prometheus scrapes no live replica: nothing is resized and every "
                    "webhook fails open (pods are admitted unchanged)."
                ),
            },
        },
        {
            "alert": "ForesizeNoLeaseHeld",
            "expr": "sum by (shard) (foresize_leader) < 1",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No replica holds Foresize shard {{ $labels.shard }}",
                "description": (
                    "The targets of this shard are not acted on: no replica holds its Lease "
                    "(API errors, RBAC, or every replica lost it)."
                ),
            },
        },
        {
            "alert": "ForesizeWebhookErrors",
            "expr": (
                "sum(rate(foresize_webhook_bad_requests_total[5m])) > 0.05 or "
                'sum(rate(apiserver_admission_webhook_request_total{name=~".*foresize.io",'
                'code!="200"}[5m])) > 0.05'
            ),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Foresize's admission webhooks are failing",
                "description": (
                    "Requests to the webhooks are refused, cut off or answered with errors "
                    "(operator side), or the API server's calls to them fail: pods are "
                    "admitted unchanged (failurePolicy Ignore)."
                ),
            },
        },
        {
            "alert": "ForesizeWebhookCertificateExpiry",
            "expr": "min(foresize_webhook_certificate_expiry_seconds) < 7 * 86400",
            "for": "1h",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": (
                    "Foresize's webhook certificate expires in {{ $value | humanizeDuration }}"
                ),
                "description": (
                    "The served certificate is near or past its expiry and was not renewed: "
                    "once expired, the API server cannot call the webhooks and every one "
                    "fails open."
                ),
            },
        },
    ]


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
    parts = {
        "crds": all_crds,
        "rbac": lambda: rbac(namespace),
        "operator": lambda: operator(namespace, image or "", replicas, history),
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


CLUSTER_SCOPED_KINDS = ("ClusterAIScaleTemplate",)


def name_errors(obj: dict[str, Any]) -> list[str]:
    """`metadata.name` and `metadata.namespace` the API server would refuse: a custom
    resource's name is an RFC 1123 subdomain, its namespace an RFC 1123 label. (The models
    do not check names: objects read from a cluster were named by its API server.)"""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []  # the models name a missing or non-map metadata
    problems = []
    name = meta.get("name")
    if name in (None, "") and not meta.get("generateName"):
        problems.append("metadata.name: required (the API server refuses an object without one)")
    elif isinstance(name, str):
        why = dns_subdomain_error(name)
        if why:
            problems.append(f"metadata.name: {shown(name)} is not a valid name: {why}")
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace and obj.get("kind") not in CLUSTER_SCOPED_KINDS:
        why = dns_label_error(namespace)
        if why:
            problems.append(
                f"metadata.namespace: {shown(namespace)} is not a valid namespace: {why}"
            )
    return problems


def validate_files(paths: list[str]) -> tuple[int, int, list[str]]:
    """Check every Foresize object (apiVersion foresize.io/...) in the YAML files with the
    API models. Returns (objects checked, other documents skipped, errors); each error
    names the file, the line of the field (of its nearest written parent when the field is
    missing; of the document for an error about the whole object), and the field."""
    from foresize.adapters.files import iter_documents_with_lines, read_text
    from foresize.core.api.types import GROUP, parse_object
    from foresize.core.errors import ForesizeError

    checked = skipped = 0
    errors: list[str] = []
    for path in paths:
        try:
            text = read_text(path)
            for _, obj, lines in iter_documents_with_lines(text, path):
                api_version = obj.get("apiVersion", "") if isinstance(obj, dict) else ""
                if not str(api_version).startswith(f"{GROUP}/"):
                    skipped += obj is not None
                    continue
                checked += 1
                problems = name_errors(obj)
                try:
                    parse_object(obj)
                except ForesizeError as exc:
                    problems += str(exc).splitlines()
                errors.extend(f"{path}:{_problem_line(lines, p)}: {p}" for p in problems)
        except ForesizeError as exc:  # unreadable file or bad YAML: one line, next file
            errors.append(str(exc))
    return checked, skipped, errors


# "spec.vertical.containers[0].cpu: ..." - a problem that starts with the field it is about.
_FIELD_PROBLEM = re.compile(r"^([A-Za-z_][\w-]*(?:\.[\w/-]+|\[\d+\])*): ")


def _problem_line(lines: dict[str, int], problem: str) -> int:
    from foresize.adapters.files import field_line

    m = _FIELD_PROBLEM.match(problem)
    return field_line(lines, m[1] if m else "")


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
        )
        typer.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)

    @app.command("validate")
    def validate(
        files: list[str] = typer.Argument(..., help="YAML files with Foresize objects."),
    ) -> None:
        """Check AIScaleTargets, DaemonSetAutoscalers and ClusterAIScaleTemplates in YAML
        files offline: the same defaults and rules as the CRDs; errors name file, line and
        field. Other documents are skipped."""
        from foresize.core.errors import ForesizeError

        checked, skipped, errors = validate_files(files)
        if errors:
            raise ForesizeError("\n".join(errors))
        if checked == 0:
            raise ForesizeError(f"no Foresize objects found in {', '.join(files)}")
        note = f" ({skipped} other documents skipped)" if skipped else ""
        typer.echo(f"{checked} Foresize objects valid{note}")
