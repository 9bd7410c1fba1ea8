"""Scenario files: the YAML description of a simulated cluster.

A scenario lists nodes, workloads (Deployment, StatefulSet, DaemonSet, Job) with their
containers, requests/limits and usage generators, PodDisruptionBudgets, HPAs and priority
classes. Every mistake is reported as a `ForesizeError` naming the file, the path inside it
(e.g. `workloads[2].containers[0].requests.cpu`) and the problem. See docs/simulator.md for
the format; `foresize simulate --scenario demo` uses the built-in `scenarios/demo.yaml`.

The parsed types live in `foresize.shells.sim.scenario_spec` and the field readers in
`foresize.shells.sim.scenario_fields`; both are importable from here as before.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Any

from foresize.adapters.files import load_one_with_lines, read_text
from foresize.core.api.duration import parse_duration, shown
from foresize.core.api.names import dns_label_error, dns_subdomain_error
from foresize.core.cluster.model import VerticalClaim
from foresize.core.errors import ForesizeError
from foresize.shells.sim.scenario_fields import (
    WORKLOAD_FIELDS,
    FieldReader,
    budget_value,
    read_container,
    read_resources,
)
from foresize.shells.sim.scenario_hpa import read_hpas
from foresize.shells.sim.scenario_nodes import (
    node_type,
    read_annotations,
    read_node_autoscaler,
    read_node_types,
)
from foresize.shells.sim.scenario_policies import read_policies
from foresize.shells.sim.scenario_spec import (
    ContainerSpec,
    HPABehavior,
    HPAMetricSpec,
    HPAScalingPolicy,
    HPAScalingRules,
    HPASpec,
    NodeAutoscalerSpec,
    NodeSpec,
    NodeTypeSpec,
    PDBSpec,
    Scenario,
    WorkloadSpec,
)

__all__ = [
    "MAX_POD_STEPS",
    "ContainerSpec",
    "HPABehavior",
    "HPAMetricSpec",
    "HPAScalingPolicy",
    "HPAScalingRules",
    "HPASpec",
    "NodeAutoscalerSpec",
    "NodeSpec",
    "NodeTypeSpec",
    "PDBSpec",
    "Scenario",
    "WorkloadSpec",
    "builtin_scenarios",
    "check_run_size",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
]

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")

# Size limits, refused up front naming the number: without them `count: 100000` hung the
# simulator and `count: 1000000000` ran out of memory. The simulator steps every pod every
# step in Python; these are ten times the biggest built-in scenario and a run of the limit
# still finishes in minutes, not hours.
MAX_NODES = 2_000
MAX_REPLICAS = 5_000
MAX_PODS = 10_000
# pods x steps of one run: 10,000 pods for 2 days at 60 s, or 500 pods for 40 days.
MAX_POD_STEPS = 30_000_000


def parse_scenario(
    data: Any, source: str, base_dir: Path | None = None, lines: dict[str, int] | None = None
) -> Scenario:
    """Validate a loaded YAML document and build the Scenario; `lines` (field path -> line
    in the file) puts the line into each error."""
    ctx = FieldReader(source, base_dir, lines)
    top = ctx.mapping(data, "")
    ctx.known(
        top,
        {
            "name",
            "description",
            "seed",
            "hpa_sync_period",
            "nodes",
            "workloads",
            "pdbs",
            "hpas",
            "vertical_autoscalers",
            "priority_classes",
            "node_types",
            "node_autoscaler",
            "policies",
            "namespaces",
        },
        "",
    )
    sc = Scenario(
        name=ctx.string(top.get("name"), "name", required=False, default=Path(source).stem),
        source=source,
    )
    sc.description = str(top.get("description") or "")
    if top.get("seed") is not None:
        sc.seed = ctx.integer(top.get("seed"), "seed", 0)
    sc.hpa_sync_period = ctx.duration(top.get("hpa_sync_period"), "hpa_sync_period", 15.0)
    if sc.hpa_sync_period <= 0:
        raise ctx.fail("hpa_sync_period", "must be positive")
    classes: dict[str, int] = {}
    for k, v in ctx.mapping(top.get("priority_classes"), "priority_classes").items():
        classes[str(k)] = ctx.integer(v, f"priority_classes.{k}", 0, minimum=-(2**31))

    read_node_types(ctx, top, sc)
    _read_nodes(ctx, top, sc)
    read_node_autoscaler(ctx, top, sc)
    seen_wl: set[tuple[str, str, str]] = set()
    for i, raw in enumerate(ctx.seq(top.get("workloads"), "workloads")):
        sc.workloads.append(_read_workload(ctx, raw, f"workloads[{i}]", classes, seen_wl))
    _read_pdbs(ctx, top, sc)
    read_hpas(ctx, top, sc, seen_wl, max_replicas=MAX_REPLICAS)
    _read_vertical_autoscalers(ctx, top, sc)
    read_policies(ctx, top, sc)
    _check_size(ctx, sc)
    return sc


def _read_nodes(ctx: FieldReader, top: dict[str, Any], sc: Scenario) -> None:
    """The `nodes` section: each entry expanded to `count` named nodes."""
    seen_nodes: set[str] = set()
    for i, raw in enumerate(ctx.seq(top.get("nodes"), "nodes")):
        path = f"nodes[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(
            m,
            {
                "name",
                "count",
                "cpu",
                "memory",
                "capacity_cpu",
                "capacity_memory",
                "labels",
                "add_at",
                "type",
            },
            path,
        )
        name = ctx.string(m.get("name"), f"{path}.name")
        count = ctx.integer(m.get("count"), f"{path}.count", 1, minimum=1, maximum=MAX_NODES)
        typ = node_type(ctx, sc, m["type"], f"{path}.type") if "type" in m else None
        size = {"cpu": typ.cpu, "memory": typ.memory} if typ is not None else {}
        for req in ("cpu", "memory"):
            if req not in m and typ is None:
                raise ctx.fail(f"{path}.{req}", "required field is missing (or give a type)")
            if req in m:
                size[req] = ctx.quantity(req, m[req], f"{path}.{req}")
        cpu, mem = size["cpu"], size["memory"]
        # A typed node's capacity is its type's, unless its size is given here.
        cap_cpu = typ.capacity_cpu if typ is not None and "cpu" not in m else cpu
        cap_mem = typ.capacity_memory if typ is not None and "memory" not in m else mem
        if "capacity_cpu" in m:
            cap_cpu = ctx.quantity("cpu", m["capacity_cpu"], f"{path}.capacity_cpu")
        if "capacity_memory" in m:
            cap_mem = ctx.quantity("memory", m["capacity_memory"], f"{path}.capacity_memory")
        labels = ctx.labels(m.get("labels"), f"{path}.labels")
        add_at = ctx.duration(m.get("add_at"), f"{path}.add_at", 0.0)
        for j in range(count):
            node_name = name if count == 1 else f"{name}-{j}"
            if node_name in seen_nodes:
                raise ctx.fail(f"{path}.name", f"duplicate node name {shown(node_name)}")
            seen_nodes.add(node_name)
            sc.nodes.append(
                NodeSpec(
                    node_name,
                    cpu,
                    mem,
                    cap_cpu,
                    cap_mem,
                    {**(typ.labels if typ else {}), **labels},
                    add_at,
                    typ.name if typ else "",
                    typ.price_per_hour if typ else 0.0,
                )
            )
    if not sc.nodes:
        raise ctx.fail("nodes", "a scenario needs at least one node")


def _read_workload(
    ctx: FieldReader,
    raw: Any,
    path: str,
    classes: dict[str, int],
    seen_wl: set[tuple[str, str, str]],
) -> WorkloadSpec:
    """One entry of `workloads`; records its (kind, namespace, name) in `seen_wl`."""
    m = ctx.mapping(raw, path)
    ctx.known(m, WORKLOAD_FIELDS, path)
    kind = ctx.string(m.get("kind"), f"{path}.kind", required=False, default="Deployment")
    if kind not in WORKLOAD_KINDS:
        raise ctx.fail(
            f"{path}.kind", f"unknown kind {shown(kind)} (one of {', '.join(WORKLOAD_KINDS)})"
        )
    w = WorkloadSpec(kind=kind, name=ctx.string(m.get("name"), f"{path}.name"))
    why = dns_subdomain_error(w.name)  # what the API server refuses
    if why:
        raise ctx.fail(f"{path}.name", f"{shown(w.name)} is not a valid name: {why}")
    w.namespace = ctx.string(
        m.get("namespace"), f"{path}.namespace", required=False, default="default"
    )
    why = dns_label_error(w.namespace)
    if why:
        raise ctx.fail(f"{path}.namespace", f"{shown(w.namespace)} is not a valid namespace: {why}")
    key = (w.kind, w.namespace, w.name)
    if key in seen_wl:
        raise ctx.fail(f"{path}.name", f"duplicate workload {kind}/{w.namespace}/{w.name}")
    seen_wl.add(key)
    w.replicas = ctx.integer(m.get("replicas"), f"{path}.replicas", 1, maximum=MAX_REPLICAS)
    if "policy" in m:
        w.policy = ctx.string(m["policy"], f"{path}.policy")
    w.labels = ctx.labels(m.get("labels"), f"{path}.labels") or {"app": w.name}
    w.annotations = read_annotations(ctx, m.get("annotations"), f"{path}.annotations")
    if "priority_class" in m:
        pc = ctx.string(m["priority_class"], f"{path}.priority_class")
        if pc not in classes:
            raise ctx.fail(
                f"{path}.priority_class",
                f"unknown priority class {shown(pc)} (define it under priority_classes)",
            )
        w.priority = classes[pc]
    w.priority = ctx.integer(m.get("priority"), f"{path}.priority", w.priority, minimum=-(2**31))
    w.readiness_delay = ctx.duration(m.get("readiness_delay"), f"{path}.readiness_delay", 10.0)
    w.termination_grace = ctx.duration(
        m.get("termination_grace"), f"{path}.termination_grace", 30.0
    )
    w.load_shared = bool(m.get("load_shared", False))
    w.jitter = ctx.number(m.get("jitter"), f"{path}.jitter", 0.1)
    if w.jitter >= 1:
        raise ctx.fail(f"{path}.jitter", "must be below 1")
    w.completions = ctx.integer(
        m.get("completions"), f"{path}.completions", 1, minimum=1, maximum=MAX_REPLICAS
    )
    w.parallelism = ctx.integer(
        m.get("parallelism"), f"{path}.parallelism", 1, minimum=1, maximum=MAX_REPLICAS
    )
    w.run_time = ctx.duration(m.get("run_time"), f"{path}.run_time", 3600.0)
    if "every" in m:
        w.every = ctx.duration(m["every"], f"{path}.every", 0.0)
        if w.every <= 0:
            raise ctx.fail(f"{path}.every", "must be positive")
    if kind == "CronJob" and w.every is None:
        raise ctx.fail(f"{path}.every", "a CronJob needs its schedule's period (every: 24h)")
    if "first_run" in m:
        if kind != "CronJob":
            raise ctx.fail(f"{path}.first_run", "only a CronJob has a first_run")
        w.first_run = ctx.duration(m["first_run"], f"{path}.first_run", 0.0)
    _read_containers(ctx, m, path, w)
    _read_pod_resources(ctx, m, path, w)
    w.overhead = read_resources(ctx, m.get("overhead"), f"{path}.overhead")
    return w


def _read_containers(ctx: FieldReader, m: dict[str, Any], path: str, w: WorkloadSpec) -> None:
    """A workload's containers and init containers (names unique across both)."""
    containers = ctx.seq(m.get("containers"), f"{path}.containers")
    if not containers:
        raise ctx.fail(f"{path}.containers", "a workload needs at least one container")
    names: set[str] = set()
    for j, rc in enumerate(containers):
        c = read_container(ctx, rc, f"{path}.containers[{j}]")
        if c.name in names:
            raise ctx.fail(
                f"{path}.containers[{j}].name", f"duplicate container name {shown(c.name)}"
            )
        names.add(c.name)
        w.containers.append(c)
    for j, rc in enumerate(ctx.seq(m.get("init_containers"), f"{path}.init_containers")):
        c = read_container(ctx, rc, f"{path}.init_containers[{j}]", init=True)
        if c.name in names:
            raise ctx.fail(
                f"{path}.init_containers[{j}].name", f"duplicate container name {c.name!r}"
            )
        names.add(c.name)
        w.init_containers.append(c)


def _read_pod_resources(ctx: FieldReader, m: dict[str, Any], path: str, w: WorkloadSpec) -> None:
    """A workload's pod-level `resources` (cpu and memory only, requests <= limits)."""
    pod_res = ctx.mapping(m.get("resources"), f"{path}.resources")
    ctx.known(pod_res, {"requests", "limits"}, f"{path}.resources")
    w.pod_requests = read_resources(ctx, pod_res.get("requests"), f"{path}.resources.requests")
    w.pod_limits = read_resources(ctx, pod_res.get("limits"), f"{path}.resources.limits")
    for res in (*w.pod_requests, *w.pod_limits):
        if res not in ("cpu", "memory"):
            raise ctx.fail(
                f"{path}.resources", f"pod-level resources are cpu and memory only, got {res!r}"
            )
    for res in ("cpu", "memory"):
        pod_req, pod_lim = w.pod_requests.get(res), w.pod_limits.get(res)
        if pod_req is not None and pod_lim is not None and pod_req > pod_lim:
            raise ctx.fail(
                f"{path}.resources.requests.{res}",
                f"must be less than or equal to the pod-level {res} limit",
            )


def _read_pdbs(ctx: FieldReader, top: dict[str, Any], sc: Scenario) -> None:
    """The `pdbs` section."""
    for i, raw in enumerate(ctx.seq(top.get("pdbs"), "pdbs")):
        path = f"pdbs[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(
            m,
            {
                "name",
                "namespace",
                "selector",
                "min_available",
                "max_unavailable",
                "unhealthy_pod_eviction_policy",
            },
            path,
        )
        policy = ctx.string(
            m.get("unhealthy_pod_eviction_policy"),
            f"{path}.unhealthy_pod_eviction_policy",
            required=False,
            default="IfHealthyBudget",
        )
        if policy not in ("IfHealthyBudget", "AlwaysAllow"):
            raise ctx.fail(
                f"{path}.unhealthy_pod_eviction_policy",
                f"must be IfHealthyBudget or AlwaysAllow, got {policy!r}",
            )
        selector = ctx.labels(m.get("selector"), f"{path}.selector")
        if not selector:
            raise ctx.fail(f"{path}.selector", "required (matchLabels)")
        has_min = m.get("min_available") is not None
        has_max = m.get("max_unavailable") is not None
        if has_min == has_max:
            raise ctx.fail(path, "exactly one of min_available and max_unavailable is required")
        sc.pdbs.append(
            PDBSpec(
                ctx.string(m.get("name"), f"{path}.name"),
                ctx.string(
                    m.get("namespace"), f"{path}.namespace", required=False, default="default"
                ),
                selector,
                budget_value(ctx, m["min_available"], f"{path}.min_available") if has_min else None,
                budget_value(ctx, m["max_unavailable"], f"{path}.max_unavailable")
                if has_max
                else None,
                policy,
            )
        )


VERTICAL_AUTOSCALER_KINDS = ("VerticalPodAutoscaler", "MultidimPodAutoscaler")


def _read_vertical_autoscalers(ctx: FieldReader, top: dict[str, Any], sc: Scenario) -> None:
    """`vertical_autoscalers`: other vertical autoscalers' objects on the scenario's
    workloads (only their claim matters: Foresize leaves those workloads alone). The
    target may name a workload the scenario does not have, as a stale VPA does."""
    path0 = "vertical_autoscalers"
    for i, raw in enumerate(ctx.seq(top.get(path0), path0)):
        path = f"{path0}[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(m, {"kind", "name", "namespace", "target", "update_mode"}, path)
        kind = ctx.string(
            m.get("kind"), f"{path}.kind", required=False, default="VerticalPodAutoscaler"
        )
        if kind not in VERTICAL_AUTOSCALER_KINDS:
            raise ctx.fail(
                f"{path}.kind",
                f"must be one of {', '.join(VERTICAL_AUTOSCALER_KINDS)}, got {shown(kind)}",
            )
        target = ctx.mapping(m.get("target"), f"{path}.target")
        ctx.known(target, {"kind", "name"}, f"{path}.target")
        sc.vertical_autoscalers.append(
            VerticalClaim(
                kind,
                ctx.string(
                    m.get("namespace"), f"{path}.namespace", required=False, default="default"
                ),
                ctx.string(m.get("name"), f"{path}.name"),
                ctx.string(
                    target.get("kind"), f"{path}.target.kind", required=False, default="Deployment"
                ),
                ctx.string(target.get("name"), f"{path}.target.name"),
                ctx.string(
                    m.get("update_mode"), f"{path}.update_mode", required=False, default="Auto"
                ),
            )
        )


def peak_pods(sc: Scenario) -> int:
    """The most pods the scenario can run at once: every workload at its replicas, or at
    its HPA's max_replicas when that is higher (a DaemonSet counts one pod per node)."""
    hpa_max = {(h.target_kind, h.namespace, h.target_name): h.max_replicas for h in sc.hpas}
    nodes = node_count(sc)
    pods = 0
    for w in sc.workloads:
        if w.kind == "DaemonSet":
            pods += nodes
        elif w.kind in ("Job", "CronJob"):
            pods += w.parallelism
        else:
            pods += max(w.replicas, hpa_max.get((w.kind, w.namespace, w.name), 0))
    return pods


def node_count(sc: Scenario) -> int:
    """Nodes at the start plus the most the node autoscaler may add."""
    return len(sc.nodes) + (sc.node_autoscaler.max_nodes if sc.node_autoscaler else 0)


def _check_size(ctx: FieldReader, sc: Scenario) -> None:
    nodes = node_count(sc)
    if nodes > MAX_NODES:
        raise ctx.fail(
            "nodes", f"{nodes} nodes in all (node autoscaler included); at most {MAX_NODES}"
        )
    pods = peak_pods(sc)
    if pods > MAX_PODS:
        raise ctx.fail("workloads", f"up to {pods} pods at once; at most {MAX_PODS}")


def check_run_size(sc: Scenario, duration: float, step: float) -> None:
    """Refuse, before anything runs, a run whose pods x steps is beyond `MAX_POD_STEPS`,
    naming the numbers."""
    steps = math.ceil(duration / step) if step > 0 else 0
    pod_steps = peak_pods(sc) * steps
    if pod_steps > MAX_POD_STEPS:
        raise ForesizeError(
            f"{sc.source}: {peak_pods(sc)} pods x {steps} steps = {pod_steps} pod-steps is more "
            f"than {MAX_POD_STEPS}; use a shorter --duration, a longer --step or fewer pods"
        )


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a built-in scenario by name (`demo`) or a scenario YAML file by path."""
    text: str
    base_dir: Path | None
    candidate = Path(name_or_path)
    builtin = resources.files("foresize.shells.sim").joinpath("scenarios", f"{name_or_path}.yaml")
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        text = read_text(candidate, what="scenario")
        source, base_dir = str(candidate), candidate.parent
    elif builtin.is_file():
        text = builtin.read_text()
        source, base_dir = f"<built-in scenario {name_or_path}>", None
    else:
        raise ForesizeError(
            f"{name_or_path}: no such scenario file, and not a built-in scenario "
            f"(built-in: {', '.join(builtin_scenarios())})"
        )
    data, lines = load_one_with_lines(text, source)
    return parse_scenario(data, source, base_dir, lines)


def builtin_scenarios() -> list[str]:
    folder = resources.files("foresize.shells.sim").joinpath("scenarios")
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )
