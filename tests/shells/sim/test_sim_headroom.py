"""Headroom placeholders on the simulated cluster (issue 23 item 4): the API server's
answer to EnsureHeadroom / ReleaseHeadroom, the scheduler preempting placeholders for any
real pod, and the `foresize+headroom` operator releasing them so an upsize lands in
place."""

from __future__ import annotations

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EnsureHeadroom, ReleaseHeadroom
from foresize.core.cluster.headroom import HeadroomConfig
from foresize.core.cluster.model import ContainerSuggestion, Suggestion
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import install_foresize
from foresize.shells.sim.policies import get_policy
from foresize.shells.sim.scenario import parse_scenario

NS = "foresize-headroom"
KEY = f"Deployment/{NS}/foresize-headroom"


def one_node(app_replicas: int = 1) -> SimCluster:
    data = {
        "name": "headroom",
        "nodes": [{"name": "n", "cpu": "2", "memory": "8Gi"}],
        "workloads": [
            {
                "name": "a",
                "replicas": app_replicas,
                "readiness_delay": "1s",
                "containers": [{"name": "app", "requests": {"cpu": "500m", "memory": "256Mi"}}],
            }
        ],
    }
    return SimCluster(parse_scenario(data, "<test>"), seed=1)


def ensure(replicas: int) -> EnsureHeadroom:
    return EnsureHeadroom(
        NS,
        "foresize-headroom",
        "",
        "karpenter.sh/nodepool",
        replicas,
        {"cpu": 250, "memory": 512 * MIB},
        "foresize-headroom",
        -1,
    )


def placeholders(sim: SimCluster) -> list:
    return sim.pods_of("Deployment", NS, "foresize-headroom")


def test_ensure_makes_the_priority_class_and_negative_priority_pause_pods() -> None:
    sim = one_node()
    assert sim.apply(ensure(6)).ok
    sim.run(10)
    pods = placeholders(sim)
    assert sum(p.phase == "Running" for p in pods) == 6  # 6 x 250m: the node is full
    assert {p.priority for p in pods} == {-1}
    assert sim.events.count("PriorityClassCreated") == 1
    assert sim.node_free("n")[0] == 0
    assert sim.apply(ensure(6)).ok and sim.events.count("PriorityClassCreated") == 1


def test_any_real_pod_preempts_a_placeholder() -> None:
    sim = one_node()
    sim.apply(ensure(6))
    sim.run(10)
    sim.controllers.set_replicas("Deployment/default/a", 2, source="test")
    sim.run(10)
    assert sum(p.phase == "Running" for p in sim.pods_of("Deployment", "default", "a")) == 2
    preempted = sim.events.query("Preempted")
    assert len(preempted) == 2 and all(e.object.startswith(f"Pod/{NS}/") for e in preempted)


def test_release_deletes_the_placeholder_at_once_and_checks_its_uid() -> None:
    sim = one_node()
    sim.apply(ensure(1))
    sim.run(5)
    (pod,) = placeholders(sim)
    stale = ReleaseHeadroom(NS, pod.name, "n", uid="other")
    assert sim.apply(stale).code == 409
    assert sim.apply(ReleaseHeadroom(NS, pod.name, "n", uid=pod.uid)).ok
    sim.run(0.5)
    assert pod.key not in sim.pods
    assert sim.apply(ReleaseHeadroom(NS, pod.name, "n")).code == 404


def test_the_operator_releases_placeholders_so_the_upsize_lands_in_place() -> None:
    sim = one_node()
    op = install_foresize(sim, headroom=HeadroomConfig())
    sim.apply(ensure(6))
    sim.run(20)
    assert sim.node_free("n")[0] == 0
    # The published suggestion: 500m more for the one pod, two placeholders' worth.
    op.pass_state.suggestions.latest["default/a"] = Suggestion(
        "s1", sim.now, {"app": ContainerSuggestion("app", {"cpu": 1000, "memory": 256 * MIB})}
    )
    sim.run(60)
    (app,) = sim.pods_of("Deployment", "default", "a")
    assert app.containers[0].resources.requests["cpu"] == 1000
    assert sim.events.count("ResizeApplied") == 1
    assert sim.events.count("Evicted") == 0  # in place, nobody moved
    assert sim.events.count("HeadroomReleased") == 2
    # The two released are the demand that landed: not recreated (they would go Pending
    # for nothing); the rest of the shrink to the demand left (none) waits its delay.
    assert sim.workloads[KEY].replicas == 4
    assert len(sim.pods_of("Deployment", "foresize-headroom", "foresize-headroom")) == 4


def test_foresize_headroom_is_a_policy() -> None:
    sim = one_node()
    get_policy("foresize+headroom")(sim)
    sim.run(3600)
    # No suggestion yet (no day of history): no demand, no placeholders made.
    assert KEY not in sim.workloads
