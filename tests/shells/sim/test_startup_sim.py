"""Start-up demand in the simulator and the boost end to end (issue 25). A container's
`startup: {work, cpu}` is core-seconds of work done at up to `cpu` cores before the pod
can be Ready, so time-to-Ready follows the CPU the pod gets (its limit, or its share on
a busy node); with `startup_boost` the webhook's boost shortens it and the pass unboosts
the pod in place within one loop interval of Ready, without a QoS change."""

from __future__ import annotations

from typing import Any

import pytest

from foresize.core.cluster.qos import qos_class_of
from foresize.core.errors import ForesizeError
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import ForesizeRecommender, OperatorOptions, SimOperator
from foresize.shells.sim.scenario import parse_scenario

LOOP = 15.0


def scenario(startup: dict[str, Any] | None = None, usage: str = "200m") -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "app",
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"cpu": "500m"},
        "usage": {"cpu": usage},
    }
    if startup is not None:
        container["startup"] = startup
    return {
        "name": "startup",
        "nodes": [{"name": "n", "cpu": "8", "memory": "16Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "a",
                "replicas": 2,
                "readiness_delay": "5s",
                "containers": [container],
            }
        ],
    }


def run(boost: dict[str, Any] | None, seconds: float = 600, usage: str = "200m") -> SimCluster:
    spec = scenario({"work": 120, "cpu": "2"}, usage)
    sim = SimCluster(parse_scenario(spec, "<t>"), seed=1, step=5)
    opts = OperatorOptions(loop_interval=LOOP, startup_boost=boost)
    SimOperator(sim, ForesizeRecommender(), opts).install()
    sim.run(seconds)
    return sim


def test_time_to_ready_follows_the_cpu_a_pod_gets() -> None:
    """120 core-seconds at a 500m limit take 240 s; at a 2-core limit 60 s; without
    start-up work the readiness delay alone."""
    slow = run(None)
    assert [t for _, t in slow.lifecycle.time_to_ready] == [245.0, 245.0]
    plain = SimCluster(parse_scenario(scenario(), "<t>"), seed=1, step=5)
    plain.run(60)
    assert [t for _, t in plain.lifecycle.time_to_ready] == [5.0, 5.0]


def test_the_boost_shortens_start_up_and_the_unboost_follows_within_one_pass() -> None:
    sim = run({"cpu_factor": 4})
    ready = [t for _, t in sim.lifecycle.time_to_ready]
    assert ready and max(ready) <= 70.0  # 1 CPU request, 2 CPU limit while starting
    pods = sim.pods_of("Deployment", "default", "a")
    for p in pods:
        c = p.containers[0]
        assert c.resources.requests["cpu"] == 250 and c.resources.limits["cpu"] == 500
        assert qos_class_of(p.containers) == "Burstable"
    applied = sim.events.query("ResizeApplied")
    assert len(applied) == len(pods)
    for ev in applied:
        start = next(e.time for e in sim.events.query("PodScheduled") if e.object == ev.object)
        # Ready at start + 65 s; the next pass (every 15 s) unboosts; the kubelet acts 1 s on.
        assert ev.time - start <= 65.0 + LOOP + 1.0


def test_a_startup_without_its_rate_names_the_field() -> None:
    with pytest.raises(ForesizeError, match=r"containers\[0\]\.startup: needs both"):
        parse_scenario(scenario({"work": 120}), "<t>")
    with pytest.raises(ForesizeError, match=r"containers\[0\]\.startup\.cpu: must be above 0"):
        parse_scenario(scenario({"work": 120, "cpu": 0}), "<t>")


def unboosted_after_ready(sim: SimCluster) -> list[float]:
    """Seconds from each pod's Ready to its unboost applied (Ready = PodScheduled + the
    time-to-Ready the lifecycle recorded)."""
    ready = dict(sim.lifecycle.time_to_ready)
    out = []
    for ev in sim.events.query("ResizeApplied"):
        start = next(e.time for e in sim.events.query("PodScheduled") if e.object == ev.object)
        out.append(ev.time - start - ready[ev.object.removeprefix("Pod/")])
    return out


def test_a_settle_boost_ends_when_usage_settles_after_ready_not_at_ready() -> None:
    """Usage 200m under the unboosted 250m: the unboost follows the third 5-s sample after
    Ready (15 s), within one pass; usage 400m never settles under 250m: the boost holds
    until its 2-minute timeout after Ready, then the same unboost (QoS kept)."""
    settle = {"cpu_factor": 4, "settle": {"samples": 3, "timeout": "2m"}}
    calm = unboosted_after_ready(run(settle))
    assert len(calm) == 2 and all(15.0 <= d <= 15.0 + LOOP + 1.0 for d in calm), calm
    at_ready = unboosted_after_ready(run({"cpu_factor": 4}))
    assert max(at_ready) < min(calm)  # without settle the unboost does not wait
    sim = run(settle, usage="400m")
    hot = unboosted_after_ready(sim)
    assert len(hot) == 2 and all(120.0 <= d <= 120.0 + LOOP + 1.0 for d in hot), hot
    for p in sim.pods_of("Deployment", "default", "a"):
        assert p.containers[0].resources.requests["cpu"] == 250
        assert qos_class_of(p.containers) == "Burstable"
