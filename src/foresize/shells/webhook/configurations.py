"""The Mutating- and ValidatingWebhookConfiguration Foresize installs, one source for
`foresize manifests`, `foresize webhook` and the Helm chart (a test holds the chart to
it): which requests reach the webhook server, which the API server skips itself, and
the `caBundle` the API server checks the serving certificate against.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable
from typing import Any

from foresize.core.api.types import SYSTEM_NAMESPACES

# The operator's own pods carry this label (both install paths): they are never sent to
# the pod webhook, wherever they run, so a restart of the operator can never wait on it.
OPERATOR_POD_LABEL = ("app.kubernetes.io/name", "foresize")

# Requests the API server skips itself (CEL matchConditions, GA since Kubernetes 1.30;
# the chart requires 1.33). Each is one the handlers would answer with "no change" anyway,
# at the price of a TLS round trip inside someone's pod creation.
POD_MATCH_CONDITIONS = (
    # Mirror pods are the kubelet's copies of static pods: their spec cannot be changed.
    {
        "name": "not-a-mirror-pod",
        "expression": "!has(object.metadata.annotations) || "
        "!('kubernetes.io/config.mirror' in object.metadata.annotations)",
    },
    # Pods with pod-level resources (spec.resources) are left alone by the pod decision.
    {"name": "no-pod-level-resources", "expression": "!has(object.spec.resources)"},
)
TARGET_MATCH_CONDITIONS = (
    # Updates that leave spec as it was (finalizers, labels, annotations) have nothing to
    # validate; answering them could only block the revert finalizer's release.
    {
        "name": "spec-changed",
        "expression": "request.operation == 'CREATE' || !has(oldObject.spec) || "
        "!has(object.spec) || object.spec != oldObject.spec",
    },
)


# The Service in front of the webhook port, and the Secret that holds its certificate: the
# names every install path (manifests, chart, operator flags) agrees on.
WEBHOOK_SERVICE = "foresize-webhook"
TLS_SECRET = "foresize-webhook-tls"


def webhook_configurations(
    *,
    service: str = WEBHOOK_SERVICE,
    namespace: str = "foresize-system",
    port: int = 443,
    ca_pem: bytes | None = None,
    timeout_seconds: int = 3,
) -> list[dict[str, Any]]:
    """The Mutating- and ValidatingWebhookConfiguration for Foresize: failurePolicy Ignore,
    3 s timeout, the system namespaces and the operator's own (`namespace`) excluded, the
    operator's pods excluded wherever they are, and the requests the handlers would not
    change skipped by the API server (`POD_MATCH_CONDITIONS`, `TARGET_MATCH_CONDITIONS`)."""
    ns_selector = {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": list(dict.fromkeys([*SYSTEM_NAMESPACES, namespace])),
            }
        ]
    }

    def hook(
        name: str, path: str, rules: list[dict[str, Any]], *, side_effects: str = "None"
    ) -> dict[str, Any]:
        h: dict[str, Any] = {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": side_effects,
            "failurePolicy": "Ignore",
            "timeoutSeconds": timeout_seconds,
            "namespaceSelector": copy.deepcopy(ns_selector),
            "rules": rules,
            "clientConfig": {
                "service": {"name": service, "namespace": namespace, "path": path, "port": port}
            },
        }
        return h

    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "foresize"},
        "webhooks": [
            {
                **hook(
                    "pods.foresize.io",
                    "/mutate-pods",
                    [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                ),
                # Another webhook changing the pod must not make us run twice.
                "reinvocationPolicy": "Never",
                "objectSelector": {
                    "matchExpressions": [
                        {
                            "key": OPERATOR_POD_LABEL[0],
                            "operator": "NotIn",
                            "values": [OPERATOR_POD_LABEL[1]],
                        }
                    ]
                },
                "matchConditions": copy.deepcopy(list(POD_MATCH_CONDITIONS)),
            },
            hook(
                "scale.foresize.io",
                "/mutate-scale",
                [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["deployments/scale", "statefulsets/scale"],
                    },
                    {
                        "apiGroups": ["argoproj.io"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["UPDATE"],
                        "resources": ["rollouts/scale"],
                    },
                ],
            ),
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "foresize"},
        "webhooks": [
            {
                **hook(
                    "aiscaletargets.foresize.io",
                    "/validate-targets",
                    [
                        {
                            "apiGroups": ["foresize.io"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": [
                                "aiscaletargets",
                                "daemonsetautoscalers",
                                "clusteraiscalepolicies",
                            ],
                        }
                    ],
                ),
                "matchConditions": copy.deepcopy(list(TARGET_MATCH_CONDITIONS)),
            }
        ],
    }
    docs = [mutating, validating]
    return inject_ca_bundle(docs, ca_pem) if ca_pem else docs


def inject_ca_bundle(manifests: Iterable[dict[str, Any]], ca_pem: bytes) -> list[dict[str, Any]]:
    """Copies of the manifests with every webhook's clientConfig.caBundle set to `ca_pem`
    (base64, as the API expects). Other objects pass through unchanged."""
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in manifests:
        doc = copy.deepcopy(doc)
        if doc.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for wh in doc.get("webhooks") or ():
                wh.setdefault("clientConfig", {})["caBundle"] = bundle
        out.append(doc)
    return out
