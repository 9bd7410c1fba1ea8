"""The webhook certificate in-cluster, against kmock: create the shared Secret, patch the
caBundle into both webhook configurations, reuse a Secret another replica created."""

from __future__ import annotations

import base64
import ssl

import kmock

from foresize.kube.api import KubeApi
from foresize.kube.tls import webhook_ssl_context
from foresize.webhook.certs import generate_self_signed

R = kmock.resource
ADM = "/apis/admissionregistration.k8s.io/v1"


def configs(handler) -> None:
    hook = {"clientConfig": {"service": {"name": "foresize-webhook", "namespace": "fs"}}}
    handler.objects[
        R("admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"), None, "foresize"
    ] = {
        "metadata": {"name": "foresize"},
        "webhooks": [{"name": "pods.foresize.io", **hook}, {"name": "scale.foresize.io", **hook}],
    }
    handler.objects[
        R("admissionregistration.k8s.io/v1/validatingwebhookconfigurations"), None, "foresize"
    ] = {
        "metadata": {"name": "foresize"},
        "webhooks": [{"name": "aiscaletargets.foresize.io", **hook}],
    }


async def test_creates_secret_and_injects_ca_bundle(kmock, tmp_path):
    configs(kmock)
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        ctx = await webhook_ssl_context(
            api,
            namespace="fs",
            secret="foresize-webhook-tls",
            service="foresize-webhook",
            configuration="foresize",
            cert_manager=False,
            workdir=tmp_path,
        )
    finally:
        await api.close()
    assert isinstance(ctx, ssl.SSLContext)
    (create,) = [r for r in kmock["post"] if r.url.path == "/api/v1/namespaces/fs/secrets"]
    assert create.headers["Content-Type"] == "application/json"
    assert create.data["type"] == "kubernetes.io/tls"
    assert set(create.data["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca = create.data["data"]["ca.crt"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(ca)
    (mutating,) = [
        r for r in kmock["patch"] if r.url.path == f"{ADM}/mutatingwebhookconfigurations/foresize"
    ]
    assert mutating.headers["Content-Type"] == "application/json-patch+json"
    assert mutating.data == [
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": ca},
    ]
    (validating,) = [
        r for r in kmock["patch"] if r.url.path == f"{ADM}/validatingwebhookconfigurations/foresize"
    ]
    assert validating.data == [
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca}
    ]


async def test_reuses_the_secret_of_another_replica(kmock, tmp_path):
    configs(kmock)
    bundle = generate_self_signed(["foresize-webhook.fs.svc"])
    data = {
        "ca.crt": base64.b64encode(bundle.ca_pem).decode(),
        "tls.crt": base64.b64encode(bundle.cert_pem).decode(),
        "tls.key": base64.b64encode(bundle.key_pem).decode(),
    }
    kmock.objects[R("v1/secrets"), "fs", "foresize-webhook-tls"] = {
        "metadata": {"name": "foresize-webhook-tls", "namespace": "fs"},
        "data": data,
    }
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        await webhook_ssl_context(
            api,
            namespace="fs",
            secret="foresize-webhook-tls",
            service="foresize-webhook",
            configuration="foresize",
            cert_manager=False,
            workdir=tmp_path,
        )
    finally:
        await api.close()
    assert [r for r in kmock["post"] if "secrets" in r.url.path] == []
    assert (tmp_path / "tls.crt").read_bytes() == bundle.cert_pem
    (mutating,) = [
        r for r in kmock["patch"] if r.url.path.endswith("mutatingwebhookconfigurations/foresize")
    ]
    assert {op["value"] for op in mutating.data} == {data["ca.crt"]}


def test_kopf_logs_in_as_the_executor(tmp_path):
    """--kubeconfig/--context: Kopf gets the same server, CA, and user as lightkube."""
    from lightkube import KubeConfig

    from foresize.kube.handlers import connection_from_lightkube

    ca = tmp_path / "ca.crt"
    ca.write_text("CA")
    token = tmp_path / "token"
    token.write_text("tok-1\n")
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {{server: "https://a.example:6443", certificate-authority: {ca}}}
- name: c2
  cluster: {{server: "https://b.example:6443", insecure-skip-tls-verify: true}}
users:
- name: u1
  user: {{tokenFile: {token}}}
- name: u2
  user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: aws}}}}
contexts:
- name: one
  context: {{cluster: c1, user: u1, namespace: shop}}
- name: two
  context: {{cluster: c2, user: u2}}
current-context: two
"""
    )
    config = KubeConfig.from_file(kubeconfig).get(context_name="one")
    info = connection_from_lightkube(config)
    assert info.server == "https://a.example:6443"
    assert str(info.ca_path) == str(ca) and info.token == "tok-1" and info.scheme == "Bearer"
    assert info.default_namespace == "shop"
    token.write_text("tok-2\n")  # rotated by the kubelet: the next login reads it again
    assert connection_from_lightkube(config).token == "tok-2"
    # An exec-plugin user is left to Kopf's own kubeconfig login.
    assert (
        connection_from_lightkube(KubeConfig.from_file(kubeconfig).get(context_name="two")) is None
    )
