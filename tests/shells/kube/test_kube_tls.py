"""The webhook certificate in-cluster, against the strict API server: create the shared
Secret, patch the caBundle into both webhook configurations, reuse a Secret another replica
created."""

from __future__ import annotations

import base64
import ssl

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.tls import webhook_ssl_context
from foresize.shells.webhook.certs import generate_self_signed, tls_secret
from foresize.shells.webhook.configurations import webhook_configurations
from foresize.testing.apiserver.server import OPERATOR_NAMESPACE

# The operator's namespace, where the shipped Role lets it keep its TLS Secret.
NS = OPERATOR_NAMESPACE
ADM = "/apis/admissionregistration.k8s.io/v1"


def configs(server) -> None:
    """The webhook configurations as the manifests install them (no caBundle yet), and the
    namespace."""
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for config in webhook_configurations(service="foresize-webhook", namespace=NS):
        server.seed(config)


async def serving_context(apiserver) -> ssl.SSLContext:
    """What a replica of the operator does at start: TLS from the shared Secret `foresize/
    foresize-webhook-tls`, the caBundle into the `foresize` configurations."""
    api = KubeApi.from_url(apiserver.url)
    try:
        return await webhook_ssl_context(
            api,
            namespace=NS,
            secret="foresize-webhook-tls",
            service="foresize-webhook",
            configuration="foresize",
            cert_manager=False,
        )
    finally:
        await api.close()


async def test_creates_secret_and_injects_ca_bundle(apiserver):
    configs(apiserver)
    ctx = await serving_context(apiserver)
    assert isinstance(ctx, ssl.SSLContext)
    (create,) = apiserver.calls("POST", f"^/api/v1/namespaces/{NS}/secrets$")
    assert create.code == 201 and create.content_type == "application/json"
    assert create.body["type"] == "kubernetes.io/tls"
    assert set(create.body["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca = create.body["data"]["ca.crt"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(ca)
    (mutating,) = apiserver.calls("PATCH", f"^{ADM}/mutatingwebhookconfigurations/foresize$")
    assert mutating.code == 200 and mutating.content_type == "application/json-patch+json"
    assert mutating.body == [
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": ca},
    ]
    (validating,) = apiserver.calls("PATCH", f"^{ADM}/validatingwebhookconfigurations/foresize$")
    assert validating.code == 200
    assert validating.body == [
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca}
    ]


async def test_reuses_the_secret_of_another_replica(apiserver):
    from foresize.bench.chaos import served_certificate
    from foresize.shells.webhook.server import AdmissionState, WebhookServer, create_app

    configs(apiserver)
    bundle = generate_self_signed(["foresize-webhook.fs.svc"])
    apiserver.seed(tls_secret(bundle, "foresize-webhook-tls", NS))
    ctx = await serving_context(apiserver)
    assert apiserver.calls("POST", "secrets") == []
    server = WebhookServer(create_app(AdmissionState()), host="127.0.0.1", port=0)
    server.ssl_context = ctx
    port = await server.start()
    try:  # the other replica's certificate is the one served
        assert await served_certificate(port) == ssl.PEM_cert_to_DER_cert(bundle.cert_pem.decode())
    finally:
        await server.stop()
    (mutating,) = apiserver.calls("PATCH", "mutatingwebhookconfigurations/foresize$")
    assert {op["value"] for op in mutating.body} == {bundle.secret_data()["ca.crt"]}


def test_kopf_logs_in_as_the_executor(tmp_path):
    """--kubeconfig/--context: Kopf gets the same server, CA, and user as lightkube."""
    from lightkube import KubeConfig

    from foresize.shells.kube.handlers import connection_from_lightkube

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
