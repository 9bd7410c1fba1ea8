"""TLS for the webhook server: a self-signed CA and a serving certificate generated with
`cryptography`, the webhook configurations (with `caBundle` filled from that CA), and
an `ssl.SSLContext` from certificate files.

cert-manager (in the chart) is the production alternative; this is for `foresize webhook
--self-signed`, the operator's default, tests and the benchmark.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from foresize.errors import ForesizeError

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")

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


@dataclass(frozen=True, slots=True)
class CertBundle:
    ca_pem: bytes
    cert_pem: bytes  # serving certificate
    key_pem: bytes  # serving key (PKCS8, unencrypted)

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """Write ca.crt, tls.crt, tls.key. The key is 0600 whatever the umask and even when
        a tls.key with wider permissions was there before (touch(mode=) would keep those);
        a directory created here is 0700."""
        if not directory.exists():
            directory.mkdir(parents=True, mode=0o700)
        ca, crt, key = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
        ca.write_bytes(self.ca_pem)
        crt.write_bytes(self.cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an existing file keeps its mode on open: set it
        with os.fdopen(fd, "wb") as handle:
            handle.write(self.key_pem)
        return ca, crt, key

    def secret_data(self) -> dict[str, str]:
        """The bundle as the data of a `kubernetes.io/tls` Secret (ca.crt, tls.crt and
        tls.key, base64 as the API stores them)."""
        return {
            "ca.crt": base64.b64encode(self.ca_pem).decode(),
            "tls.crt": base64.b64encode(self.cert_pem).decode(),
            "tls.key": base64.b64encode(self.key_pem).decode(),
        }


def tls_secret(
    bundle: CertBundle, name: str, namespace: str, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """The `kubernetes.io/tls` Secret holding `bundle`, as the webhook replicas share it."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": metadata,
        "data": bundle.secret_data(),
    }


def service_dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_self_signed(
    hosts: Iterable[str] = ("localhost", "127.0.0.1"),
    *,
    now: dt.datetime | None = None,
    days: int = 365,
) -> CertBundle:
    """A fresh CA and a serving certificate for `hosts` (DNS names or IP addresses)."""
    now = now or dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "foresize-webhook-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    hosts = list(hosts)
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "foresize")])
        )
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return CertBundle(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def server_ssl_context(cert_file: Path | str, key_file: Path | str) -> ssl.SSLContext:
    """A TLS server context from PEM files; a clear error naming the file if unusable."""
    for path in (cert_file, key_file):
        if not Path(path).is_file():
            raise ForesizeError(f"{path}: no such certificate/key file")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert_file), str(key_file))
    except (ssl.SSLError, OSError) as exc:
        raise ForesizeError(
            f"{cert_file} / {key_file}: cannot load certificate and key ({exc})"
        ) from exc
    return ctx


def client_ssl_context(ca_pem: bytes) -> ssl.SSLContext:
    """A client context trusting only `ca_pem` (tests, benchmark)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=ca_pem.decode())
    return ctx


def webhook_configurations(
    *,
    service: str = "foresize-webhook",
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
                            "resources": ["aiscaletargets", "daemonsetautoscalers"],
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
