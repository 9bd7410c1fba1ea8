"""`foresize bench runtimes`: workloads as they really run (issue 25), on simulator
scenarios, with the policies side by side in one run.

- `jvm`: a Java service with a fixed heap (`-Xmx1g`) whose heap is half used for three
  days and then fills, while its non-heap memory falls from 300Mi to 150Mi. A recommender
  that follows usage (vpa) sizes memory under heap + non-heap and is OOM-killed when the
  heap fills; Foresize's heap rule keeps memory at the heap ceiling + non-heap. Memory
  requested is compared with the heap-aware optimum (heap ceiling + the non-heap in use,
  per replica) from the end of the first day (when both recommenders may act).
- `startup`: a service needing 4x its steady CPU while starting (work at 1 core, steady
  250m, CPU limit 500m): time-to-Ready of every pod without a boost and with
  `startup_boost: {cpu_factor: 4}`, at equal steady requests (the boost is undone in
  place), QoS changes, and how long after Ready the unboost landed.
- `cronjob`: not built (issue 25 item 3): its keys are printed as null with the reason.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from foresize.core.api.quantity import MIB
from foresize.core.cluster.qos import qos_class_of
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import (
    ForesizeRecommender,
    OperatorOptions,
    SimOperator,
    VPARecommender,
)
from foresize.shells.sim.scenario import parse_scenario

GIB = 1024 * MIB
HEAP = GIB
TRACE_STEP = 300.0
JVM_DAYS = 5.0
HEAP_FILLS_AT = 3.5 * 86400  # the heap fills (a cache warms) half-way through day 4
WARMUP = 86400.0  # both recommenders hold the template for min_lookback_to_scale (24 h)
POLICIES = ("static", "vpa", "foresize")


def _non_heap(t: np.ndarray) -> np.ndarray:
    """300Mi falling to 150Mi over the run (metaspace and caches of start-up released)."""
    return (300 - 150 * t / (JVM_DAYS * 86400)) * MIB


def _jvm_demand(t: np.ndarray) -> np.ndarray:
    heap_used = np.where(t < HEAP_FILLS_AT, 0.5 * HEAP, HEAP)
    return heap_used + _non_heap(t)


def _jvm_scenario(folder: Path) -> dict[str, Any]:
    t = np.arange(0.0, JVM_DAYS * 86400 + TRACE_STEP, TRACE_STEP)
    lines = ["ts,value", *(f"{a:.0f},{b:.0f}" for a, b in zip(t, _jvm_demand(t), strict=True))]
    (folder / "jvm-memory.csv").write_text("\n".join(lines) + "\n")
    return {
        "name": "jvm-fixed-heap",
        "nodes": [{"name": "n", "count": 2, "cpu": "4", "memory": "16Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "orders",
                "replicas": 2,
                "jitter": 0.0,
                "readiness_delay": "10s",
                "containers": [
                    {
                        "name": "app",
                        "command": ["java", "-Xmx1g", "-jar", "/app/orders.jar"],
                        "requests": {"cpu": "500m", "memory": "2Gi"},
                        "limits": {"memory": "2Gi"},
                        "usage": {
                            "cpu": {"generator": "diurnal", "base": "300m", "noise": 0.1},
                            "memory": {
                                "generator": "trace",
                                "file": "jvm-memory.csv",
                                "step": f"{TRACE_STEP:.0f}s",
                            },
                        },
                    }
                ],
            }
        ],
    }


def _install(sim: SimCluster, policy: str, loop: float, **options: Any) -> SimOperator | None:
    if policy == "static":
        return None
    if policy == "vpa":
        opts = OperatorOptions(
            loop_interval=loop, scale_up_percent=10.0, scale_down_percent=10.0, **options
        )
        return SimOperator(sim, VPARecommender(), opts).install()
    opts = OperatorOptions(loop_interval=loop, **options)
    return SimOperator(sim, ForesizeRecommender(), opts).install()


def _memory_sampler(sim: SimCluster, out: list[float]) -> Callable[[Any, float], None]:
    """Every trace step from the warm-up on: the memory requested in force (all pods)."""

    def sample(_sim: Any, now: float) -> None:
        if now < WARMUP:
            return
        out.append(
            float(
                sum(
                    s.resources.requests.get("memory", 0)
                    for p in sim.pods_of("Deployment", "default", "orders")
                    if p.phase == "Running"
                    for s in p.container_statuses
                )
            )
        )

    return sample


def run_jvm(progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = _jvm_scenario(folder)
        for policy in POLICIES:
            progress(f"jvm: {policy}")
            sim = SimCluster(parse_scenario(data, "jvm", base_dir=folder), seed=1, step=60)
            _install(sim, policy, 60.0)
            samples: list[float] = []
            sim.every(TRACE_STEP, _memory_sampler(sim, samples))
            sim.run(JVM_DAYS * 86400)
            out[f"{policy}_oom_kills"] = sim.events.count("OOMKilled")
            out[f"{policy}_memory_gib_hours"] = round(sum(samples) * TRACE_STEP / 3600 / GIB, 3)
    t = np.arange(WARMUP, JVM_DAYS * 86400, TRACE_STEP)
    optimum = float(np.sum(HEAP + _non_heap(t)) * 2 * TRACE_STEP / 3600 / GIB)  # 2 replicas
    out["heap_aware_optimum_gib_hours"] = round(optimum, 3)
    for policy in POLICIES:
        out[f"{policy}_memory_vs_optimum"] = round(out[f"{policy}_memory_gib_hours"] / optimum, 4)
    return out


STARTUP_REPLICAS = 20
STARTUP_LOOP = 30.0


def _startup_scenario() -> dict[str, Any]:
    return {
        "name": "startup-4x",
        "nodes": [{"name": "n", "count": 2, "cpu": "16", "memory": "32Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "api",
                "replicas": STARTUP_REPLICAS,
                "jitter": 0.0,
                "readiness_delay": "5s",
                "containers": [
                    {
                        "name": "app",
                        "requests": {"cpu": "250m", "memory": "512Mi"},
                        "limits": {"cpu": "500m", "memory": "1Gi"},
                        # 4x the steady 250m while starting: 60 core-seconds at 1 core.
                        "startup": {"work": 60, "cpu": "1"},
                        "usage": {"cpu": "250m", "memory": "400Mi"},
                    }
                ],
            }
        ],
    }


def _startup_run(policy: str, boost: dict[str, Any] | None) -> dict[str, Any]:
    sim = SimCluster(parse_scenario(_startup_scenario(), "startup"), seed=1, step=5)
    _install(sim, policy, STARTUP_LOOP, startup_boost=boost)
    template_qos = "Burstable"
    changes = 0

    def watch_qos(_sim: Any, _now: float) -> None:
        nonlocal changes
        for p in sim.pods_of("Deployment", "default", "api"):
            if p.phase == "Running" and qos_class_of(p.containers) != template_qos:
                changes += 1

    sim.every(5.0, watch_qos)
    sim.run(1800)
    ready = sorted(t for _, t in sim.lifecycle.time_to_ready)
    steady = sorted(
        {
            s.resources.requests.get("cpu", 0)
            for p in sim.pods_of("Deployment", "default", "api")
            for s in p.container_statuses
        }
    )
    # From Ready to the unboost applied in place (PodScheduled + time-to-Ready = Ready).
    scheduled = {e.object: e.time for e in sim.events.query("PodScheduled")}
    ready_at = {
        f"Pod/{k}": scheduled.get(f"Pod/{k}", 0.0) + t for k, t in sim.lifecycle.time_to_ready
    }
    unboost_after = [
        e.time - ready_at[e.object]
        for e in sim.events.query("ResizeApplied")
        if e.object in ready_at
    ]
    return {
        "ready_p50_s": statistics.median(ready) if ready else None,
        "ready_pods": len(ready),
        "qos_changes": changes,
        "steady_cpu_requests_m": steady,
        "unboost_after_ready_max_s": max(unboost_after) if unboost_after else None,
        "unboosts": len(unboost_after),
    }


def run_startup(progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    for policy in POLICIES:
        progress(f"startup: {policy}")
        runs[policy] = _startup_run(policy, None)
    progress("startup: foresize+boost")
    runs["foresize+boost"] = _startup_run("foresize", {"cpu_factor": 4})
    boost, noboost = runs["foresize+boost"], runs["foresize"]
    return {
        "ready_p50_boost_s": boost["ready_p50_s"],
        "ready_p50_noboost_s": noboost["ready_p50_s"],
        "ready_p50_shorter_share": (
            round(1 - boost["ready_p50_s"] / noboost["ready_p50_s"], 4)
            if boost["ready_p50_s"] and noboost["ready_p50_s"]
            else None
        ),
        "qos_changes": boost["qos_changes"],
        "steady_cpu_requests_equal": boost["steady_cpu_requests_m"]
        == noboost["steady_cpu_requests_m"],
        "unboost_after_ready_max_s": boost["unboost_after_ready_max_s"],
        "loop_interval_s": STARTUP_LOOP,
        "policies": runs,
    }


CRONJOB_NOT_BUILT = (
    "issue 25 item 3 (usage history per CronJob, a recommendation from past runs' peaks "
    "applied at pod creation) is not built: no policy sizes Job pods yet"
)


def run_bench(progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    return {
        "jvm": run_jvm(progress),
        "startup": run_startup(progress),
        "cronjob": {
            "share_within_20pct_from_run4": None,
            "oom_kills": None,
            "not_built": CRONJOB_NOT_BUILT,
        },
    }
