"""`foresize bench hpa`: an HPA on CPU with and without a vertical autoscaler on the same
resource, on trace-driven traffic (issue 27, "How it is measured").

Scenarios are built at bench time from the real traces (`../shared/traces`, never read by
tests): one per trace family, a Deployment `web` whose CPU demand is the trace's first
series, shared over its Ready replicas (a traffic-serving tier: more replicas, less CPU
each), an HPA on CPU at 60, 70, 80 or 70% (by family) between 2 and 20 replicas, and
nodes with room for 20 replicas at twice their request. The request is what a careful
team would write (not inflated to flatter the others): 1.2 x the per-pod 95th percentile
of CPU at M replicas, M chosen so the trace's peak needs about `PEAK_REPLICAS` replicas
at that request (within 3..10), and 1 core by the trace's scale; CPU limit 2 x request.

Policies side by side on the same scenarios and seed: `hpa` (the HPA alone, requests as
written), `hpa+vpa` (the VPA-style reference sizing CPU too: the fight), `hpa+foresize-leave`
(Foresize leaves the HPA's CPU alone) and `hpa+foresize-coordinated`
(`hpa_resource_policy: coordinate`). Each key is the median over the scenarios. The
`collision` object is the seed-004 scenario (`hpa-collision`) under Foresize coordinated:
preemptions of the application's own pods, and pods Pending beyond what static sizing
leaves Pending in the same scenario.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from foresize.core.errors import ForesizeError
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.events import EventLog
from foresize.shells.sim.scenario import Scenario, load_scenario, parse_scenario

POLICIES = ("hpa", "hpa+vpa", "hpa+foresize-leave", "hpa+foresize-coordinated")
# The keys of each policy's row (the interface).
KEYS = (
    "cpu_request_core_hours",
    "replica_hours",
    "replica_changes_per_day",
    "resizes_per_day",
    "seconds_at_max_replicas",
    "throttled_seconds",
    "underprovisioned_seconds",
    "oscillations",
)
FAMILIES: dict[str, tuple[str, str]] = {
    "crane": ("crane-dsp", "crane"),
    "google": ("google-2011-dev", "canonical"),
    "bitbrains": ("bitbrains-rnd-2013-07", "bitbrains"),
    "azure": ("azure-2017-dev", "canonical"),
}
TARGETS = {"crane": 60, "google": 70, "bitbrains": 80, "azure": 70}  # HPA CPU targets, %
MIN_REPLICAS, MAX_REPLICAS = 2, 20
PEAK_REPLICAS = 18  # the trace's peak needs about this many replicas at the team's request
TEAM_MARGIN = 1.2  # the team's request: 1.2 x per-pod p95 at M replicas
REQUEST_CORES = 1.0  # the team's request, by the trace's scale
OSCILLATION_WINDOW = 600.0  # a direction change of replicas within 10 minutes
NODE_CPU = 16  # cores a node
WARMUP = 86400.0  # Foresize's `min_lookback_to_scale` (the API default): it acts after it
HPA_TOLERANCE = 0.1  # the HPA controller's default tolerance (the simulated HPA's too)
CUT = 0.9  # the bounds' uniform cut of the HPA alone's requests (the issue's 0.9 x)


def _install(policy: str, min_lookback: str | None = None) -> Callable[[SimCluster], object]:
    """The policy's installer; `min_lookback` shortens Foresize's `min_lookback_to_scale`
    (tests only: the bench keeps the API default of 24 h)."""
    from foresize.shells.sim.operator import install_foresize, install_vpa

    foresize = partial(install_foresize, min_lookback_to_scale=min_lookback)
    installers: dict[str, Callable[[SimCluster], object]] = {
        "hpa": lambda sim: None,
        "hpa+vpa": partial(install_vpa, hpa_resource_policy="override"),
        "hpa+foresize-leave": foresize,
        "hpa+foresize-coordinated": partial(foresize, hpa_resource_policy="coordinate"),
    }
    return installers[policy]


def scenario(traces: Path, family: str, *, seed: int = 7) -> Scenario:
    """The bench scenario of one trace family (see the module's notes)."""
    from foresize.bench.nodes import first_series

    folder_name, fmt = FAMILIES[family]
    folder = traces / folder_name
    if not folder.exists():
        raise ForesizeError(f"{folder}: no such trace folder (see ../shared/traces/README.md)")
    ((index, cpu, _mem, _step),) = first_series(folder, fmt, 1)
    finite = cpu[np.isfinite(cpu) & (cpu > 0)]
    if finite.size == 0:
        raise ForesizeError(f"{folder}: series {index} has no positive CPU reading")
    target = TARGETS[family]
    u = target / 100.0
    p95, peak = float(np.percentile(finite, 95)), float(finite.max())
    m = int(min(10, max(3, round(PEAK_REPLICAS * TEAM_MARGIN * u * p95 / peak))))
    # Total demand D = trace x s with 1.2 x p95(D) / m = the request (1 core).
    s = REQUEST_CORES * m / (TEAM_MARGIN * p95)
    request_m = int(round(REQUEST_CORES * 1000))
    nodes = math.ceil(MAX_REPLICAS * 2 * REQUEST_CORES / NODE_CPU) + 1
    data = {
        "name": f"hpa-{family}",
        "seed": seed,
        "hpa_sync_period": "15s",
        "nodes": [{"name": "n", "count": nodes, "cpu": str(NODE_CPU), "memory": "64Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "web",
                "namespace": "bench",
                "replicas": m,
                "readiness_delay": "20s",
                "load_shared": True,
                "containers": [
                    {
                        "name": "app",
                        "requests": {"cpu": f"{request_m}m", "memory": "512Mi"},
                        "limits": {"cpu": f"{2 * request_m}m", "memory": "1Gi"},
                        "usage": {
                            # the generator gives one of the m replicas' share of D
                            "cpu": {"generator": "trace", "file": str(folder), "format": fmt,
                                    "series": index, "scale": s / m},
                            "memory": {"generator": "constant", "base": "300Mi", "noise": 0.02},
                        },
                    }
                ],
            }
        ],
        "hpas": [
            {
                "name": "web",
                "namespace": "bench",
                "target": {"kind": "Deployment", "name": "web"},
                "min_replicas": MIN_REPLICAS,
                "max_replicas": MAX_REPLICAS,
                "metrics": [{"resource": "cpu", "target_utilization": target}],
            }
        ],
    }  # fmt: skip
    return parse_scenario(data, f"<bench hpa {family}>")


@dataclass(slots=True)
class Provisioning:
    """A usage observer: seconds in which the workload's CPU demand was above the CPU its
    running pods request (requests x replicas)."""

    sim: SimCluster
    step: float
    seconds: float = 0.0
    _last: float | None = field(default=None)

    def __call__(self, now: float, keys: Any, cpu: Any, mem: Any) -> None:
        usage = self.sim.metering.usage
        idx, _ = self.sim.metering.active()
        if idx.size and float(usage.cpu_demand[idx].sum()) > float(usage.cpu_req[idx].sum()):
            self.seconds += self.step


@dataclass(slots=True)
class Bounds:
    """A usage observer on a run (the bench reads the `hpa` run's): what no sizing of the
    same resource can beat while the HPA is in the loop, and what the HPA alone's request
    means.

    - `edge_core_seconds`: the CPU requested if, from the end of Foresize's warm-up on,
      every step held exactly the lowest total the HPA leaves alone at that step's demand
      D: D / (u x (1 + tolerance)) (below it the HPA scales out, at any request and any
      replica count, minReplicas included: an oracle that knows each step's demand);
      before it, what the HPA alone requested (Foresize does not act yet);
    - `cut_seconds`: seconds with D above `CUT` x the HPA alone's requests (what a uniform
      10% cut, without knowing when the load jumps, leaves under-provisioned);
    - `jump_seconds`: under-provisioned seconds (D above the requests) in a step that
      follows one that was not: the load jumped past the headroom within one step, which
      only foresight of that step removes; the rest of the under-provisioned seconds are
      the HPA's lag catching up (what a forecast replica floor can remove);
    - `demand` and `replicas` per step, for the team's request against the per-pod p95 at
      the HPA's median count."""

    sim: SimCluster
    step: float
    utilization: float
    requested_core_seconds: float = 0.0
    edge_core_seconds: float = 0.0
    requested_after_warmup: float = 0.0  # core-seconds, the same two from `WARMUP` on
    edge_after_warmup: float = 0.0
    cut_seconds: float = 0.0
    jump_seconds: float = 0.0
    under: bool = False  # the last step was under-provisioned
    demand: list[float] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)

    def __call__(self, now: float, keys: Any, cpu: Any, mem: Any) -> None:
        usage = self.sim.metering.usage
        idx, _ = self.sim.metering.active()
        d = float(usage.cpu_demand[idx].sum()) if idx.size else 0.0
        req = float(usage.cpu_req[idx].sum()) if idx.size else 0.0
        self.requested_core_seconds += req * self.step
        edge = req if now < WARMUP else d / (self.utilization * (1.0 + HPA_TOLERANCE))
        self.edge_core_seconds += edge * self.step
        if now >= WARMUP:
            self.requested_after_warmup += req * self.step
            self.edge_after_warmup += edge * self.step
        if d > CUT * req:
            self.cut_seconds += self.step
        under = d > req
        if under and not self.under:
            self.jump_seconds += self.step
        self.under = under
        self.demand.append(d)
        self.replicas.append(int(idx.size))

    def row(self, scenario_name: str, request_cores: float) -> dict[str, Any]:
        median = int(np.median(self.replicas)) if self.replicas else 0
        p95 = float(np.percentile(self.demand, 95)) / median if median else 0.0
        return {
            "scenario": scenario_name,
            "median_replicas": median,
            "per_pod_p95_at_median_cores": round(p95, 3),
            "team_request_over_that_p95": round(request_cores / p95, 3) if p95 else 0.0,
            "band_edge_cpu_request_ratio": round(
                self.edge_core_seconds / self.requested_core_seconds, 4
            )
            if self.requested_core_seconds
            else 0.0,
            "band_edge_cpu_request_ratio_after_warmup": round(
                self.edge_after_warmup / self.requested_after_warmup, 4
            )
            if self.requested_after_warmup
            else 0.0,
            "underprovisioned_seconds_at_cut": self.cut_seconds,
            "underprovisioned_seconds_first_step_of_a_jump": self.jump_seconds,
        }


def replica_timeline(events: EventLog, initial: int, workload: str) -> list[tuple[float, int]]:
    """(time, replicas) at the start and at every change of the workload's replicas."""
    out = [(0.0, initial)]
    for e in events.query("Scaled", object=workload):
        n = int(e.details.get("replicas", out[-1][1]))
        if n != out[-1][1]:
            out.append((e.time, n))
    return out


def replica_metrics(
    timeline: list[tuple[float, int]], end: float, max_replicas: int
) -> dict[str, float]:
    """Replica-hours, changes per day, seconds at maxReplicas and oscillations (direction
    changes within `OSCILLATION_WINDOW`) of a replica timeline ending at `end`."""
    hours = at_max = 0.0
    for (t0, n), (t1, _) in zip(timeline, [*timeline[1:], (end, 0)], strict=True):
        hours += n * (t1 - t0) / 3600.0
        if n >= max_replicas:
            at_max += t1 - t0
    changes = timeline[1:]
    # direction of each change (up True), with its time
    moves = [(t, n > prev) for (_, prev), (t, n) in zip(timeline, changes, strict=False)]
    oscillations = sum(
        1
        for (t0, up0), (t1, up1) in itertools.pairwise(moves)
        if up0 != up1 and t1 - t0 <= OSCILLATION_WINDOW
    )
    days = end / 86400.0
    return {
        "replica_hours": hours,
        "replica_changes_per_day": len(changes) / days if days else 0.0,
        "seconds_at_max_replicas": at_max,
        "oscillations": float(oscillations),
    }


def run_one(
    sc: Scenario, policy: str, hours: float, step: float = 60.0, min_lookback: str | None = None
) -> dict[str, Any]:
    """One policy on one scenario: its row (the issue's keys)."""
    return _run(sc, policy, hours, step, min_lookback)[0]


def _run(
    sc: Scenario, policy: str, hours: float, step: float = 60.0, min_lookback: str | None = None
) -> tuple[dict[str, Any], Bounds]:
    """One policy on one scenario: its row and the run's `Bounds`."""
    from foresize.shells.sim.runner import run_for

    sim = SimCluster(sc, step=step)
    _install(policy, min_lookback)(sim)
    observer = Provisioning(sim, step)
    sim.on_usage(observer)
    (hpa,) = sc.hpas
    target = next(m.target_utilization for m in hpa.metrics if m.resource == "cpu")
    bounds = Bounds(sim, step, (target or 100) / 100.0)
    sim.on_usage(bounds)
    end = hours * 3600.0
    run_for(sim, end)
    summary = sim.summary(policy=policy)
    (wl,) = sc.workloads
    key = f"Deployment/{wl.namespace}/{wl.name}"
    replicas = replica_metrics(
        replica_timeline(sim.events, wl.replicas, key), end, hpa.max_replicas
    )
    t = summary["totals"]
    days = end / 86400.0
    row = {
        "cpu_request_core_hours": float(t.get("cpu_requested_core_hours", 0.0)),
        "replica_hours": replicas["replica_hours"],
        "replica_changes_per_day": replicas["replica_changes_per_day"],
        "resizes_per_day": float(t.get("resizes", 0)) / days if days else 0.0,
        "seconds_at_max_replicas": replicas["seconds_at_max_replicas"],
        "throttled_seconds": float(t.get("throttled_seconds", 0.0)),
        "underprovisioned_seconds": observer.seconds,
        "oscillations": replicas["oscillations"],
    }
    return row, bounds


def _waited(events: EventLog) -> set[str]:
    """Pods that waited for a node: scheduling failed, or preempted."""
    return {e.object for e in events if e.kind in ("FailedScheduling", "Preempted")}


def collision(hours: float, step: float = 60.0) -> dict[str, int]:
    """The seed-004 scenario under Foresize coordinated: preemptions of the application's
    pods (every pod of the scenario is the application's: web and web-worker), and the
    pods that waited for a node beyond those that wait under static sizing."""
    from foresize.shells.sim.runner import run_for

    sc = load_scenario("hpa-collision")
    runs = {}
    for policy in ("hpa", "hpa+foresize-coordinated"):
        sim = SimCluster(sc, step=step)
        _install(policy)(sim)
        run_for(sim, hours * 3600.0)
        runs[policy] = sim
    sim = runs["hpa+foresize-coordinated"]
    own = sum(1 for e in sim.events.query("Preempted") if e.object.startswith("Pod/pay/"))
    extra = len(_waited(sim.events)) - len(_waited(runs["hpa"].events))
    return {"own_preemptions": own, "pending_due_to_resize": max(extra, 0)}


def _median(values: list[float]) -> float:
    return round(float(statistics.median(values)), 4) if values else 0.0


def run_bench(
    traces: Path,
    *,
    hours: float = 96.0,
    families: tuple[str, ...] = tuple(FAMILIES),
    collision_hours: float = 96.0,
    step: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every policy on every family's scenario; medians per policy, each run's row under
    `runs`, the `hpa` runs' `Bounds` rows under `bounds`, and the collision scenario."""
    per_policy: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    runs = []
    bounds = []
    for family in families:
        sc = scenario(traces, family)
        for policy in POLICIES:
            row, seen = _run(sc, policy, hours, step)
            if policy == "hpa":
                (wl,) = sc.workloads
                request = sum(c.requests.get("cpu", 0) for c in wl.containers) / 1000.0
                bounds.append(seen.row(sc.name, request))
            per_policy[policy].append(row)
            runs.append({"scenario": sc.name, "policy": policy, **row})
            if progress is not None:
                progress(
                    f"{sc.name} {policy}: {row['cpu_request_core_hours']:.1f} core-h, "
                    f"{row['seconds_at_max_replicas']:.0f} s at max"
                )
    return {
        "policies": {
            p: {k: _median([r[k] for r in rows]) for k in KEYS} for p, rows in per_policy.items()
        },
        "collision": collision(collision_hours, step),
        "runs": runs,
        "bounds": bounds,
        "hours": hours,
        "families": list(families),
    }
