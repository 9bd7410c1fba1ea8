"""The generated CRDs: valid for Kubernetes 1.33-1.35, structural, and they accept and refuse
the same objects as the pydantic models, with errors naming the field.

Custom resources are checked the way the API server does it: schema defaults applied, the
openAPIV3Schema checked (jsonschema), then every CEL rule evaluated (cel-expr-python, the
CEL reference runtime; Kubernetes uses cel-go with the same standard library)."""

from __future__ import annotations

import copy
import re
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from cel_expr_python import cel
from typer.testing import CliRunner

from foresize.core.api import crd as crdgen
from foresize.core.api.types import KINDS, parse_object
from foresize.core.errors import ForesizeError

K8S_VERSIONS = ("1.33.0", "1.34.0", "1.35.0")


@cache
def schema_of(kind: str) -> dict[str, Any]:
    """(Read-only: cached.)"""
    return crdgen.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


# ---- an API-server-like check of a custom resource -------------------------------------


def apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """Structural defaulting: missing properties with a default get it, recursively."""
    if isinstance(obj, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                obj[name] = apply_defaults(sub, obj[name])
    elif isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key in obj:
            obj[key] = apply_defaults(schema["additionalProperties"], obj[key])
    elif isinstance(obj, list) and "items" in schema:
        obj = [apply_defaults(schema["items"], item) for item in obj]
    return obj


@cache
def _env() -> Any:
    return cel.NewEnv(variables={"self": cel.Type.DYN})


@cache
def compile_rule(rule: str) -> Any:
    return _env().compile(rule)


def list_errors(schema: dict[str, Any], obj: Any, path: str) -> list[str]:
    """x-kubernetes-list-type map/set: the API server refuses duplicate keys/values."""
    errors: list[str] = []
    if isinstance(obj, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in obj:
                errors += list_errors(sub, obj[name], f"{path}.{name}")
    elif isinstance(obj, list):
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = set()
        for i, item in enumerate(obj):
            key = tuple(item.get(k) for k in keys) if kind == "map" else repr(item)
            if kind in ("map", "set") and key in seen:
                errors.append(f"{path}[{i}]: Duplicate value: {key!r}")
            seen.add(key)
            errors += list_errors(schema.get("items", {}), item, f"{path}[{i}]")
    return errors


def cel_errors(schema: dict[str, Any], obj: Any, path: str) -> list[str]:
    errors: list[str] = []
    if isinstance(obj, dict):
        for rule in schema.get("x-kubernetes-validations", []):
            result = compile_rule(rule["rule"]).eval(data={"self": obj})
            if result.value() is not True:
                where = path + rule.get("fieldPath", "")
                errors.append(f"{where}: {rule['message']}")
        for name, sub in schema.get("properties", {}).items():
            if name in obj:
                errors += cel_errors(sub, obj[name], f"{path}.{name}")
    elif isinstance(obj, list) and "items" in schema:
        for i, item in enumerate(obj):
            errors += cel_errors(schema["items"], item, f"{path}[{i}]")
    return errors


def api_server_errors(obj: dict[str, Any]) -> list[str]:
    schema = schema_of(obj["kind"])
    obj = apply_defaults(schema, copy.deepcopy(obj))
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = []
    for error in validator.iter_errors(obj):
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        errors.append(f"{path.lstrip('.')}: {error.message}")
    errors += [e.lstrip(".") for e in list_errors(schema, obj, "")]
    if errors:  # the API server stops at schema errors before running CEL
        return errors
    return cel_errors(schema, obj, "")


# ---- examples ------------------------------------------------------------------------


def ast(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    base = {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}
    base.update(spec)
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": base,
        **extra,
    }


def dsa(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "DaemonSetAutoscaler",
        "metadata": {"name": "agent", "namespace": "mon"},
        "spec": {"scaleTargetRef": {"name": "node-agent"}, **spec},
    }


def astt(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScaleTemplate",
        "metadata": {"name": "fleet"},
        "spec": {"selector": {"matchLabels": {"tier": "web"}}, **spec},
    }


VALID = {
    "minimal": ast({}),
    "cronjob": ast(
        {
            "scaleTargetRef": {"kind": "CronJob", "name": "report"},
            "vertical": {"mode": "autonomous", "update_policy": {"update_mode": "recreate"}},
        }
    ),
    "max_replicas_int32": ast({"horizontal": {"maxReplicas": 2**31 - 1}}),
    "ref_name_with_dots": ast({"scaleTargetRef": {"kind": "Deployment", "name": "web.v2-0"}}),
    "evict_single_replica": ast({"vertical": {"update_policy": {"min_replicas": 1}}}),
    "full": ast(
        {
            "model": {
                "forecast_blocks": "1h",
                "forecast_interval": "15m",
                "mode": "assurance_optimized",
                "forecast_buffer_percentage": 10,
                "min_lookback_to_scale": "3h",
                "metrics": {"memory": {"mode": "percentile", "percentile_value": 99.5}},
            },
            "vertical": {
                "mode": "auto",
                "model": {"forecast_buffer_percentage": 5},
                "containers": [
                    {
                        "name": "app",
                        "cpu": {"lowerbound": "100m", "upperbound": 4, "limit": {"ratio": 2}},
                        "memory": {"lowerbound": "128Mi", "upperbound": "8Gi"},
                    },
                    {"name": "*", "memory": {"lowerbound": 33554432}},
                ],
                "update_policy": {
                    "update_mode": "in_place_or_recreate",
                    "recreate_resources": ["cpu", "memory"],
                },
                "disruption": {
                    "max_disrupted": 2,
                    "interval": "30s",
                    "stall_timeout": "3m",
                    "release_deferred_after": "10m",
                },
                "oom_remediation": {"enabled": True, "stabilization_window": "2h"},
                "scaling_behavior": {
                    "scale_up": {"type": "percent", "percent": 5},
                    "scale_down": {"type": "absolute", "absolute": {"cpu": "50m"}},
                },
                "hpa_resource_policy": "override",
            },
            "horizontal": {
                "mode": "recommendation",
                "model": {"forecast_interval": "30m", "mode": "overshoot"},
                "minReplicas": 2,
                "maxReplicas": 20,
                "allowedReplicas": [2, 4, 8, 16, 20],
                "scaling_behavior": {"scale_down": {"type": "absolute", "absolute": 2}},
            },
        }
    ),
    "selector": {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "batch", "namespace": "jobs"},
        "spec": {
            "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]},
            "vertical": {"mode": "observe", "update_policy": {"update_mode": "in_place"}},
        },
    },
    "cron_and_days": ast(
        {
            "model": {"forecast_blocks": "2d", "forecast_cron": "0 */6 * * *"},
            "vertical": {"model": {"mode": "percentile", "percentile_value": 90}},
        }
    ),
    "rollout_horizontal_auto": ast(
        {
            "scaleTargetRef": {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Rollout",
                "name": "r",
            },
            "horizontal": {"mode": "autonomous", "multipleOf": 3},
            "vertical": {"mode": "rec"},
        }
    ),
    "dsa": dsa({"scaleMode": "auto", "containers": [{"name": "*", "cpu": {"lowerbound": "10m"}}]}),
    "dsa_windows": dsa({"observationWindow": "8d", "minObservationWindow": "6h"}),
    "template": astt(
        {
            "conflictResolution": "override",
            "includedNamespaces": ["shop", "payments"],
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {"vertical": {"mode": "autonomous"}},
            },
        }
    ),
}

# name -> (object, a word the error must name). Schema-level problems first, then CEL ones.
_CRONJOB_REF = {"kind": "CronJob", "name": "report"}
INVALID = {
    "cronjob_horizontal": (
        ast({"scaleTargetRef": _CRONJOB_REF, "horizontal": {"mode": "recommendation"}}),
        "horizontal",
    ),
    "cronjob_in_place": (
        ast(
            {
                "scaleTargetRef": _CRONJOB_REF,
                "vertical": {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}},
            }
        ),
        "update_policy.update_mode",
    ),
    "cronjob_boost": (
        ast(
            {
                "scaleTargetRef": _CRONJOB_REF,
                "vertical": {"mode": "autonomous", "startup_boost": {"cpu_factor": 2}},
            }
        ),
        "startup_boost",
    ),
    "bad_mode": (ast({"vertical": {"mode": "yolo"}}), "vertical.mode"),
    "max_disrupted_zero": (
        ast({"vertical": {"disruption": {"max_disrupted": 0}}}),
        "disruption.max_disrupted",
    ),
    "max_disrupted_text": (
        ast({"vertical": {"disruption": {"max_disrupted": "many"}}}),
        "disruption.max_disrupted",
    ),
    "bad_duration": (
        ast({"vertical": {"disruption": {"stall_timeout": "soon"}}}),
        "disruption.stall_timeout",
    ),
    "unitless_duration": (ast({"model": {"forecast_blocks": "15"}}), "model.forecast_blocks"),
    "bad_update_mode": (
        ast({"vertical": {"update_policy": {"update_mode": "sometimes"}}}),
        "update_policy.update_mode",
    ),
    "bad_recreate_resource": (
        ast({"vertical": {"update_policy": {"recreate_resources": ["disk"]}}}),
        "update_policy.recreate_resources",
    ),
    "bad_quantity": (
        ast({"vertical": {"containers": [{"name": "app", "memory": {"lowerbound": "lots"}}]}}),
        "containers[0].memory.lowerbound",
    ),
    "bad_container_name": (
        ast({"vertical": {"containers": [{"name": "App_1"}]}}),
        "containers[0].name",
    ),
    "low_limit_ratio": (
        ast(
            {
                "vertical": {
                    "containers": [
                        {"name": "a", "cpu": {"lowerbound": "1", "limit": {"ratio": 0.5}}}
                    ]
                }
            }
        ),
        "limit.ratio",
    ),
    "bad_kind": (ast({"scaleTargetRef": {"kind": "Job", "name": "j"}}), "scaleTargetRef.kind"),
    "zero_min_replicas": (ast({"horizontal": {"minReplicas": 0}}), "horizontal.minReplicas"),
    # The eviction guard cannot be switched off below one ready replica left alone.
    "zero_eviction_min_replicas": (
        ast({"vertical": {"update_policy": {"min_replicas": 0}}}),
        "vertical.update_policy.min_replicas",
    ),
    "empty_allowed_replicas": (
        ast({"horizontal": {"allowedReplicas": []}}),
        "horizontal.allowedReplicas",
    ),
    "percentile_out_of_range": (
        ast({"model": {"mode": "percentile", "percentile_value": 150}}),
        "model.percentile_value",
    ),
    "bad_cron": (ast({"model": {"forecast_cron": "hourly"}}), "model.forecast_cron"),
    "bad_hpa_policy": (
        ast({"vertical": {"hpa_resource_policy": "maybe"}}),
        "vertical.hpa_resource_policy",
    ),
    "negative_buffer": (
        ast({"model": {"forecast_buffer_percentage": -5}}),
        "model.forecast_buffer_percentage",
    ),
    "dsa_percentile": (dsa({"percentile": 0}), "spec.percentile"),
    "template_conflict": (astt({"conflictResolution": "merge"}), "spec.conflictResolution"),
    "template_namespace": (astt({"excludedNamespaces": ["Bad_NS"]}), "excludedNamespaces[0]"),
    # R-10: workloads are named by RFC 1123 subdomains (apps' NameIsDNSSubdomain), so a
    # reference to any other name cannot resolve: refused where it is written.
    "ref_name_traversal": (
        ast({"scaleTargetRef": {"kind": "Deployment", "name": "../kube-system/coredns"}}),
        "scaleTargetRef.name",
    ),
    "ref_name_slash": (
        ast({"scaleTargetRef": {"kind": "StatefulSet", "name": "a/b"}}),
        "scaleTargetRef.name",
    ),
    "ref_name_upper": (
        ast({"scaleTargetRef": {"kind": "Rollout", "name": "UPPER"}}),
        "scaleTargetRef.name",
    ),
    "ref_name_empty_label": (
        ast({"scaleTargetRef": {"kind": "Deployment", "name": "a..b"}}),
        "scaleTargetRef.name",
    ),
    "dsa_ref_name_traversal": (
        dsa({"scaleTargetRef": {"name": "../kube-system/kube-proxy"}}),
        "scaleTargetRef.name",
    ),
    # Replica counts are int32 in the Kubernetes API.
    "min_replicas_over_int32": (ast({"horizontal": {"minReplicas": 2**31}}), "minReplicas"),
    "max_replicas_huge": (ast({"horizontal": {"maxReplicas": 10**27}}), "maxReplicas"),
    "allowed_replicas_over_int32": (
        ast({"horizontal": {"allowedReplicas": [2**31]}}),
        "allowedReplicas[0]",
    ),
    # A namespace is an RFC 1123 label: no dots.
    "template_namespace_with_a_dot": (
        astt({"includedNamespaces": ["kube.system"]}),
        "includedNamespaces[0]",
    ),
    "max_disrupted_zero_percent": (
        ast({"vertical": {"disruption": {"max_disrupted": "0%"}}}),
        "disruption.max_disrupted",
    ),
    "max_disrupted_over_100_percent": (
        ast({"vertical": {"disruption": {"max_disrupted": "101%"}}}),
        "disruption.max_disrupted",
    ),
    "duplicate_allowed_replicas": (
        ast({"horizontal": {"allowedReplicas": [2, 4, 2]}}),
        "allowedReplicas[2]",
    ),
    "duplicate_container": (
        ast({"vertical": {"containers": [{"name": "a"}, {"name": "a"}]}}),
        "containers[1]",
    ),
    # Cross-field rules: CEL in the CRD, model validators in pydantic.
    "ref_and_selector": (
        ast({"selector": {"matchLabels": {"a": "b"}}}),
        "exactly one of scaleTargetRef or selector",
    ),
    "neither_ref_nor_selector": (
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "x", "namespace": "y"},
            "spec": {"vertical": {}},
        },
        "exactly one of scaleTargetRef or selector",
    ),
    "selector_with_horizontal": (
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "x", "namespace": "y"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "horizontal": {}},
        },
        "horizontal needs scaleTargetRef",
    ),
    "cron_and_interval": (
        ast({"model": {"forecast_interval": "5m", "forecast_cron": "*/5 * * * *"}}),
        "forecast_interval and forecast_cron are mutually exclusive",
    ),
    "interval_over_blocks": (
        ast({"model": {"forecast_blocks": "15m", "forecast_interval": "1h"}}),
        "forecast_interval must not exceed forecast_blocks",
    ),
    "override_interval_over_blocks": (
        ast({"vertical": {"model": {"forecast_interval": "1h"}}}),
        "vertical.model (merged with model): forecast_interval",
    ),
    "override_interval_over_its_blocks": (
        ast({"horizontal": {"model": {"forecast_blocks": "5m", "forecast_interval": "10m"}}}),
        "forecast_interval must not exceed forecast_blocks",
    ),
    "percentile_without_value": (
        ast({"model": {"mode": "percentile"}}),
        "percentile_value is required when mode is percentile",
    ),
    "value_without_percentile": (
        ast({"model": {"percentile_value": 90}}),
        "percentile_value is",
    ),
    "override_value_without_percentile": (
        ast({"vertical": {"model": {"mode": "balanced", "percentile_value": 90}}}),
        "percentile_value is only allowed when mode is percentile",
    ),
    "metric_percentile_without_value": (
        ast({"model": {"metrics": {"cpu": {"mode": "percentile"}}}}),
        "percentile_value is required when mode is percentile",
    ),
    "override_blocks_under_target_interval": (
        ast(
            {
                "model": {"forecast_blocks": "2h", "forecast_interval": "1h"},
                "horizontal": {"model": {"forecast_blocks": "30m"}},
            }
        ),
        "horizontal.model (merged with model): forecast_interval must not exceed",
    ),
    "override_percentile_without_value": (
        ast({"vertical": {"model": {"mode": "percentile"}}}),
        "vertical.model (merged with model): percentile_value is required",
    ),
    "override_value_with_target_mode_not_percentile": (
        ast({"horizontal": {"model": {"percentile_value": 95}}}),
        "horizontal.model (merged with model): percentile_value is only allowed",
    ),
    "metric_value_without_mode": (
        ast({"model": {"metrics": {"memory": {"percentile_value": 99}}}}),
        "percentile_value is",
    ),
    "min_over_max": (
        ast({"horizontal": {"minReplicas": 5, "maxReplicas": 3}}),
        "minReplicas",
    ),
    "multiple_and_allowed": (
        ast({"horizontal": {"multipleOf": 2, "allowedReplicas": [2, 4]}}),
        "multipleOf and allowedReplicas are mutually exclusive",
    ),
    "both_autonomous": (
        ast({"vertical": {"mode": "auto"}, "horizontal": {"mode": "autonomous"}}),
        "only one of vertical.mode and horizontal.mode may be autonomous",
    ),
    "short_lookback": (
        ast({"model": {"min_lookback_to_scale": "2h"}}),
        "min_lookback_to_scale must be at least 3h",
    ),
    "threshold_without_value": (
        ast({"vertical": {"scaling_behavior": {"scale_up": {"type": "absolute"}}}}),
        "absolute is required when type is absolute",
    ),
    "dsa_windows_reversed": (
        dsa({"observationWindow": "2h", "minObservationWindow": "3h"}),
        "minObservationWindow must not exceed observationWindow",
    ),
    "template_in_and_ex": (
        astt({"includedNamespaces": ["a"], "excludedNamespaces": ["b"]}),
        "includedNamespaces and excludedNamespaces are mutually exclusive",
    ),
    "template_both_autonomous": (
        astt(
            {"template": {"spec": {"vertical": {"mode": "auto"}, "horizontal": {"mode": "auto"}}}}
        ),
        "only one of vertical.mode and horizontal.mode may be autonomous",
    ),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_examples_pass_schema_cel_and_models(name):
    obj = VALID[name]
    assert api_server_errors(obj) == []
    model = parse_object(copy.deepcopy(obj), f"{name}.yaml")
    # What the models write back is valid for the API server too.
    assert api_server_errors(model.to_kube()) == []


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_examples_are_refused_by_crd_and_models_naming_the_field(name):
    obj, names = INVALID[name]
    errors = api_server_errors(obj)
    assert errors, f"{name}: the CRD accepted it"
    assert any(names in e for e in errors), errors
    with pytest.raises(ForesizeError) as info:
        parse_object(copy.deepcopy(obj), f"{name}.yaml")
    # The model's message names the same fields (every schema field name the CRD's did).
    fields = _field_names(schema_of(obj["kind"]))
    named = [w for w in re.findall(r"[A-Za-z_]\w*", names) if w in fields]
    assert named, names
    for word in named:
        assert word in str(info.value), str(info.value)


def _field_names(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        found |= set(node.get("properties", {}))
        for value in node.values():
            found |= _field_names(value)
    elif isinstance(node, list):
        for value in node:
            found |= _field_names(value)
    return found


def test_schema_defaults_equal_model_defaults():
    obj = dsa({})
    defaulted = apply_defaults(schema_of(obj["kind"]), copy.deepcopy(obj))
    assert defaulted != obj  # the schema did fill something in
    assert parse_object(defaulted) == parse_object(obj)


def test_the_hierarchy_kinds_carry_no_schema_defaults_so_unset_stays_unset():
    # An API server filling `model.mode: balanced` into a target would make it look set,
    # and a set field overrides the policies above it (docs/policies.md).
    for obj in (
        ast({"vertical": {}, "horizontal": {}}),
        ast({"vertical": {"containers": [{"name": "a"}], "disruption": {}}}),
        astt({"template": {"spec": {"vertical": {}}}}),
        {
            "apiVersion": "foresize.io/v1",
            "kind": "ClusterAIScalePolicy",
            "metadata": {"name": "team"},
            "spec": {"vertical": {"update_policy": {}}, "model": {}},
        },
    ):
        assert apply_defaults(schema_of(obj["kind"]), copy.deepcopy(obj)) == obj
        spec = parse_object(obj).spec
        model = spec.template.spec.model if obj["kind"] == "ClusterAIScaleTemplate" else spec.model
        assert "mode" not in model.model_fields_set


def test_every_cross_field_rule_has_a_cel_rule():
    messages = {r["message"] for kind in KINDS for r in _walk_rules(schema_of(kind))}
    for needed in (
        "exactly one of scaleTargetRef or selector must be set",
        "forecast_interval and forecast_cron are mutually exclusive",
        "forecast_interval must not exceed forecast_blocks",
        "percentile_value is required when mode is percentile and only allowed then",
        "minReplicas must not exceed maxReplicas",
        "multipleOf and allowedReplicas are mutually exclusive",
        "only one of vertical.mode and horizontal.mode may be autonomous",
    ):
        assert needed in messages


def _walk_rules(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        found += node.get("x-kubernetes-validations", [])
        for value in node.values():
            found += _walk_rules(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk_rules(value)
    return found


# ---- the CRD objects themselves --------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_crds_pass_kubernetes_validate_strict(version):
    for doc in crdgen.all_crds():
        kubernetes_validate.validate(doc, version, strict=True)


def test_crd_names_scope_status_and_columns():
    by_kind = {c["spec"]["names"]["kind"]: c for c in crdgen.all_crds()}
    assert set(by_kind) == {
        "AIScaleTarget",
        "DaemonSetAutoscaler",
        "ClusterAIScaleTemplate",
        "ClusterAIScalePolicy",
    }
    expected = {
        "ClusterAIScalePolicy": ("astp", "Cluster", "clusteraiscalepolicies.foresize.io"),
        "AIScaleTarget": ("ast", "Namespaced", "aiscaletargets.foresize.io"),
        "DaemonSetAutoscaler": ("dsa", "Namespaced", "daemonsetautoscalers.foresize.io"),
        "ClusterAIScaleTemplate": ("astt", "Cluster", "clusteraiscaletemplates.foresize.io"),
    }
    for kind, (short, scope, name) in expected.items():
        c = by_kind[kind]
        assert c["metadata"]["name"] == name and c["spec"]["group"] == "foresize.io"
        assert c["spec"]["names"]["shortNames"] == [short] and c["spec"]["scope"] == scope
        (version,) = c["spec"]["versions"]
        assert version["name"] == "v1" and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
        cols = {col["name"]: col["jsonPath"] for col in version["additionalPrinterColumns"]}
        assert cols["Age"] == ".metadata.creationTimestamp"
    cols = by_kind["AIScaleTarget"]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert {c["jsonPath"] for c in cols} >= {
        ".spec.scaleTargetRef.name",
        ".spec.vertical.mode",
        ".spec.horizontal.mode",
        ".status.hasEnoughDataToScale",
    }


_FORBIDDEN_KEYS = {"$ref", "$defs", "allOf", "oneOf", "const", "title", "nullable"}


def _check_structural(node: dict[str, Any], path: str, problems: list[str]) -> None:
    bad = _FORBIDDEN_KEYS & set(node)
    if bad:
        problems.append(f"{path}: {sorted(bad)}")
    if node.get("x-kubernetes-int-or-string"):
        if node.get("anyOf") != [{"type": "integer"}, {"type": "string"}] or "type" in node:
            problems.append(f"{path}: malformed int-or-string")
    else:
        if "anyOf" in node:
            problems.append(f"{path}: anyOf outside int-or-string")
        if "type" not in node:
            problems.append(f"{path}: no type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties with additionalProperties")
    if isinstance(node.get("additionalProperties"), bool):
        problems.append(f"{path}: boolean additionalProperties")
    if "default" in node:
        try:
            jsonschema.Draft4Validator(node).validate(node["default"])
        except jsonschema.ValidationError as exc:
            problems.append(f"{path}: default does not validate: {exc.message}")
    for name, sub in node.get("properties", {}).items():
        _check_structural(sub, f"{path}.{name}", problems)
    if isinstance(node.get("items"), dict):
        _check_structural(node["items"], f"{path}[]", problems)
    if isinstance(node.get("additionalProperties"), dict):
        _check_structural(node["additionalProperties"], f"{path}{{}}", problems)


@pytest.mark.parametrize("kind", list(KINDS))
def test_schemas_are_structural(kind):
    problems: list[str] = []
    _check_structural(schema_of(kind), kind, problems)
    assert problems == []


def _rules_with_nodes(node: dict[str, Any], path: str = ""):
    for rule in node.get("x-kubernetes-validations", []):
        yield path, node, rule
    for name, sub in node.get("properties", {}).items():
        yield from _rules_with_nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _rules_with_nodes(node["items"], f"{path}[]")


@pytest.mark.parametrize("kind", list(KINDS))
def test_cel_rules_compile_and_stay_cheap(kind):
    """Every rule compiles with the CEL standard library alone (no Kubernetes-only
    functions), iterates no list, and reads only bounded strings, so its estimated cost is a
    small constant."""
    count = 0
    for path, node, rule in _rules_with_nodes(schema_of(kind)):
        count += 1
        compile_rule(rule["rule"])
        assert not re.search(r"\.(all|exists|exists_one|map|filter)\(", rule["rule"]), path
        for ref in set(re.findall(r"self((?:\.[A-Za-z_]\w*)+)", rule["rule"])):
            target = node
            for part in ref.strip(".").split("."):
                if part == "matches":  # a method call, not a field
                    break
                target = target["properties"][part]
            if target.get("type") == "string":
                assert "maxLength" in target or "enum" in target, f"{path}: {ref} unbounded"
        if "fieldPath" in rule:
            target = node
            for part in rule["fieldPath"].strip(".").split("."):
                target = target["properties"][part]
        assert len(rule["rule"]) < 1000
    assert count >= 1


def test_cel_duration_rules_skip_day_units_and_models_check_them():
    # CEL's duration() is Go syntax; `2d` is skipped there and caught by the models.
    obj = ast({"model": {"forecast_blocks": "1h", "forecast_interval": "2d"}})
    assert api_server_errors(obj) == []
    with pytest.raises(ForesizeError, match="must not exceed forecast_blocks"):
        parse_object(obj)


# ---- the CLI --------------------------------------------------------------------------


def test_manifests_crds_prints_the_crds():
    from foresize.front.cli import app

    result = CliRunner().invoke(app, ["manifests", "crds"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.output) if d]
    assert docs == crdgen.all_crds()


# ---- differential: the CRD and the models accept exactly the same targets ---------------

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _target_strategy(bad: bool, focus: bool = False) -> Any:
    """Random AIScaleTargets. With `bad`, field values are sometimes invalid; without, only
    the combinations of valid values (the cross-field rules) can make a target invalid."""

    def mostly(good: list[Any], wrong: list[Any]) -> Any:
        # Valid values four times as often as invalid ones.
        if not bad:
            return st.sampled_from(good)
        return st.one_of(*([st.sampled_from(good)] * 4), st.sampled_from(wrong))

    def opt(**fields: Any) -> Any:
        return st.fixed_dictionaries({}, optional=fields)

    dur = st.sampled_from(["30s", "1m", "5m", "15m", "30m", "1h", "90m", "2h", "3h", "24h"])
    modes = mostly(
        ["undershoot", "cost_optimized", "balanced", "assurance_optimized", "overshoot"]
        + ["percentile"] * 2,
        ["bogus"],
    )
    pct = mostly([50, 99.5], [0, 150])
    metric = opt(mode=modes, percentile_value=pct, forecast_buffer_percentage=st.just(5))
    model = opt(
        forecast_blocks=mostly(["1h", "2h", "15m", "30m"], ["15"]),
        forecast_interval=dur,
        forecast_cron=mostly(["*/5 * * * *", "@hourly"], ["bad cron"]),
        mode=modes,
        percentile_value=pct,
        forecast_buffer_percentage=mostly([0, 12.5], [-1]),
        min_lookback_to_scale=mostly(["3h", "24h", "6h"], ["1h"]),
        metrics=opt(cpu=metric, memory=metric),
    )
    scaling_modes = mostly(
        ["autonomous", "auto", "recommendation", "rec", "observe", "observation"], ["bogus"]
    )
    cpu = st.fixed_dictionaries(
        {"lowerbound": mostly(["10m", "100m"], ["lots"])},
        optional={
            "upperbound": st.sampled_from(["1", "2"]),
            "limit": opt(ratio=mostly([1, 2.5], [0.5])),
        },
    )
    memory = st.fixed_dictionaries(
        {"lowerbound": st.sampled_from(["64Mi", 1048576])}, optional={"upperbound": st.just("1Gi")}
    )
    container = st.fixed_dictionaries(
        {"name": mostly(["app", "*", "side"], ["App_1"])}, optional={"cpu": cpu, "memory": memory}
    )
    v_threshold = opt(
        type=st.sampled_from(["percent", "absolute"]),
        percent=mostly([5], [-1]),
        absolute=opt(cpu=st.just("50m"), memory=st.just("64Mi")),
    )
    vertical = opt(
        mode=scaling_modes,
        model=model,
        containers=st.lists(container, max_size=3),
        update_policy=opt(
            update_mode=mostly(["initial", "recreate", "in_place", "in_place_or_recreate"], ["x"]),
            recreate_resources=st.lists(mostly(["cpu", "memory"], ["disk"]), max_size=2),
        ),
        disruption=opt(
            max_disrupted=mostly([1, 3, "20%", "0.5%", "100%", "7"], ["0%", "101%", 0, "x"]),
            interval=mostly(["30s", "1m", "5m"], ["soon"]),
            stall_timeout=dur,
            release_deferred_after=dur,
        ),
        oom_remediation=opt(enabled=st.booleans(), stabilization_window=dur),
        scaling_behavior=opt(scale_up=v_threshold, scale_down=v_threshold),
        hpa_resource_policy=mostly(["leave", "override"], ["maybe"]),
    )
    horizontal = opt(
        mode=scaling_modes,
        model=model,
        minReplicas=mostly([1, 2, 5], [0]),
        maxReplicas=st.sampled_from([1, 3, 10]),
        multipleOf=mostly([2, 3], [0]),
        allowedReplicas=st.lists(st.sampled_from([1, 2, 4]), min_size=int(not bad), max_size=3),
        scaling_behavior=opt(
            scale_up=opt(
                type=st.sampled_from(["percent", "absolute"]),
                percent=st.just(10),
                absolute=mostly([2], [-1]),
            )
        ),
    )
    ref = {"kind": "Deployment", "name": "web"}
    selector = {"matchLabels": {"app": "web"}}
    valid_workloads = [{"scaleTargetRef": ref}] * 5 + [{"selector": selector}] * 2
    workload = st.sampled_from(
        [*valid_workloads, {"scaleTargetRef": ref, "selector": selector}, {}]
    )
    if focus:  # only the fields the cross-field rules read
        small = opt(
            forecast_blocks=st.sampled_from(["30m", "1h", "2h"]),
            forecast_interval=st.sampled_from(["5m", "15m", "1h"]),
            mode=st.sampled_from(["balanced", "percentile"]),
            percentile_value=st.just(90),
        )
        # A target-level model that is valid on its own, so that refusals come from the
        # merge with the overrides.
        model = st.builds(
            lambda cadence, quantile: {**cadence, **quantile},
            st.sampled_from(
                [
                    {},
                    {"forecast_blocks": "1h", "forecast_interval": "15m"},
                    {"forecast_blocks": "2h", "forecast_interval": "1h"},
                    {"forecast_blocks": "30m"},
                    {"forecast_cron": "@hourly"},
                ]
            ),
            st.sampled_from(
                [{}, {"mode": "balanced"}, {"mode": "percentile", "percentile_value": 95}]
            ),
        )
        vertical = opt(mode=scaling_modes, model=small)
        horizontal = opt(
            mode=scaling_modes,
            model=small,
            minReplicas=st.sampled_from([1, 2, 5]),
            maxReplicas=st.sampled_from([1, 3, 10]),
            multipleOf=st.just(2),
            allowedReplicas=st.just([1, 2]),
        )
    return st.builds(
        lambda w, rest: {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "t", "namespace": "n"},
            "spec": {**w, **rest},
        },
        workload,
        opt(model=model, vertical=vertical, horizontal=horizontal),
    )


_TARGETS = st.one_of(_target_strategy(bad=False), _target_strategy(bad=True))
_CROSS_FIELD_TARGETS = _target_strategy(bad=False, focus=True)


def _agree(obj: dict[str, Any]) -> None:
    crd_errors = api_server_errors(obj)
    try:
        model = parse_object(copy.deepcopy(obj), "t.yaml")
    except ForesizeError as exc:
        assert crd_errors, f"models refuse what the CRD accepts: {exc}"
        event("refused by both")
        return
    assert crd_errors == [], f"CRD refuses what the models accept: {crd_errors}"
    event("accepted by both")
    out = model.to_kube()
    assert api_server_errors(out) == []
    assert parse_object(copy.deepcopy(out)) == model


_SETTINGS = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_SETTINGS
@given(_TARGETS)
def test_crd_and_models_agree_on_random_targets(obj):
    """Generated AIScaleTargets (valid and invalid, no `d` durations, no reversed bounds, no
    unknown fields: the documented differences) are accepted by the API server checks
    exactly when the models accept them; what the models write back is accepted too."""
    _agree(obj)


@_SETTINGS
@given(_CROSS_FIELD_TARGETS)
def test_crd_and_models_agree_on_cross_field_combinations(obj):
    """The same, over combinations of valid values only: model overrides, modes, replica
    bounds and the workload reference, so only the cross-field rules can refuse."""
    _agree(obj)


def test_a_traversal_looking_workload_name_is_refused_by_validate_and_the_webhook(tmp_path):
    # R-10: `../kube-system/coredns` passed `foresize validate` and /validate-targets.
    from foresize.core.admission.validate import validate_target
    from foresize.front.cli.validate import validate_files

    obj = ast({"scaleTargetRef": {"kind": "Deployment", "name": "../kube-system/coredns"}})
    problems = validate_target(copy.deepcopy(obj))
    assert any("scaleTargetRef.name" in p and "RFC 1123 subdomain" in p for p in problems)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(obj))
    _, _, errors = validate_files([str(path)])
    assert any(e.startswith(f"{path}:") and "scaleTargetRef.name" in e for e in errors), errors
