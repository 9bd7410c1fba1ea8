"""`foresize validate` and the policy hierarchy: a target may name a policy another file on
the same command line defines; an unknown name, a cycle and an unknown preset are errors
naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app

POLICIES = """\
apiVersion: foresize.io/v1
kind: ClusterAIScalePolicy
metadata: {name: team}
spec:
  preset: performance
"""

TARGET = """\
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: web}
  policy: team
"""


def run(*args: str):
    return CliRunner().invoke(app, ["validate", *args])


def errors(result) -> str:
    """The message the console script prints (the CLI raises it as a ForesizeError)."""
    assert isinstance(result.exception, ForesizeError), result.exception
    return str(result.exception)


def test_a_target_naming_a_policy_of_another_file_given_is_valid(tmp_path: Path):
    (tmp_path / "policies.yaml").write_text(POLICIES)
    (tmp_path / "target.yaml").write_text(TARGET)
    result = run(str(tmp_path / "target.yaml"), str(tmp_path / "policies.yaml"))
    assert result.exit_code == 0, result.output
    assert "2 Foresize objects valid" in result.output


def test_a_target_naming_a_policy_no_file_defines_is_an_error_naming_file_and_field(
    tmp_path: Path,
):
    path = tmp_path / "target.yaml"
    path.write_text(TARGET)
    message = errors(run(str(path)))
    assert (
        f"{path}:6: spec.policy: ClusterAIScalePolicy 'team' does not exist "
        "(not defined in any file given)"
    ) in message


def test_a_cycle_across_files_and_an_unknown_preset_are_errors(tmp_path: Path):
    a = tmp_path / "a.yaml"
    a.write_text(
        "apiVersion: foresize.io/v1\nkind: ClusterAIScalePolicy\nmetadata: {name: a}\n"
        "spec:\n  policy: b\n"
    )
    b = tmp_path / "b.yaml"
    b.write_text(
        "apiVersion: foresize.io/v1\nkind: ClusterAIScalePolicy\nmetadata: {name: b}\n"
        "spec:\n  policy: a\n  preset: cheap\n"
    )
    message = errors(run(str(a), str(b)))
    assert f"{b}:6: spec.preset: must be one of cost, balanced, performance, batch" in message
    # b does not parse, so a starts from a policy that is not defined.
    assert f"{a}:5: spec.policy: ClusterAIScalePolicy 'b' does not exist" in message
    b.write_text(b.read_text().replace("  preset: cheap\n", ""))
    message = errors(run(str(a), str(b)))
    assert f"{a}:5: spec.policy: cycle a -> b -> a" in message
    assert f"{b}:5: spec.policy: cycle b -> a -> b" in message


NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    foresize.io/policy: {name}
"""


def test_a_namespace_label_must_name_a_policy_of_the_files_given(tmp_path: Path):
    (tmp_path / "policies.yaml").write_text(POLICIES)
    ns = tmp_path / "ns.yaml"
    ns.write_text(NAMESPACE.format(name="team"))
    result = run(str(ns), str(tmp_path / "policies.yaml"))
    assert result.exit_code == 0, result.output
    assert "2 Foresize objects valid" in result.output
    ns.write_text(NAMESPACE.format(name="teem"))
    message = errors(run(str(ns), str(tmp_path / "policies.yaml")))
    assert (
        f"{ns}:6: metadata.labels.foresize.io/policy: ClusterAIScalePolicy 'teem' does not "
        "exist (not defined in any file given)"
    ) in message
    # A Namespace without the label is another document: skipped, as before.
    ns.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: plain}\n")
    result = run(str(ns), str(tmp_path / "policies.yaml"))
    assert result.exit_code == 0, result.output
    assert "1 Foresize objects valid" in result.output
