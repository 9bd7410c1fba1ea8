"""The optional NetworkPolicy: `foresize manifests networkpolicy` and the chart's
`networkPolicy.enabled` give the same object, admitting only the webhook port (from the
API server) and the metrics port (from the monitoring namespace) of the operator pods."""

from __future__ import annotations

from support.manifests import (
    ALL,
    IMAGE,
    _by_key,
    _strip_helm_labels,
    cli,
    helm_render,
    validate_all,
)


def _policy(docs):
    return [d for d in docs if d["kind"] == "NetworkPolicy"]


def test_the_policy_is_valid_and_not_part_of_all():
    (policy,) = cli("networkpolicy")
    validate_all([policy])
    assert _policy(cli(*ALL)) == []


def test_it_admits_exactly_the_operator_ports_and_metrics_from_monitoring_only():
    (policy,) = cli("networkpolicy")
    deployment = _by_key(cli("operator", "--image", IMAGE))[("StatefulSet", "foresize")]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]  # egress (the API server) untouched
    assert spec["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    webhook, metrics = spec["ingress"]
    assert webhook == {"ports": [{"protocol": "TCP", "port": ports["webhook"]}]}
    assert metrics["ports"] == [{"protocol": "TCP", "port": ports["metrics"]}]
    assert metrics["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def test_the_chart_renders_it_only_when_enabled_and_equal_to_the_cli():
    assert _policy(helm_render()) == []
    rendered = _policy(helm_render({"networkPolicy": {"enabled": True}}))
    validate_all(rendered)
    assert _strip_helm_labels(rendered) == cli("networkpolicy")


def test_the_chart_narrows_the_webhook_port_to_given_sources():
    peers = [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    values = {"networkPolicy": {"enabled": True, "webhookFrom": peers}}
    (policy,) = _policy(helm_render(values))
    validate_all([policy])
    assert policy["spec"]["ingress"][0]["from"] == peers
