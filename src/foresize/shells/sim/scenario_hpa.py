"""The `hpas` section of a scenario file: HorizontalPodAutoscalers as autoscaling/v2 has
them (Resource metrics, `behavior`), with the API server's validation; every mistake a
`ForesizeError` naming the field."""

from __future__ import annotations

from typing import Any

from foresize.core.api.duration import shown
from foresize.shells.sim.scenario_fields import FieldReader
from foresize.shells.sim.scenario_spec import (
    HPABehavior,
    HPAMetricSpec,
    HPAScalingPolicy,
    HPAScalingRules,
    HPASpec,
    Scenario,
)


def read_hpas(
    ctx: FieldReader,
    top: dict[str, Any],
    sc: Scenario,
    seen_wl: set[tuple[str, str, str]],
    *,
    max_replicas: int,
) -> None:
    """The `hpas` section: each targets a Deployment or StatefulSet of this scenario
    (`max_replicas`: the scenario's size limit)."""
    for i, raw in enumerate(ctx.seq(top.get("hpas"), "hpas")):
        path = f"hpas[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(
            m,
            {"name", "namespace", "target", "min_replicas", "max_replicas", "metrics", "behavior"},
            path,
        )
        target = ctx.mapping(m.get("target"), f"{path}.target")
        ctx.known(target, {"kind", "name"}, f"{path}.target")
        t_kind = ctx.string(
            target.get("kind"), f"{path}.target.kind", required=False, default="Deployment"
        )
        t_name = ctx.string(target.get("name"), f"{path}.target.name")
        namespace = ctx.string(
            m.get("namespace"), f"{path}.namespace", required=False, default="default"
        )
        if (t_kind, namespace, t_name) not in seen_wl:
            raise ctx.fail(
                f"{path}.target", f"no workload {t_kind}/{namespace}/{t_name} in this scenario"
            )
        if t_kind not in ("Deployment", "StatefulSet"):
            raise ctx.fail(f"{path}.target.kind", "an HPA scales a Deployment or a StatefulSet")
        lo = ctx.integer(m.get("min_replicas"), f"{path}.min_replicas", 1, minimum=1)
        hi = ctx.integer(
            m.get("max_replicas"), f"{path}.max_replicas", 0, minimum=1, maximum=max_replicas
        )
        if "max_replicas" not in m:
            raise ctx.fail(f"{path}.max_replicas", "required field is missing")
        if lo > hi:
            raise ctx.fail(f"{path}.min_replicas", f"must not exceed max_replicas ({hi})")
        metrics = [
            _read_hpa_metric(ctx, rm, f"{path}.metrics[{j}]")
            for j, rm in enumerate(ctx.seq(m.get("metrics"), f"{path}.metrics"))
        ]
        if not metrics:
            raise ctx.fail(f"{path}.metrics", "an HPA needs at least one metric")
        sc.hpas.append(
            HPASpec(
                ctx.string(m.get("name"), f"{path}.name"),
                namespace,
                t_kind,
                t_name,
                lo,
                hi,
                metrics,
                _read_behavior(ctx, m.get("behavior"), f"{path}.behavior"),
            )
        )


def _read_hpa_metric(ctx: FieldReader, raw: Any, mp: str) -> HPAMetricSpec:
    """`{resource, target_utilization}` (percent of request) or
    `{resource, target_average_value}` (a quantity per pod), as the two Resource targets."""
    mm = ctx.mapping(raw, mp)
    ctx.known(mm, {"resource", "target_utilization", "target_average_value"}, mp)
    res = ctx.string(mm.get("resource"), f"{mp}.resource")
    if res not in ("cpu", "memory"):
        raise ctx.fail(f"{mp}.resource", f"must be cpu or memory, got {shown(res)}")
    has_util = "target_utilization" in mm
    has_value = "target_average_value" in mm
    if has_util == has_value:
        raise ctx.fail(mp, "needs exactly one of target_utilization and target_average_value")
    if has_util:
        util = ctx.integer(mm.get("target_utilization"), f"{mp}.target_utilization", 0, minimum=1)
        return HPAMetricSpec(res, target_utilization=util)
    value = ctx.quantity(res, mm.get("target_average_value"), f"{mp}.target_average_value")
    if value <= 0:
        raise ctx.fail(f"{mp}.target_average_value", "must be positive")
    return HPAMetricSpec(res, target_average_value=value)


SELECT_POLICIES = ("Max", "Min", "Disabled")
POLICY_TYPES = ("Pods", "Percent")
MAX_POLICY_PERIOD = 1800.0  # the API server's bound on periodSeconds
MAX_STABILIZATION_WINDOW = 3600.0  # and on stabilizationWindowSeconds


def _read_behavior(ctx: FieldReader, raw: Any, path: str) -> HPABehavior | None:
    """`behavior: {scale_up, scale_down}` as `spec.behavior` of autoscaling/v2, with the
    API server's validation (periods 1 s to 30 min, windows up to 1 h, values > 0)."""
    if raw is None:
        return None
    m = ctx.mapping(raw, path)
    ctx.known(m, {"scale_up", "scale_down"}, path)
    return HPABehavior(
        _read_rules(ctx, m.get("scale_up"), f"{path}.scale_up"),
        _read_rules(ctx, m.get("scale_down"), f"{path}.scale_down"),
    )


def _read_rules(ctx: FieldReader, raw: Any, path: str) -> HPAScalingRules | None:
    if raw is None:
        return None
    m = ctx.mapping(raw, path)
    ctx.known(m, {"stabilization_window", "select_policy", "policies", "tolerance"}, path)
    window = None
    if "stabilization_window" in m:
        window = ctx.duration(m["stabilization_window"], f"{path}.stabilization_window", 0.0)
        if not 0 <= window <= MAX_STABILIZATION_WINDOW:
            raise ctx.fail(f"{path}.stabilization_window", "must be between 0s and 1h")
    select = None
    if "select_policy" in m:
        select = ctx.string(m["select_policy"], f"{path}.select_policy")
        if select not in SELECT_POLICIES:
            raise ctx.fail(
                f"{path}.select_policy",
                f"must be one of {', '.join(SELECT_POLICIES)}, got {shown(select)}",
            )
    policies = None
    if "policies" in m:
        policies = tuple(
            _read_policy(ctx, p, f"{path}.policies[{i}]")
            for i, p in enumerate(ctx.seq(m["policies"], f"{path}.policies"))
        )
        if not policies and select != "Disabled":
            raise ctx.fail(f"{path}.policies", "must have at least one policy")
    tolerance = None
    if "tolerance" in m:
        tolerance = ctx.number(m["tolerance"], f"{path}.tolerance", 0.0, minimum=0.0)
    return HPAScalingRules(window, select, policies, tolerance)


def _read_policy(ctx: FieldReader, raw: Any, path: str) -> HPAScalingPolicy:
    m = ctx.mapping(raw, path)
    ctx.known(m, {"type", "value", "period"}, path)
    kind = ctx.string(m.get("type"), f"{path}.type")
    if kind not in POLICY_TYPES:
        raise ctx.fail(f"{path}.type", f"must be Pods or Percent, got {shown(kind)}")
    if "value" not in m:
        raise ctx.fail(f"{path}.value", "required field is missing")
    value = ctx.integer(m.get("value"), f"{path}.value", 0, minimum=1)
    if "period" not in m:
        raise ctx.fail(f"{path}.period", "required field is missing")
    period = ctx.duration(m.get("period"), f"{path}.period", 0.0)
    if not 1 <= period <= MAX_POLICY_PERIOD:
        raise ctx.fail(f"{path}.period", "must be between 1s and 30m")
    return HPAScalingPolicy(kind, value, period)
