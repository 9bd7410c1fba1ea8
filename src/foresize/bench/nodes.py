"""`foresize bench nodes`: what each sizing policy costs in nodes, with a node autoscaler
consolidating behind it (BENCHMARK.md §3; issue 23).

Scenarios are built at bench time from the real traces (`../shared/traces`, never read by
tests): each is one trace family (daily peaks), a few Deployments whose containers replay
one series each, priced node types and a node autoscaler, run once per flavour
(Karpenter-like and Cluster-Autoscaler-like). Policies side by side on the same scenarios
and seed: `static` (requests as a careful team would write them: the 95th percentile of
the first day for CPU, its maximum plus 15% for memory — not inflated), `vpa`,
`foresize`, `foresize+headroom` (`core.cluster.headroom`). Each policy's figures are the
medians over every (scenario, flavour) run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from foresize.core.errors import ForesizeError
from foresize.shells.sim.events import EventLog
from foresize.shells.sim.scenario import Scenario, parse_scenario
from foresize.shells.sim.scenario_spec import CLUSTER_AUTOSCALER, KARPENTER

POLICIES = ("static", "vpa", "foresize", "foresize+headroom")
FLAVOURS = (KARPENTER, CLUSTER_AUTOSCALER)
# The keys of each policy's row (the interface).
KEYS = (
    "node_hours",
    "cost",
    "cpu_request_core_hours",
    "oom_kills",
    "throttled_seconds",
    "stalls",
    "stall_evictions",
    "resize_land_seconds_p50",
    "resize_land_seconds_p95",
    "inplace_within_60s_share",
    "evictions_by_cause",
    "do_not_disrupt_evictions",
)
# Beside them (not in the rows): the upsizes the capacity guard held for want of
# room, in place or as a recreation no node had room for. The guard sends no resize that
# would sit Deferred, so `stalls` (the kubelet's) stays 0 where these are what waits.
HELD = "upsizes_held_for_room"
# A policy's row: the keys with the held upsizes right after `stalls`, the figure
# that is trivially 0 without them.
ROW_KEYS = (*KEYS[: KEYS.index("stalls") + 1], HELD, *KEYS[KEYS.index("stalls") + 1 :])
# Beside each run's request core·h (in `runs` only): what its pods wanted, and what an
# oracle sizing every hour to that hour's peak would have requested (`HourlyPeaks`).
DEMAND = "cpu_demand_core_hours"
HOURLY_PEAK = "cpu_hourly_peak_core_hours"
RUN_KEYS = (*ROW_KEYS[:3], DEMAND, HOURLY_PEAK, *ROW_KEYS[3:])
# Evictions Foresize makes because a resize did not land: after stall_timeout, or at once
# when the API server refused it (the worker's EvictPod reasons).
STALL_EVICTION_REASONS = ("stall-fallback", "refused")
INPLACE_WINDOW = 60.0  # "lands in place within one minute of the decision"
# The worker's Event when the capacity guard's fallback cannot recreate a pod bigger: no
# node has room for it (`vertical.admit`). The upsize is decided but held, like one the
# guard holds in place (`ResizeWaitingForCapacity`).
NO_ROOM_SKIP = "EvictionSkipped"
NO_ROOM_MESSAGE = "no node has room"

# On-demand prices of three general-purpose sizes (USD per hour, us-east-1 m5 family);
# allocatable is capacity less a typical system reservation.
NODE_TYPES = [
    {"name": "m5.large", "cpu": "1930m", "memory": "7Gi", "capacity_cpu": "2",
     "capacity_memory": "8Gi", "price_per_hour": 0.096},
    {"name": "m5.xlarge", "cpu": "3920m", "memory": "14Gi", "capacity_cpu": "4",
     "capacity_memory": "16Gi", "price_per_hour": 0.192},
    {"name": "m5.2xlarge", "cpu": "7910m", "memory": "29Gi", "capacity_cpu": "8",
     "capacity_memory": "32Gi", "price_per_hour": 0.384},
]  # fmt: skip

# One scenario per trace family: (folder, format, series, what one series' median CPU is
# scaled to in cores, memory median in MiB when the trace has none).
FAMILIES: dict[str, tuple[str, str]] = {
    "crane": ("crane-dsp", "crane"),
    "google": ("google-2011-dev", "canonical"),  # converted to the canonical CSV
    "bitbrains": ("bitbrains-rnd-2013-07", "bitbrains"),
}
CPU_MEDIANS = (0.15, 0.25, 0.35, 0.5, 0.2, 0.3, 0.4, 0.6)  # cores, one per Deployment
MEMORY_MEDIAN_MIB = (256, 384, 512, 768, 320, 448, 640, 896)
REPLICAS = 3
STATIC_WINDOW = 86400.0  # the careful team measured one day before writing requests


def first_series(folder: Path, fmt: str, count: int) -> list[tuple[int, Any, Any, float]]:
    """The first `count` series of a trace folder with a CPU reading: (index, cpu values,
    memory values or None, step seconds), resampled onto their median step."""
    from foresize.adapters.history.traces import load_traces

    found, _ = load_traces(folder, fmt)
    out = []
    for i, s in enumerate(found):
        if s.cpu is None or np.isfinite(s.cpu).sum() < 100:
            continue
        ts = s.timestamps
        step = float(np.median(np.diff(ts)))
        grid = np.arange(ts[0], ts[-1] + step / 2, step)

        def on_grid(v: Any, ts: Any = ts, grid: Any = grid) -> Any:
            ok = np.isfinite(v)
            return np.interp(grid, ts[ok], v[ok]) if ok.sum() >= 2 else None

        mem = on_grid(s.memory) if s.memory is not None else None
        out.append((i, on_grid(s.cpu), mem, step))
        if len(out) == count:
            break
    if not out:
        raise ForesizeError(f"{folder}: no series with CPU readings")
    return out


def _positive_median(v: Any) -> float:
    pos = v[v > 0]
    return float(np.median(pos)) if pos.size else 0.0


def scenario(
    traces: Path, family: str, flavour: str, *, deployments: int = 8, seed: int = 7
) -> Scenario:
    """One bench scenario: `deployments` Deployments replaying the first series of a trace
    family, static requests from its first day, a node autoscaler of `flavour`."""
    folder_name, fmt = FAMILIES[family]
    folder = traces / folder_name
    if not folder.exists():
        raise ForesizeError(f"{folder}: no such trace folder (see ../shared/traces/README.md)")
    workloads = []
    for j, (index, cpu, mem, step) in enumerate(first_series(folder, fmt, deployments)):
        cpu_scale = CPU_MEDIANS[j % len(CPU_MEDIANS)] / max(_positive_median(cpu), 1e-9)
        first = max(2, int(STATIC_WINDOW / step))
        cpu_cores = cpu * cpu_scale
        cpu_req = max(0.01, float(np.percentile(cpu_cores[:first], 95)))
        mem_target = MEMORY_MEDIAN_MIB[j % len(MEMORY_MEDIAN_MIB)] * 2**20
        usage: dict[str, Any] = {
            "cpu": {"generator": "trace", "file": str(folder), "format": fmt, "series": index,
                    "scale": cpu_scale},
        }  # fmt: skip
        if mem is not None and _positive_median(mem) > 0:
            mem_scale = mem_target / _positive_median(mem)
            mem_req = float(np.max(mem[:first])) * mem_scale * 1.15
            usage["memory"] = {"generator": "trace", "file": str(folder), "format": fmt,
                               "series": index, "scale": mem_scale}  # fmt: skip
        else:
            mem_req = mem_target * 1.15
            usage["memory"] = {"generator": "constant", "base": mem_target, "noise": 0.02}
        cpu_m, mem_mi = math.ceil(cpu_req * 1000), math.ceil(mem_req / 2**20)
        workloads.append(
            {
                "kind": "Deployment",
                "name": f"{family}-{j}",
                "namespace": "bench",
                "replicas": REPLICAS,
                "readiness_delay": "20s",
                "containers": [
                    {
                        "name": "app",
                        "requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"},
                        "limits": {"cpu": f"{2 * cpu_m}m", "memory": f"{2 * mem_mi}Mi"},
                        "usage": usage,
                    }
                ],
            }
        )
    data = {
        "name": f"nodes-{family}-{flavour}",
        "seed": seed,
        "node_types": NODE_TYPES,
        "nodes": [{"name": "base", "type": "m5.xlarge", "count": 2}],
        "node_autoscaler": {"flavour": flavour, "max_nodes": 40},
        "workloads": workloads,
    }
    return parse_scenario(data, f"<bench nodes {family}/{flavour}>")


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def resize_landing(events: EventLog) -> tuple[list[float], int, int]:
    """From a run's event log: the seconds from each upsize decision to its landing, the
    decisions, and those that landed in place within `INPLACE_WINDOW`.

    A decision is the first of: an upsize sent (`ResizeRequested` up), an upsize held for
    room (`ResizeWaitingForCapacity`, or the fallback eviction skipped because no node has
    room for the bigger pod), or an eviction to recreate the pod bigger (the policy's
    `Evicted` for capacity or a stall). It lands in place when the resize is applied, by
    recreation when a new pod of the same workload is scheduled after the pod went away;
    a held decision that never lands counts in the share's denominator."""
    owner: dict[str, str] = {}
    open_up: dict[str, float] = {}  # pod -> time of its oldest unlanded upsize decision
    waiting_owner: dict[str, list[float]] = {}  # owner -> decisions waiting for a new pod
    landed: list[float] = []
    decisions = in_place = 0

    def decide(pod: str, t: float) -> None:
        nonlocal decisions
        if pod not in open_up:
            decisions += 1
            open_up[pod] = t

    for e in events:
        if e.kind == "PodCreated":
            owner[e.object] = str(e.details.get("owner", ""))
        elif _is_upsize_decision(e):
            decide(e.object, e.time)
        elif e.kind == "ResizeApplied" and e.object in open_up:
            waited = e.time - open_up.pop(e.object)
            landed.append(waited)
            in_place += waited <= INPLACE_WINDOW
        elif (
            e.kind == "Evicted"
            and e.details.get("cause") == "policy"
            and e.reason
            in (
                "capacity",
                *STALL_EVICTION_REASONS,
            )
        ):
            decide(e.object, e.time)
            waiting_owner.setdefault(owner.get(e.object, ""), []).append(open_up.pop(e.object))
        elif e.kind in ("Evicted", "PodDeleted") and e.object in open_up:
            waiting_owner.setdefault(owner.get(e.object, ""), []).append(open_up.pop(e.object))
        elif e.kind == "PodScheduled":
            waits = waiting_owner.get(owner.get(e.object, ""))
            if waits:
                landed.append(e.time - waits.pop(0))
    return landed, decisions, in_place


def _is_upsize_decision(e: Any) -> bool:
    if e.kind == "ResizeRequested":
        return bool(e.details.get("direction") == "up")
    return _is_held_for_room(e)


def _is_held_for_room(e: Any) -> bool:
    """An upsize the capacity guard holds: in place, or its recreation (no node fits)."""
    if e.kind != "Event" or not str(e.object).startswith("Pod/"):
        return False
    return bool(
        e.reason == "ResizeWaitingForCapacity"
        or (e.reason == NO_ROOM_SKIP and NO_ROOM_MESSAGE in str(e.message))
    )


class HourlyPeaks:
    """What an oracle sizing each hour would request: every running replica at its
    workload's highest CPU demand of that clock hour (per replica, any replica), with
    perfect foresight and a change every hour. Where a policy's request core·h sit above
    this is what it holds beyond each hour's peak; where a fixed request sits below it,
    the workload outgrew it (throttling, or contention on a full node).

    Fed by the simulator's usage step (`sim.on_usage`): per step and workload, the
    highest demand and the replica-seconds."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.peak: dict[tuple[int, int], float] = {}  # (hour, workload row) -> cores
        self.slot_seconds: dict[tuple[int, int], float] = {}
        sim.on_usage(self.observe)

    def observe(self, t: float, keys: Any, used: Any, seen: Any) -> None:
        metering = self.sim.metering
        idx, _ = metering.active()
        if not idx.size:
            return
        hour = int(t // 3600)
        wl = metering.usage.wl[idx]
        demand = metering.usage.cpu_demand[idx]
        for w in np.unique(wl).tolist():
            mine = wl == w
            key = (hour, w)
            self.peak[key] = max(self.peak.get(key, 0.0), float(demand[mine].max()))
            self.slot_seconds[key] = self.slot_seconds.get(key, 0.0) + mine.sum() * self.sim.step

    def core_hours(self) -> float:
        return sum(p * self.slot_seconds[k] for k, p in self.peak.items()) / 3600.0


def run_metrics(
    summary: dict[str, Any], events: EventLog, hourly_peak_core_hours: float | None = None
) -> dict[str, Any]:
    """One run's row (the issue's keys, the held upsizes after `stalls`; with
    `hourly_peak_core_hours`, the demand and the hourly oracle after the request)."""
    t = summary["totals"]
    nodes = summary["node_autoscaler"]
    landed, decisions, in_place = resize_landing(events)
    stall_evictions = sum(
        1
        for e in events.query("Evicted")
        if e.details.get("cause") == "policy" and e.reason in STALL_EVICTION_REASONS
    )
    # Each held pod once (the worker reports a hold once per pod and change).
    held = len({e.object for e in events.query("Event") if _is_held_for_room(e)})
    row = {
        "node_hours": nodes["node_hours"],
        "cost": nodes["cost"],
        "cpu_request_core_hours": float(t.get("cpu_requested_core_hours", 0.0)),
        DEMAND: float(t.get("cpu_demand_core_hours", 0.0)),
        HOURLY_PEAK: hourly_peak_core_hours,
        "oom_kills": t.get("oom_kills", 0),
        "throttled_seconds": t.get("throttled_seconds", 0.0),
        "stalls": t.get("stalls", 0),
        "stall_evictions": stall_evictions,
        "resize_land_seconds_p50": _percentile(landed, 50),
        "resize_land_seconds_p95": _percentile(landed, 95),
        "inplace_within_60s_share": round(in_place / decisions, 4) if decisions else None,
        "evictions_by_cause": dict(nodes["evictions_by_cause"]),
        "do_not_disrupt_evictions": nodes["do_not_disrupt_evictions"],
        HELD: held,
    }
    return {k: row[k] for k in RUN_KEYS}


def _median(values: list[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return round(float(statistics.median(vals)), 4) if vals else None


def medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each key's median over the runs (evictions by cause: per cause)."""
    out: dict[str, Any] = {}
    for key in ROW_KEYS:
        if rows and key not in rows[0]:
            continue
        if key == "evictions_by_cause":
            causes = sorted({c for r in rows for c in r[key]})
            out[key] = {c: _median([r[key].get(c, 0) for r in rows]) for c in causes}
        else:
            out[key] = _median([r[key] for r in rows])
    return out


def run_bench(
    traces: Path,
    *,
    hours: float = 96.0,
    families: tuple[str, ...] = tuple(FAMILIES),
    flavours: tuple[str, ...] = FLAVOURS,
    deployments: int = 8,
    step: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every policy on every (family, flavour) scenario: the medians per policy under
    `policies`, and each run's row under `runs` (its family, flavour and policy first)."""
    from foresize.shells.sim.runner import build, run_for
    from foresize.shells.sim.scenario import check_run_size

    per_policy: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    runs = []
    for family in families:
        for flavour in flavours:
            sc = scenario(traces, family, flavour, deployments=deployments)
            for policy in POLICIES:
                check_run_size(sc, hours * 3600.0, step)
                sim = build(sc, policy=policy, step=step)
                peaks = HourlyPeaks(sim)
                run_for(sim, hours * 3600.0)
                summary = sim.summary(policy=policy)
                row = run_metrics(summary, sim.events, round(peaks.core_hours(), 3))
                per_policy[policy].append({k: row[k] for k in ROW_KEYS})
                runs.append({"family": family, "flavour": flavour, "policy": policy, **row})
                if progress is not None:
                    progress(f"{sc.name} {policy}: {row['node_hours']:.1f} node-h")
    return {
        "policies": {p: medians(rows) for p, rows in per_policy.items()},
        "runs": runs,
        "hours": hours,
        "step_seconds": step,
        "families": list(families),
        "flavours": list(flavours),
        "deployments": deployments,
        "runs_per_policy": len(families) * len(flavours),
    }
