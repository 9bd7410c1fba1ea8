"""`foresize bench deferred`: how long a Deferred in-place grow may hold node capacity
(issue 23 item 5), the release settings side by side on scenarios with full nodes.

A Deferred resize keeps the node charged at its new size (seed 004, kubernetes #135107):
the scheduler sees the room as taken while the kubelet has not given it, and no node
autoscaler adds a node for it. Foresize's capacity guard never sends an upsize that does
not fit, so in these runs the guard is off: they stand for the Deferred resizes the guard
cannot prevent (another writer's resize, a view of the node that was stale when the patch
went). Settings (`disruption.release_deferred_after` / `release_deferred`):

- `never`: held until room frees up (the behaviour before this bench);
- `allocated@1m|5m|15m`: given up, patched back to what the kubelet allocated;
- `fit@1m|5m|15m`: shrunk to what the node has room for now.

Scenarios: `peak-two-nodes-cpu` and `peak-two-nodes-memory`: two nodes whose sized pods
all peak at once (in CPU, or in memory), a batch Deployment filling the rest. Each runs
under `in_place` and `in_place_or_recreate`. (Seed 004's `hpa-collision` makes no Deferred
resize at all once its pods are sized: its cost is Pending replicas, `bench hpa`.)

Figures per run: `held_core_seconds` (the CPU a Deferred resize holds, spec less
allocated, integrated over the run), `held_gib_seconds` (memory alike), `stalls`,
`evictions` (Foresize's), `pending_pod_seconds` (other pods waiting for a node),
`resize_land_seconds_p50/p95` (decision to landing, `bench.nodes.resize_landing`: a
released resize lands when its release is applied), `upsizes_decided` / `upsizes_landed`,
`throttled_seconds` and `oom_kills`. `settings` holds their medians over the runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from foresize.bench.nodes import resize_landing
from foresize.core.api.quantity import GIB
from foresize.core.cluster.model import POD_RESIZE_PENDING, REASON_DEFERRED
from foresize.core.vertical import WorkerConfig
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import ForesizeRecommender, OperatorOptions, SimOperator
from foresize.shells.sim.scenario import Scenario, parse_scenario

# (name, release_deferred, release_deferred_after)
SETTINGS: tuple[tuple[str, str, str | None], ...] = (
    ("never", "never", None),
    ("allocated@1m", "allocated", "1m"),
    ("allocated@5m", "allocated", "5m"),
    ("allocated@15m", "allocated", "15m"),
    ("fit@1m", "fit", "1m"),
    ("fit@5m", "fit", "5m"),
    ("fit@15m", "fit", "15m"),
)
MODES = ("in_place", "in_place_or_recreate")
KEYS = (
    "held_core_seconds",
    "held_gib_seconds",
    "stalls",
    "evictions",
    "pending_pod_seconds",
    "resize_land_seconds_p50",
    "resize_land_seconds_p95",
    "upsizes_decided",
    "upsizes_landed",
    "throttled_seconds",
    "oom_kills",
)
SAMPLE = 60.0  # how often held capacity and Pending pods are sampled (seconds)
LOOP = 30.0  # the operator's pass interval
MIN_LOOKBACK = "3h"  # the API minimum: Foresize acts from the fourth hour on day one


def peak_two_nodes(resource: str = "cpu", peak_hour: int = 13) -> Scenario:
    """Two 4-CPU, 16Gi nodes; `api` (4 replicas) peaks at 13:00, `batch` (3 replicas, not
    sized) fills the rest: at the peak the grows do not all fit. `resource`: what peaks,
    CPU (500m requested, ~1.3 cores at the peak) or memory (1Gi requested, ~4.5Gi)."""
    api_usage: dict[str, Any] = {
        "cpu": {
            "generator": "diurnal",
            "base": "700m",
            "amplitude": 0.8,
            "peak_hour": peak_hour,
            "noise": 0.05,
        },
        "memory": {"generator": "constant", "base": "300Mi"},
    }
    api_requests = {"cpu": "500m", "memory": "512Mi"}
    api_limits = {"cpu": "2", "memory": "1Gi"}
    batch_memory = "1Gi"
    if resource == "memory":
        api_usage = {
            "cpu": {"generator": "constant", "base": "200m"},
            "memory": {
                "generator": "diurnal",
                "base": "3Gi",
                "amplitude": 0.5,
                "peak_hour": peak_hour,
            },
        }
        api_requests = {"cpu": "250m", "memory": "1Gi"}
        api_limits = {"cpu": "1", "memory": "8Gi"}
        batch_memory = "5Gi"
    data = {
        "name": f"peak-two-nodes-{resource}",
        "seed": 23,
        "nodes": [{"name": "n", "count": 2, "cpu": "4", "memory": "16Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "api",
                "namespace": "shop",
                "replicas": 4,
                "readiness_delay": "10s",
                "containers": [
                    {
                        "name": "app",
                        "requests": api_requests,
                        "limits": api_limits,
                        "usage": api_usage,
                    }
                ],
            },
            {
                "kind": "Deployment",
                "name": "batch",
                "namespace": "shop",
                "replicas": 3,
                "readiness_delay": "10s",
                "containers": [
                    {
                        "name": "job",
                        "requests": {"cpu": "1500m", "memory": batch_memory},
                        "limits": {"cpu": "2", "memory": batch_memory},
                        "usage": {"cpu": "1200m", "memory": "800Mi"},
                    }
                ],
            },
        ],
    }
    return parse_scenario(data, f"<bench deferred peak-two-nodes-{resource}>")


SCENARIOS = ("peak-two-nodes-cpu", "peak-two-nodes-memory")
# Foresize sizes `api`; `batch` is what needs the room.
TARGETS = ["Deployment/shop/api"]


def _disruption(release: str, after: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"release_deferred": release}
    if after is not None:
        out["release_deferred_after"] = after
    return out


def _held(sim: SimCluster, out: dict[str, float]) -> Callable[[Any, float], None]:
    """Every SAMPLE: what Deferred resizes hold (spec less allocated), other pods Pending."""

    def sample(_sim: Any, _now: float) -> None:
        for pod in sim.pods.values():
            if pod.phase == "Pending":
                out["pending"] += SAMPLE
            cond = pod.condition(POD_RESIZE_PENDING)
            if cond is None or cond.reason != REASON_DEFERRED:
                continue
            for c in pod.containers:
                st = pod.status_of(c.name)
                if st is None:
                    continue
                for r, key in (("cpu", "cpu"), ("memory", "memory")):
                    gap = c.resources.requests.get(r, 0) - st.allocated.get(r, 0)
                    out[key] += max(0, gap) * SAMPLE

    return sample


def run_one(
    scenario: str,
    mode: str,
    release: str,
    after: str | None,
    hours: float,
    step: float,
    peak_hour: int = 13,
) -> dict[str, Any]:
    """One run's figures (see the module's notes)."""
    resource = scenario.rsplit("-", 1)[-1]
    sim = SimCluster(peak_two_nodes(resource, peak_hour), step=step)
    opts = OperatorOptions(
        update_mode=mode,
        loop_interval=LOOP,
        disruption=_disruption(release, after),
        worker=WorkerConfig(capacity_guard=False),
        targets=TARGETS,
        min_lookback_to_scale=MIN_LOOKBACK,
    )
    SimOperator(sim, ForesizeRecommender(), opts).install()
    held = {"cpu": 0.0, "memory": 0.0, "pending": 0.0}
    sim.every(SAMPLE, _held(sim, held))
    sim.run(hours * 3600.0)
    totals = sim.summary(policy="foresize")["totals"]
    landed, decisions, _in_place = resize_landing(sim.events)
    evictions = sum(1 for e in sim.events.query("Evicted") if e.details.get("cause") == "policy")
    return {
        "held_core_seconds": round(held["cpu"] / 1000.0, 1),
        "held_gib_seconds": round(held["memory"] / GIB, 1),
        "stalls": int(totals.get("stalls", 0)),
        "evictions": evictions,
        "pending_pod_seconds": held["pending"],
        "resize_land_seconds_p50": _pct(landed, 50),
        "resize_land_seconds_p95": _pct(landed, 95),
        "upsizes_decided": decisions,
        "upsizes_landed": len(landed),
        "throttled_seconds": round(float(totals.get("throttled_seconds", 0.0)), 1),
        "oom_kills": int(totals.get("oom_kills", 0)),
    }


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def _median(values: list[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return round(float(statistics.median(vals)), 2) if vals else None


def run_bench(
    *,
    hours: float = 24.0,
    step: float = 60.0,
    scenarios: tuple[str, ...] = SCENARIOS,
    modes: tuple[str, ...] = MODES,
    settings: tuple[tuple[str, str, str | None], ...] = SETTINGS,
    peak_hour: int = 13,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every setting on every (scenario, mode); medians per setting, each run's row under
    `runs`."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in settings}
    runs = []
    for sc in scenarios:
        for mode in modes:
            for name, release, after in settings:
                row = run_one(sc, mode, release, after, hours, step, peak_hour)
                rows[name].append(row)
                runs.append({"scenario": sc, "mode": mode, "setting": name, **row})
                if progress is not None:
                    progress(f"{sc} {mode} {name}: {row['held_core_seconds']:.0f} core-s held")
    return {
        "settings": {n: {k: _median([r[k] for r in rs]) for k in KEYS} for n, rs in rows.items()},
        "runs": runs,
        "hours": hours,
        "step_seconds": step,
        "scenarios": list(scenarios),
        "modes": list(modes),
    }
