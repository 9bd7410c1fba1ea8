"""Loading Foresize objects from plain dicts, with errors that name the field."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from foresize.core.api.cluster_policy import ClusterAIScalePolicy
from foresize.core.api.daemonset import DaemonSetAutoscaler
from foresize.core.api.fields import (
    AIScaleTargetKind,
    ClusterAIScalePolicyKind,
    ClusterAIScaleTemplateKind,
    DaemonSetAutoscalerKind,
    error_message,
)
from foresize.core.api.meta import APIObject
from foresize.core.api.target import AIScaleTarget
from foresize.core.api.template import ClusterAIScaleTemplate
from foresize.core.errors import ForesizeError

ForesizeObject = AIScaleTarget | DaemonSetAutoscaler | ClusterAIScaleTemplate | ClusterAIScalePolicy

KINDS: dict[str, type[ForesizeObject]] = {
    AIScaleTargetKind: AIScaleTarget,
    DaemonSetAutoscalerKind: DaemonSetAutoscaler,
    ClusterAIScaleTemplateKind: ClusterAIScaleTemplate,
    ClusterAIScalePolicyKind: ClusterAIScalePolicy,
}


def _loc_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        # pydantic adds union-branch / validator tags to the location; they are not fields.
        if "[" in part or part in ("int", "str", "float", "bool", "dict", "list"):
            continue
        out += f".{part}" if out else part
    return out


FIELD_PREFIX = re.compile(r"([A-Za-z_]\w*(?:\[\d+\])*(?:\.[A-Za-z_]\w*(?:\[\d+\])*)*): ")
"""A rule across fields (a model validator) names the field its error is about at the start
of its message (`upperbound: 1Mi is below lowerbound 1Gi`, relative to the model): the
error's path is then that field's, as for a check on the field itself."""


def error_path_and_message(error: ErrorDetails) -> tuple[str, str]:
    """Where one pydantic error is (`spec.vertical.containers[1].name`) and what it says."""
    path = _loc_path(tuple(error.get("loc", ())))
    message = error_message(error)
    field = FIELD_PREFIX.match(message) if error.get("type") == "value_error" else None
    if field is not None:
        inner = field[1]
        path = f"{path}{'' if not path or inner.startswith('[') else '.'}{inner}"
        message = message[field.end() :]
    return path, message


def format_validation_error(exc: ValidationError, source: str = "") -> str:
    """`source: path: problem` lines, one per pydantic error."""
    lines = []
    for error in exc.errors():
        path, message = error_path_and_message(error)
        parts = [p for p in (source, path) if p]
        lines.append(_printable(": ".join([*parts, message])))
    return "\n".join(lines)


def _printable(line: str) -> str:
    """`line` with control characters escaped and its length bounded: a field name or a
    value from a hostile file must not split one error into several lines or flood them."""
    if not line.isprintable():
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    return line if len(line) <= 400 else line[:397] + "..."


_ObjectT = TypeVar("_ObjectT", bound="APIObject")


def _parse(cls: type[_ObjectT], obj: object, source: str) -> _ObjectT:
    where = f"{source}: " if source else ""
    if not isinstance(obj, dict):
        raise ForesizeError(f"{where}expected a mapping (a {cls.KIND} object)")
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        raise ForesizeError(format_validation_error(exc, source)) from None


def parse_target(obj: dict[str, Any], source: str = "") -> AIScaleTarget:
    """Kubernetes JSON/YAML of an AIScaleTarget -> model; ForesizeError naming the
    source and field path on bad input."""
    return _parse(AIScaleTarget, obj, source)


def parse_daemonset_autoscaler(obj: dict[str, Any], source: str = "") -> DaemonSetAutoscaler:
    return _parse(DaemonSetAutoscaler, obj, source)


def parse_template(obj: dict[str, Any], source: str = "") -> ClusterAIScaleTemplate:
    return _parse(ClusterAIScaleTemplate, obj, source)


def parse_policy(obj: dict[str, Any], source: str = "") -> ClusterAIScalePolicy:
    return _parse(ClusterAIScalePolicy, obj, source)


def parse_object(obj: dict[str, Any], source: str = "") -> ForesizeObject:
    """Any Foresize object, dispatched on `kind`."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind not in KINDS:
        where = f"{source}: " if source else ""
        raise ForesizeError(f"{where}kind: must be one of {', '.join(KINDS)}, not {kind!r}")
    return _parse(KINDS[kind], obj, source)
