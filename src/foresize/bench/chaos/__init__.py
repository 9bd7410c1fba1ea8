"""Fault scenarios for the real `foresize operator` process (`foresize bench chaos`, and
the fault tests).

Each scenario starts the strict API server (`foresize.testing.apiserver`) with a small
cluster (a node, a Deployment, its ReplicaSet, an in-place autonomous AIScaleTarget with
a suggestion, its pods), puts a `FaultProxy` in front of it (one per replica, so the log
tells replicas apart), and runs `foresize operator` as a subprocess against the proxy,
with short intervals through the operator's own flags.
The proxy injects the fault (outage, 410 Gone, 429/500 storms, 401 after a token
rotation, failing Lease renewals) and logs every request with its arrival time; each
scenario's invariant is checked from that log and from the process's exit.

Times are scaled down for a quick run: the 90 s outage at start is `outage` seconds
(default 8), the Lease is 3 s with a 2 s renew deadline and a 0.5 s retry period.
"""

from foresize.bench.chaos.certificates import (
    scenario_certificate,
    scenario_certificate_expired,
    served_certificate,
)
from foresize.bench.chaos.cluster import Cluster, OperatorProcess, ScenarioResult, populate
from foresize.bench.chaos.proxy import FaultProxy, Logged
from foresize.bench.chaos.scenarios import (
    SCENARIOS,
    run_scenarios,
    scenario_kopf_dies,
    scenario_leader_loss,
    scenario_outage_at_start,
    scenario_signal,
    scenario_storm,
    scenario_templates_before_workloads,
    scenario_token_rotation,
    scenario_watch_gone,
)

__all__ = [
    "SCENARIOS",
    "Cluster",
    "FaultProxy",
    "Logged",
    "OperatorProcess",
    "ScenarioResult",
    "populate",
    "run_scenarios",
    "scenario_certificate",
    "scenario_certificate_expired",
    "scenario_kopf_dies",
    "scenario_leader_loss",
    "scenario_outage_at_start",
    "scenario_signal",
    "scenario_storm",
    "scenario_templates_before_workloads",
    "scenario_token_rotation",
    "scenario_watch_gone",
    "served_certificate",
]
