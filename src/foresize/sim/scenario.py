"""Scenario files: the YAML description of a simulated cluster.

A scenario lists nodes, workloads (Deployment, StatefulSet, DaemonSet, Job) with their
containers, requests/limits and usage generators, PodDisruptionBudgets, HPAs and priority
classes. Every mistake is reported as a `ForesizeError` naming the file, the path inside it
(e.g. `workloads[2].containers[0].requests.cpu`) and the problem. See docs/simulator.md for
the format; `foresize simulate --scenario demo` uses the built-in `scenarios/demo.yaml`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from foresize.api.duration import parse_duration, shown
from foresize.api.labels import label_key_error, label_value_error
from foresize.api.names import dns_label_error, dns_subdomain_error
from foresize.api.quantity import QuantityError, parse_quantity, to_canonical
from foresize.api.safe_yaml import load_one, read_text
from foresize.errors import ForesizeError
from foresize.sim.usage import GENERATOR_KINDS, GeneratorSpec, load_trace

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")

# Size limits, refused up front naming the number: without them `count: 100000` hung the
# simulator and `count: 1000000000` ran out of memory. The simulator steps every pod every
# step in Python; these are ten times the biggest built-in scenario and a run of the limit
# still finishes in minutes, not hours.
MAX_NODES = 2_000
MAX_REPLICAS = 5_000
MAX_PODS = 10_000
# pods x steps of one run: 10,000 pods for 2 days at 60 s, or 500 pods for 40 days.
MAX_POD_STEPS = 30_000_000
# Numbers in a scenario (scales, factors, jitter, noise) and integers (seed, priorities) are
# small in any honest file; these only keep absurd values from reaching the arithmetic.
MAX_NUMBER = 1e6
MAX_INTEGER = 2**31 - 1


@dataclass(slots=True)
class NodeSpec:
    name: str
    cpu: int  # millicores allocatable
    memory: int  # bytes allocatable
    capacity_cpu: int
    capacity_memory: int
    labels: dict[str, str] = field(default_factory=dict)
    add_at: float = 0.0  # seconds into the run at which the node joins


@dataclass(slots=True)
class ContainerSpec:
    name: str
    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    resize_policy: dict[str, str] = field(default_factory=dict)
    cpu: GeneratorSpec = field(default_factory=GeneratorSpec)
    memory: GeneratorSpec = field(default_factory=GeneratorSpec)
    restart_policy: str | None = None  # init containers: "Always" makes a sidecar


@dataclass(slots=True)
class WorkloadSpec:
    kind: str
    name: str
    namespace: str = "default"
    replicas: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    priority: int = 0
    containers: list[ContainerSpec] = field(default_factory=list)
    init_containers: list[ContainerSpec] = field(default_factory=list)
    pod_requests: dict[str, int] = field(default_factory=dict)  # pod-level spec.resources
    pod_limits: dict[str, int] = field(default_factory=dict)
    overhead: dict[str, int] = field(default_factory=dict)  # the RuntimeClass's pod overhead
    readiness_delay: float = 10.0
    termination_grace: float = 30.0
    load_shared: bool = False  # demand is spread over the ready replicas (HPA-driven tiers)
    jitter: float = 0.1  # per-replica variation of the usage level
    # Job only
    completions: int = 1
    parallelism: int = 1
    run_time: float = 3600.0
    every: float | None = None  # rerun the Job on this period (a CronJob)


@dataclass(slots=True)
class PDBSpec:
    name: str
    namespace: str
    selector: dict[str, str]
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"  # or AlwaysAllow


@dataclass(slots=True)
class HPASpec:
    name: str
    namespace: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    metrics: list[tuple[str, int]]  # (resource, target utilisation percent)


@dataclass(slots=True)
class Scenario:
    name: str
    source: str
    nodes: list[NodeSpec] = field(default_factory=list)
    workloads: list[WorkloadSpec] = field(default_factory=list)
    pdbs: list[PDBSpec] = field(default_factory=list)
    hpas: list[HPASpec] = field(default_factory=list)
    seed: int | None = None
    hpa_sync_period: float = 15.0
    description: str = ""
    autoscaler: AutoscalerSpec | None = None


@dataclass(slots=True)
class AutoscalerSpec:
    """A cluster-autoscaler stand-in: adds template nodes for pods pending too long."""

    node: NodeSpec
    max_nodes: int = 10
    pending_after: float = 60.0  # a pod must be pending this long to count
    provision_time: float = 300.0  # from decision to Ready node


class _Ctx:
    """Error reporting: every problem names the file and the path inside it."""

    def __init__(self, source: str, base_dir: Path | None) -> None:
        self.source = source
        self.base_dir = base_dir

    def fail(self, path: str, problem: str) -> ForesizeError:
        where = f"{self.source}: {path}" if path else self.source
        return ForesizeError(f"{where}: {problem}")

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {type(value).__name__}")
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def known(self, value: dict[str, Any], allowed: set[str], path: str) -> None:
        for key in value:
            if key not in allowed:
                prefix = f"{path}." if path else ""
                raise self.fail(
                    f"{prefix}{key}", f"unknown field (allowed: {', '.join(sorted(allowed))})"
                )

    def string(self, value: Any, path: str, *, required: bool = True, default: str = "") -> str:
        if value is None:
            if required:
                raise self.fail(path, "required field is missing")
            return default
        if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
            raise self.fail(path, f"expected a non-empty string, got {shown(value)}")
        return str(value)

    def integer(
        self,
        value: Any,
        path: str,
        default: int,
        *,
        minimum: int = 0,
        maximum: int = MAX_INTEGER,
    ) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {shown(value)}")
        if value < minimum:
            raise self.fail(path, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(path, f"must be at most {maximum}, got {shown(value)}")
        return value

    def number(
        self, value: Any, path: str, default: float, *, minimum: float | None = 0.0
    ) -> float:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, f"expected a number, got {shown(value)}")
        if not math.isfinite(value):
            raise self.fail(path, f"expected a finite number, got {shown(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"must be at least {minimum}, got {value}")
        if abs(value) > MAX_NUMBER:
            raise self.fail(path, f"must be at most {MAX_NUMBER:g}, got {shown(value)}")
        return float(value)

    def duration(self, value: Any, path: str, default: float) -> float:
        if value is None:
            return default
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None

    def quantity(self, resource: str, value: Any, path: str) -> int:
        if isinstance(value, bool) or value is None:
            raise self.fail(path, f"expected a quantity, got {shown(value)}")
        try:
            amount = to_canonical(resource, value)
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from None
        if amount < 0:
            raise self.fail(path, f"must not be negative, got {shown(value)}")
        return amount

    def amount(self, resource: str, value: Any, path: str) -> float:
        """A usage level: cpu in cores (float), memory in bytes (float)."""
        if isinstance(value, bool) or value is None:
            raise self.fail(path, f"expected a quantity, got {shown(value)}")
        try:
            q = float(parse_quantity(value))
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from None
        if q < 0:
            raise self.fail(path, f"must not be negative, got {shown(value)}")
        return q

    def labels(self, value: Any, path: str) -> dict[str, str]:
        out = {}
        for k, v in self.mapping(value, path).items():
            text = self.string(v, f"{path}.{k}")
            problem = label_key_error(str(k)) or label_value_error(text)
            if problem:
                raise self.fail(f"{path}.{shown(str(k))}", problem)
            out[str(k)] = text
        return out


_GEN_FIELDS = {
    "generator",
    "base",
    "amplitude",
    "peak_hour",
    "weekend_factor",
    "noise",
    "spike_probability",
    "spike_factor",
    "growth_per_hour",
    "max",
    "file",
    "scale",
    "step",
    "offset",
    "select",
    "format",
    "series",
}


def _generator(ctx: _Ctx, resource: str, raw: Any, path: str, default_base: float) -> GeneratorSpec:
    if raw is None:
        return GeneratorSpec("constant", base=default_base)
    if isinstance(raw, str | int | float) and not isinstance(raw, bool):
        return GeneratorSpec("constant", base=ctx.amount(resource, raw, path))
    m = ctx.mapping(raw, path)
    ctx.known(m, _GEN_FIELDS, path)
    kind = ctx.string(m.get("generator"), f"{path}.generator", required=False, default="constant")
    kind = {"memory_leak": "leak", "growth": "leak", "daily": "diurnal"}.get(kind, kind)
    if kind not in GENERATOR_KINDS:
        raise ctx.fail(
            f"{path}.generator",
            f"unknown generator {shown(kind)} (one of {', '.join(GENERATOR_KINDS)})",
        )
    g = GeneratorSpec(kind)
    if kind == "trace":
        if "file" not in m:
            raise ctx.fail(f"{path}.file", "required for generator trace")
        file = Path(ctx.string(m["file"], f"{path}.file"))
        if not file.is_absolute() and ctx.base_dir is not None:
            file = ctx.base_dir / file
        if not file.exists():
            raise ctx.fail(f"{path}.file", f"no such file: {file}")
        select = {str(k): str(v) for k, v in ctx.mapping(m.get("select"), f"{path}.select").items()}
        fmt = m.get("format")
        g.trace_step = ctx.duration(m.get("step"), f"{path}.step", 60.0)
        try:
            if fmt is None:
                g.trace = load_trace(file, resource, select=select)
            else:
                series = ctx.integer(m.get("series"), f"{path}.series", 0)
                g.trace, g.trace_step = _history_trace(file, str(fmt), resource, series)
        except ForesizeError as exc:
            raise ctx.fail(f"{path}.file", str(exc)) from None
        g.trace_scale = ctx.number(m.get("scale"), f"{path}.scale", 1.0)
        if g.trace_step <= 0:
            raise ctx.fail(f"{path}.step", "must be positive")
        g.trace_offset = ctx.duration(m.get("offset"), f"{path}.offset", 0.0)
    else:
        if "base" not in m:
            raise ctx.fail(f"{path}.base", f"required for generator {kind}")
        g.base = ctx.amount(resource, m["base"], f"{path}.base")
    g.amplitude = ctx.number(
        m.get("amplitude"), f"{path}.amplitude", 0.6 if kind in ("diurnal", "weekly") else 0.0
    )
    if g.amplitude > 1:
        raise ctx.fail(
            f"{path}.amplitude", f"must be at most 1 (a fraction of base), got {g.amplitude}"
        )
    g.peak_hour = ctx.number(m.get("peak_hour"), f"{path}.peak_hour", 14.0)
    if g.peak_hour >= 24:
        raise ctx.fail(f"{path}.peak_hour", f"must be below 24, got {g.peak_hour}")
    g.weekend_factor = ctx.number(
        m.get("weekend_factor"), f"{path}.weekend_factor", 0.5 if kind == "weekly" else 1.0
    )
    g.noise = ctx.number(m.get("noise"), f"{path}.noise", 0.0)
    g.spike_probability = ctx.number(
        m.get("spike_probability"), f"{path}.spike_probability", 0.02 if kind == "spiky" else 0.0
    )
    if g.spike_probability > 1:
        raise ctx.fail(f"{path}.spike_probability", "must be at most 1")
    g.spike_factor = ctx.number(
        m.get("spike_factor"), f"{path}.spike_factor", 3.0 if kind == "spiky" else 1.0
    )
    if "growth_per_hour" in m:
        g.growth_per_second = (
            ctx.amount(resource, m["growth_per_hour"], f"{path}.growth_per_hour") / 3600.0
        )
    elif kind == "leak":
        raise ctx.fail(f"{path}.growth_per_hour", "required for generator leak")
    g.cap = ctx.amount(resource, m["max"], f"{path}.max") if "max" in m else math.inf
    return g


def _history_trace(path: Path, fmt: str, resource: str, series: int) -> tuple[Any, float]:
    """A public-format trace (bitbrains, crane, google2011, canonical) read by the history
    readers, resampled onto its median step with gaps interpolated."""
    import numpy as np

    from foresize.history.traces import load_traces

    found, _ = load_traces(path, fmt)
    if series >= len(found):
        raise ForesizeError(f"{path}: has {len(found)} series, no series {series}")
    s = found[series]
    values = s.cpu if resource == "cpu" else s.memory
    if values is None:
        raise ForesizeError(f"{path}: no {resource} readings in this format")
    ok = np.isfinite(values)
    if ok.sum() < 2:
        raise ForesizeError(f"{path}: fewer than two {resource} readings")
    ts = s.timestamps[ok]
    step = float(np.median(np.diff(ts)))
    grid = np.arange(ts[0], ts[-1] + step / 2, step)
    return np.interp(grid, ts, values[ok]), step


def _resources(ctx: _Ctx, raw: Any, path: str) -> dict[str, int]:
    out = {}
    for name, value in ctx.mapping(raw, path).items():
        out[str(name)] = ctx.quantity(str(name), value, f"{path}.{name}")
    return out


_CONTAINER_FIELDS = {"name", "requests", "limits", "resize_policy", "usage"}
# A sidecar is an init container with restartPolicy Always (KEP-753); it runs, uses
# resources and is resized like a regular container. Other init containers run to completion
# before the pod starts: they count in the scheduler's charge at their peak only.
_INIT_CONTAINER_FIELDS = _CONTAINER_FIELDS | {"restart_policy"}


def _container(ctx: _Ctx, raw: Any, path: str, *, init: bool = False) -> ContainerSpec:
    m = ctx.mapping(raw, path)
    ctx.known(m, _INIT_CONTAINER_FIELDS if init else _CONTAINER_FIELDS, path)
    c = ContainerSpec(ctx.string(m.get("name"), f"{path}.name"))
    if init and m.get("restart_policy") is not None:
        if m["restart_policy"] != "Always":
            raise ctx.fail(
                f"{path}.restart_policy",
                f"only Always (a sidecar) is allowed, got {m['restart_policy']!r}",
            )
        c.restart_policy = "Always"
    c.requests = _resources(ctx, m.get("requests"), f"{path}.requests")
    c.limits = _resources(ctx, m.get("limits"), f"{path}.limits")
    for res in ("cpu", "memory"):
        req, lim = c.requests.get(res), c.limits.get(res)
        if req is not None and lim is not None and req > lim:
            raise ctx.fail(
                f"{path}.requests.{res}", f"must be less than or equal to the {res} limit"
            )
    for res, pol in ctx.mapping(m.get("resize_policy"), f"{path}.resize_policy").items():
        if res not in ("cpu", "memory"):
            raise ctx.fail(
                f"{path}.resize_policy.{res}", "only cpu and memory have a resize policy"
            )
        if pol not in ("NotRequired", "RestartContainer"):
            raise ctx.fail(
                f"{path}.resize_policy.{res}",
                f"must be NotRequired or RestartContainer, got {shown(pol)}",
            )
        c.resize_policy[str(res)] = str(pol)
    usage = ctx.mapping(m.get("usage"), f"{path}.usage")
    ctx.known(usage, {"cpu", "memory"}, f"{path}.usage")
    # Without a generator a container uses half its request: a quiet, static workload.
    c.cpu = _generator(
        ctx, "cpu", usage.get("cpu"), f"{path}.usage.cpu", c.requests.get("cpu", 0) / 2000.0
    )
    c.memory = _generator(
        ctx,
        "memory",
        usage.get("memory"),
        f"{path}.usage.memory",
        c.requests.get("memory", 0) / 2.0,
    )
    return c


_WORKLOAD_FIELDS = {
    "kind",
    "name",
    "namespace",
    "replicas",
    "labels",
    "priority",
    "priority_class",
    "containers",
    "init_containers",
    "resources",
    "overhead",
    "readiness_delay",
    "termination_grace",
    "load_shared",
    "jitter",
    "completions",
    "parallelism",
    "run_time",
    "every",
}


def _budget_value(ctx: _Ctx, value: Any, path: str) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{1,3}%", value) and int(value[:-1]) <= 100:
        return value
    raise ctx.fail(
        path, f"expected a non-negative integer or a percentage like '25%', got {shown(value)}"
    )


def parse_scenario(data: Any, source: str, base_dir: Path | None = None) -> Scenario:
    """Validate a loaded YAML document and build the Scenario."""
    ctx = _Ctx(source, base_dir)
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
            "priority_classes",
            "cluster_autoscaler",
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
            },
            path,
        )
        name = ctx.string(m.get("name"), f"{path}.name")
        count = ctx.integer(m.get("count"), f"{path}.count", 1, minimum=1, maximum=MAX_NODES)
        if "cpu" not in m:
            raise ctx.fail(f"{path}.cpu", "required field is missing")
        if "memory" not in m:
            raise ctx.fail(f"{path}.memory", "required field is missing")
        cpu = ctx.quantity("cpu", m["cpu"], f"{path}.cpu")
        mem = ctx.quantity("memory", m["memory"], f"{path}.memory")
        cap_cpu = (
            ctx.quantity("cpu", m["capacity_cpu"], f"{path}.capacity_cpu")
            if "capacity_cpu" in m
            else cpu
        )
        cap_mem = (
            ctx.quantity("memory", m["capacity_memory"], f"{path}.capacity_memory")
            if "capacity_memory" in m
            else mem
        )
        labels = ctx.labels(m.get("labels"), f"{path}.labels")
        add_at = ctx.duration(m.get("add_at"), f"{path}.add_at", 0.0)
        for j in range(count):
            node_name = name if count == 1 else f"{name}-{j}"
            if node_name in seen_nodes:
                raise ctx.fail(f"{path}.name", f"duplicate node name {shown(node_name)}")
            seen_nodes.add(node_name)
            sc.nodes.append(NodeSpec(node_name, cpu, mem, cap_cpu, cap_mem, dict(labels), add_at))
    if not sc.nodes:
        raise ctx.fail("nodes", "a scenario needs at least one node")

    if top.get("cluster_autoscaler") is not None:
        path = "cluster_autoscaler"
        m = ctx.mapping(top["cluster_autoscaler"], path)
        ctx.known(m, {"node", "max_nodes", "pending_after", "provision_time"}, path)
        nm = ctx.mapping(m.get("node"), f"{path}.node")
        ctx.known(nm, {"name", "cpu", "memory", "labels"}, f"{path}.node")
        for req in ("cpu", "memory"):
            if req not in nm:
                raise ctx.fail(f"{path}.node.{req}", "required field is missing")
        cpu = ctx.quantity("cpu", nm["cpu"], f"{path}.node.cpu")
        mem = ctx.quantity("memory", nm["memory"], f"{path}.node.memory")
        sc.autoscaler = AutoscalerSpec(
            NodeSpec(
                ctx.string(nm.get("name"), f"{path}.node.name", required=False, default="auto"),
                cpu,
                mem,
                cpu,
                mem,
                ctx.labels(nm.get("labels"), f"{path}.node.labels"),
            ),
            max_nodes=ctx.integer(
                m.get("max_nodes"), f"{path}.max_nodes", 10, minimum=1, maximum=MAX_NODES
            ),
            pending_after=ctx.duration(m.get("pending_after"), f"{path}.pending_after", 60.0),
            provision_time=ctx.duration(m.get("provision_time"), f"{path}.provision_time", 300.0),
        )

    seen_wl: set[tuple[str, str, str]] = set()
    for i, raw in enumerate(ctx.seq(top.get("workloads"), "workloads")):
        path = f"workloads[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(m, _WORKLOAD_FIELDS, path)
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
            raise ctx.fail(
                f"{path}.namespace", f"{shown(w.namespace)} is not a valid namespace: {why}"
            )
        key = (w.kind, w.namespace, w.name)
        if key in seen_wl:
            raise ctx.fail(f"{path}.name", f"duplicate workload {kind}/{w.namespace}/{w.name}")
        seen_wl.add(key)
        w.replicas = ctx.integer(m.get("replicas"), f"{path}.replicas", 1, maximum=MAX_REPLICAS)
        w.labels = ctx.labels(m.get("labels"), f"{path}.labels") or {"app": w.name}
        if "priority_class" in m:
            pc = ctx.string(m["priority_class"], f"{path}.priority_class")
            if pc not in classes:
                raise ctx.fail(
                    f"{path}.priority_class",
                    f"unknown priority class {shown(pc)} (define it under priority_classes)",
                )
            w.priority = classes[pc]
        w.priority = ctx.integer(
            m.get("priority"), f"{path}.priority", w.priority, minimum=-(2**31)
        )
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
        containers = ctx.seq(m.get("containers"), f"{path}.containers")
        if not containers:
            raise ctx.fail(f"{path}.containers", "a workload needs at least one container")
        names: set[str] = set()
        for j, rc in enumerate(containers):
            c = _container(ctx, rc, f"{path}.containers[{j}]")
            if c.name in names:
                raise ctx.fail(
                    f"{path}.containers[{j}].name", f"duplicate container name {shown(c.name)}"
                )
            names.add(c.name)
            w.containers.append(c)
        for j, rc in enumerate(ctx.seq(m.get("init_containers"), f"{path}.init_containers")):
            c = _container(ctx, rc, f"{path}.init_containers[{j}]", init=True)
            if c.name in names:
                raise ctx.fail(
                    f"{path}.init_containers[{j}].name", f"duplicate container name {c.name!r}"
                )
            names.add(c.name)
            w.init_containers.append(c)
        pod_res = ctx.mapping(m.get("resources"), f"{path}.resources")
        ctx.known(pod_res, {"requests", "limits"}, f"{path}.resources")
        w.pod_requests = _resources(ctx, pod_res.get("requests"), f"{path}.resources.requests")
        w.pod_limits = _resources(ctx, pod_res.get("limits"), f"{path}.resources.limits")
        for res in (*w.pod_requests, *w.pod_limits):
            if res not in ("cpu", "memory"):
                raise ctx.fail(
                    f"{path}.resources", f"pod-level resources are cpu and memory only, got {res!r}"
                )
        for res in ("cpu", "memory"):
            req, lim = w.pod_requests.get(res), w.pod_limits.get(res)
            if req is not None and lim is not None and req > lim:
                raise ctx.fail(
                    f"{path}.resources.requests.{res}",
                    f"must be less than or equal to the pod-level {res} limit",
                )
        w.overhead = _resources(ctx, m.get("overhead"), f"{path}.overhead")
        sc.workloads.append(w)

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
                _budget_value(ctx, m["min_available"], f"{path}.min_available")
                if has_min
                else None,
                _budget_value(ctx, m["max_unavailable"], f"{path}.max_unavailable")
                if has_max
                else None,
                policy,
            )
        )

    for i, raw in enumerate(ctx.seq(top.get("hpas"), "hpas")):
        path = f"hpas[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(
            m, {"name", "namespace", "target", "min_replicas", "max_replicas", "metrics"}, path
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
            m.get("max_replicas"), f"{path}.max_replicas", 0, minimum=1, maximum=MAX_REPLICAS
        )
        if "max_replicas" not in m:
            raise ctx.fail(f"{path}.max_replicas", "required field is missing")
        if lo > hi:
            raise ctx.fail(f"{path}.min_replicas", f"must not exceed max_replicas ({hi})")
        metrics = []
        for j, rm in enumerate(ctx.seq(m.get("metrics"), f"{path}.metrics")):
            mp = f"{path}.metrics[{j}]"
            mm = ctx.mapping(rm, mp)
            ctx.known(mm, {"resource", "target_utilization"}, mp)
            res = ctx.string(mm.get("resource"), f"{mp}.resource")
            if res not in ("cpu", "memory"):
                raise ctx.fail(f"{mp}.resource", f"must be cpu or memory, got {shown(res)}")
            util = ctx.integer(
                mm.get("target_utilization"), f"{mp}.target_utilization", 0, minimum=1
            )
            if "target_utilization" not in mm:
                raise ctx.fail(f"{mp}.target_utilization", "required field is missing")
            metrics.append((res, util))
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
            )
        )
    _check_size(ctx, sc)
    return sc


def peak_pods(sc: Scenario) -> int:
    """The most pods the scenario can run at once: every workload at its replicas, or at
    its HPA's max_replicas when that is higher (a DaemonSet counts one pod per node)."""
    hpa_max = {(h.target_kind, h.namespace, h.target_name): h.max_replicas for h in sc.hpas}
    nodes = node_count(sc)
    pods = 0
    for w in sc.workloads:
        if w.kind == "DaemonSet":
            pods += nodes
        elif w.kind == "Job":
            pods += w.parallelism
        else:
            pods += max(w.replicas, hpa_max.get((w.kind, w.namespace, w.name), 0))
    return pods


def node_count(sc: Scenario) -> int:
    """Nodes at the start plus the most the autoscaler may add."""
    return len(sc.nodes) + (sc.autoscaler.max_nodes if sc.autoscaler else 0)


def _check_size(ctx: _Ctx, sc: Scenario) -> None:
    nodes = node_count(sc)
    if nodes > MAX_NODES:
        raise ctx.fail("nodes", f"{nodes} nodes in all (autoscaler included); at most {MAX_NODES}")
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
    builtin = resources.files("foresize.sim").joinpath("scenarios", f"{name_or_path}.yaml")
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
    data = load_one(text, source)
    return parse_scenario(data, source, base_dir)


def builtin_scenarios() -> list[str]:
    folder = resources.files("foresize.sim").joinpath("scenarios")
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )
