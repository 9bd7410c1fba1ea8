"""DaemonSetAutoscaler: the percentile suggestion (pure), and on the simulated cluster
through the simulated operator's reconcile pass (the kube shell's pass): nothing before
minObservationWindow, running pods resized in place every scaleInterval, the suggestion in
the DSA's status, new pods (including one for a node added later) seeded at admission
from it."""

from __future__ import annotations

import itertools

import numpy as np

from foresize.core.admission.pod import MANAGED_ANNOTATION
from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_daemonset_autoscaler
from foresize.core.cluster.target import dsa_view
from foresize.core.lifecycle.daemonset import ContainerSamples, dsa_suggestion
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import OperatorOptions, SimOperator
from foresize.shells.sim.recommenders import FixedRecommender
from foresize.shells.sim.scenario import parse_scenario

H = 3600.0


def dsa(mode="autonomous", **spec):
    return parse_daemonset_autoscaler(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "mon"},
            "spec": {
                "scaleTargetRef": {"name": "agent"},
                "scaleMode": mode,
                "containers": [
                    {"name": "*", "cpu": {"lowerbound": "10m"}, "memory": {"lowerbound": "32Mi"}}
                ],
                **spec,
            },
        }
    )


def test_percentile_over_the_observation_window_and_nothing_before_the_minimum():
    d = dsa(percentile=90, observationWindow="8d", minObservationWindow="3h")
    t = np.arange(0, 10 * 86400, 300.0)
    cpu = np.where(t < 2 * 86400, 5.0, (t % 3600) / 3600.0)  # old huge values fall out
    mem = np.full(t.shape, 100.5 * MIB)
    usage = {"agent": ContainerSamples(t, cpu, mem)}
    now = float(t[-1])
    s = dsa_suggestion(d, usage, now)
    inside = t >= now - 8 * 86400
    expected = int(np.ceil(np.percentile(cpu[inside], 90) * 1000 - 1e-9))
    assert s.containers["agent"].requests == {"cpu": expected, "memory": 101 * MIB}
    # Two hours of data: below minObservationWindow, no suggestion at all.
    short = {"agent": ContainerSamples(t[:24], cpu[:24], mem[:24])}
    assert dsa_suggestion(d, short, float(t[23])) is None
    # Bounds apply: a tiny usage is raised to the lowerbound.
    tiny = {"agent": ContainerSamples(t, np.full(t.shape, 0.001), np.full(t.shape, 1.0))}
    assert dsa_suggestion(d, tiny, now).containers["agent"].requests == {
        "cpu": 10,
        "memory": 32 * MIB,
    }


def scenario():
    return parse_scenario(scenario_spec(), "test")


def scenario_spec() -> dict:
    return {
        "name": "dsa",
        "seed": 9,
        "nodes": [
            {"name": "n", "count": 2, "cpu": "4", "memory": "16Gi"},
            {"name": "late", "cpu": "4", "memory": "16Gi", "add_at": "5h"},
        ],
        "workloads": [
            {
                "kind": "DaemonSet",
                "name": "agent",
                "namespace": "mon",
                "readiness_delay": "5s",
                "containers": [
                    {
                        "name": "agent",
                        "requests": {"cpu": "200m", "memory": "256Mi"},
                        "limits": {"memory": "512Mi"},
                        "usage": {
                            "cpu": {"generator": "constant", "base": "60m", "noise": 0.1},
                            "memory": {"generator": "constant", "base": "100Mi", "noise": 0.02},
                        },
                    }
                ],
            }
        ],
    }


def agent_pods(sim):
    return [p for p in sim.pods_of("DaemonSet", "mon", "agent") if not p.terminating]


def operate(sim, autoscaler, loop_interval=60.0):
    """The simulated operator, with no AIScaleTargets, running the pass every minute."""
    sim.daemonset_autoscalers = [autoscaler]
    options = OperatorOptions(targets=[], loop_interval=loop_interval)
    return SimOperator(sim, FixedRecommender({}), options).install()


def published(sim):
    """The suggestion in the DaemonSetAutoscaler's status (as the pass wrote it)."""
    (autoscaler,) = sim.daemonset_autoscalers
    return dsa_view(autoscaler).suggestion


def test_daemonset_pods_resized_in_place_and_new_node_pod_seeded():
    sim = SimCluster(scenario(), seed=9)
    op = operate(sim, dsa())
    sim.run_until(2 * H)
    pods = agent_pods(sim)
    original = {p.name: p.uid for p in pods}
    assert len(pods) == 2
    # Under minObservationWindow (3h): nothing suggested, nothing resized.
    assert published(sim) is None and not sim.events.query("ResizeRequested")
    status = sim.target_status[("DaemonSetAutoscaler", "mon", "agent")]
    assert status["hasEnoughDataToScale"] is False
    assert all(p.containers[0].resources.requests["cpu"] == 200 for p in pods)

    sim.run_until(4 * H)
    sug = published(sim).containers["agent"].requests
    assert 60 <= sug["cpu"] <= 90 and 100 * MIB <= sug["memory"] <= 110 * MIB
    pods = agent_pods(sim)
    assert {p.name: p.uid for p in pods} == original  # in place
    for p in pods:
        res = p.containers[0].resources
        assert res.requests == sug and res.limits == {"memory": 512 * MIB}
        assert MANAGED_ANNOTATION not in p.annotations  # in-place resizes never annotate
    # Re-planned every scaleInterval (15m), not every pass.
    runs = {round(e.time) for e in sim.events.query("ResizeRequested")}
    assert runs and all(r % 900 == 0 for r in runs)

    sim.run_until(5 * H + 120)
    late = [p for p in agent_pods(sim) if p.name not in original]
    assert len(late) == 1 and late[0].node_name == "late"
    current = published(sim).containers["agent"].requests
    assert late[0].containers[0].resources.requests == current
    assert late[0].annotations[MANAGED_ANNOTATION] == "true"
    assert op.pass_state.last_dsa == {"mon/agent": 5 * H}


def test_recommendation_mode_dsa_neither_seeds_nor_resizes():
    sim = SimCluster(scenario(), seed=9)
    operate(sim, dsa("recommendation"))
    sim.run_until(5 * H + 120)
    assert published(sim) is not None  # it still computes what it would do
    assert not sim.events.query("ResizeRequested")
    pods = agent_pods(sim)
    assert len(pods) == 3
    assert all(
        p.containers[0].resources.requests == {"cpu": 200, "memory": 256 * MIB} for p in pods
    )
    assert all(MANAGED_ANNOTATION not in p.annotations for p in pods)


def test_leaving_autonomous_mode_reverts_daemonset_pods_in_place():
    sim = SimCluster(scenario(), seed=9)
    operate(sim, dsa())
    sim.run_until(4 * H)
    names = {p.name: p.uid for p in agent_pods(sim)}
    assert all(p.containers[0].resources.requests["cpu"] < 200 for p in agent_pods(sim))
    (autoscaler,) = sim.daemonset_autoscalers
    spec = autoscaler.spec.model_copy(update={"scaleMode": "recommendation"})
    sim.daemonset_autoscalers = [autoscaler.model_copy(update={"spec": spec})]
    sim.run_until(4 * H + 300)
    pods = agent_pods(sim)
    assert {p.name: p.uid for p in pods} == names
    assert all(
        p.containers[0].resources.requests == {"cpu": 200, "memory": 256 * MIB} for p in pods
    )


def test_a_daemonset_upsize_with_no_room_on_its_node_is_held_not_deferred():
    """One capacity guard for every resize: the agent on the full node is not resized (it
    would sit Deferred with the node charged beyond its allocatable); the agent on the
    roomy node is."""
    spec = {
        "name": "dsa-full",
        "seed": 9,
        "nodes": [{"name": "n", "count": 2, "cpu": "1", "memory": "16Gi"}],
        "workloads": [
            {
                "kind": "DaemonSet",
                "name": "agent",
                "namespace": "mon",
                "readiness_delay": "5s",
                "containers": [
                    {
                        "name": "agent",
                        "requests": {"cpu": "200m", "memory": "256Mi"},
                        "usage": {
                            "cpu": {"generator": "constant", "base": "600m", "noise": 0.05},
                            "memory": {"generator": "constant", "base": "100Mi", "noise": 0.02},
                        },
                    }
                ],
            },
            {
                "kind": "Deployment",
                "name": "filler",
                "replicas": 1,
                "containers": [
                    {
                        "name": "app",
                        "requests": {"cpu": "700m", "memory": "256Mi"},
                        "usage": {
                            "cpu": {"generator": "constant", "base": "50m"},
                            "memory": {"generator": "constant", "base": "100Mi"},
                        },
                    }
                ],
            },
        ],
    }
    sim = SimCluster(parse_scenario(spec, "test"), seed=9)
    operate(sim, dsa())
    lowest: dict[str, int] = {}

    def watch(sim, now):
        for node in sim.nodes:
            lowest[node] = min(lowest.get(node, 0), sim.node_free(node)[0])

    sim.every(60, watch)
    sim.run_until(4 * H)
    (filler,) = [p for p in sim.pods.values() if p.name.startswith("filler")]
    by_node = {p.node_name: p for p in agent_pods(sim)}
    full = filler.node_name  # 700m of its 1000m taken: 100m left for the agent to grow
    (roomy,) = [n for n in by_node if n != full]
    assert by_node[roomy].containers[0].resources.requests["cpu"] >= 600
    assert by_node[full].containers[0].resources.requests["cpu"] == 200
    assert not sim.events.query("ResizeDeferred")
    assert min(lowest.values()) >= 0


def test_restarting_daemonset_resizes_are_paced_in_batches_through_the_pass():
    """seed.md N2 on the simulated cluster (the kube shell's pass): 10 agents whose memory
    resizePolicy is RestartContainer. The suggestion lowers memory, so every resize restarts
    its container: they go out 2 at a time (20% of 10), one batch a minute, without waiting
    for the next scaleInterval, until all 10 are resized in place; the revert on leaving
    autonomous mode likewise."""
    spec = scenario_spec()
    spec["nodes"] = [{"name": "n", "count": 10, "cpu": "4", "memory": "16Gi"}]
    (agent,) = spec["workloads"]
    agent["containers"][0]["resize_policy"] = {"memory": "RestartContainer"}
    sim = SimCluster(parse_scenario(spec, "test"), seed=9)
    operate(sim, dsa())
    # The first suggestion comes with the scaleInterval after minObservationWindow (3h15m).
    sim.run_until(3 * H + 900 + 300)
    pods = agent_pods(sim)
    assert len(pods) == 10
    requested: dict[float, set[str]] = {}
    for e in sim.events.query("ResizeRequested"):
        requested.setdefault(round(e.time), set()).add(e.object)
    times = sorted(requested)
    assert [len(requested[t]) for t in times] == [2, 2, 2, 2, 2], requested
    assert all(b - a >= 60 for a, b in itertools.pairwise(times))
    assert times[-1] - times[0] < 900  # batches follow each other, not the scaleInterval
    sug = published(sim).containers["agent"].requests
    assert all(p.containers[0].resources.requests == sug for p in pods)
    restarts = sim.events.query("ContainerRestarted")
    assert len({e.object for e in restarts}) == 10
    # Leaving autonomous mode: the revert to the template's 256Mi restarts them again, in
    # the same batches (a revert runs every pass).
    before = len(sim.events.query("ResizeRequested"))
    (autoscaler,) = sim.daemonset_autoscalers
    spec_ = autoscaler.spec.model_copy(update={"scaleMode": "recommendation"})
    sim.daemonset_autoscalers = [autoscaler.model_copy(update={"spec": spec_})]
    sim.run_until(3 * H + 1200 + 600)
    reverted: dict[float, set[str]] = {}
    for e in sim.events.query("ResizeRequested")[before:]:
        reverted.setdefault(round(e.time), set()).add(e.object)
    assert [len(v) for _, v in sorted(reverted.items())] == [2, 2, 2, 2, 2], reverted
    assert all(b - a >= 60 for a, b in itertools.pairwise(sorted(reverted)))
    template = {"cpu": 200, "memory": 256 * MIB}
    assert all(p.containers[0].resources.requests == template for p in agent_pods(sim))


def _restarting_agents_sim(autoscaler):
    spec = scenario_spec()
    spec["nodes"] = [{"name": "n", "count": 4, "cpu": "4", "memory": "16Gi"}]
    (agent,) = spec["workloads"]
    agent["containers"][0]["resize_policy"] = {"memory": "RestartContainer"}
    sim = SimCluster(parse_scenario(spec, "test"), seed=9)
    operate(sim, autoscaler)
    return sim


def _dsa_status(sim) -> dict:
    (autoscaler,) = sim.daemonset_autoscalers
    return autoscaler.status.model_dump()


def test_restarting_daemonset_resizes_wait_for_the_maintenance_window():
    """A DaemonSetAutoscaler's `spec.maintenance` holds its restarting resizes outside
    the windows as an AIScaleTarget's does (windows.md): the suggestion comes at 3h15m,
    the window opens at 05:00 UTC; nothing is resized before, the status says why, and
    the first passes inside the window send them (in their disruption batches)."""
    window = {"windows": [{"schedule": "0 5 * * *", "duration": "1h"}]}
    sim = _restarting_agents_sim(dsa(maintenance=window))
    start = sim.now
    sim.run_until(start + 4.5 * H)
    assert published(sim) is not None
    assert not sim.events.query("ResizeRequested")
    status = _dsa_status(sim)
    assert status["pods_held_for_maintenance_window"] == 4
    assert status["maintenance_window"].startswith(
        "held: outside every maintenance window; windows[0] opens next at"
    )
    sim.run_until(start + 5.25 * H)
    sent = sim.events.query("ResizeRequested")
    assert len({e.object for e in sent}) == 4
    assert min(e.time for e in sent) >= start + 5 * H
    assert _dsa_status(sim)["pods_held_for_maintenance_window"] == 0


def test_in_place_daemonset_resizes_go_on_outside_windows_unless_restrict_all():
    """Outside the windows a resize that restarts nothing goes on (`restrict:
    disruptive`, the default); `restrict: all` holds it too."""
    for restrict, resized in (("disruptive", True), ("all", False)):
        window = {"restrict": restrict, "windows": [{"schedule": "0 5 * * *", "duration": "1h"}]}
        sim = SimCluster(scenario(), seed=9)
        operate(sim, dsa(maintenance=window))
        sim.run_until(sim.now + 4 * H)
        assert bool(sim.events.query("ResizeRequested")) is resized, restrict


def test_daemonset_windows_that_cannot_be_read_hold_what_they_guard_and_say_why():
    """A zone the database does not know: the window never opens; the resizes it guards
    are held (the safe side), naming the field."""
    window = {"windows": [{"schedule": "0 5 * * *", "duration": "1h", "timeZone": "Mars/Olympus"}]}
    sim = _restarting_agents_sim(dsa(maintenance=window))
    sim.run_until(sim.now + 6 * H)
    assert not sim.events.query("ResizeRequested")
    why = _dsa_status(sim)["maintenance_window"]
    assert why.startswith("held: the maintenance windows cannot be read as written (")
    assert "spec.maintenance.windows[0]" in why, why
