"""`foresize validate FILE...`: check Foresize objects in YAML files offline, with the API
models and the names the API server would accept; each error names file, line and field."""

from __future__ import annotations

import re
from typing import Any

import typer

from foresize.core.api.duration import shown
from foresize.core.api.names import dns_label_error, dns_subdomain_error

CLUSTER_SCOPED_KINDS = ("ClusterAIScaleTemplate",)


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
    from foresize.core.api.types import GROUP, parse_object
    from foresize.core.errors import ForesizeError

    checked = skipped = 0
    errors: list[str] = []
    for path in paths:
        try:
            text = read_text(path)
            for _, obj, lines in iter_documents_with_lines(text, path):
                api_version = obj.get("apiVersion", "") if isinstance(obj, dict) else ""
                if not str(api_version).startswith(f"{GROUP}/"):
                    skipped += obj is not None
                    continue
                checked += 1
                problems = name_errors(obj)
                try:
                    parse_object(obj)
                    if obj.get("kind") == "AIScaleTarget":
                        problems += window_errors(obj, SYSTEM_ZONES)
                except ForesizeError as exc:
                    problems += str(exc).splitlines()
                errors.extend(f"{path}:{_problem_line(lines, p)}: {p}" for p in problems)
        except ForesizeError as exc:  # unreadable file or bad YAML: one line, next file
            errors.append(str(exc))
    return checked, skipped, errors


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
        """Check AIScaleTargets, DaemonSetAutoscalers and ClusterAIScaleTemplates in YAML
        files offline: the same defaults and rules as the CRDs; errors name file, line and
        field. Other documents are skipped."""
        from foresize.core.errors import ForesizeError

        checked, skipped, errors = validate_files(files)
        if errors:
            raise ForesizeError("\n".join(errors))
        if checked == 0:
            raise ForesizeError(f"no Foresize objects found in {', '.join(files)}")
        note = f" ({skipped} other documents skipped)" if skipped else ""
        typer.echo(f"{checked} Foresize objects valid{note}")
