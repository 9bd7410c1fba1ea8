"""Builders shared by the tests (moved out of test_manifests.py)."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from foresize.front.cli import app
from support.paths import ROOT

CHART = ROOT / "deploy" / "helm" / "foresize"


K8S_VERSIONS = ("1.33.0", "1.34.0", "1.35.0")


PROM_KINDS = {"PrometheusRule", "ServiceMonitor"}


HELM_ONLY_LABELS = ("app.kubernetes.io/managed-by", "helm.sh/chart")


# An image the user built and pushed (no Foresize image is published), tagged as the chart's
# appVersion so that the chart's default tag gives the same.
REPOSITORY = "registry.example.com/foresize"


IMAGE = f"{REPOSITORY}:{yaml.safe_load((CHART / 'Chart.yaml').read_text())['appVersion']}"


ALL = ("all", "--image", IMAGE)


def cli(*args: str) -> list[dict[str, Any]]:
    return copy.deepcopy(_cli(args))


@cache
def _cli(args: tuple[str, ...]) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, ["manifests", *args])
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.output) if d]


@cache
def _chart() -> Any:
    from helm_python import Chart

    return Chart.load(str(CHART))


def helm_render(
    values: dict[str, Any] | None = None, name: str = "foresize", ns: str = "foresize-system"
) -> list[dict[str, Any]]:
    # The image is required (none is published): the same one as `cli(*ALL)`'s.
    values = {"image": {"repository": REPOSITORY}, **(values or {})}
    rendered = _chart().render(values, name=name, namespace=ns, is_install=True)
    # As `helm template` does: NOTES.txt is shown to the user, not applied.
    assert "foresize/templates/NOTES.txt" in rendered
    return [
        d
        for path, text in rendered.items()
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]


def validate_all(docs: list[dict[str, Any]]) -> None:
    from cloudcoil.models.prometheus_operator.v1 import PrometheusRule, ServiceMonitor

    models = {"PrometheusRule": PrometheusRule, "ServiceMonitor": ServiceMonitor}
    for doc in docs:
        if doc["kind"] in PROM_KINDS:
            for version in K8S_VERSIONS:
                with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                    kubernetes_validate.validate(doc, version, strict=True)
            # Unknown fields are dropped by the model: a round trip must give the same object.
            model = models[doc["kind"]].model_validate(doc)
            assert model.model_dump(by_alias=True, exclude_none=True, mode="json") == doc
            continue
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def _strip_helm_labels(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "labels" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k not in HELM_ONLY_LABELS}
            out[key] = _strip_helm_labels(value)
        return out
    if isinstance(node, list):
        return [_strip_helm_labels(v) for v in node]
    return node


def _by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}
