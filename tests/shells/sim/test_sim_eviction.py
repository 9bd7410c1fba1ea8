"""The simulated Eviction API answers as kube-apiserver does.

Upstream: `pkg/registry/core/pod/storage/eviction.go` (EvictionREST.Create, canIgnorePDB,
checkAndDecrement, getPodDisruptionBudgets) and the status it reads, from
`pkg/controller/disruption/disruption.go` (countHealthyPods, getExpectedPodCount,
getExpectedScale, updatePdbStatus).
"""

from __future__ import annotations

from foresize.core.cluster.actions import EvictPod, PatchScale
from foresize.core.cluster.model import Container, Pod, ResourceRequirements
from support.sim import make_sim, pods_of, workload

WEB = {"tier": "web"}


def evict(sim, pod):
    return sim.apply(EvictPod(pod.namespace, pod.name))


def pdb(policy: str | None = None, **budget):
    out = {"name": "web", "selector": WEB, **budget}
    if policy:
        out["unhealthy_pod_eviction_policy"] = policy
    return out


def ready_and_unready(ready: int, unready: int, budget: dict):
    """`ready` Ready pods (workload a) and `unready` never-Ready pods (workload b), all
    selected by one PDB."""
    return make_sim(
        [
            workload("a", ready, labels=WEB),
            workload("b", unready, labels=WEB, readiness_delay="10h"),
        ],
        pdbs=[budget],
    )


def test_unhealthy_pod_below_the_budget_is_refused_unless_always_allow():
    # currentHealthy 1 < desiredHealthy 2: IfHealthyBudget sends the unready pod through
    # checkAndDecrement, where disruptionsAllowed is 0.
    sim = ready_and_unready(1, 1, pdb(min_available=2))
    unready = pods_of(sim, "b")[0]
    assert not unready.ready
    res = evict(sim, unready)
    assert res.code == 429 and res.retry_after_seconds is None
    assert res.causes[0]["message"] == (
        "The disruption budget web needs 2 healthy pods and has 1 currently"
    )
    assert sim.pod("default", unready.name).deletion_time is None
    sim = ready_and_unready(1, 1, pdb("AlwaysAllow", min_available=2))
    assert evict(sim, pods_of(sim, "b")[0]).code == 201


def test_unhealthy_pod_goes_while_the_budget_is_met_even_if_the_pdb_is_stale():
    sim = ready_and_unready(2, 1, pdb(min_available=2))
    # currentHealthy 2 >= desiredHealthy 2 > 0: the unready pod goes without the budget.
    assert evict(sim, pods_of(sim, "b")[0]).code == 201
    sim.run(30)  # its replacement is unready too
    sim.update_pdb("default", "web", min_available=1, processing_delay=600)
    # A healthy pod must pass checkAndDecrement: the PDB is not processed yet.
    res = evict(sim, pods_of(sim, "a")[0])
    assert res.code == 429 and res.retry_after_seconds == 10
    assert "is still being processed by the server" in res.causes[0]["message"]
    # The unready replacement skips checkAndDecrement: the generation is not looked at.
    replacement = next(p for p in pods_of(sim, "b") if p.deletion_time is None)
    assert not replacement.ready
    assert evict(sim, replacement).code == 201


def test_an_empty_budget_does_not_let_unhealthy_pods_go_under_if_healthy_budget():
    # desiredHealthy 0 and no healthy pod: disruptionsAllowed is 0, and the unhealthy-pod
    # shortcut needs desiredHealthy > 0, so kube-apiserver answers 429.
    sim = ready_and_unready(0, 2, pdb(min_available=0))
    res = evict(sim, pods_of(sim, "b")[0])
    assert res.code == 429
    assert res.causes[0]["message"] == (
        "The disruption budget web needs 0 healthy pods and has 0 currently"
    )
    sim = ready_and_unready(0, 2, pdb("AlwaysAllow", min_available=0))
    assert evict(sim, pods_of(sim, "b")[0]).code == 201


def test_pods_without_a_controller_are_not_expected_by_a_max_unavailable_budget():
    sim = make_sim([], pdbs=[pdb(max_unavailable=1)])
    for i in range(3):
        sim.create_pod(
            Pod(
                "default",
                f"bare-{i}",
                labels=dict(WEB),
                containers=[Container("app", ResourceRequirements({"cpu": 100}, {}))],
            ),
            readiness_delay=1,
        )
    sim.run(10)
    assert all(p.ready for p in sim.pods.values())
    status = sim.snapshot().pdbs[0]
    assert (status.expected_pods, status.current_healthy, status.disruptions_allowed) == (
        3 - 3,
        3,
        0,
    )
    assert evict(sim, sim.pod("default", "bare-0")).code == 429


def test_pending_and_terminating_pods_skip_the_budget_and_two_pdbs_are_a_500():
    sim = ready_and_unready(2, 0, pdb(min_available=2))
    assert evict(sim, pods_of(sim, "a")[0]).code == 429  # no disruption allowed
    # Scaling down makes one pod terminating: its eviction is a plain delete (201), where
    # checkAndDecrement would refuse it (currentHealthy 1 < desiredHealthy 2).
    assert sim.apply(PatchScale("default", "Deployment", "a", 1)).ok
    sim.run(1)
    terminating = [p for p in pods_of(sim, "a") if p.deletion_time is not None]
    assert len(terminating) == 1
    assert evict(sim, terminating[0]).code == 201
    # A Pending pod (too big for any node) is deleted without looking at the budget.
    sim.create_pod(
        Pod(
            "default",
            "huge",
            labels=dict(WEB),
            containers=[Container("app", ResourceRequirements({"cpu": 64000}, {}))],
        )
    )
    sim.run(1)
    assert sim.pod("default", "huge").phase == "Pending"
    assert evict(sim, sim.pod("default", "huge")).code == 201
    sim = make_sim(
        [workload("a", 1, labels=WEB)],
        pdbs=[pdb(min_available=0), {"name": "other", "selector": WEB, "max_unavailable": 1}],
    )
    res = evict(sim, pods_of(sim, "a")[0])
    assert res.code == 500 and "more than one PodDisruptionBudget" in res.message


def test_a_stale_plan_for_a_recreated_statefulset_pod_is_a_409():
    # The same name, another pod: eviction's deleteOptions.preconditions.uid and the
    # resize patch's test of /metadata/uid both refuse (409), nothing happens to the pod.
    from foresize.core.cluster.actions import ContainerResize, ResizePod

    sim = make_sim([workload("db", 1, kind="StatefulSet", labels=WEB)])
    (old,) = pods_of(sim, "db", kind="StatefulSet")
    assert sim.apply(EvictPod(old.namespace, old.name, uid=old.uid)).code == 201
    sim.run(60)
    (new,) = pods_of(sim, "db", kind="StatefulSet")
    assert new.name == old.name and new.uid != old.uid and new.ready
    res = sim.apply(EvictPod(new.namespace, new.name, uid=old.uid))
    assert res.code == 409 and "Precondition failed" in res.message
    resize = ResizePod(
        new.namespace, new.name, (ContainerResize("app", {"cpu": 400}),), uid=old.uid
    )
    assert sim.apply(resize).code == 409
    now = sim.pod(new.namespace, new.name)
    assert now.deletion_time is None and now.generation == 1
    # The right uid goes through.
    assert sim.apply(EvictPod(new.namespace, new.name, uid=new.uid)).code == 201
