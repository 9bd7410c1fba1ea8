"""Custom resources as the strict API server validates them: one CRD version's structural
schema (nullable, defaults, pruning of unknown fields, list types) and its CEL rules."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from foresize.testing.validation import (
    FieldError,
    ValidationFailed,
    dotted_path,
    format_checker,
    join_path,
    metadata_errors,
    need_module,
)


def _nullable_types(node: Any) -> Any:
    """OpenAPI `nullable: true` -> a JSON-schema type list that admits null."""
    if isinstance(node, dict):
        out = {k: _nullable_types(v) for k, v in node.items()}
        if out.pop("nullable", False) and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out
    if isinstance(node, list):
        return [_nullable_types(v) for v in node]
    return node


class CustomResourceValidator:
    """One CRD version's schema, applied as the API server applies it."""

    def __init__(self, kind: str, schema: dict[str, Any]) -> None:
        jsonschema = need_module("jsonschema")
        self.kind = kind
        self.schema = schema
        self._validator = jsonschema.Draft4Validator(
            _nullable_types(schema), format_checker=format_checker()
        )

    def validate(self, obj: dict[str, Any], *, creating: bool) -> dict[str, Any]:
        """The object as stored (nulls dropped, defaults applied); raises ValidationFailed."""
        obj = copy.deepcopy(obj)
        unknown: list[FieldError] = []
        obj = _prune(self.schema, obj, "", unknown, top=True)
        if unknown:
            raise ValidationFailed(unknown, unknown=True)
        obj = _default(self.schema, obj)
        errors = metadata_errors(self.kind, obj, creating=creating)
        for error in self._validator.iter_errors(obj):
            path = dotted_path(error.absolute_path)
            reason = "FieldValueTypeInvalid" if error.validator == "type" else "FieldValueInvalid"
            if error.validator == "required":
                reason = "FieldValueRequired"
            errors.append(FieldError(path, reason, f"Invalid value: {error.message}"))
        errors += _list_type_errors(self.schema, obj, "")
        if errors:  # the API server stops at schema errors before running CEL
            raise ValidationFailed(errors)
        errors = _cel_errors(self.schema, obj, "")
        if errors:
            raise ValidationFailed(errors)
        return obj


def _prune(
    schema: dict[str, Any], obj: Any, path: str, unknown: list[FieldError], *, top: bool = False
) -> Any:
    """Drop nulls the schema does not allow; collect fields it does not declare."""
    if isinstance(obj, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
            "x-kubernetes-embedded-resource"
        )
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if top and key in ("apiVersion", "kind", "metadata"):
                out[key] = value
                continue
            sub = (props or {}).get(key)
            if sub is None and isinstance(additional, dict):
                sub = additional
            if value is None and not (sub or {}).get("nullable"):
                continue  # nulls are pruned before defaulting and validation
            if sub is None:
                if preserve or additional is True:
                    out[key] = value
                else:
                    field = join_path(path, key)
                    unknown.append(
                        FieldError(field, "FieldValueInvalid", f'unknown field "{field}"')
                    )
                continue
            out[key] = _prune(sub, value, join_path(path, key), unknown)
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [_prune(schema["items"], v, f"{path}[{i}]", unknown) for i, v in enumerate(obj)]
    return obj


def _default(schema: dict[str, Any], obj: Any) -> Any:
    if isinstance(obj, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                obj[name] = _default(sub, obj[name])
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict) and not schema.get("properties"):
            for key in obj:
                obj[key] = _default(additional, obj[key])
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [_default(schema["items"], v) for v in obj]
    return obj


def _list_type_errors(schema: dict[str, Any], obj: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if isinstance(obj, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in obj:
                errors += _list_type_errors(sub, obj[name], join_path(path, name))
    elif isinstance(obj, list):
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: set[Any] = set()
        for i, item in enumerate(obj):
            if kind in ("map", "set"):
                key = (
                    tuple(item.get(k) for k in keys)
                    if kind == "map" and isinstance(item, dict)
                    else repr(item)
                )
                if key in seen:
                    errors.append(
                        FieldError(
                            f"{path}[{i}]", "FieldValueDuplicate", f"Duplicate value: {key!r}"
                        )
                    )
                seen.add(key)
            errors += _list_type_errors(schema.get("items") or {}, item, f"{path}[{i}]")
    return errors


@cache
def _cel_program(rule: str) -> Any:
    cel = need_module("cel_expr_python.cel")
    return cel.NewEnv(variables={"self": cel.Type.DYN}).compile(rule)


def _cel_errors(schema: dict[str, Any], obj: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if obj is None:
        return errors
    for rule in schema.get("x-kubernetes-validations") or []:
        result = _cel_program(rule["rule"]).eval(data={"self": obj})
        if result.value() is not True:
            where = path + rule.get("fieldPath", "")
            errors.append(
                FieldError(
                    where.lstrip("."), "FieldValueInvalid", f"Invalid value: {rule['message']}"
                )
            )
    if isinstance(obj, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in obj:
                errors += _cel_errors(sub, obj[name], join_path(path, name))
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict) and not schema.get("properties"):
            for key, value in obj.items():
                errors += _cel_errors(additional, value, join_path(path, key))
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            errors += _cel_errors(schema["items"], item, f"{path}[{i}]")
    return errors
