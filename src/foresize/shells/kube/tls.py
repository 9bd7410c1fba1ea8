"""The webhook's serving certificate in a cluster, without or with cert-manager.

Without cert-manager the replicas share one self-signed CA and serving certificate kept
in a `kubernetes.io/tls` Secret (`ca.crt`, `tls.crt`, `tls.key`): the first replica to
start creates it (a concurrent creator gets 409 and reads the winner's), and every
replica patches the CA into the webhook configurations' `clientConfig.caBundle` with a
JSON patch. With cert-manager the Secret is cert-manager's and so is the caBundle
injection; the operator only waits for the Secret and serves from it.

`WebhookCertificate` keeps the served certificate alive (`check`, every
`--cert-check-interval`):
- self-managed: a certificate with less than a third of its lifetime left (or expired) is
  replaced by a new CA and serving certificate, written to the Secret with the
  resourceVersion read (a replica racing it gets 409 and loads the winner's), and the
  caBundle becomes new CA + old CA, so API servers trust replicas serving either; a
  renewal the API server refuses (e.g. 403: RBAC) keeps the current certificate served,
  with an error log and a Warning Event `WebhookCertificateRenewalFailed` on the Secret, at
  start as on every check (never a crash loop while the old one is still valid);
- a Secret changed by another replica or renewed by cert-manager, or `--tls-cert` files
  rewritten, are read again;
- every change is loaded into the SAME `ssl.SSLContext` the server listens with: new
  handshakes get the new certificate, no restart;
- the private key is on disk only while it is loaded (`webhook.certs.load_pair`):
  whatever ends the process (SIGTERM, a task failing, a startup failure, a hung
  shutdown's forced exit, SIGKILL), no key is left behind in its temp directory;
- `foresize_webhook_certificate_expiry_seconds` tells how long the served certificate
  has left (negative once expired), and an expired one is never served silently: an
  error log and a Warning Event `WebhookCertificateExpired` on the Secret, every check.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foresize.shells.kube.api import JSON, JSON_PATCH, KubeApi
from foresize.shells.webhook.certs import certificate_window

log = logging.getLogger("foresize.operator")

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
# Renew a self-managed certificate when less than this share of its lifetime is left
# (cert-manager's default renewBefore is a third of the duration, too).
RENEW_FRACTION = 1 / 3
SELF_SIGNED_DAYS = 365


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def load_or_create_secret(
    api: KubeApi, namespace: str, secret: str, service: str, *, create: bool = True
) -> dict[str, bytes] | None:
    """The Secret's ca.crt/tls.crt/tls.key, creating a self-signed set if `create`."""
    from foresize.shells.webhook.certs import generate_self_signed, service_dns_names, tls_secret

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
        body = tls_secret(bundle, secret, namespace, {"app.kubernetes.io/name": "foresize"})
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
    wait: float = 120.0,
) -> ssl.SSLContext:
    """Serving TLS for the webhooks, from the shared Secret (see module docstring)."""
    cert = WebhookCertificate(
        api,
        namespace=namespace,
        secret=secret,
        service=service,
        configuration=configuration,
        cert_manager=cert_manager,
    )
    return await cert.start(wait)


class RenewalRefused(RuntimeError):
    """The API server refused the renewed certificate (403, 422, ...)."""


class WebhookCertificate:
    """The webhook's serving certificate over its lifetime (see the module docstring)."""

    def __init__(
        self,
        api: KubeApi | None,
        *,
        namespace: str = "",
        secret: str | None = None,
        service: str = "",
        configuration: str = "",
        cert_manager: bool = False,
        cert_file: str | None = None,
        key_file: str | None = None,
        metrics: Any = None,
        emit: Callable[[Any], Any] | None = None,
        clock: Callable[[], float] = time.time,
        validity_days: int = SELF_SIGNED_DAYS,
        scratch: Path | None = None,
    ) -> None:
        self.api = api
        self.scratch = scratch  # where the key is written while loaded (None: $TMPDIR)
        self.namespace = namespace
        self.secret = secret
        self.service = service
        self.configuration = configuration
        self.cert_manager = cert_manager
        self.cert_file = cert_file
        self.key_file = key_file
        self.metrics = metrics
        self.emit = emit  # async callable taking an EmitEvent (the executor's apply)
        self.clock = clock
        self.validity_days = validity_days
        self.context: ssl.SSLContext | None = None
        self.served: bytes = b""  # the PEM being served
        self.not_before = 0.0
        self.not_after = 0.0
        self.renewals = 0
        self.reloads = 0

    # ----------------------------------------------------------------- serving
    def _load(self, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
        """Serve `cert_pem` from now on: into the existing context (hot reload)."""
        from foresize.shells.webhook.certs import load_pair

        reload = self.context is not None
        self.context = load_pair(
            cert_pem, key_pem, source=self._source(), context=self.context, scratch=self.scratch
        )
        if reload:
            self.reloads += 1
            log.info("webhook certificate reloaded (no restart)")
        self.served = cert_pem
        self.not_before, self.not_after = certificate_window(cert_pem)
        self._export()
        return self.context

    def _source(self) -> str:
        if self.cert_file and self.key_file:
            return f"{self.cert_file} / {self.key_file}"
        return f"Secret {self.namespace}/{self.secret}"

    def _export(self) -> None:
        if self.metrics is not None and self.not_after:
            self.metrics.certificate_expiry.set(self.not_after - self.clock())

    def needs_renewal(self, cert_pem: bytes) -> bool:
        start, end = certificate_window(cert_pem)
        return end - self.clock() < (end - start) * RENEW_FRACTION

    # ----------------------------------------------------------------- sources
    async def _read_secret(self) -> tuple[dict[str, bytes], str | None] | None:
        assert self.api is not None and self.secret
        path = f"/api/v1/namespaces/{self.namespace}/secrets/{self.secret}"
        resp = await self.api.request("GET", path)
        if not resp.ok or not isinstance(resp.body, dict):
            return None
        data = resp.body.get("data") or {}
        if not (data.get("tls.crt") and data.get("tls.key")):
            return None
        rv = (resp.body.get("metadata") or {}).get("resourceVersion")
        return {k: base64.b64decode(v) for k, v in data.items()}, rv

    async def _renew_secret(self, old: dict[str, bytes], rv: str | None) -> dict[str, bytes]:
        """A new CA and certificate into the Secret (optimistic: the resourceVersion read)."""
        from foresize.shells.webhook.certs import generate_self_signed, service_dns_names

        assert self.api is not None
        bundle = generate_self_signed(
            service_dns_names(self.service, self.namespace),
            now=dt.datetime.fromtimestamp(self.clock(), dt.UTC),
            days=self.validity_days,
        )
        data = {"ca.crt": bundle.ca_pem, "tls.crt": bundle.cert_pem, "tls.key": bundle.key_pem}
        patch: dict[str, Any] = {"data": bundle.secret_data()}
        if rv:
            patch["metadata"] = {"resourceVersion": rv}
        path = f"/api/v1/namespaces/{self.namespace}/secrets/{self.secret}"
        answer = await self.api.request("PATCH", path, patch, "application/merge-patch+json")
        if answer.code == 409:
            log.info("webhook certificate renewed by another replica; loading theirs")
            fresh = await self._read_secret()
            return fresh[0] if fresh else old
        if not answer.ok:
            raise RenewalRefused(
                f"renewing Secret {self.namespace}/{self.secret} answered {answer.code}"
                f"{' (does the Role grant patch on it?)' if answer.code == 403 else ''}"
            )
        self.renewals += 1
        log.info("webhook certificate renewed (Secret %s/%s)", self.namespace, self.secret)
        # Both CAs until every replica serves the new certificate.
        data["ca.crt"] = bundle.ca_pem + old.get("ca.crt", b"")
        return data

    # ----------------------------------------------------------------- lifecycle
    async def start(self, wait: float = 120.0) -> ssl.SSLContext:
        """The first certificate (created, or renewed when already near expiry)."""
        if self.cert_file and self.key_file:
            self._load(Path(self.cert_file).read_bytes(), Path(self.key_file).read_bytes())
            await self._warn_if_expired()
            assert self.context is not None
            return self.context
        assert self.api is not None and self.secret
        deadline = asyncio.get_running_loop().time() + wait
        data = None
        while data is None:
            data = await load_or_create_secret(
                self.api, self.namespace, self.secret, self.service, create=not self.cert_manager
            )
            if data is None:
                if asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError(
                        f"no certificate in Secret {self.namespace}/{self.secret} after {wait:.0f}s"
                    )
                await asyncio.sleep(2.0)
        self._load(data["tls.crt"], data["tls.key"])
        await self.check()
        if not self.cert_manager and data.get("ca.crt") and self.renewals == 0:
            await inject_ca_bundle(self.api, self.configuration, data["ca.crt"])
        assert self.context is not None
        return self.context

    async def check(self) -> str:
        """One round: "renewed", "reloaded", "renewal-refused", "expired" or "ok"."""
        outcome = "ok"
        if self.cert_file and self.key_file:
            cert = Path(self.cert_file).read_bytes()
            if cert != self.served:
                self._load(cert, Path(self.key_file).read_bytes())
                outcome = "reloaded"
        elif self.api is not None and self.secret:
            read = await self._read_secret()
            if read is not None:
                data, rv = read
                if not self.cert_manager and self.needs_renewal(data["tls.crt"]):
                    try:
                        data = await self._renew_secret(data, rv)
                    except RenewalRefused as refused:
                        # Serving the old certificate while it is valid beats not starting
                        # (every replica would crash-loop): say so, try again next check.
                        await self._report_refused(str(refused))
                        outcome = "renewal-refused"
                    else:
                        if data.get("ca.crt"):
                            await inject_ca_bundle(self.api, self.configuration, data["ca.crt"])
                        outcome = "renewed"
                if data["tls.crt"] != self.served:
                    self._load(data["tls.crt"], data["tls.key"])
                    outcome = outcome if outcome != "ok" else "reloaded"
        self._export()
        if await self._warn_if_expired():
            outcome = "expired"
        return outcome

    async def _report_refused(self, why: str) -> None:
        left = (self.not_after - self.clock()) / 86400
        message = f"{why}: serving the current certificate ({left:.0f} days left) meanwhile"
        log.error("webhook certificate not renewed: %s", message)
        await self._warn("WebhookCertificateRenewalFailed", message)

    async def _warn(self, reason: str, message: str) -> None:
        """A Warning Event on the Secret (best effort: the log line is the record)."""
        if self.emit is not None and self.secret:
            from foresize.core.cluster.actions import EmitEvent

            with contextlib.suppress(Exception):
                await self.emit(
                    EmitEvent(self.namespace, "Secret", self.secret, reason, message, "Warning")
                )

    async def _warn_if_expired(self) -> bool:
        now = self.clock()
        if not self.not_after or now < self.not_after:
            return False
        message = (
            f"the webhook serving certificate expired "
            f"{dt.datetime.fromtimestamp(self.not_after, dt.UTC):%Y-%m-%dT%H:%M:%SZ}: "
            "the API server cannot call the webhooks (they fail open)"
        )
        log.error(message)
        await self._warn("WebhookCertificateExpired", message)
        return True

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
            if stop.is_set():
                return
            try:
                await self.check()
            except Exception as exc:  # the API or a file: try again next round
                log.warning("webhook certificate check failed: %s", exc)
