"""The webhook's serving certificate in a cluster, without or with cert-manager.

Without cert-manager the replicas share one self-signed CA and serving certificate kept
in a `kubernetes.io/tls` Secret (`ca.crt`, `tls.crt`, `tls.key`): the first replica to
start creates it (a concurrent creator gets 409 and reads the winner's), and every
replica patches the CA into the webhook configurations' `clientConfig.caBundle` with a
JSON patch. With cert-manager the Secret is cert-manager's and so is the caBundle
injection; the operator only waits for the Secret and serves from it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from pathlib import Path
from typing import Any

from foresize.kube.api import JSON, JSON_PATCH, KubeApi

log = logging.getLogger("foresize.operator")

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def load_or_create_secret(
    api: KubeApi, namespace: str, secret: str, service: str, *, create: bool = True
) -> dict[str, bytes] | None:
    """The Secret's ca.crt/tls.crt/tls.key, creating a self-signed set if `create`."""
    from foresize.webhook.certs import generate_self_signed, service_dns_names

    path = f"/api/v1/namespaces/{namespace}/secrets/{secret}"
    for _ in range(2):
        resp = await api.request("GET", path)
        if resp.ok and isinstance(resp.body, dict):
            data = resp.body.get("data") or {}
            if data.get("tls.crt") and data.get("tls.key"):
                return {k: base64.b64decode(v) for k, v in data.items()}
        if not create:
            return None
        bundle = generate_self_signed(service_dns_names(service, namespace))
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": secret,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "foresize"},
            },
            "data": {
                "ca.crt": _b64(bundle.ca_pem),
                "tls.crt": _b64(bundle.cert_pem),
                "tls.key": _b64(bundle.key_pem),
            },
        }
        created = await api.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body, JSON)
        if created.ok:
            log.info("created webhook certificate Secret %s/%s", namespace, secret)
            return {"ca.crt": bundle.ca_pem, "tls.crt": bundle.cert_pem, "tls.key": bundle.key_pem}
        if created.code != 409:
            raise RuntimeError(
                f"creating Secret {namespace}/{secret} answered {created.code}: {created.body}"
            )
        # Another replica won the race: read its certificate on the next round.
    return None


async def inject_ca_bundle(api: KubeApi, configuration: str, ca_pem: bytes) -> int:
    """Set every webhook's caBundle in the named configurations; returns webhooks patched."""
    patched = 0
    wanted = _b64(ca_pem)
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        path = f"{ADMISSION}/{plural}/{configuration}"
        resp = await api.request("GET", path)
        if resp.code == 404 or not isinstance(resp.body, dict):
            continue
        ops: list[dict[str, Any]] = []
        for i, hook in enumerate(resp.body.get("webhooks") or []):
            if (hook.get("clientConfig") or {}).get("caBundle") != wanted:
                ops.append(
                    {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": wanted}
                )
        if ops:
            answer = await api.request("PATCH", path, ops, JSON_PATCH)
            if not answer.ok:
                raise RuntimeError(f"patching caBundle of {plural}/{configuration}: {answer.code}")
            patched += len(ops)
    return patched


async def webhook_ssl_context(
    api: KubeApi,
    *,
    namespace: str,
    secret: str,
    service: str,
    configuration: str,
    cert_manager: bool,
    workdir: Path,
    wait: float = 120.0,
) -> ssl.SSLContext:
    """Serving TLS for the webhooks, from the shared Secret (see module docstring)."""
    from foresize.webhook.certs import server_ssl_context

    data = None
    deadline = asyncio.get_running_loop().time() + wait
    while data is None:
        data = await load_or_create_secret(api, namespace, secret, service, create=not cert_manager)
        if data is None:
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(
                    f"no certificate in Secret {namespace}/{secret} after {wait:.0f}s"
                )
            await asyncio.sleep(2.0)
    if not cert_manager and data.get("ca.crt"):
        await inject_ca_bundle(api, configuration, data["ca.crt"])
    workdir.mkdir(parents=True, exist_ok=True)
    cert, key = workdir / "tls.crt", workdir / "tls.key"
    cert.write_bytes(data["tls.crt"])
    key.touch(mode=0o600)
    key.write_bytes(data["tls.key"])
    return server_ssl_context(cert, key)
