"""`foresize webhook --state` and the policy hierarchy: ClusterAIScalePolicies and
Namespaces in the state file make the index hold the targets' effective spec (a pod is
admitted at the size the policy in force gives it, as the operator's pass would size it),
the validating webhook checks policy names against the file's policies, and a Namespace
whose labels are not strings is an error naming the document; hostile policy and Namespace
documents are read or refused, a line a problem naming file and document (fuzzed: the file
crosses a trust boundary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


JUNK: Any = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
POLICY_NAMES = st.sampled_from(["default", "team", "missing", "", "Bad_Name", "x" * 300])
SPECS = st.fixed_dictionaries(
    {},
    optional={
        "preset": st.sampled_from(["cost", "performance", "cheap", 3]),
        "policy": POLICY_NAMES,
        "vertical": st.fixed_dictionaries(
            {"containers": st.lists(st.fixed_dictionaries({"name": st.just("*"), "cpu": JUNK}))}
        )
        | JUNK,
    },
)
LABELS = st.dictionaries(
    st.sampled_from(["foresize.io/policy", "team", ""]), POLICY_NAMES | JUNK, max_size=2
)


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    specs=st.lists(st.tuples(POLICY_NAMES, SPECS | JUNK), max_size=3),
    labels=LABELS | JUNK,
)
def test_hostile_policies_and_namespaces_are_read_or_refused_naming_the_document(
    tmp_path: Path, specs: list[tuple[str, Any]], labels: Any
):
    path = tmp_path / "state.json"
    docs = [target_manifest(suggestion=SUG, containers=[]), namespace("shop", labels)]
    docs += [policy(name, spec) for name, spec in specs]
    path.write_text(json.dumps(docs))
    try:
        index = load_state_file(path)
    except ForesizeError as exc:
        # One line a problem, each naming the file and the document (never a traceback).
        lines = str(exc).splitlines()
        assert lines and all(line.startswith(f"{path} (document ") for line in lines), lines
        return
    answer = review_pod(review(pod_json()), index, 0.0)["response"]
    assert answer["allowed"] is True  # the pod webhook never blocks a pod
