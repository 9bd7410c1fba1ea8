"""Fault tests of the REAL process: `foresize operator` as a subprocess against the strict
API server behind a fault-injecting proxy (`foresize.kube.chaos`). Each scenario's invariant is
checked from the proxy's request log and the process's exit; see the scenario docstrings.
Intervals are short through the operator's own flags (Lease 3 s, renew deadline 2 s,
pass every 0.5 s; the 90 s outage at start is scaled to 5 s)."""

from __future__ import annotations

import signal

import pytest

from foresize.kube import chaos


@pytest.mark.parametrize(
    "scenario",
    [
        lambda: chaos.scenario_signal(signal.SIGTERM),
        lambda: chaos.scenario_signal(signal.SIGINT),
        lambda: chaos.scenario_outage_at_start(outage=5.0),
        chaos.scenario_watch_gone,
        lambda: chaos.scenario_storm(duration=4.0),
        chaos.scenario_token_rotation,
        chaos.scenario_leader_loss,
        chaos.scenario_kopf_dies,
        chaos.scenario_templates_before_workloads,
        chaos.scenario_certificate,
        lambda: chaos.scenario_certificate(cert_manager=True),
        chaos.scenario_certificate_expired,
    ],
    ids=[
        "sigterm",
        "sigint",
        "outage-at-start",
        "watch-gone",
        "storm",
        "token",
        "leader",
        "kopf-dies",
        "templates-before-workloads",
        "certificate-near-expiry",
        "certificate-renewed-by-cert-manager",
        "certificate-expired",
    ],
)
async def test_scenario_keeps_its_invariant(scenario):
    result = await scenario()
    assert result.ok, result.to_json()
