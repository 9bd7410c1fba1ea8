"""`labelSelector` and `fieldSelector` query parameters, parsed and matched as the API
server does (`apimachinery/pkg/labels/selector.go`, `fields/selector.go`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Matcher = Callable[[dict[str, Any]], bool]


class SelectorError(ValueError):
    """An unparsable or unsupported selector (the API server answers 400)."""


_SET_RE = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _split_requirements(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in selector {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise SelectorError(f"unbalanced '(' in selector {text!r}")
    parts.append("".join(current))
    return [p for p in parts if p.strip()] if text.strip() else []


LabelTest = Callable[[dict[str, str]], bool]


def _label_in(key: str, values: set[str], *, negate: bool) -> LabelTest:
    """`key in (values)`, or `key notin (values)` (true for a missing key)."""

    def test(labels: dict[str, str]) -> bool:
        return (labels.get(key) in values) != negate

    return test


def _label_equals(key: str, value: str, *, negate: bool) -> LabelTest:
    """`key=value` (the label must exist), or `key!=value` (true for a missing key)."""

    def test(labels: dict[str, str]) -> bool:
        if negate:
            return labels.get(key) != value
        return key in labels and labels[key] == value

    return test


def _label_exists(key: str, *, negate: bool) -> LabelTest:
    """`key`, or `!key`."""

    def test(labels: dict[str, str]) -> bool:
        return (key in labels) != negate

    return test


def _field_equals(name: str, value: str, *, negate: bool) -> Callable[[dict[str, Any]], bool]:
    """`name=value` or `name!=value` over a field of the object."""

    def test(obj: dict[str, Any]) -> bool:
        return (_field_value(obj, name) == value) != negate

    return test


def label_matcher(text: str | None) -> Matcher:
    """A matcher over an object's `metadata.labels`."""
    tests: list[Callable[[dict[str, str]], bool]] = []
    for req in _split_requirements(text or ""):
        if m := _SET_RE.match(req):
            key, op, raw = m.groups()
            values = {v.strip() for v in raw.split(",") if v.strip()}
            tests.append(_label_in(key, values, negate=op == "notin"))
        elif m := _EQ_RE.match(req):
            key, op, value = m.groups()
            tests.append(_label_equals(key, value, negate=op == "!="))
        elif m := _EXISTS_RE.match(req):
            neg, key = m.groups()
            tests.append(_label_exists(key, negate=bool(neg)))
        else:
            raise SelectorError(f"unable to parse requirement {req.strip()!r}")

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in tests)

    return match


# Field labels each kind supports besides metadata.name / metadata.namespace
# (`pkg/registry/*/strategy.go` GetAttrs / AddFieldLabelConversionFunc).
FIELD_LABELS: dict[str, tuple[str, ...]] = {
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Node": ("spec.unschedulable",),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "Secret": ("type",),
    "Namespace": ("status.phase",),
    "ReplicaSet": ("status.replicas",),
}


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source":
        return str((obj.get("source") or {}).get("component") or "")
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def field_matcher(text: str | None, kind: str) -> Matcher:
    allowed = {"metadata.name", "metadata.namespace", *FIELD_LABELS.get(kind, ())}
    tests: list[Callable[[dict[str, Any]], bool]] = []
    for req in _split_requirements(text or ""):
        m = _EQ_RE.match(req)
        if not m:
            raise SelectorError(f"invalid field selector {req.strip()!r}")
        field, op, value = m.groups()
        if field not in allowed:
            raise SelectorError(f'field label not supported: "{field}"')
        tests.append(_field_equals(field, value, negate=op == "!="))

    def match(obj: dict[str, Any]) -> bool:
        return all(t(obj) for t in tests)

    return match
