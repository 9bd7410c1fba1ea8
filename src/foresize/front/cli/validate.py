"""`foresize validate FILE...`: check Foresize objects in YAML files offline, with the API
models and the names the API server would accept; each error names file, line and field."""

from __future__ import annotations

import re
from typing import Any

import typer

from foresize.core.api.duration import shown
from foresize.core.api.names import dns_label_error, dns_subdomain_error

CLUSTER_SCOPED_KINDS = ("ClusterAIScaleTemplate", "ClusterAIScalePolicy")


def name_errors(obj: dict[str, Any]) -> list[str]:
    """`metadata.name` and `metadata.namespace` the API server would refuse: a custom
    resource's name is an RFC 1123 subdomain, its namespace an RFC 1123 label. (The models
    do not check names: objects read from a cluster were named by its API server.)"""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []  # the models name a missing or non-map metadata
    problems = []
    name = meta.get("name")
    if name in (None, "") and not meta.get("generateName"):
        problems.append("metadata.name: required (the API server refuses an object without one)")
    elif isinstance(name, str):
        why = dns_subdomain_error(name)
        if why:
            problems.append(f"metadata.name: {shown(name)} is not a valid name: {why}")
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace and obj.get("kind") not in CLUSTER_SCOPED_KINDS:
        why = dns_label_error(namespace)
        if why:
            problems.append(
                f"metadata.namespace: {shown(namespace)} is not a valid namespace: {why}"
            )
    return problems


def validate_files(paths: list[str]) -> tuple[int, int, list[str]]:
    """Check every Foresize object (apiVersion foresize.io/...) in the YAML files with the
    API models. Returns (objects checked, other documents skipped, errors); each error
    names the file, the line of the field (of its nearest written parent when the field is
    missing; of the document for an error about the whole object), and the field."""
    from foresize.adapters.files import iter_documents_with_lines, read_text
    from foresize.adapters.timezones import SYSTEM_ZONES
    from foresize.core.admission.validate import window_errors
    from foresize.core.api.types import GROUP, ClusterAIScalePolicy, parse_object
    from foresize.core.cluster.policies import PolicyIndex
    from foresize.core.errors import ForesizeError

    checked = skipped = 0
    errors: list[str] = []
    # Every object first: a target may name a policy another file on the command line
    # defines, so the names are checked once all files are read.
    found: list[tuple[str, Any, dict[str, int], list[str], bool]] = []
    policies: list[Any] = []
    for path in paths:
        try:
            text = read_text(path)
            for _, obj, lines in iter_documents_with_lines(text, path):
                api_version = obj.get("apiVersion", "") if isinstance(obj, dict) else ""
                if _labelled_namespace(obj):
                    # Its label names a policy: checked with the targets' references.
                    checked += 1
                    found.append((path, obj, lines, [], True))
                    continue
                if not str(api_version).startswith(f"{GROUP}/"):
                    skipped += obj is not None
                    continue
                checked += 1
                problems = name_errors(obj)
                valid = False
                try:
                    parsed = parse_object(obj)
                    valid = True
                    problems += window_errors(obj, SYSTEM_ZONES)
                    if isinstance(parsed, ClusterAIScalePolicy):
                        policies.append(parsed)
                except ForesizeError as exc:
                    problems += str(exc).splitlines()
                    # A schedule out of range is the windows' to say (the model checks its
                    # shape alone): said beside whatever else the model refused.
                    problems += [p for p in window_errors(obj, SYSTEM_ZONES) if p not in problems]
                found.append((path, obj, lines, problems, valid))
        except ForesizeError as exc:  # unreadable file or bad YAML: one line, next file
            errors.append(str(exc))
    index = PolicyIndex.build(policies)
    for path, obj, lines, problems, valid in found:
        if valid:
            problems += policy_reference_errors(obj, index)
        errors.extend(f"{path}:{_problem_line(lines, p)}: {p}" for p in problems)
    return checked, skipped, errors


def policy_reference_errors(obj: dict[str, Any], index: Any) -> list[str]:
    """The policies a valid object names in `spec.policy` (a target, a policy, a template's
    target) or a Namespace in its `foresize.io/policy` label are defined in the files
    given, with no cycle and no chain longer than the operator applies (the webhook's
    rules, `core.admission.validate`)."""
    from foresize.core.admission.validate import named_policy_errors, policy_chain_errors

    kind = obj.get("kind")
    if kind == "Namespace":
        problems = namespace_label_errors(obj, index)
    elif kind == "ClusterAIScalePolicy":
        problems = policy_chain_errors(obj, index)
    elif kind == "AIScaleTarget":
        problems = named_policy_errors(obj, index)
    elif kind == "ClusterAIScaleTemplate":
        inner = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        problems = [f"spec.template.{p}" for p in named_policy_errors({"spec": inner}, index)]
    else:
        problems = []
    where = " (not defined in any file given)"
    return [p + where if "does not exist" in p else p for p in problems]


def _labelled_namespace(obj: object) -> bool:
    from foresize.core.api.cluster_policy import POLICY_LABEL

    if not isinstance(obj, dict) or obj.get("kind") != "Namespace" or obj.get("apiVersion") != "v1":
        return False
    labels = (
        (obj.get("metadata") or {}).get("labels") if isinstance(obj.get("metadata"), dict) else None
    )
    return isinstance(labels, dict) and POLICY_LABEL in labels


def namespace_label_errors(obj: dict[str, Any], index: Any) -> list[str]:
    """A Namespace's `foresize.io/policy` label names a policy the files define, whose chain
    the operator can apply (else its targets fall back to the cluster default)."""
    from foresize.core.api.cluster_policy import POLICY_LABEL
    from foresize.core.cluster.policies import Problem, policy_layers

    field = f"metadata.labels.{POLICY_LABEL}"
    named = obj["metadata"]["labels"][POLICY_LABEL]
    if not isinstance(named, str) or not named:
        return [f"{field}: a policy name (a string), not {named!r}"]
    found = policy_layers(named, index, "namespace", named_by=f"{field}: ")
    if not isinstance(found, Problem):
        return []
    message = found.message
    return [message if message.startswith(f"{field}: ") else f"{field}: {message}"]


# "spec.vertical.containers[0].cpu: ..." - a problem that starts with the field it is about.
_FIELD_PROBLEM = re.compile(r"^([A-Za-z_][\w-]*(?:\.[\w/-]+|\[\d+\])*): ")


def _problem_line(lines: dict[str, int], problem: str) -> int:
    from foresize.adapters.files import field_line

    m = _FIELD_PROBLEM.match(problem)
    return field_line(lines, m[1] if m else "")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        files: list[str] = typer.Argument(..., help="YAML files with Foresize objects."),
    ) -> None:
        """Check AIScaleTargets, DaemonSetAutoscalers, ClusterAIScaleTemplates and
        ClusterAIScalePolicies in YAML files offline: the same defaults and rules as the
        CRDs and the validating webhook; a policy named in `spec.policy` or a Namespace's
        `foresize.io/policy` label must be defined in one of the files given. Errors name
        file, line and field. Other documents are skipped."""
        from foresize.core.errors import ForesizeError

        checked, skipped, errors = validate_files(files)
        if errors:
            raise ForesizeError("\n".join(errors))
        if checked == 0:
            raise ForesizeError(f"no Foresize objects found in {', '.join(files)}")
        note = f" ({skipped} other documents skipped)" if skipped else ""
        typer.echo(f"{checked} Foresize objects valid{note}")
