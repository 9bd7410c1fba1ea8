"""Run a scenario under a policy and return its summary (used by `foresize simulate`,
`foresize bench sim` and end-to-end tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.policies import get_policy
from foresize.shells.sim.scenario import Scenario, check_run_size


def build(
    scenario: Scenario, *, policy: str = "static", seed: int | None = None, step: float = 60.0
) -> SimCluster:
    """A fresh simulated cluster for `scenario` with `policy` installed."""
    sim = SimCluster(scenario, seed=seed, step=step)
    get_policy(policy)(sim)
    return sim


def simulate(
    scenario: Scenario,
    *,
    duration: float,
    policy: str = "static",
    seed: int | None = None,
    step: float = 60.0,
    progress: Callable[[float], None] | None = None,
    chunk: float = 3600.0,
) -> tuple[SimCluster, dict[str, Any]]:
    """Run `scenario` for `duration` seconds; `progress(now)` is called every `chunk`. A run
    beyond the simulator's size limit is refused before it starts (`check_run_size`)."""
    check_run_size(scenario, duration, step)
    sim = build(scenario, policy=policy, seed=seed, step=step)
    run_for(sim, duration, progress=progress, chunk=chunk)
    return sim, sim.summary(policy=policy)


def run_for(
    sim: SimCluster,
    duration: float,
    *,
    progress: Callable[[float], None] | None = None,
    chunk: float = 3600.0,
) -> None:
    """Run `sim` from 0 to `duration` seconds in steps of `chunk`, calling `progress(now)`
    after each."""
    t = 0.0
    while t < duration:
        t = min(duration, t + chunk)
        sim.run_until(t)
        if progress is not None:
            progress(t)
