"""What the strict API server checks on every write, before it stores anything.

- Custom resources: the CRD's structural openAPIV3Schema as the API server applies it —
  nulls dropped where the schema is not `nullable`, defaults filled in, then types,
  formats (`date-time`, `date`, `duration`, `byte`), patterns, enums and bounds, list
  types `map`/`set`, and finally the CEL rules (`x-kubernetes-validations`, evaluated with
  cel-expr-python, the CEL reference runtime).
- Built-in kinds: the Kubernetes 1.34 OpenAPI schema (kubernetes-validate's copy), plus
  the semantic rules of `pkg/apis/core/validation` that Foresize's calls can run into
  (names, labels, containers and images, quantities, requests <= limits, selectors that
  match their template, PDB budgets, Event namespaces).
- Fields no schema declares are refused (as with `fieldValidation=Strict`): the API
  server's default would drop them silently, which hides the same bug.

Validators are built once per kind and cached: a write costs a few milliseconds.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any

from foresize.core.api.names import dns_label_error, dns_subdomain_error

SCHEMA_VERSION = "1.34.0"  # the Kubernetes release whose built-in schemas are checked


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    reason: str  # StatusCause type: FieldValueInvalid, FieldValueRequired, ...
    message: str

    def text(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ValidationFailed(Exception):
    """The object is invalid (422), or has undeclared or undecodable fields (400, `unknown`)."""

    def __init__(self, errors: list[FieldError], *, unknown: bool = False) -> None:
        super().__init__("; ".join(e.text() for e in errors))
        self.errors = errors
        self.unknown = unknown


def need_module(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RuntimeError(
            f"the strict API server needs {module!r}: pip install 'foresize[testing]'"
        ) from exc


# ------------------------------------------------------------------------- formats
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DURATION = re.compile(r"^(\d+(\.\d+)?\s*(ns|us|µs|ms|s|m|h|d|w)\s*)+$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def is_date_time(value: str) -> bool:
    """RFC 3339 date-time with a zone, as go-openapi's strfmt checks `date-time`."""
    m = _DATE_TIME.match(value)
    if not m:
        return False
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    try:
        dt.datetime(y, mo, d, h, mi, min(s, 59))
    except ValueError:
        return False
    return s <= 60


def format_checker() -> Any:
    jsonschema = need_module("jsonschema")
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time")(lambda v: not isinstance(v, str) or is_date_time(v))

    def date(v: Any) -> bool:
        if not isinstance(v, str):
            return True
        m = _DATE.match(v)
        if not m:
            return False
        try:
            dt.date(*(int(x) for x in m.groups()))
        except ValueError:
            return False
        return True

    checker.checks("date")(date)
    checker.checks("duration")(lambda v: not isinstance(v, str) or bool(_DURATION.match(v)))
    checker.checks("byte")(
        lambda v: not isinstance(v, str) or (len(v) % 4 == 0 and bool(_BASE64.match(v)))
    )
    return checker


# ------------------------------------------------------------------- quantities
_QUANTITY = re.compile(
    r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}


def quantity_value(value: Any) -> Decimal | None:
    """The amount of a Kubernetes quantity, or None when it is not one (the grammar of
    `apimachinery/pkg/api/resource/quantity.go`; a JSON number is accepted as it is)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str) or len(value) > 64:
        return None
    m = _QUANTITY.match(value)
    if not m:
        return None
    sign, number, suffix = m.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation:
        return None
    suffix = suffix or ""
    scale = Decimal(10) ** int(suffix[1:]) if suffix[:1] in ("e", "E") else _SUFFIX[suffix]
    return (-amount if sign == "-" else amount) * scale


# ------------------------------------------------------------------ names, labels
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def qualified_name_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or dns_subdomain_error(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (max 63 characters)"
        )
    return None


def label_value_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if value and (len(value) > 63 or not _QUALIFIED_NAME.match(value)):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return None


# Kinds whose names are RFC 1123 labels rather than subdomains.
_LABEL_NAMED = {"Namespace", "Service"}


def metadata_errors(kind: str, obj: dict[str, Any], *, creating: bool) -> list[FieldError]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [FieldError("metadata", "FieldValueRequired", "Required value")]
    errors: list[FieldError] = []
    name = meta.get("name")
    if not name and not (creating and meta.get("generateName")):
        errors.append(FieldError("metadata.name", "FieldValueRequired", "Required value: name"))
    elif name:
        why = dns_label_error(name) if kind in _LABEL_NAMED else dns_subdomain_error(name)
        if why:
            errors.append(FieldError("metadata.name", "FieldValueInvalid", f"{name!r}: {why}"))
    for field, check_value in (("labels", True), ("annotations", False)):
        entries = meta.get(field) or {}
        if not isinstance(entries, dict):
            errors.append(FieldError(f"metadata.{field}", "FieldValueInvalid", "must be a map"))
            continue
        for key, value in entries.items():
            why = qualified_name_error(key)
            if why:
                errors.append(
                    FieldError(f"metadata.{field}", "FieldValueInvalid", f"{key!r}: {why}")
                )
            if check_value:
                why = label_value_error(value)
                if why:
                    errors.append(
                        FieldError(
                            f"metadata.labels.{key}", "FieldValueInvalid", f"{value!r}: {why}"
                        )
                    )
            elif not isinstance(value, str):
                errors.append(
                    FieldError(
                        f"metadata.annotations.{key}", "FieldValueTypeInvalid", "must be a string"
                    )
                )
    for i, fin in enumerate(meta.get("finalizers") or []):
        why = qualified_name_error(fin) if isinstance(fin, str) else "must be a string"
        if why:
            errors.append(FieldError(f"metadata.finalizers[{i}]", "FieldValueInvalid", why))
    return errors


def dotted_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def join_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ------------------------------------------------------------------- built-in kinds
@cache
def _definitions() -> Any:
    import json

    files = need_module("importlib.resources").files("kubernetes_validate")
    need_module("kubernetes_validate")
    base = files / "kubernetes-json-schema" / f"v{SCHEMA_VERSION}-local-strict"
    return base, json.loads((base / "_definitions.json").read_text())


@cache
def builtin_validator(api_version: str, kind: str) -> Any:
    """A cached validator for the kind's 1.34 schema, or None when it has none."""
    import json

    jsonschema = need_module("jsonschema")
    referencing = need_module("referencing")
    base, definitions = _definitions()
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = base / f"{kind.lower()}-{group_version}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    registry = referencing.Registry().with_resources(
        [
            (schema.get("$id", ""), referencing.Resource.from_contents(schema)),
            (definitions["$id"], referencing.Resource.from_contents(definitions)),
        ]
    )
    return jsonschema.Draft202012Validator(
        schema, registry=registry, format_checker=format_checker()
    )


def builtin_errors(obj: dict[str, Any]) -> tuple[list[FieldError], list[FieldError]]:
    """(schema errors, undeclared fields) of a built-in object."""
    validator = builtin_validator(str(obj.get("apiVersion")), str(obj.get("kind")))
    if validator is None:
        return [], []
    errors: list[FieldError] = []
    unknown: list[FieldError] = []
    for error in validator.iter_errors(obj):
        path = dotted_path(error.absolute_path)
        if error.validator == "additionalProperties":
            for extra in re.findall(r"'([^']+)'", error.message.split(" were unexpected")[0]):
                field = join_path(path, extra)
                unknown.append(FieldError(field, "FieldValueInvalid", f'unknown field "{field}"'))
            continue
        if error.validator == "oneOf" and error.context:
            # int-or-string, quantity: report the branch's own complaint
            error = min(error.context, key=lambda e: len(e.message))
        reason = "FieldValueTypeInvalid" if error.validator == "type" else "FieldValueInvalid"
        if error.validator == "required":
            reason = "FieldValueRequired"
        errors.append(FieldError(path, reason, f"Invalid value: {error.message}"))
    return errors, unknown


def _container_errors(spec: dict[str, Any], base: str) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        return [FieldError(f"{base}.containers", "FieldValueRequired", "Required value")]
    seen: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            where = f"{base}.{field}[{i}]"
            name = c.get("name") or ""
            why = dns_label_error(name) if name else "Required value"
            if why:
                errors.append(FieldError(f"{where}.name", "FieldValueInvalid", why))
            elif name in seen:
                errors.append(
                    FieldError(f"{where}.name", "FieldValueDuplicate", f"Duplicate value: {name!r}")
                )
            seen.add(name)
            if not c.get("image"):
                errors.append(FieldError(f"{where}.image", "FieldValueRequired", "Required value"))
            errors += resources_errors(c.get("resources") or {}, f"{where}.resources")
    return errors


def resources_errors(resources: dict[str, Any], where: str) -> list[FieldError]:
    errors: list[FieldError] = []
    amounts: dict[str, dict[str, Decimal]] = {}
    for section in ("requests", "limits"):
        for name, raw in (resources.get(section) or {}).items():
            value = quantity_value(raw)
            if value is None:
                errors.append(
                    FieldError(
                        f"{where}.{section}.{name}",
                        "FieldValueInvalid",
                        f"Invalid value: {raw!r}: quantities must match the regular expression "
                        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    )
                )
                continue
            if value < 0:
                errors.append(
                    FieldError(
                        f"{where}.{section}.{name}",
                        "FieldValueInvalid",
                        f"Invalid value: {raw!r}: must be greater than or equal to 0",
                    )
                )
            amounts.setdefault(section, {})[name] = value
    for name, request in (amounts.get("requests") or {}).items():
        limit = (amounts.get("limits") or {}).get(name)
        if limit is not None and request > limit:
            errors.append(
                FieldError(
                    f"{where}.requests",
                    "FieldValueInvalid",
                    f"Invalid value: {resources['requests'][name]!r}: must be less than or "
                    f"equal to {name} limit of {resources['limits'][name]}",
                )
            )
    return errors


def label_selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}


def semantic_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The rules of `pkg/apis/*/validation` the schema alone does not carry."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    errors: list[FieldError] = []
    if kind == "Pod":
        errors += _container_errors(spec, "spec")
    elif kind in _WORKLOADS:
        selector = spec.get("selector")
        template = spec.get("template")
        if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
            errors.append(FieldError("spec.selector", "FieldValueRequired", "Required value"))
        if not isinstance(template, dict):
            errors.append(FieldError("spec.template", "FieldValueRequired", "Required value"))
        else:
            labels = (template.get("metadata") or {}).get("labels") or {}
            if selector and not label_selector_matches(selector, labels):
                errors.append(
                    FieldError(
                        "spec.template.metadata.labels",
                        "FieldValueInvalid",
                        f"Invalid value: {labels!r}: `selector` does not match template `labels`",
                    )
                )
            errors += _container_errors(template.get("spec") or {}, "spec.template.spec")
        if isinstance(spec.get("replicas"), int) and spec["replicas"] < 0:
            errors.append(
                FieldError(
                    "spec.replicas", "FieldValueInvalid", "must be greater than or equal to 0"
                )
            )
    elif kind == "PriorityClass":
        from foresize.testing.apiserver.scheduling import priority_class_errors

        errors += priority_class_errors(obj)
    elif kind == "PodDisruptionBudget":
        if "minAvailable" in spec and "maxUnavailable" in spec:
            errors.append(
                FieldError(
                    "spec",
                    "FieldValueInvalid",
                    "minAvailable and maxUnavailable cannot be both set",
                )
            )
    elif kind == "Event":
        # legacyValidateEvent (a core/v1 Event without eventTime): the event lives in its
        # object's namespace, and an event about a cluster-scoped object in "default".
        involved_ns = (obj.get("involvedObject") or {}).get("namespace") or ""
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        agree = ns == involved_ns if involved_ns else ns in ("", "default")
        if obj.get("eventTime") is None and not agree:
            errors.append(
                FieldError(
                    "involvedObject.namespace",
                    "FieldValueInvalid",
                    f"Invalid value: {involved_ns!r}: does not match event.namespace",
                )
            )
    return errors


# metav1.MicroTime fields: decoded with time.Parse(RFC3339Micro), which needs exactly six
# fractional digits; the API server answers 400 to anything else (a whole-second time
# included), while the OpenAPI schema calls them plain `date-time`.
_MICRO_TIME_FIELDS = {
    "Lease": (("spec", "acquireTime"), ("spec", "renewTime")),
    "Event": (("eventTime",), ("series", "lastObservedTime")),
}
_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def micro_time_errors(obj: dict[str, Any]) -> list[FieldError]:
    """MicroTime fields the API server cannot decode."""
    errors = []
    for path in _MICRO_TIME_FIELDS.get(str(obj.get("kind")), ()):
        value: Any = obj
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, str) and not _MICRO_TIME.match(value):
            errors.append(
                FieldError(
                    ".".join(path),
                    "FieldValueInvalid",
                    f'{".".join(path)}: parsing time "{value}" as '
                    '"2006-01-02T15:04:05.000000Z07:00": a MicroTime needs six fractional digits',
                )
            )
    return errors


def validate_builtin(obj: dict[str, Any], *, creating: bool) -> None:
    errors, unknown = builtin_errors(obj)
    unknown += micro_time_errors(obj)
    if unknown:
        raise ValidationFailed(unknown, unknown=True)
    errors += metadata_errors(str(obj.get("kind")), obj, creating=creating)
    if not errors:
        errors = semantic_errors(obj)
    if errors:
        raise ValidationFailed(errors)
