"""`foresize webhook --state` and the policy hierarchy: ClusterAIScalePolicies and
Namespaces in the state file make the index hold the targets' effective spec (a pod is
admitted at the size the policy in force gives it, as the operator's pass would size it),
the validating webhook checks policy names against the file's policies, and a Namespace
whose labels are not strings is an error naming the document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from foresize.core.admission.review import review_pod, review_target
from foresize.core.errors import ForesizeError
from foresize.shells.webhook.state_file import load_state_file
from support.admission import SUG, apply_patch, decode_patch, pod_json, review, target_manifest

FLOOR = {"vertical": {"containers": [{"name": "*", "cpu": {"lowerbound": "400m"}}]}}


def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScalePolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def namespace(name: str, labels: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def admitted_cpu(tmp_path: Path, *docs: dict[str, Any]) -> str:
    """The CPU request of a new pod of the autonomous target (suggestion 250m, no bounds of
    its own: the levels above show through) the webhook serving this state file admits."""
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([target_manifest(suggestion=SUG, containers=[]), *docs]))
    pod = pod_json()
    patch = decode_patch(review_pod(review(pod), load_state_file(path), 0.0))
    assert patch is not None
    return apply_patch(pod, patch)["spec"]["containers"][0]["resources"]["requests"]["cpu"]


def test_the_cluster_default_policy_s_floor_raises_the_admitted_request(tmp_path: Path):
    assert admitted_cpu(tmp_path) == "250m"
    assert admitted_cpu(tmp_path, policy("default", FLOOR)) == "400m"


def test_a_namespace_label_picks_the_policy_the_pod_is_admitted_under(tmp_path: Path):
    team = policy("team", FLOOR)
    assert admitted_cpu(tmp_path, team) == "250m"  # defined, but nothing picks it
    labelled = namespace("shop", {"foresize.io/policy": "team"})
    assert admitted_cpu(tmp_path, team, labelled) == "400m"


def test_the_validating_webhook_checks_policy_names_against_the_file(tmp_path: Path):
    path = tmp_path / "state.yaml"
    named = target_manifest(name="api", ref="api")
    named["spec"]["policy"] = "fast"
    body = review(named, kind="AIScaleTarget", group="foresize.io", resource="aiscaletargets")
    # No policy in the file: the cluster's are not known, no name is checked.
    path.write_text(yaml.safe_dump_all([target_manifest()]))
    assert review_target(body, load_state_file(path), 0.0)["response"]["allowed"] is True
    path.write_text(yaml.safe_dump_all([target_manifest(), policy("default", FLOOR)]))
    answer = review_target(body, load_state_file(path), 0.0)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"] == "spec.policy: ClusterAIScalePolicy 'fast' does not exist"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (namespace("shop", ["a"]), "Namespace shop: metadata.labels: a mapping of strings"),
        (namespace("shop", {"foresize.io/policy": 3}), "metadata.labels: a mapping of strings"),
        ({"kind": "Namespace", "metadata": {}}, "Namespace: metadata.name: a name is required"),
        (policy("team", {"preset": "cheap"}), "spec.preset"),
    ],
)
def test_bad_hierarchy_documents_are_errors_naming_the_document(
    tmp_path: Path, doc: dict[str, Any], message: str
):
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([target_manifest(), doc]))
    with pytest.raises(ForesizeError, match="document 2") as raised:
        load_state_file(path)
    assert message in str(raised.value)
