"""Run a scenario once per policy (same scenario, seed and step) with the report's
recorders installed, and keep what the report needs: the summary (the `--json` one), the
per-workload time series, the per-node charge gaps and the risk events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from foresize.front.report.recorder import (
    NodeGaps,
    NodeGapSampler,
    RiskEvent,
    UsageRecorder,
    WorkloadSeries,
    risk_events,
)
from foresize.shells.sim.scenario import Scenario

# The references every headline is measured against.
BASELINES = ("static", "vpa")


@dataclass
class PolicyRun:
    policy: str
    summary: dict[str, Any]
    series: WorkloadSeries
    gaps: NodeGaps
    risks: list[RiskEvent] = field(default_factory=list)
    baseline_only: bool = False  # run only as a reference for the headline
    events: list[Any] = field(default_factory=list)  # the raw event log (for --events)


def run_policy(
    scenario: Scenario,
    policy: str,
    *,
    duration: float,
    seed: int | None,
    step: float,
    gap_every: float = 900.0,
    progress: Callable[[float], None] | None = None,
    chunk: float = 3600.0,
) -> PolicyRun:
    """Simulate `scenario` under `policy` for `duration` seconds, recording as it goes."""
    from foresize.shells.sim.runner import build, run_for

    sim = build(scenario, policy=policy, seed=seed, step=step)
    recorder = UsageRecorder(sim).install()
    sampler = NodeGapSampler(sim, interval=gap_every).install()
    run_for(sim, duration, progress=progress, chunk=chunk)
    return PolicyRun(
        policy=policy,
        summary=sim.summary(policy=policy),
        series=recorder.series(),
        gaps=sampler.gaps(),
        risks=risk_events(sim),
        events=list(sim.events),
    )
