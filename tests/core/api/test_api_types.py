"""The API models: defaults, aliases, units, cross-field rules and error messages."""

from __future__ import annotations

import copy

import pytest

from foresize.core.api.duration import shown
from foresize.core.api.quantity import GIB, MIB
from foresize.core.api.types import (
    AIScaleTarget,
    ClusterAIScaleTemplate,
    ContainerSuggestion,
    DaemonSetAutoscaler,
    DisruptionPolicy,
    HorizontalScalingBehavior,
    VerticalScalingBehavior,
    format_duration,
    parse_daemonset_autoscaler,
    parse_duration,
    parse_object,
    parse_target,
    parse_template,
)
from foresize.core.errors import ForesizeError


def target(**spec) -> dict:
    base = {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}
    base.update(spec)
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": base,
    }


def error_of(obj: dict, source: str = "t.yaml") -> str:
    with pytest.raises(ForesizeError) as info:
        parse_target(obj, source)
    return str(info.value)


# ---- defaults -----------------------------------------------------------------------


def test_defaults_follow_the_design():
    t = parse_target(target(vertical={}, horizontal={}))
    m = t.spec.model
    assert m.forecast_blocks == 900.0
    assert m.forecast_interval is None and m.forecast_cron is None
    assert m.mode == "balanced"
    assert m.forecast_buffer_percentage == 0
    assert m.min_lookback_to_scale == 86400.0
    v = t.spec.vertical
    assert v.update_policy.update_mode == "recreate"
    assert v.update_policy.recreate_resources == ["memory"]
    assert v.disruption.max_disrupted == "20%"
    assert v.disruption.interval == 60.0
    assert v.disruption.stall_timeout == 120.0
    assert v.disruption.release_deferred_after is None
    assert v.oom_remediation.enabled is True
    assert v.oom_remediation.stabilization_window is None
    assert v.hpa_resource_policy == "leave"
    h = t.spec.horizontal
    assert h.minReplicas is None and h.maxReplicas is None
    assert t.spec.scaleTargetRef.apiVersion == "apps/v1"


def test_rollout_defaults_to_argo_api_version():
    t = parse_target(target(scaleTargetRef={"kind": "Rollout", "name": "r"}))
    assert t.spec.scaleTargetRef.apiVersion == "argoproj.io/v1alpha1"


def test_metadata_fields():
    obj = target()
    obj["metadata"].update(
        uid="u-1",
        labels={"a": "b"},
        annotations={"x": "y"},
        generation=4,
        deletionTimestamp="2026-11-29T08:00:00Z",
        finalizers=["foresize.io/revert"],
        resourceVersion="77",
        creationTimestamp="2026-11-01T00:00:00Z",
    )
    t = parse_target(obj)
    md = t.metadata
    assert (md.name, md.namespace, md.uid, md.generation) == ("web", "shop", "u-1", 4)
    assert md.labels == {"a": "b"} and md.annotations == {"x": "y"}
    assert md.finalizers == ["foresize.io/revert"]
    assert md.deletion_timestamp == 1795939200.0
    out = t.to_kube()["metadata"]
    assert out["deletionTimestamp"] == "2026-11-29T08:00:00Z"
    assert out["creationTimestamp"] == "2026-11-01T00:00:00Z"  # unknown metadata is kept


# ---- aliases and units ----------------------------------------------------------------


@pytest.mark.parametrize(
    "given,expected",
    [
        ("auto", "autonomous"),
        ("Autonomous", "autonomous"),
        ("recommend", "recommendation"),
        ("rec", "recommendation"),
        ("observation", "observe"),
        ("observe", "observe"),
    ],
)
def test_mode_aliases_normalise(given, expected):
    t = parse_target(target(vertical={"mode": given}))
    assert t.spec.vertical.mode == expected
    assert t.to_kube()["spec"]["vertical"]["mode"] == expected


def test_unknown_mode_is_refused_naming_the_field():
    msg = error_of(target(vertical={"mode": "yolo"}))
    assert msg.startswith("t.yaml: spec.vertical.mode: must be one of autonomous")


@pytest.mark.parametrize(
    "text,seconds,canonical",
    [
        ("15m", 900, "15m"),
        ("2m", 120, "2m"),
        ("60s", 60, "1m"),
        ("1h", 3600, "1h"),
        ("8d", 8 * 86400, "192h"),
        ("1h30m", 5400, "1h30m"),
        ("1.5s", 1.5, "1.5s"),
        ("250ms", 0.25, "250ms"),
        ("0", 0, "0s"),
    ],
)
def test_durations_parse_and_format(text, seconds, canonical):
    assert parse_duration(text) == seconds
    assert format_duration(parse_duration(text)) == canonical
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["15", "1x", "", "m", "-5m", "1h 30m", True, None])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_quantities_are_canonical_ints_and_serialise_back():
    t = parse_target(
        target(
            vertical={
                "containers": [
                    {
                        "name": "app",
                        "cpu": {"lowerbound": "250m", "upperbound": 2, "limit": {"ratio": 2}},
                        "memory": {"lowerbound": "512Mi", "upperbound": "1Gi"},
                    }
                ]
            }
        )
    )
    c = t.spec.vertical.containers[0]
    assert (c.cpu.lowerbound, c.cpu.upperbound) == (250, 2000)
    assert (c.memory.lowerbound, c.memory.upperbound) == (512 * MIB, GIB)
    out = t.to_kube()["spec"]["vertical"]["containers"][0]
    assert out["cpu"] == {"lowerbound": "250m", "upperbound": "2", "limit": {"ratio": 2.0}}
    assert out["memory"] == {"lowerbound": "512Mi", "upperbound": "1Gi"}


def test_full_round_trip_is_stable():
    obj = target(
        model={"forecast_blocks": "1h", "forecast_cron": "*/15 * * * *", "mode": "overshoot"},
        vertical={
            "mode": "auto",
            "model": {"mode": "percentile", "percentile_value": 97},
            "containers": [{"name": "*", "memory": {"lowerbound": "64Mi"}}],
            "update_policy": {"update_mode": "in_place_or_recreate"},
            "disruption": {"max_disrupted": 2, "release_deferred_after": "10m"},
            "oom_remediation": {"stabilization_window": "2h"},
            "scaling_behavior": {"scale_down": {"type": "percent", "percent": 10}},
            "hpa_resource_policy": "override",
        },
    )
    obj["status"] = {
        "hasEnoughDataToScale": True,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Forecasting",
                "message": "ok",
                "lastTransitionTime": "2026-11-29T08:00:00Z",
            }
        ],
        "vertical_suggestion": {
            "uid": "s1",
            "containers": [{"name": "app", "requests": {"cpu": "300m", "memory": "256Mi"}}],
            "forecast_window": {"start": "2026-11-29T08:00:00Z", "end": "2026-11-29T09:00:00Z"},
            "forecast_error": 0.12,
        },
        "horizontal_suggestion": {"uid": "h1", "replicas": 4},
        "oom_floors": [{"container": "app", "memory": "300Mi", "oom_count": 2}],
        "pods_resized": 3,
        "pods_evicted": 1,
        "pods_stalled": 1,
        "circuit_breaker": {"state": "open", "no_progress_cycles": 3, "backoff": "2m"},
        "stall_first_seen": {"shop/web-1": "2026-11-29T08:01:00Z"},  # another part's key
    }
    once = parse_target(obj).to_kube()
    twice = parse_target(copy.deepcopy(once)).to_kube()
    assert once == twice
    # The plain pydantic dump is the same Kubernetes JSON, but for the spec's defaults:
    # to_kube writes only the fields set (a default written out would read back as set and
    # override the policy hierarchy), and they read back to the same spec.
    dumped = parse_target(obj).model_dump(by_alias=True, exclude_none=True)
    assert {**dumped, "spec": once["spec"]} == once
    assert parse_target(copy.deepcopy(once)).spec == parse_target(obj).spec
    assert "min_replicas" not in once["spec"]["vertical"]["update_policy"]  # a default
    assert "min_replicas" in dumped["spec"]["vertical"]["update_policy"]
    assert once["spec"]["vertical"]["model"] == {"mode": "percentile", "percentile_value": 97.0}
    assert once["status"]["stall_first_seen"] == {"shop/web-1": "2026-11-29T08:01:00Z"}
    assert once["status"]["circuit_breaker"]["backoff"] == "2m"
    t = parse_target(once)
    assert t.status.vertical_suggestion.for_container("app").requests == {
        "cpu": 300,
        "memory": 256 * MIB,
    }
    assert t.status.condition("Ready").lastTransitionTime == 1795939200.0


def test_container_suggestion_from_canonical_ints():
    s = ContainerSuggestion.from_canonical("app", {"cpu": 250, "memory": 512 * MIB}, {"cpu": 500})
    assert s.requests == {"cpu": 250, "memory": 512 * MIB}
    assert s.model_dump(by_alias=True)["requests"] == {"cpu": "250m", "memory": "512Mi"}


# ---- model overrides ------------------------------------------------------------------


def test_effective_model_applies_only_given_override_fields():
    t = parse_target(
        target(
            model={"forecast_blocks": "1h", "forecast_interval": "30m", "mode": "overshoot"},
            horizontal={"model": {"forecast_interval": "15m"}},
            vertical={"model": {"forecast_cron": "0 * * * *", "forecast_buffer_percentage": 5}},
        )
    )
    h = t.spec.effective_model("horizontal")
    assert (h.forecast_blocks, h.forecast_interval, h.mode) == (3600, 900, "overshoot")
    v = t.spec.effective_model("vertical")
    # The cadence is replaced as a unit: the cron replaces the target-level interval.
    assert v.forecast_interval is None and v.forecast_cron == "0 * * * *"
    assert v.forecast_buffer_percentage == 5 and v.mode == "overshoot"
    # Round trip keeps the override partial (no defaults leak into it).
    out = t.to_kube()["spec"]["horizontal"]["model"]
    assert out == {"forecast_interval": "15m"}


def test_override_interval_is_checked_against_merged_blocks():
    msg = error_of(
        target(model={"forecast_blocks": "15m"}, vertical={"model": {"forecast_interval": "1h"}})
    )
    assert "spec: vertical.model (merged with model): forecast_interval (1h)" in msg
    assert "forecast_blocks (15m)" in msg
    # Fine when the target-level horizon is long enough.
    parse_target(
        target(model={"forecast_blocks": "2h"}, vertical={"model": {"forecast_interval": "1h"}})
    )


def test_metric_overrides():
    t = parse_target(
        target(
            model={
                "mode": "balanced",
                "metrics": {"memory": {"mode": "percentile", "percentile_value": 99}},
            }
        )
    )
    assert t.spec.model.for_metric("cpu").mode == "balanced"
    mem = t.spec.model.for_metric("memory")
    assert (mem.mode, mem.percentile_value) == ("percentile", 99)


def test_oom_stabilization_window_defaults_to_max_of_interval_and_an_hour():
    t = parse_target(
        target(model={"forecast_blocks": "2h", "forecast_interval": "90m"}, vertical={})
    )
    assert t.spec.oom_stabilization_window() == 5400
    t = parse_target(target(model={"forecast_interval": "5m"}, vertical={}))
    assert t.spec.oom_stabilization_window() == 3600
    t = parse_target(target(vertical={"oom_remediation": {"stabilization_window": "10m"}}))
    assert t.spec.oom_stabilization_window() == 600


# ---- disruption -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,replicas,expected",
    [
        ("20%", 10, 2),
        ("20%", 11, 3),
        ("20%", 1, 1),
        ("20%", 0, 1),
        ("50%", 3, 2),
        (3, 10, 3),
        (1, 1, 1),
    ],
)
def test_max_disrupted_for(value, replicas, expected):
    assert DisruptionPolicy(max_disrupted=value).max_disrupted_for(replicas) == expected


@pytest.mark.parametrize("bad", [0, -1, "0%", "101%", "x", "20", 1.5, True])
def test_max_disrupted_rejects_bad_values_naming_the_field(bad):
    if bad == "20":  # a digit string is an integer count, accepted
        assert DisruptionPolicy(max_disrupted=bad).max_disrupted == 20
        return
    msg = error_of(target(vertical={"disruption": {"max_disrupted": bad}}))
    assert msg == (
        "t.yaml: spec.vertical.disruption.max_disrupted: must be an integer >= 1 or a "
        f"percentage (e.g. 3 or 20%), not {shown(bad)}"
    )


def test_hysteresis_thresholds():
    b = VerticalScalingBehavior.model_validate(
        {
            "scale_up": {"type": "percent", "percent": 10},
            "scale_down": {"type": "absolute", "absolute": {"cpu": "100m", "memory": "64Mi"}},
        }
    )
    assert not b.is_significant("cpu", 1000, 1050)
    assert b.is_significant("cpu", 1000, 1100)
    assert not b.is_significant("cpu", 1000, 950)
    assert b.is_significant("cpu", 1000, 900)
    assert not b.is_significant("memory", GIB, GIB - 32 * MIB)
    assert not b.is_significant("memory", GIB, GIB)
    h = HorizontalScalingBehavior.model_validate({"scale_up": {"type": "absolute", "absolute": 2}})
    assert not h.is_significant(4, 5) and h.is_significant(4, 6) and h.is_significant(4, 3)


def test_threshold_type_needs_its_value():
    msg = error_of(target(vertical={"scaling_behavior": {"scale_up": {"type": "absolute"}}}))
    assert (
        "spec.vertical.scaling_behavior.scale_up: absolute is required when type is absolute" in msg
    )


# ---- cross-field rules (the same as the CRD's CEL rules) --------------------------------


def test_exactly_one_of_scale_target_ref_or_selector():
    obj = target()
    del obj["spec"]["scaleTargetRef"]
    assert error_of(obj) == "t.yaml: spec: exactly one of scaleTargetRef or selector must be set"
    obj["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    assert parse_target(obj).spec.selector.matches({"app": "web", "x": "y"})
    obj["spec"]["scaleTargetRef"] = {"kind": "Deployment", "name": "web"}
    assert "exactly one of scaleTargetRef or selector" in error_of(obj)


def test_selector_is_vertical_only():
    obj = target(horizontal={})
    del obj["spec"]["scaleTargetRef"]
    obj["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    assert "horizontal needs scaleTargetRef" in error_of(obj)


def test_cron_xor_interval():
    msg = error_of(target(model={"forecast_interval": "5m", "forecast_cron": "*/5 * * * *"}))
    assert msg == "t.yaml: spec.model: forecast_interval and forecast_cron are mutually exclusive"


def test_interval_at_most_blocks():
    msg = error_of(target(model={"forecast_blocks": "15m", "forecast_interval": "30m"}))
    assert msg == (
        "t.yaml: spec.model: forecast_interval (30m) must not exceed forecast_blocks (15m)"
    )


def test_percentile_value_iff_mode_percentile():
    msg = error_of(target(model={"mode": "percentile"}))
    assert msg == "t.yaml: spec.model: percentile_value is required when mode is percentile"
    msg = error_of(target(model={"mode": "balanced", "percentile_value": 90}))
    assert msg == "t.yaml: spec.model: percentile_value is only allowed when mode is percentile"


def test_min_replicas_at_most_max():
    msg = error_of(target(horizontal={"minReplicas": 5, "maxReplicas": 3}))
    assert msg == "t.yaml: spec.horizontal: minReplicas (5) must not exceed maxReplicas (3)"


def test_multiple_of_xor_allowed_replicas():
    msg = error_of(target(horizontal={"multipleOf": 2, "allowedReplicas": [2, 4]}))
    assert msg == "t.yaml: spec.horizontal: multipleOf and allowedReplicas are mutually exclusive"


def test_only_one_direction_autonomous():
    msg = error_of(target(vertical={"mode": "auto"}, horizontal={"mode": "autonomous"}))
    assert msg == "t.yaml: spec: only one of vertical.mode and horizontal.mode may be autonomous"
    parse_target(target(vertical={"mode": "auto"}, horizontal={"mode": "rec"}))


def test_min_lookback_floor():
    msg = error_of(target(model={"min_lookback_to_scale": "2h"}))
    assert msg == "t.yaml: spec.model: min_lookback_to_scale must be at least 3h"


def test_bounds_order_and_duplicate_containers():
    msg = error_of(
        target(
            vertical={"containers": [{"name": "a", "cpu": {"lowerbound": 2, "upperbound": "1"}}]}
        )
    )
    # The rule across the two bounds names the upperbound and both amounts (N-08: as the
    # webhook's own re-check did before it was deleted).
    assert msg == "t.yaml: spec.vertical.containers[0].cpu.upperbound: 1 is below lowerbound 2"
    msg = error_of(target(vertical={"containers": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}))
    assert msg == (
        "t.yaml: spec.vertical.containers[2].name: container 'a' is listed twice"
        " (first at containers[0])"
    )


def test_errors_name_nested_fields_and_every_problem():
    obj = target(
        vertical={
            "containers": [
                {
                    "name": "app",
                    "cpu": {"upperbound": "0.5", "lowerbound": "1"},
                    "memory": {"lowerbound": "lots"},
                }
            ],
            "update_policy": {"update_mode": "sometimes"},
            "disruption": {"stall_timeout": "soon"},
            "typo_field": 1,
        }
    )
    msg = error_of(obj)
    assert "t.yaml: spec.vertical.containers[0].cpu.upperbound: 500m is below lowerbound 1" in msg
    assert "t.yaml: spec.vertical.containers[0].memory.lowerbound: not a quantity" in msg
    assert "t.yaml: spec.vertical.update_policy.update_mode: must be one of initial" in msg
    assert "t.yaml: spec.vertical.disruption.stall_timeout: not a duration" in msg
    assert "t.yaml: spec.vertical.typo_field: unknown field" in msg


def test_wrong_kind_and_non_mapping():
    obj = target()
    obj["kind"] = "DaemonSetAutoscaler"
    assert "kind must be AIScaleTarget" in error_of(obj)
    with pytest.raises(ForesizeError, match=r"x\.yaml: expected a mapping"):
        parse_target(["nope"], "x.yaml")  # type: ignore[arg-type]


# ---- the other kinds ------------------------------------------------------------------


def test_daemonset_autoscaler_defaults_and_rules():
    obj = {
        "apiVersion": "foresize.io/v1",
        "kind": "DaemonSetAutoscaler",
        "metadata": {"name": "agent", "namespace": "mon"},
        "spec": {"scaleTargetRef": {"name": "node-agent"}, "scaleMode": "auto"},
    }
    d = parse_daemonset_autoscaler(obj)
    assert isinstance(d, DaemonSetAutoscaler)
    s = d.spec
    assert (s.scaleTargetRef.kind, s.scaleTargetRef.apiVersion) == ("DaemonSet", "apps/v1")
    assert s.scaleMode == "autonomous"
    assert (s.percentile, s.observationWindow, s.minObservationWindow, s.scaleInterval) == (
        90.0,
        8 * 86400,
        3 * 3600,
        900,
    )
    obj["spec"].update(observationWindow="2h", minObservationWindow="3h")
    with pytest.raises(ForesizeError, match="spec: minObservationWindow must not exceed"):
        parse_daemonset_autoscaler(obj, "d.yaml")


def test_cluster_template_namespaces_and_build():
    obj = {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScaleTemplate",
        "metadata": {"name": "fleet"},
        "spec": {
            "selector": {
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]
            },
            "template": {"spec": {"vertical": {"mode": "rec"}}},
            "excludedNamespaces": ["legacy"],
        },
    }
    tpl = parse_template(obj)
    assert isinstance(tpl, ClusterAIScaleTemplate)
    s = tpl.spec
    assert s.conflictResolution == "skip" and s.kinds == ["Deployment", "StatefulSet", "Rollout"]
    assert s.selects_namespace("shop") and not s.selects_namespace("legacy")
    assert not s.selects_namespace("kube-system")
    assert s.selector.matches({"tier": "web"}) and not s.selector.matches({"tier": "db"})
    t = s.build_target("StatefulSet", "db", "shop", template_name="fleet")
    assert isinstance(t, AIScaleTarget)
    assert t.spec.scaleTargetRef.kind == "StatefulSet" and t.spec.vertical.mode == "recommendation"
    assert t.metadata.labels == {"foresize.io/template": "fleet"}
    obj["spec"]["includedNamespaces"] = ["shop"]
    with pytest.raises(ForesizeError, match="mutually exclusive"):
        parse_template(obj)
    obj["spec"]["template"]["spec"] = {"vertical": {"mode": "auto"}, "horizontal": {"mode": "auto"}}
    del obj["spec"]["excludedNamespaces"]
    with pytest.raises(ForesizeError, match=r"spec\.template\.spec: only one of"):
        parse_template(obj, "fleet.yaml")


def test_parse_object_dispatches_on_kind():
    assert isinstance(parse_object(target()), AIScaleTarget)
    with pytest.raises(ForesizeError, match=r"f\.yaml: kind: must be one of"):
        parse_object({"kind": "Pod"}, "f.yaml")
