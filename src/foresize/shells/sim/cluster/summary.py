"""The run's summary: per-workload cost and disruption figures (`foresize simulate --json`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.facade import SimCluster


def summarize(sim: SimCluster, *, policy: str = "static") -> dict[str, Any]:
    """The run's summary (the JSON of `foresize simulate --json`)."""
    sim.metering.account(sim.now)
    hours = sim.now / 3600.0
    rows = []
    totals: dict[str, float] = {}
    for key, st in sim.wl_state.items():
        i = st.index
        acc = sim.metering.acc
        cnt = sim.counters.get(key, {})
        row: dict[str, Any] = {
            "name": key,
            "kind": st.spec.kind,
            "cpu_requested_core_hours": acc["cpu_req"][i] / 3600.0,
            "cpu_used_core_hours": acc["cpu_used"][i] / 3600.0,
            "cpu_demand_core_hours": acc["cpu_demand"][i] / 3600.0,
            "memory_requested_gib_hours": acc["mem_req"][i] / 3600.0 / 2**30,
            "memory_used_gib_hours": acc["mem_used"][i] / 3600.0 / 2**30,
            "oom_kills": cnt.get("oom_kills", 0),
            "throttled_seconds": float(acc["throttled"][i]),
            "evictions": cnt.get("evictions", 0),
            "resizes": cnt.get("resizes", 0),
            "pending_pod_hours": acc["pending"][i] / 3600.0,
            "stalls": cnt.get("stalls", 0),
            "breaker_openings": cnt.get("breaker_openings", 0),
            "preemptions": cnt.get("preemptions", 0),
            "resize_restarts": cnt.get("resize_restarts", 0),
            "node_pressure_evictions": cnt.get("node_pressure_evictions", 0),
            "replicas_final": sim.workloads[key].replicas,
        }
        row["cpu_slack_core_hours"] = row["cpu_requested_core_hours"] - row["cpu_used_core_hours"]
        row["memory_slack_gib_hours"] = (
            row["memory_requested_gib_hours"] - row["memory_used_gib_hours"]
        )
        for k, v in row.items():
            if k not in ("name", "kind", "replicas_final") and isinstance(v, int | float):
                totals[k] = totals.get(k, 0) + v
        rows.append(row)
    for k, v in list(totals.items()):
        totals[k] = round(v, 6) if isinstance(v, float) else v
    for row in rows:
        for k, v in list(row.items()):
            if isinstance(v, float):
                row[k] = round(float(v), 6)
    return {
        "scenario": sim.scenario.name,
        "policy": policy,
        "duration_hours": round(hours, 6),
        "seed": sim.seed,
        "step_seconds": sim.step,
        "nodes": len(sim.nodes),
        "pods_final": sum(1 for p in sim.pods.values() if p.phase in ("Pending", "Running")),
        "totals": totals,
        "workloads": rows,
        "events": sim.events.kinds(),
        "event_log_sha256": sim.events.fingerprint(),
    }
