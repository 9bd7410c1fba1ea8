"""CustomResourceDefinitions generated from the pydantic API types (one source of truth).

The pydantic JSON schema is turned into a Kubernetes *structural* openAPIV3Schema: `$ref`s
inlined, optional fields unwrapped, defaults written in their serialised form (`15m`, not
900.0) so the API server applies the same defaults as the models - except in the kinds of
the policy hierarchy (`SCHEMA_DEFAULTS_OFF`): an API server that fills a default makes an
unset field look set, and a set field overrides the policies above it (docs/policies.md);
their defaults are the models', applied where the hierarchy is resolved -, int-or-string
quantities in the form Kubernetes expects, open status objects marked
`x-kubernetes-preserve-unknown-fields`.
Cross-field rules are attached as CEL `x-kubernetes-validations`; each has a pydantic
counterpart in `foresize.core.api.types` with the same message.

CEL cost: every string a rule reads has a `maxLength` and no rule iterates a list, so the
estimated cost of each rule is a small constant, far below the per-rule and per-CRD limits.
Durations written with a `d` or `w` unit cannot be read by CEL's `duration()` (Go syntax); rules
skip the comparison for those and the validating webhook (pydantic) checks them instead.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from foresize.core.api import types as t

# --------------------------------------------------------------------------------------
# CEL rules (keyed by the pydantic model they belong to)
# --------------------------------------------------------------------------------------


def _dur_le(a: str, b: str) -> str:
    """CEL: duration a <= duration b, skipped (true) when either uses the `d` or `w` unit."""
    return f"{a}.matches('[dw]') || {b}.matches('[dw]') || duration({a}) <= duration({b})"


_AUTONOMOUS = "['autonomous', 'auto']"
_DEFAULT_BLOCKS = "'15m'"  # ModelSpec.forecast_blocks' default, as a CEL duration literal


def _merged_rules(direction: str) -> list[dict[str, str]]:
    """`<direction>.model` merged with `model` (see ModelSpec.merged): the cadence is
    replaced as a unit, the other fields one by one."""
    over = f"self.{direction}.model"
    guard = f"!has(self.{direction}) || !has({over})"
    interval = f"{over}.forecast_interval"
    blocks = "self.model.forecast_blocks"
    with_blocks = _dur_le(interval, blocks)
    with_default = _dur_le(interval, "'15m'")
    where = f"{direction}.model (merged with model)"
    return [
        {
            # The override's interval against the target's horizon.
            "rule": (
                f"{guard} || !has({interval}) || has({over}.forecast_blocks) || "
                f"(has(self.model) && has({blocks}) ? ({with_blocks}) : ({with_default}))"
            ),
            "message": f"{where}: forecast_interval must not exceed forecast_blocks",
        },
        {
            # The override's horizon against the target's interval (kept when the
            # override names no cadence of its own).
            "rule": (
                f"{guard} || !has({over}.forecast_blocks) || has({interval}) || "
                f"has({over}.forecast_cron) || !has(self.model) || "
                "!has(self.model.forecast_interval) || "
                f"({_dur_le('self.model.forecast_interval', f'{over}.forecast_blocks')})"
            ),
            "message": f"{where}: forecast_interval must not exceed forecast_blocks",
        },
        {
            "rule": (
                f"{guard} || !has({over}.mode) || {over}.mode != 'percentile' || "
                f"has({over}.percentile_value) || "
                "(has(self.model) && has(self.model.percentile_value))"
            ),
            "message": f"{where}: percentile_value is required when mode is percentile",
        },
        {
            "rule": (
                f"{guard} || !has({over}.percentile_value) || has({over}.mode) || "
                "(has(self.model) && has(self.model.mode) && self.model.mode == 'percentile')"
            ),
            "message": f"{where}: percentile_value is only allowed when mode is percentile",
        },
    ]


_ONE_AUTONOMOUS = {
    "rule": (
        "!(has(self.vertical) && has(self.vertical.mode) && self.vertical.mode in "
        f"{_AUTONOMOUS} && has(self.horizontal) && has(self.horizontal.mode) && "
        f"self.horizontal.mode in {_AUTONOMOUS})"
    ),
    "message": "only one of vertical.mode and horizontal.mode may be autonomous",
}

_CRON_XOR_INTERVAL = {
    "rule": "!(has(self.forecast_interval) && has(self.forecast_cron))",
    "message": "forecast_interval and forecast_cron are mutually exclusive",
}

_MIN_LOOKBACK = {
    "rule": (
        "!has(self.min_lookback_to_scale) || self.min_lookback_to_scale.matches('[dw]') || "
        "duration(self.min_lookback_to_scale) >= duration('3h')"
    ),
    "message": "min_lookback_to_scale must be at least 3h",
    "fieldPath": ".min_lookback_to_scale",
}

_NOT_CRONJOB = "!has(self.scaleTargetRef) || !(self.scaleTargetRef.kind in ['CronJob', 'JobGroup'])"
# `api.jobs.cronjob_target_problem`: what a CronJob target cannot take.
_CRONJOB_RULES = [
    {
        "rule": f"{_NOT_CRONJOB} || !has(self.horizontal)",
        "message": (
            "horizontal: a CronJob has no replicas to scale (a CronJob target is vertical only)"
        ),
    },
    {
        "rule": (
            f"{_NOT_CRONJOB} || !has(self.vertical) || !has(self.vertical.update_policy) || "
            "!has(self.vertical.update_policy.update_mode) || "
            "!(self.vertical.update_policy.update_mode in ['in_place', 'in_place_or_recreate'])"
        ),
        "message": (
            "vertical.update_policy.update_mode: a CronJob's pods are sized when they are "
            "created (initial), never resized or evicted"
        ),
    },
    {
        "rule": f"{_NOT_CRONJOB} || !has(self.vertical) || !has(self.vertical.startup_boost)",
        "message": (
            "vertical.startup_boost: a CronJob's pods are not resized after creation, so a "
            "boost could never be undone"
        ),
    },
]

CEL_RULES: dict[type[BaseModel], list[dict[str, str]]] = {
    t.AIScaleTargetSpec: [
        {
            "rule": "has(self.scaleTargetRef) != has(self.selector)",
            "message": "exactly one of scaleTargetRef or selector must be set",
        },
        {
            "rule": "!has(self.selector) || !has(self.horizontal)",
            "message": "horizontal needs scaleTargetRef (a selector is vertical only)",
        },
        _ONE_AUTONOMOUS,
        *_merged_rules("vertical"),
        *_merged_rules("horizontal"),
        *_CRONJOB_RULES,
    ],
    t.TargetTemplateSpec: [
        _ONE_AUTONOMOUS,
        *_merged_rules("vertical"),
        *_merged_rules("horizontal"),
    ],
    t.ModelSpec: [
        _CRON_XOR_INTERVAL,
        {
            # No schema default fills forecast_blocks (SCHEMA_DEFAULTS_OFF): absent, it is
            # the model's 15m.
            "rule": (
                "!has(self.forecast_interval) || (has(self.forecast_blocks) ? "
                f"({_dur_le('self.forecast_interval', 'self.forecast_blocks')}) : "
                f"({_dur_le('self.forecast_interval', _DEFAULT_BLOCKS)}))"
            ),
            "message": "forecast_interval must not exceed forecast_blocks",
            "fieldPath": ".forecast_interval",
        },
        {
            "rule": (
                "has(self.mode) && self.mode == 'percentile' ? has(self.percentile_value) "
                ": !has(self.percentile_value)"
            ),
            "message": (
                "percentile_value is required when mode is percentile and only allowed then"
            ),
        },
        _MIN_LOOKBACK,
    ],
    t.ModelOverride: [
        _CRON_XOR_INTERVAL,
        {
            "rule": (
                "!has(self.forecast_interval) || !has(self.forecast_blocks) || "
                + _dur_le("self.forecast_interval", "self.forecast_blocks")
            ),
            "message": "forecast_interval must not exceed forecast_blocks",
            "fieldPath": ".forecast_interval",
        },
        {
            "rule": ("!has(self.mode) || self.mode == 'percentile' || !has(self.percentile_value)"),
            "message": "percentile_value is only allowed when mode is percentile",
        },
        _MIN_LOOKBACK,
    ],
    t.MetricModelOverride: [
        {
            "rule": (
                "has(self.mode) && self.mode == 'percentile' ? has(self.percentile_value) "
                ": !has(self.percentile_value)"
            ),
            "message": (
                "percentile_value is required when mode is percentile and only allowed then"
            ),
        },
    ],
    t.HorizontalSpec: [
        {
            "rule": (
                "!has(self.minReplicas) || !has(self.maxReplicas) || "
                "self.minReplicas <= self.maxReplicas"
            ),
            "message": "minReplicas must not exceed maxReplicas",
            "fieldPath": ".minReplicas",
        },
        {
            "rule": "!(has(self.multipleOf) && has(self.allowedReplicas))",
            "message": "multipleOf and allowedReplicas are mutually exclusive",
        },
    ],
    t.VerticalThreshold: [
        {
            # An absent type is the model's default, percent (no schema default fills it).
            "rule": "(has(self.type) && self.type != 'percent') || has(self.percent)",
            "message": "percent is required when type is percent",
        },
        {
            "rule": "!has(self.type) || self.type != 'absolute' || has(self.absolute)",
            "message": "absolute is required when type is absolute",
        },
    ],
    t.HorizontalThreshold: [
        {
            # An absent type is the model's default, percent (no schema default fills it).
            "rule": "(has(self.type) && self.type != 'percent') || has(self.percent)",
            "message": "percent is required when type is percent",
        },
        {
            "rule": "!has(self.type) || self.type != 'absolute' || has(self.absolute)",
            "message": "absolute is required when type is absolute",
        },
    ],
    t.DaemonSetAutoscalerSpec: [
        {
            "rule": (
                "!has(self.minObservationWindow) || !has(self.observationWindow) || "
                + _dur_le("self.minObservationWindow", "self.observationWindow")
            ),
            "message": "minObservationWindow must not exceed observationWindow",
            "fieldPath": ".minObservationWindow",
        },
    ],
    t.ClusterAIScalePolicySpec: [_ONE_AUTONOMOUS],
    t.ClusterAIScaleTemplateSpec: [
        {
            "rule": "!(has(self.includedNamespaces) && has(self.excludedNamespaces))",
            "message": "includedNamespaces and excludedNamespaces are mutually exclusive",
        },
    ],
}

# Lists whose items are keyed by a field: Kubernetes itself refuses duplicate keys.
LIST_MAP_KEYS: dict[tuple[type[BaseModel], str], str] = {
    (t.VerticalSpec, "containers"): "name",
    (t.DaemonSetAutoscalerSpec, "containers"): "name",
    (t.AIScaleTargetStatus, "conditions"): "type",
    (t.DaemonSetAutoscalerStatus, "conditions"): "type",
    (t.ClusterAIScaleTemplateStatus, "conditions"): "type",
    (t.ClusterAIScalePolicyStatus, "conditions"): "type",
}
LIST_SETS: set[tuple[type[BaseModel], str]] = {
    (t.UpdatePolicy, "recreate_resources"),
    (t.HorizontalSpec, "allowedReplicas"),
    (t.ClusterAIScaleTemplateSpec, "kinds"),
    (t.ClusterAIScaleTemplateSpec, "includedNamespaces"),
    (t.ClusterAIScaleTemplateSpec, "excludedNamespaces"),
}


def _all_models() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for value in vars(t).values():
        if isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel:
            found[value.__name__] = value
    return found


# --------------------------------------------------------------------------------------
# pydantic JSON schema -> structural openAPIV3Schema
# --------------------------------------------------------------------------------------


def _serialised_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Field alias -> default in its JSON form (None defaults are left out)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.default_factory is not None:
            value = info.default_factory()  # type: ignore[call-arg]
        elif info.default is not PydanticUndefined:
            value = info.default
        else:
            continue
        if value is None:
            continue
        # Serialise through the model itself so each field's own serializer is used.
        instance = model.model_construct(**{name: value})
        dumped = instance.model_dump(mode="json", by_alias=True, exclude_none=True, include={name})
        out[info.alias or name] = dumped[info.alias or name]
    return out


def _one_paragraph(text: str) -> str:
    """A docstring's first paragraph on one line (kubectl explain wraps it itself)."""
    return " ".join(text.strip().split("\n\n")[0].split())


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.models = _all_models()

    def convert(self, node: dict[str, Any], *, defaults: bool) -> dict[str, Any]:
        node = dict(node)
        node.pop("title", None)
        if isinstance(node.get("description"), str):
            node["description"] = _one_paragraph(node["description"])
        if "$ref" in node:
            name = node.pop("$ref").rsplit("/", 1)[-1]
            return self.model_schema(name, node, defaults=defaults)
        if "anyOf" in node:
            options = [o for o in node.pop("anyOf") if o.get("type") != "null"]
            if node.get("x-kubernetes-int-or-string") or len(options) > 1:
                return self.int_or_string(node, options)
            merged = {**options[0], **{k: v for k, v in node.items() if k != "default"}}
            return self.convert(merged, defaults=defaults)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if "enum" in node and "type" not in node:
            node["type"] = "string"
        for key, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if key in node and not isinstance(node[key], bool):
                node[flag] = node.pop(key)
                node[key] = True
        if not defaults or node.get("default") is None:
            node.pop("default", None)
        if node.get("type") == "object":
            self._convert_object(node, defaults=defaults)
        if node.get("type") == "array" and "items" in node:
            node["items"] = self.convert(node["items"], defaults=defaults)
        return node

    def _convert_object(self, node: dict[str, Any], *, defaults: bool) -> None:
        """An object's properties (or its map values) converted in place; an object open to
        unknown fields says so the structural-schema way."""
        extra = node.pop("additionalProperties", None)
        if "properties" in node:
            node["properties"] = {
                k: self.convert(v, defaults=defaults) for k, v in node["properties"].items()
            }
            if extra is True:
                node["x-kubernetes-preserve-unknown-fields"] = True
        elif isinstance(extra, dict):
            node["additionalProperties"] = self.convert(extra, defaults=defaults)
        elif extra is True or extra is None:
            node["x-kubernetes-preserve-unknown-fields"] = True

    @staticmethod
    def int_or_string(node: dict[str, Any], options: list[dict[str, Any]]) -> dict[str, Any]:
        out = {k: v for k, v in node.items() if k not in ("default",)}
        out["x-kubernetes-int-or-string"] = True
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        for option in options:
            for key, value in option.items():
                if key != "type":
                    out[key] = value
        if "default" in node:
            out["default"] = node["default"]
        return out

    def model_schema(self, name: str, extra: dict[str, Any], *, defaults: bool) -> dict[str, Any]:
        model = self.models[name]
        schema = self.convert(copy.deepcopy(self.defs[name]), defaults=defaults)
        schema.pop("default", None)
        if "description" in extra:
            schema["description"] = extra["description"]
        if "description" in schema:
            schema["description"] = _one_paragraph(schema["description"])
        props = schema.get("properties", {})
        if defaults:
            for alias, value in _serialised_defaults(model).items():
                if alias in props:
                    props[alias]["default"] = value
        else:
            for prop in props.values():
                prop.pop("default", None)
        for (owner, field), key in LIST_MAP_KEYS.items():
            if owner is model and field in props:
                props[field]["x-kubernetes-list-type"] = "map"
                props[field]["x-kubernetes-list-map-keys"] = [key]
        for owner, field in LIST_SETS:
            if owner is model and field in props:
                props[field]["x-kubernetes-list-type"] = "set"
        if model in CEL_RULES:
            schema["x-kubernetes-validations"] = copy.deepcopy(CEL_RULES[model])
        return schema


SCHEMA_DEFAULTS_OFF = frozenset(
    {t.AIScaleTargetKind, t.ClusterAIScaleTemplateKind, t.ClusterAIScalePolicyKind}
)
"""Kinds whose spec schema carries no defaults: an unset field must stay unset so that the
policy hierarchy can fill it from the level above (`foresize.core.cluster.policies`)."""


def openapi_schema(kind_cls: type[t.APIObject]) -> dict[str, Any]:
    """The openAPIV3Schema of one kind: apiVersion, kind, metadata, spec, status."""
    spec_cls = kind_cls.model_fields["spec"].annotation
    status_cls = kind_cls.model_fields["status"].annotation
    out: dict[str, Any] = {
        "type": "object",
        "description": (kind_cls.__doc__ or kind_cls.__name__).strip().splitlines()[0],
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
        },
    }
    spec_defaults = kind_cls.KIND not in SCHEMA_DEFAULTS_OFF
    for field, cls, defaults in (
        ("spec", spec_cls, spec_defaults),
        ("status", status_cls, False),
    ):
        assert cls is not None, f"{kind_cls.__name__}.{field} has no annotation"
        raw = cls.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        defs = raw.pop("$defs", {})
        defs[cls.__name__] = raw
        out["properties"][field] = _Converter(defs).model_schema(
            cls.__name__, {}, defaults=defaults
        )
    return out


_PRINTER_COLUMNS: dict[str, list[dict[str, Any]]] = {
    t.ClusterAIScalePolicyKind: [
        {"name": "Preset", "type": "string", "jsonPath": ".spec.preset"},
        {"name": "Policy", "type": "string", "jsonPath": ".spec.policy"},
        {"name": "Vertical", "type": "string", "jsonPath": ".spec.vertical.mode"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    t.AIScaleTargetKind: [
        {"name": "Kind", "type": "string", "jsonPath": ".spec.scaleTargetRef.kind"},
        {"name": "Target", "type": "string", "jsonPath": ".spec.scaleTargetRef.name"},
        {"name": "Vertical", "type": "string", "jsonPath": ".spec.vertical.mode"},
        {"name": "Horizontal", "type": "string", "jsonPath": ".spec.horizontal.mode"},
        {"name": "Data", "type": "boolean", "jsonPath": ".status.hasEnoughDataToScale"},
        {"name": "Resized", "type": "integer", "jsonPath": ".status.pods_resized"},
        {"name": "Stalled", "type": "integer", "jsonPath": ".status.pods_stalled"},
        {"name": "Breaker", "type": "string", "jsonPath": ".status.circuit_breaker.state"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    t.DaemonSetAutoscalerKind: [
        {"name": "DaemonSet", "type": "string", "jsonPath": ".spec.scaleTargetRef.name"},
        {"name": "Mode", "type": "string", "jsonPath": ".spec.scaleMode"},
        {"name": "Percentile", "type": "number", "jsonPath": ".spec.percentile"},
        {"name": "Data", "type": "boolean", "jsonPath": ".status.hasEnoughDataToScale"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    t.ClusterAIScaleTemplateKind: [
        {"name": "Conflicts", "type": "string", "jsonPath": ".spec.conflictResolution"},
        {"name": "Vertical", "type": "string", "jsonPath": ".spec.template.spec.vertical.mode"},
        {
            "name": "Horizontal",
            "type": "string",
            "jsonPath": ".spec.template.spec.horizontal.mode",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
}

_NAMES: dict[str, dict[str, Any]] = {
    t.ClusterAIScalePolicyKind: {
        "plural": "clusteraiscalepolicies",
        "singular": "clusteraiscalepolicy",
        "shortNames": ["astp"],
        "scope": "Cluster",
    },
    t.AIScaleTargetKind: {
        "plural": "aiscaletargets",
        "singular": "aiscaletarget",
        "shortNames": ["ast"],
        "scope": "Namespaced",
    },
    t.DaemonSetAutoscalerKind: {
        "plural": "daemonsetautoscalers",
        "singular": "daemonsetautoscaler",
        "shortNames": ["dsa"],
        "scope": "Namespaced",
    },
    t.ClusterAIScaleTemplateKind: {
        "plural": "clusteraiscaletemplates",
        "singular": "clusteraiscaletemplate",
        "shortNames": ["astt"],
        "scope": "Cluster",
    },
}


def plural(kind: str) -> str:
    """The resource (plural) name of a Foresize kind, e.g. `aiscaletargets`."""
    return str(_NAMES[kind]["plural"])


def crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition of one Foresize kind."""
    names = _NAMES[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{names['plural']}.{t.GROUP}",
            "labels": {
                "app.kubernetes.io/name": "foresize",
                "app.kubernetes.io/part-of": "foresize",
            },
        },
        "spec": {
            "group": t.GROUP,
            "scope": names["scope"],
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": names["plural"],
                "singular": names["singular"],
                "shortNames": list(names["shortNames"]),
                "categories": ["foresize"],
            },
            "versions": [
                {
                    "name": t.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema(t.KINDS[kind])},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(_PRINTER_COLUMNS[kind]),
                }
            ],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    """The CRDs, one per kind, in a stable order."""
    return [crd(kind) for kind in t.KINDS]
