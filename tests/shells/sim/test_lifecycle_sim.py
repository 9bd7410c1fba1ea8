"""Admission and lifecycle on the simulated cluster: every pod the simulator's controllers
create goes through the real pod decision (`foresize.shells.sim.admission`), running pods
are resized by the real vertical planner, and reverts come from the real lifecycle pass."""

from __future__ import annotations

import copy

import pytest

from foresize.core.admission.pod import MANAGED_ANNOTATION
from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import EvictPod
from foresize.core.cluster.qos import pod_qos_class
from foresize.core.lifecycle.planner import LifecycleState, plan_lifecycle
from foresize.core.vertical import WorkerState
from foresize.core.vertical import execute as vexecute
from foresize.core.vertical import plan as vplan
from foresize.shells.sim.admission import install
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.scenario import parse_scenario
from support.admission import target_manifest

SUG = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
TEMPLATE = {"cpu": 500, "memory": 512 * MIB}
SUGGESTED = {"cpu": 250, "memory": 256 * MIB}


def scenario(limits: dict | None = None):
    return parse_scenario(
        {
            "name": "lifecycle",
            "seed": 3,
            "nodes": [{"name": "n", "count": 2, "cpu": "4", "memory": "16Gi"}],
            "workloads": [
                {
                    "kind": "Deployment",
                    "name": "web",
                    "namespace": "shop",
                    "replicas": 3,
                    "readiness_delay": "5s",
                    "termination_grace": "5s",
                    "containers": [
                        {
                            "name": "app",
                            "requests": {"cpu": "500m", "memory": "512Mi"},
                            **({"limits": limits} if limits else {}),
                            "usage": {
                                "cpu": {"generator": "constant", "base": "100m"},
                                "memory": {"generator": "constant", "base": "150Mi"},
                            },
                        }
                    ],
                }
            ],
        },
        "test",
    )


def target(mode: str, generation: int, *, update_mode: str = "in_place_or_recreate", sug=SUG):
    m = target_manifest(vmode=mode, suggestion=sug, update_mode=update_mode)
    m["metadata"]["generation"] = generation
    # All pods in one batch: the tests are about admission and revert, not pacing.
    m["spec"]["vertical"]["disruption"] = {"max_disrupted": 3, "interval": "10s"}
    m["metadata"]["finalizers"] = ["foresize.io/revert"]
    return parse_target(m)


class Driver:
    """The control loop a shell runs: snapshot, vertical pass, lifecycle pass, apply."""

    def __init__(self, sim: SimCluster, interval: float = 30.0):
        self.sim = sim
        self.down = False
        self.worker = WorkerState()
        self.life = LifecycleState()
        self.finalizers_done: list[str] = []
        sim.every(interval, self.tick)

    def restart(self) -> None:
        """An operator restart: in-memory state is gone; the targets are read back from
        the API server with the status the previous process wrote."""
        self.worker = WorkerState()
        self.life = LifecycleState()
        objs = []
        for t in self.sim.targets:
            m = t.to_kube()
            written = self.sim.target_status.get(("AIScaleTarget", "shop", t.metadata.name), {})
            m["status"] = {**m.get("status", {}), **copy.deepcopy(written)}
            objs.append(parse_target(m))
        self.sim.targets = objs

    def tick(self, sim: SimCluster, now: float) -> None:
        if self.down:
            return
        snap = sim.snapshot()
        actions, self.worker = vplan(snap, now, self.worker)
        self.worker, _ = vexecute(actions, sim.apply, self.worker, snap, now)
        lp = plan_lifecycle(sim.snapshot(), now, self.life)
        self.life = lp.state
        self.finalizers_done += lp.finalizers_done
        for a in lp.actions:
            sim.apply(a)
        # The shell removes the finalizer; the API server then deletes the object.
        sim.targets = [
            t
            for t in sim.targets
            if f"AIScaleTarget/{t.metadata.namespace}/{t.metadata.name}" not in lp.finalizers_done
        ]


def web_pods(sim: SimCluster):
    return [p for p in sim.pods_of("Deployment", "shop", "web") if not p.terminating]


def requests(p):
    return p.containers[0].resources.requests


def limit_range(inner):
    """A LimitRange-style default applied at admission before Foresize: every container
    gets limits equal to its requests (so pods are Guaranteed while the template only
    declares requests: the template's resource keys differ from the running pods')."""

    def hook(pod, wl, now):
        for c in pod.containers:
            for r in ("cpu", "memory"):
                if r in c.resources.requests:
                    c.resources.limits.setdefault(r, c.resources.requests[r])
        return inner(pod, wl, now)

    return hook


def test_predating_pods_resized_in_place_without_annotation_then_recreated_pod_annotated():
    sim = SimCluster(scenario(), seed=1)
    hook = install(sim)
    sim.targets = [target("recommendation", 1)]
    Driver(sim)
    sim.run_until(60)
    before = {p.name: p.uid for p in web_pods(sim)}
    assert len(before) == 3 and all(requests(p) == TEMPLATE for p in web_pods(sim))
    assert hook.admitted == 3 and hook.mutated == 0  # recommendation mode: no mutation
    sim.targets = [target("autonomous", 2)]
    sim.run_until(200)
    pods = web_pods(sim)
    assert {p.name: p.uid for p in pods} == before  # resized in place, not recreated
    assert all(requests(p) == SUGGESTED for p in pods)
    assert all(MANAGED_ANNOTATION not in p.annotations for p in pods)
    assert sim.events.count("ResizeRequested") == 3
    # A recreated pod goes through admission: suggested resources and the annotation.
    victim = pods[0]
    assert sim.apply(EvictPod("shop", victim.name)).ok
    sim.run_until(260)
    fresh = [p for p in web_pods(sim) if p.name not in before]
    assert len(fresh) == 1
    assert requests(fresh[0]) == SUGGESTED and fresh[0].annotations[MANAGED_ANNOTATION] == "true"
    old = [p for p in web_pods(sim) if p.name in before]
    assert len(old) == 2 and all(MANAGED_ANNOTATION not in p.annotations for p in old)

    # Leaving autonomous mode: pods go back to template values in place; the annotated
    # pod keeps its annotation (it is never removed).
    uids = {p.name: p.uid for p in web_pods(sim)}
    sim.targets = [target("recommendation", 3)]
    sim.run_until(400)
    pods = web_pods(sim)
    assert {p.name: p.uid for p in pods} == uids
    assert all(requests(p) == TEMPLATE for p in pods)
    assert [p.name for p in pods if MANAGED_ANNOTATION in p.annotations] == [fresh[0].name]
    reverts = [e for e in sim.events.query("ResizeRequested") if e.reason == "Revert"]
    assert len(reverts) == 3
    assert not sim.events.query("RolloutRestart")


def _autonomous_guaranteed(update_mode: str):
    sim = SimCluster(scenario(), seed=2)
    hook = install(sim)
    sim.admission_hook = limit_range(hook.admit)
    sim.targets = [target("autonomous", 1, update_mode=update_mode)]
    driver = Driver(sim)
    sim.run_until(120)
    pods = web_pods(sim)
    assert len(pods) == 3
    for p in pods:
        assert pod_qos_class(p) == "Guaranteed"
        assert requests(p) == SUGGESTED and p.containers[0].resources.limits == SUGGESTED
        assert p.annotations[MANAGED_ANNOTATION] == "true"
    sim.targets = [target("recommendation", 2, update_mode=update_mode)]
    return sim, driver, {p.name for p in pods}


def test_revert_that_would_change_qos_restarts_the_workload_when_recreation_is_allowed():
    sim, _, old_names = _autonomous_guaranteed("in_place_or_recreate")
    sim.run_until(600)
    assert len(sim.events.query("RolloutRestart")) == 1
    pods = web_pods(sim)
    assert len(pods) == 3 and not ({p.name for p in pods} & old_names)
    for p in pods:
        assert requests(p) == TEMPLATE  # template values (the LimitRange adds equal limits)
        assert MANAGED_ANNOTATION not in p.annotations
    assert not [e for e in sim.events.query("ResizeRequested") if e.reason == "Revert"]


def test_revert_that_would_change_qos_is_left_and_reported_with_in_place():
    sim, _, old_names = _autonomous_guaranteed("in_place")
    sim.run_until(600)
    assert not sim.events.query("RolloutRestart")
    pods = web_pods(sim)
    assert {p.name for p in pods} == old_names
    assert all(requests(p) == SUGGESTED for p in pods)  # left as they were
    warnings = sim.events.query("Event", reason="RevertNotInPlace")
    assert len(warnings) == 3  # one per pod, reported once
    assert all("QoS" in w.message or "resource keys" in w.message for w in warnings)
    status = sim.target_status[("AIScaleTarget", "shop", "web")]["revert"]
    assert {e["pod"] for e in status["pods_left"]} == {f"shop/{n}" for n in old_names}
    assert all("in_place does not permit recreation" in e["reason"] for e in status["pods_left"])


def test_pods_left_drops_pods_that_are_gone_from_status():
    """status.revert.pods_left is rewritten whole each pass: a pod that was left and has
    since gone (deleted, evicted, reverted) is no longer listed."""
    from foresize.core.cluster.target import TargetView
    from foresize.core.lifecycle.revert import RevertPlan, revert_status

    sim, _, old_names = _autonomous_guaranteed("in_place")
    view = TargetView("AIScaleTarget", "shop", "web")
    first, second = sorted(old_names)[:2]
    both = RevertPlan(left={f"shop/{first}": "why", f"shop/{second}": "why"})
    assert sim.apply(revert_status(view, both, 10.0, "Reverting")).ok
    one = RevertPlan(left={f"shop/{second}": "why"})
    assert sim.apply(revert_status(view, one, 20.0, "Reverting")).ok
    status = sim.target_status[("AIScaleTarget", "shop", "web")]["revert"]
    assert [e["pod"] for e in status["pods_left"]] == [f"shop/{second}"]


def test_pause_freezes_running_pods_and_new_pods_get_template_values():
    sim = SimCluster(scenario(), seed=4)
    hook = install(sim)
    sim.targets = [target("autonomous", 1)]
    driver = Driver(sim)
    sim.run_until(120)
    assert all(requests(p) == SUGGESTED for p in web_pods(sim))
    names = {p.name for p in web_pods(sim)}
    mutated_before = hook.mutated
    sim.paused = True
    # A new suggestion and a mode switch arrive while paused: nothing happens to running pods.
    bigger = {"app": {"requests": {"cpu": "300m", "memory": "300Mi"}}}
    sim.targets = [target("autonomous", 2, sug=bigger)]
    n_events = len(sim.events)
    sim.run_until(300)
    assert all(requests(p) == SUGGESTED for p in web_pods(sim))
    sim.targets = [target("recommendation", 3)]
    sim.run_until(400)
    assert all(requests(p) == SUGGESTED for p in web_pods(sim))
    assert not sim.events.query("ResizeRequested", since=120)
    assert not [e for e in sim.events[n_events:] if e.kind == "Event"]
    # A new pod while paused: template values, no annotation.
    sim.targets = [target("autonomous", 4, sug=bigger)]
    sim.apply(EvictPod("shop", sorted(names)[0]))
    sim.run_until(460)
    fresh = [p for p in web_pods(sim) if p.name not in names]
    assert len(fresh) == 1 and requests(fresh[0]) == TEMPLATE
    assert MANAGED_ANNOTATION not in fresh[0].annotations
    assert hook.mutated == mutated_before
    # Unpausing resumes: the running pods follow the current suggestion again.
    sim.paused = False
    sim.run_until(700)
    assert all(requests(p) == {"cpu": 300, "memory": 300 * MIB} for p in web_pods(sim))
    assert driver.life.jobs == {}


def test_deleting_a_target_reverts_then_releases_the_finalizer():
    sim = SimCluster(scenario(), seed=5)
    install(sim)
    sim.targets = [target("autonomous", 1)]
    driver = Driver(sim)
    sim.run_until(120)
    assert all(requests(p) == SUGGESTED for p in web_pods(sim))
    m = copy.deepcopy(sim.targets[0].to_kube())
    m["metadata"]["deletionTimestamp"] = "2026-01-05T00:02:00Z"
    m["metadata"]["generation"] += 1  # the API server bumps it when marking for deletion
    sim.targets = [parse_target(m)]
    sim.run_until(300)
    assert all(requests(p) == TEMPLATE for p in web_pods(sim))
    assert driver.finalizers_done == ["AIScaleTarget/shop/web"]
    assert sim.targets == []
    reverts = [e for e in sim.events.query("ResizeRequested") if e.reason == "Revert"]
    assert len(reverts) == 3


@pytest.mark.parametrize("enabled", [True, False])
def test_webhook_can_be_switched_off(enabled):
    sim = SimCluster(scenario(), seed=6)
    hook = install(sim)
    hook.enabled = enabled
    sim.targets = [target("autonomous", 1)]
    sim.run_until(30)
    pods = web_pods(sim)
    want = SUGGESTED if enabled else TEMPLATE
    assert len(pods) == 3 and all(requests(p) == want for p in pods)
    assert all((MANAGED_ANNOTATION in p.annotations) == enabled for p in pods)


def test_mode_switch_while_the_operator_is_down_is_still_reverted():
    sim = SimCluster(scenario(), seed=7)
    install(sim)
    sim.targets = [target("autonomous", 1)]
    driver = Driver(sim)
    sim.run_until(120)
    assert all(requests(p) == SUGGESTED for p in web_pods(sim))
    assert sim.target_status[("AIScaleTarget", "shop", "web")]["lifecycle"] == {
        "observed_mode": "autonomous"
    }
    driver.down = True
    sim.run_until(150)
    sim.targets = [target("recommendation", 2)]  # switched while nobody watches
    sim.run_until(200)
    driver.restart()
    driver.down = False
    sim.run_until(400)
    assert all(requests(p) == TEMPLATE for p in web_pods(sim))
    assert sim.target_status[("AIScaleTarget", "shop", "web")]["lifecycle"] == {
        "observed_mode": "recommendation"
    }


def test_restart_mid_revert_does_not_restart_the_workload_twice():
    sim, driver, _ = _autonomous_guaranteed("in_place_or_recreate")
    sim.run_until(150)  # one lifecycle pass: the rollout restart is issued
    assert len(sim.events.query("RolloutRestart")) == 1
    status = sim.target_status[("AIScaleTarget", "shop", "web")]["lifecycle"]
    assert status["reverting"]["restarted"] == ["Deployment/shop/web"]
    driver.restart()
    sim.run_until(600)
    assert len(sim.events.query("RolloutRestart")) == 1
    assert all(MANAGED_ANNOTATION not in p.annotations for p in web_pods(sim))
