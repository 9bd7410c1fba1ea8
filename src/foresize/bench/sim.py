"""The simulator benchmark: a 50-node, 2,000-pod cluster at a 1-minute usage step.

`bench_scenario()` builds the cluster deterministically: one DaemonSet (a pod per node),
Deployments and StatefulSets with every generator kind, a few HPAs and PDBs, sized so that
everything schedules with headroom. `run_bench()` times simulated hours per wall second.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from foresize.core.api.quantity import GIB, MIB
from foresize.shells.sim.scenario import Scenario, parse_scenario


def bench_scenario(nodes: int = 50, pods: int = 2000) -> Scenario:
    """A deterministic scenario with `nodes` nodes and `pods` pods in total."""
    node_cpu_m, node_mem = 16000, 64 * GIB
    per_node_pods = pods / nodes
    # Leave room: the average pod requests about 55% of its share of a node.
    cpu_req = max(10, int(node_cpu_m / per_node_pods * 0.55))
    mem_req = max(16 * MIB, int(node_mem / per_node_pods * 0.55) // MIB * MIB)
    kinds = ["constant", "diurnal", "weekly", "spiky", "leak"]
    workloads: list[dict[str, Any]] = [
        {
            "kind": "DaemonSet",
            "name": "node-agent",
            "namespace": "kube-system",
            "containers": [
                {
                    "name": "agent",
                    "requests": {"cpu": "50m", "memory": "64Mi"},
                    "limits": {"cpu": "100m", "memory": "128Mi"},
                    "usage": {
                        "cpu": {"generator": "diurnal", "base": "30m", "noise": 0.1},
                        "memory": {"generator": "constant", "base": "50Mi"},
                    },
                }
            ],
        }
    ]
    remaining = pods - nodes
    hpas = []
    pdbs = []
    i = 0
    while remaining > 0:
        replicas = min(remaining, 40 if i % 3 else 20)
        gen = kinds[i % len(kinds)]
        cpu_base = f"{int(cpu_req * 0.45)}m"
        cpu_gen: dict[str, Any] = {"generator": gen, "base": cpu_base, "noise": 0.1}
        mem_gen: dict[str, Any] = {"generator": "constant", "base": mem_req // 2, "noise": 0.02}
        if gen == "leak":
            cpu_gen = {"generator": "diurnal", "base": f"{int(cpu_req * 0.45)}m", "noise": 0.1}
            mem_gen = {
                "generator": "leak",
                "base": int(mem_req * 0.4),
                "growth_per_hour": int(mem_req * 0.004),
                "noise": 0.01,
            }
        kind = "StatefulSet" if i % 7 == 6 else "Deployment"
        name = f"svc-{i:03d}"
        workloads.append(
            {
                "kind": kind,
                "name": name,
                "namespace": f"team-{i % 5}",
                "replicas": replicas,
                "load_shared": i % 4 == 0,
                "priority": 1000 if i % 2 else 0,
                "containers": [
                    {
                        "name": "app",
                        "requests": {"cpu": f"{cpu_req}m", "memory": mem_req},
                        "limits": {"cpu": f"{cpu_req * 2}m", "memory": mem_req * 2},
                        "usage": {"cpu": cpu_gen, "memory": mem_gen},
                    }
                ],
            }
        )
        if i % 4 == 0 and kind == "Deployment":
            hpas.append(
                {
                    "name": name,
                    "namespace": f"team-{i % 5}",
                    "target": {"kind": kind, "name": name},
                    "min_replicas": max(1, replicas // 2),
                    "max_replicas": replicas,
                    "metrics": [{"resource": "cpu", "target_utilization": 80}],
                }
            )
        if i % 5 == 0:
            pdbs.append(
                {
                    "name": name,
                    "namespace": f"team-{i % 5}",
                    "selector": {"app": name},
                    "max_unavailable": "10%",
                }
            )
        remaining -= replicas
        i += 1
    data = {
        "name": f"bench-{nodes}n-{pods}p",
        "seed": 7,
        "hpa_sync_period": "60s",
        "nodes": [{"name": "node", "count": nodes, "cpu": f"{node_cpu_m}m", "memory": node_mem}],
        "workloads": workloads,
        "hpas": hpas,
        "pdbs": pdbs,
    }
    return parse_scenario(data, "<bench scenario>")


def run_bench(
    *, hours: float = 24.0, runs: int = 3, nodes: int = 50, pods: int = 2000, step: float = 60.0
) -> dict[str, Any]:
    """Median wall time of `runs` simulations of `hours` simulated hours."""
    from foresize.shells.sim.cluster import SimCluster

    scenario = bench_scenario(nodes, pods)
    walls = []
    cpus = []
    running = 0
    for _ in range(runs):
        sim = SimCluster(scenario, step=step)
        t0, c0 = time.perf_counter(), time.process_time()
        sim.run_until(hours * 3600.0)
        walls.append(time.perf_counter() - t0)
        # CPU time of this process: steadier than wall time on a shared machine.
        cpus.append(time.process_time() - c0)
        running = sum(1 for p in sim.pods.values() if p.phase == "Running")
    median = statistics.median(walls)
    return {
        "nodes": nodes,
        "pods": pods,
        "simulated_hours": hours,
        "step_seconds": step,
        "runs": runs,
        "wall_seconds": [round(w, 3) for w in walls],
        "wall_seconds_median": round(median, 3),
        "simulated_hours_per_wall_second": round(hours / median, 2),
        "projected_week_wall_seconds": round(median * (168.0 / hours), 1),
        "cpu_seconds_median": round(statistics.median(cpus), 3),
        "pods_running_at_end": running,
    }
