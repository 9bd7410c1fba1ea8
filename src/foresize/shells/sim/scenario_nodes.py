"""The node sections of a scenario file: priced `node_types` and the `node_autoscaler`
(Karpenter-like or Cluster-Autoscaler-like, `foresize.shells.sim.cluster.nodes`); every mistake a
`ForesizeError` naming the field."""

from __future__ import annotations

import re
from typing import Any

from foresize.core.api.duration import shown
from foresize.core.cluster.model import DO_NOT_DISRUPT, SAFE_TO_EVICT
from foresize.shells.sim.scenario_fields import FieldReader
from foresize.shells.sim.scenario_spec import (
    CLUSTER_AUTOSCALER,
    KARPENTER,
    NODE_AUTOSCALER_FLAVOURS,
    WHEN_EMPTY,
    WHEN_EMPTY_OR_UNDERUTILIZED,
    NodeAutoscalerSpec,
    NodeTypeSpec,
    Scenario,
)

NODE_TYPE_FIELDS = {"name", "cpu", "memory", "capacity_cpu", "capacity_memory", "price_per_hour"}
KARPENTER_FIELDS = {
    "batch_idle_duration",
    "batch_max_duration",
    "consolidation_policy",
    "consolidate_after",
    "disruption_budget",
}
CLUSTER_AUTOSCALER_FIELDS = {
    "scan_interval",
    "scale_down_utilization_threshold",
    "scale_down_unneeded_time",
    "scale_down_delay_after_add",
    "max_empty_bulk_delete",
    "max_pod_eviction_time",
    "min_nodes",
}
COMMON_FIELDS = {"flavour", "node_types", "max_nodes", "startup_delay"}
# A NodePool budget's `nodes`: an integer or a percentage (the CRD's pattern).
_BUDGET = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")

# Annotations whose values the node autoscalers read: only these spellings mean anything
# to them, so a scenario with another value is a mistake worth naming.
_ANNOTATION_VALUES = {DO_NOT_DISRUPT: ("true", "false"), SAFE_TO_EVICT: ("true", "false")}


def read_node_types(ctx: FieldReader, top: dict[str, Any], sc: Scenario) -> None:
    """The `node_types` section: name, size and a positive price per hour each."""
    for i, raw in enumerate(ctx.seq(top.get("node_types"), "node_types")):
        path = f"node_types[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(m, NODE_TYPE_FIELDS | {"labels"}, path)
        name = ctx.string(m.get("name"), f"{path}.name")
        if name in sc.node_types:
            raise ctx.fail(f"{path}.name", f"duplicate node type {shown(name)}")
        for req in ("cpu", "memory", "price_per_hour"):
            if req not in m:
                raise ctx.fail(f"{path}.{req}", "required field is missing")
        cpu = ctx.quantity("cpu", m["cpu"], f"{path}.cpu")
        mem = ctx.quantity("memory", m["memory"], f"{path}.memory")
        if cpu <= 0 or mem <= 0:
            raise ctx.fail(f"{path}.{'cpu' if cpu <= 0 else 'memory'}", "must be positive")
        price = ctx.number(m["price_per_hour"], f"{path}.price_per_hour", 0.0, minimum=None)
        if price <= 0:
            raise ctx.fail(
                f"{path}.price_per_hour", f"must be a positive price per hour, got {shown(price)}"
            )
        sc.node_types[name] = NodeTypeSpec(
            name,
            cpu,
            mem,
            ctx.quantity("cpu", m["capacity_cpu"], f"{path}.capacity_cpu")
            if "capacity_cpu" in m
            else cpu,
            ctx.quantity("memory", m["capacity_memory"], f"{path}.capacity_memory")
            if "capacity_memory" in m
            else mem,
            price,
            ctx.labels(m.get("labels"), f"{path}.labels"),
        )


def node_type(ctx: FieldReader, sc: Scenario, value: Any, path: str) -> NodeTypeSpec:
    """The node type a field names, or an error listing the known ones."""
    name = ctx.string(value, path)
    if name not in sc.node_types:
        known = ", ".join(sc.node_types) or "none: define them under node_types"
        raise ctx.fail(path, f"unknown node type {shown(name)} (known: {known})")
    return sc.node_types[name]


def read_node_autoscaler(ctx: FieldReader, top: dict[str, Any], sc: Scenario) -> None:
    """The optional `node_autoscaler` section."""
    if top.get("node_autoscaler") is None:
        return
    path = "node_autoscaler"
    m = ctx.mapping(top["node_autoscaler"], path)
    flavour = ctx.string(m.get("flavour"), f"{path}.flavour")
    if flavour not in NODE_AUTOSCALER_FLAVOURS:
        raise ctx.fail(
            f"{path}.flavour",
            f"unknown flavour {shown(flavour)} (one of {', '.join(NODE_AUTOSCALER_FLAVOURS)})",
        )
    own = KARPENTER_FIELDS if flavour == KARPENTER else CLUSTER_AUTOSCALER_FIELDS
    for key in m:
        if key not in COMMON_FIELDS | own and key in KARPENTER_FIELDS | CLUSTER_AUTOSCALER_FIELDS:
            raise ctx.fail(f"{path}.{key}", f"not a setting of the {flavour} flavour")
    ctx.known(m, COMMON_FIELDS | own, path)
    names = ctx.seq(m.get("node_types"), f"{path}.node_types")
    if not names:
        if not sc.node_types:
            raise ctx.fail(f"{path}.node_types", "a node autoscaler needs node_types to launch")
        names = list(sc.node_types)
    pool = [node_type(ctx, sc, v, f"{path}.node_types[{j}]").name for j, v in enumerate(names)]
    spec = NodeAutoscalerSpec(flavour, list(dict.fromkeys(pool)))
    spec.max_nodes = ctx.integer(m.get("max_nodes"), f"{path}.max_nodes", 20, minimum=1)
    spec.startup_delay = ctx.duration(m.get("startup_delay"), f"{path}.startup_delay", 60.0)
    if flavour == KARPENTER:
        _read_karpenter(ctx, m, path, spec)
    else:
        _read_cluster_autoscaler(ctx, m, path, spec)
    sc.node_autoscaler = spec


def _read_karpenter(
    ctx: FieldReader, m: dict[str, Any], path: str, spec: NodeAutoscalerSpec
) -> None:
    spec.batch_idle_duration = ctx.duration(
        m.get("batch_idle_duration"), f"{path}.batch_idle_duration", 1.0
    )
    spec.batch_max_duration = ctx.duration(
        m.get("batch_max_duration"), f"{path}.batch_max_duration", 10.0
    )
    if spec.batch_max_duration < spec.batch_idle_duration:
        raise ctx.fail(f"{path}.batch_max_duration", "must not be below batch_idle_duration")
    policy = ctx.string(
        m.get("consolidation_policy"),
        f"{path}.consolidation_policy",
        required=False,
        default=WHEN_EMPTY_OR_UNDERUTILIZED,
    )
    if policy not in (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED):
        raise ctx.fail(
            f"{path}.consolidation_policy",
            f"must be {WHEN_EMPTY} or {WHEN_EMPTY_OR_UNDERUTILIZED}, got {shown(policy)}",
        )
    spec.consolidation_policy = policy
    after = m.get("consolidate_after")
    spec.consolidate_after = (
        None if after == "Never" else ctx.duration(after, f"{path}.consolidate_after", 0.0)
    )
    budget = m.get("disruption_budget", "10%")
    text = str(budget).strip() if isinstance(budget, int | str) else ""
    if isinstance(budget, bool) or not _BUDGET.match(text):
        raise ctx.fail(
            f"{path}.disruption_budget",
            f"expected a node count or a percentage up to 100%, got {shown(budget)}",
        )
    if int(text.rstrip("%")) == 0:
        raise ctx.fail(
            f"{path}.disruption_budget",
            f"{shown(budget)} allows no node to be disrupted: consolidation could never act "
            "(to turn it off, set consolidate_after: Never)",
        )
    spec.disruption_budget = text if text.endswith("%") else int(text)


def _read_cluster_autoscaler(
    ctx: FieldReader, m: dict[str, Any], path: str, spec: NodeAutoscalerSpec
) -> None:
    spec.scan_interval = ctx.duration(m.get("scan_interval"), f"{path}.scan_interval", 10.0)
    if spec.scan_interval <= 0:
        raise ctx.fail(f"{path}.scan_interval", "must be positive")
    threshold = ctx.number(
        m.get("scale_down_utilization_threshold"),
        f"{path}.scale_down_utilization_threshold",
        0.5,
    )
    if not 0 < threshold <= 1:
        raise ctx.fail(
            f"{path}.scale_down_utilization_threshold",
            f"must be above 0 and at most 1, got {shown(threshold)}",
        )
    spec.scale_down_utilization_threshold = threshold
    spec.scale_down_unneeded_time = ctx.duration(
        m.get("scale_down_unneeded_time"), f"{path}.scale_down_unneeded_time", 600.0
    )
    spec.scale_down_delay_after_add = ctx.duration(
        m.get("scale_down_delay_after_add"), f"{path}.scale_down_delay_after_add", 600.0
    )
    spec.max_empty_bulk_delete = ctx.integer(
        m.get("max_empty_bulk_delete"), f"{path}.max_empty_bulk_delete", 10, minimum=1
    )
    spec.max_pod_eviction_time = ctx.duration(
        m.get("max_pod_eviction_time"), f"{path}.max_pod_eviction_time", 120.0
    )
    spec.min_nodes = ctx.integer(m.get("min_nodes"), f"{path}.min_nodes", 0)
    if spec.min_nodes > spec.max_nodes:
        raise ctx.fail(f"{path}.min_nodes", f"must not exceed max_nodes ({spec.max_nodes})")


def read_annotations(ctx: FieldReader, value: Any, path: str) -> dict[str, str]:
    """A workload's pod annotations: label-key syntax, string values, and the values the
    node autoscalers understand for their own annotations."""
    out: dict[str, str] = {}
    for k, v in ctx.mapping(value, path).items():
        key = str(k)
        if not isinstance(v, str):
            raise ctx.fail(f"{path}.{key}", f"annotation values are strings, got {shown(v)}")
        allowed = _ANNOTATION_VALUES.get(key)
        if allowed is not None and v not in allowed:
            raise ctx.fail(
                f"{path}.{key}", f"must be {' or '.join(map(repr, allowed))}, got {shown(v)}"
            )
        out[key] = v
    ctx.labels({k: "x" for k in out}, path)  # the keys follow the label-key syntax
    return out


__all__ = [
    "CLUSTER_AUTOSCALER",
    "KARPENTER",
    "node_type",
    "read_annotations",
    "read_node_autoscaler",
    "read_node_types",
]
