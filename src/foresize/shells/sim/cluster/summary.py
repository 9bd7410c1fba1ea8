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
            "consolidation_evictions": cnt.get("consolidation_evictions", 0),
            "do_not_disrupt_evictions": cnt.get("do_not_disrupt_evictions", 0),
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
    out = {
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
    if sim.node_autoscaler is not None:
        out["node_autoscaler"] = node_summary(sim, totals)
    return out


def node_summary(sim: SimCluster, totals: dict[str, float]) -> dict[str, Any]:
    """What the nodes cost and what disrupted pods: the headline of a run with a node
    autoscaler."""
    na = sim.node_autoscaler
    assert na is not None
    by_type: dict[str, float] = {}
    cost = 0.0
    for rec in sim.node_records.values():
        h = rec.hours(sim.now)
        by_type[rec.node_type or "(untyped)"] = by_type.get(rec.node_type or "(untyped)", 0) + h
        cost += h * rec.price_per_hour
    return {
        "flavour": na.spec.flavour,
        "node_hours": round(sum(by_type.values()), 6),
        "cost": round(cost, 6),
        "node_hours_by_type": {k: round(v, 6) for k, v in sorted(by_type.items())},
        "nodes_launched": na.launched,
        "nodes_removed": na.removed,
        "nodes_final": len(sim.nodes),
        "evictions_by_cause": {
            "policy": int(totals.get("evictions", 0)),
            "consolidation": int(totals.get("consolidation_evictions", 0)),
            "node_pressure": int(totals.get("node_pressure_evictions", 0)),
            "preemption": int(totals.get("preemptions", 0)),
        },
        "restarts": int(totals.get("resize_restarts", 0)),
        "do_not_disrupt_evictions": int(totals.get("do_not_disrupt_evictions", 0)),
    }
