"""The webhook certificate over its lifetime, against the strict API server: a certificate
near expiry is renewed (Secret, caBundle) and served without a restart; a Secret renewed
by cert-manager is loaded into the running server; an expired one is reported (metric,
Event, error), never served silently."""

from __future__ import annotations

import base64
import datetime as dt
import os
import ssl
import time
from pathlib import Path

import pytest

from foresize.adapters.telemetry.metrics import ForesizeMetrics
from foresize.bench.chaos import served_certificate
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.rbac import operator_rbac
from foresize.shells.kube.tls import WebhookCertificate, certificate_window
from foresize.shells.webhook.certs import (
    generate_self_signed,
    service_dns_names,
    tls_secret,
)
from foresize.shells.webhook.configurations import webhook_configurations
from foresize.testing.apiserver import OPERATOR_NAMESPACE, Rbac, StrictApiServer

# The operator's namespace, where the shipped Role lets it keep its TLS Secret.
NS = OPERATOR_NAMESPACE
DAY = 86400.0


def bundle(age_days: float, days: int = 365):
    """A bundle issued `age_days` ago (valid `days`)."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(days=age_days)
    return generate_self_signed(service_dns_names("foresize-webhook", NS), now=now, days=days)


def seed(apiserver, b) -> None:
    apiserver.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    apiserver.seed(tls_secret(b, "foresize-webhook-tls", NS))
    for config in webhook_configurations(service="foresize-webhook", namespace=NS):
        apiserver.seed(config)


def manager(api, tmp_path, **kw) -> WebhookCertificate:
    return WebhookCertificate(
        api,
        scratch=tmp_path,
        namespace=NS,
        secret="foresize-webhook-tls",
        service="foresize-webhook",
        configuration="foresize",
        **kw,
    )


def secret_cert(apiserver) -> bytes:
    data = apiserver.get("Secret", NS, "foresize-webhook-tls")["data"]
    return base64.b64decode(data["tls.crt"])


def der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


async def test_a_certificate_near_expiry_is_renewed_and_served_without_restart(apiserver, tmp_path):
    from foresize.shells.webhook.server import AdmissionState, WebhookServer, create_app

    old = bundle(age_days=200)  # 165 of 365 days left: more than a third -> kept
    seed(apiserver, old)
    api = KubeApi.from_url(apiserver.url)
    clock = [time.time()]
    metrics = ForesizeMetrics()
    cert = manager(api, tmp_path, metrics=metrics, clock=lambda: clock[0])
    try:
        ctx = await cert.start()
        server = WebhookServer(create_app(AdmissionState()), host="127.0.0.1", port=0)
        server.ssl_context = ctx
        port = await server.start()
        try:
            assert await served_certificate(port) == der(old.cert_pem)
            assert await cert.check() == "ok" and cert.renewals == 0
            clock[0] += 50 * DAY  # 115 days left: less than a third of 365
            assert await cert.check() == "renewed"
            new_pem = secret_cert(apiserver)
            assert new_pem != old.cert_pem
            # The same listening server, a new handshake: the new certificate.
            assert await served_certificate(port) == der(new_pem)
            _, not_after = certificate_window(new_pem)
            assert not_after - clock[0] > 360 * DAY
            hooks = apiserver.get("MutatingWebhookConfiguration", None, "foresize")["webhooks"]
            ca_bundle = base64.b64decode(hooks[0]["clientConfig"]["caBundle"])
            assert old.ca_pem in ca_bundle and ca_bundle != old.ca_pem  # new CA + old CA
            assert metrics.certificate_expiry._value.get() > 360 * DAY
        finally:
            await server.stop()
    finally:
        await api.close()


async def test_a_secret_renewed_by_cert_manager_is_reloaded(apiserver, tmp_path):
    first = bundle(age_days=1)
    seed(apiserver, first)
    api = KubeApi.from_url(apiserver.url)
    cert = manager(api, tmp_path, cert_manager=True)
    try:
        await cert.start()
        assert cert.served == first.cert_pem
        renewed = bundle(age_days=0)

        def rotate(secret: dict) -> None:
            secret["data"]["tls.crt"] = base64.b64encode(renewed.cert_pem).decode()
            secret["data"]["tls.key"] = base64.b64encode(renewed.key_pem).decode()

        apiserver.update("Secret", NS, "foresize-webhook-tls", rotate)
        assert await cert.check() == "reloaded"
        assert cert.served == renewed.cert_pem and cert.reloads == 1
        assert cert.renewals == 0  # cert-manager's Secret is never written
        assert not apiserver.calls("PATCH", "secrets")
    finally:
        await api.close()


async def test_an_expired_certificate_is_reported_not_served_silently(apiserver, tmp_path):
    expired = bundle(age_days=400)
    seed(apiserver, expired)
    api = KubeApi.from_url(apiserver.url)
    metrics = ForesizeMetrics()
    executor = KubeExecutor(api)
    # cert-manager owns it and did not renew it: nothing to renew here, so report.
    cert = manager(api, tmp_path, cert_manager=True, metrics=metrics, emit=executor.apply)
    try:
        await cert.start()
        assert await cert.check() == "expired"
        assert metrics.certificate_expiry._value.get() < 0
        await executor.events.flush()  # Events go out on their own task
        events = [
            r.body
            for r in apiserver.calls("POST", "/events$")
            if r.body["reason"] == "WebhookCertificateExpired"
        ]
        assert events and events[0]["involvedObject"]["kind"] == "Secret"
        assert events[0]["type"] == "Warning"
    finally:
        await api.close()


async def test_an_expired_self_managed_certificate_is_replaced_at_start(apiserver, tmp_path):
    expired = bundle(age_days=400)
    seed(apiserver, expired)
    api = KubeApi.from_url(apiserver.url)
    try:
        cert = manager(api, tmp_path)
        await cert.start()
        assert cert.renewals == 1 and cert.served == secret_cert(apiserver)
        assert cert.not_after > time.time() + 360 * DAY
    finally:
        await api.close()


async def test_the_private_key_is_on_disk_only_while_it_is_loaded(apiserver, tmp_path, monkeypatch):
    # ssl loads a key from a file alone: it is written 0600 into a 0700 folder, loaded, and
    # the folder removed, so that no exit of the process (even SIGKILL, or a hung
    # shutdown's forced exit) leaves the webhook's private key behind.
    from foresize.shells.webhook import certs

    seen: list[tuple[int, int, bytes]] = []
    load = certs.server_ssl_context

    def recording(cert_file, key_file):
        key = Path(key_file)
        modes = (key.parent.stat().st_mode & 0o777, key.stat().st_mode & 0o777)
        seen.append((*modes, key.read_bytes()))
        return load(cert_file, key_file)

    monkeypatch.setattr(certs, "server_ssl_context", recording)
    first = bundle(age_days=1)
    seed(apiserver, first)
    api = KubeApi.from_url(apiserver.url)
    cert = manager(api, tmp_path, cert_manager=True)
    umask = os.umask(0)  # the modes must not depend on a careful umask
    try:
        await cert.start()
        assert seen == [(0o700, 0o600, first.key_pem)]
        assert list(tmp_path.iterdir()) == []
        renewed = bundle(age_days=0)

        def rotate(secret: dict) -> None:
            secret["data"]["tls.crt"] = base64.b64encode(renewed.cert_pem).decode()
            secret["data"]["tls.key"] = base64.b64encode(renewed.key_pem).decode()

        apiserver.update("Secret", NS, "foresize-webhook-tls", rotate)
        assert await cert.check() == "reloaded"  # a reload writes and removes it again
        assert list(tmp_path.iterdir()) == []
    finally:
        os.umask(umask)
        await api.close()


async def test_a_pair_that_does_not_load_is_named_by_its_files_and_leaves_no_key(tmp_path):
    from foresize.core.errors import ForesizeError

    one, other = bundle(age_days=1), bundle(age_days=1)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(one.cert_pem)
    key.write_bytes(other.key_pem)  # not the certificate's key
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    loader = WebhookCertificate(None, cert_file=str(cert), key_file=str(key), scratch=scratch)
    with pytest.raises(ForesizeError) as error:
        await loader.start()
    # The user's files, not the copies loaded (gone already).
    assert str(error.value).startswith(f"{cert} / {key}: cannot load certificate and key")
    assert list(scratch.iterdir()) == []


def test_a_key_that_cannot_be_written_for_loading_is_one_line_naming_the_source(tmp_path):
    from foresize.core.errors import ForesizeError
    from foresize.shells.webhook.certs import load_pair

    pair = bundle(age_days=1)
    missing = tmp_path / "gone"
    with pytest.raises(ForesizeError) as error:
        load_pair(pair.cert_pem, pair.key_pem, source="--self-signed", scratch=missing)
    assert str(error.value).startswith(f"--self-signed: cannot write the key to {missing}")
    assert list(tmp_path.iterdir()) == []


async def test_a_renewal_the_api_server_refuses_keeps_the_valid_certificate_served(tmp_path):
    """kube.md N1: under roles without `patch` on the Secret (the shipped Role before the
    fix) the renewal at start is 403. The replica starts anyway and serves the current,
    still valid certificate, with an error and a Warning Event, instead of exiting (which
    made every replica crash-loop from day ~243)."""
    objects = operator_rbac(NS)
    for rule in next(o for o in objects if o["kind"] == "Role")["rules"]:
        if rule["resources"] == ["secrets"] and "patch" in rule["verbs"]:
            rule["verbs"].remove("patch")  # fewer rights than shipped, on purpose
    async with StrictApiServer(rbac=Rbac(objects)) as server:
        old = bundle(age_days=300)  # 65 of 365 days left: due for renewal
        seed(server, old)
        api = KubeApi.from_url(server.url)
        executor = KubeExecutor(api)
        cert = manager(api, tmp_path, emit=executor.apply)
        try:
            await cert.start()
            assert cert.served == old.cert_pem and cert.renewals == 0
            assert server.calls("PATCH", "/secrets/", code=403)
            assert await cert.check() == "renewal-refused"  # and again on every check
            await executor.events.flush()  # Events go out on their own task
            events = [
                r.body
                for r in server.calls("POST", "/events$")
                if r.body["reason"] == "WebhookCertificateRenewalFailed"
            ]
            assert events and events[0]["type"] == "Warning"
            assert "403" in events[0]["message"] and "65 days left" in events[0]["message"]
        finally:
            await api.close()
