"""Controllers, admission hook, Eviction API with PDBs, rollouts and HPAs in the simulator."""

from __future__ import annotations

from foresize.core.cluster.actions import (
    EmitEvent,
    EvictPod,
    PatchPodMetadata,
    PatchScale,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.core.cluster.model import Pod, Workload
from foresize.core.cluster.port import ClusterPort
from foresize.shells.sim.cluster import RESTARTED_AT, SimCluster
from support.sim import container, make_sim, pods_of, workload


def test_sim_implements_the_cluster_port():
    sim: ClusterPort = make_sim([workload("a")], settle=0)
    snap = sim.snapshot()
    assert snap.now == 0 and "Deployment/default/a" in snap.workloads


def test_evicted_pod_is_recreated_by_its_controller_through_the_admission_hook():
    sim = make_sim([workload("web", 2)])
    calls: list[tuple[str, str | None, float]] = []

    def hook(pod: Pod, wl: Workload | None, now: float) -> Pod:
        calls.append((pod.name, wl.key if wl else None, now))
        pod.containers[0].resources.requests["cpu"] = 300
        pod.annotations["foresize.io/managed"] = "true"
        return pod

    sim.admission_hook = hook
    victim = pods_of(sim, "web")[0]
    res = sim.apply(EvictPod("default", victim.name, reason="test"))
    assert res.ok and res.code == 201
    assert sim.pod("default", victim.name).deletion_time == sim.now  # terminating, graceful
    sim.run(1)
    # The ReplicaSet replaced it at once (terminating pods do not count) via the hook.
    assert len(calls) == 1
    new_name, owner, _ = calls[0]
    assert owner == "Deployment/default/web"
    new = sim.pod("default", new_name)
    assert new.containers[0].resources.requests["cpu"] == 300
    assert new.annotations["foresize.io/managed"] == "true"
    assert new.owner.kind == "ReplicaSet" and new.name.startswith(new.owner.name + "-")
    created = sim.events.query("PodCreated", object=f"Pod/default/{new_name}")
    assert created[0].details["mutated"] is True
    sim.run(20)
    assert sim.pod("default", victim.name) is None  # gone after the grace period
    assert sim.pod("default", new_name).ready
    assert sim.summary()["workloads"][0]["evictions"] == 1
    # Switching the hook off: the next replacement keeps the template values.
    sim.admission_hook = None
    sim.apply(EvictPod("default", new_name))
    sim.run(1)
    fresh = [p for p in pods_of(sim, "web") if p.deletion_time is None and p.name != victim.name]
    assert {p.containers[0].resources.requests["cpu"] for p in fresh} == {500}
    assert len(calls) == 1


PDB_WEB = {"name": "web", "namespace": "default", "selector": {"app": "web"}, "min_available": 2}


def test_pdb_forbidden_eviction_returns_429_and_evicts_nothing():
    sim = make_sim([workload("web", 2)], pdbs=[PDB_WEB])
    before = {p.name for p in pods_of(sim, "web")}
    res = sim.apply(EvictPod("default", sorted(before)[0]))
    assert not res.ok and res.code == 429 and res.reason == "TooManyRequests"
    assert res.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert res.has_cause("DisruptionBudget")
    assert res.causes[0]["message"] == (
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    )
    assert res.retry_after_seconds is None
    sim.run(60)
    pods = pods_of(sim, "web")
    assert {p.name for p in pods} == before
    assert all(p.deletion_time is None and p.ready for p in pods)
    assert sim.events.count("Evicted") == 0 and sim.events.count("EvictionRefused") == 1
    snap_pdb = sim.snapshot().pdbs[0]
    assert (snap_pdb.current_healthy, snap_pdb.desired_healthy) == (2, 2)
    assert snap_pdb.disruptions_allowed == 0 and snap_pdb.expected_pods == 2


def test_pdb_allows_one_then_refuses_and_special_cases():
    sim = make_sim([workload("web", 3)], pdbs=[PDB_WEB])
    names = sorted(p.name for p in pods_of(sim, "web"))
    assert sim.apply(EvictPod("default", names[0])).code == 201
    # The evicted pod is terminating and its replacement not Ready yet: budget exhausted.
    assert sim.apply(EvictPod("default", names[1])).code == 429
    # A terminating pod skips the PDB check.
    assert sim.apply(EvictPod("default", names[0])).code == 201
    sim.run(60)
    # A PDB being processed: 429 with retryAfterSeconds 10.
    sim.update_pdb("default", "web", min_available=1)
    res = sim.apply(EvictPod("default", names[1]))
    assert res.code == 429 and res.retry_after_seconds == 10
    assert "is still being processed by the server" in res.causes[0]["message"]
    sim.run(2)
    assert sim.apply(EvictPod("default", names[1])).code == 201
    # Two PDBs selecting one pod: 500.
    sim2 = make_sim(
        [workload("web", 2)],
        pdbs=[PDB_WEB, {**PDB_WEB, "name": "web2", "max_unavailable": 1, "min_available": None}],
    )
    res = sim2.apply(EvictPod("default", pods_of(sim2, "web")[0].name))
    assert res.code == 500 and "more than one PodDisruptionBudget" in res.message


def test_pending_pod_skips_the_pdb_check():
    sim = make_sim(
        [workload("web", 3, containers=[container(req={"cpu": "900m", "memory": "1Mi"}, lim={})])],
        pdbs=[PDB_WEB],
    )
    pending = [p for p in pods_of(sim, "web") if p.phase == "Pending"]
    assert len(pending) == 1
    assert sim.apply(EvictPod("default", pending[0].name)).code == 201


def test_statefulset_names_are_ordered_and_created_in_order():
    sim = make_sim([workload("db", 3, kind="StatefulSet")], settle=0)
    sim.run(60)
    pods = pods_of(sim, "db", "StatefulSet")
    assert [p.name for p in sorted(pods, key=lambda p: p.creation_time)] == ["db-0", "db-1", "db-2"]
    # OrderedReady: each ordinal waits for the previous one to be Ready (5s delay).
    times = [sim.pod("default", f"db-{i}").creation_time for i in range(3)]
    assert times[1] - times[0] >= 5 and times[2] - times[1] >= 5
    # A deleted ordinal comes back with the same name once the old pod is gone.
    sim.apply(EvictPod("default", "db-1"))
    sim.run(30)
    assert sim.pod("default", "db-1").phase == "Running"
    assert sim.pod("default", "db-1").uid != next(p for p in pods if p.name == "db-1").uid
    # Scale down removes the highest ordinal.
    sim.apply(PatchScale("default", "StatefulSet", "db", 2))
    sim.run(30)
    assert sorted(p.name for p in pods_of(sim, "db", "StatefulSet")) == ["db-0", "db-1"]


def test_daemonset_runs_one_pod_per_node_including_new_nodes():
    sim = make_sim([workload("agent", kind="DaemonSet")], nodes=3)
    pods = pods_of(sim, "agent", "DaemonSet")
    assert sorted(p.node_name for p in pods) == ["n-0", "n-1", "n-2"]
    sim.add_node("late", 2000, 4 * 2**30)
    sim.run(10)
    pods = pods_of(sim, "agent", "DaemonSet")
    assert sorted(p.node_name for p in pods) == ["late", "n-0", "n-1", "n-2"]
    assert sim.snapshot().workloads["DaemonSet/default/agent"].replicas == 4


def test_rolling_restart_replaces_every_pod_within_surge_and_unavailability():
    sim = make_sim([workload("web", 4)], nodes=2, cpu="4")
    old = {p.name for p in pods_of(sim, "web")}
    ready_counts = []
    totals = []

    def watch(s: SimCluster, now: float) -> None:
        live = [p for p in pods_of(s, "web") if p.deletion_time is None]
        totals.append(len(live))
        ready_counts.append(sum(1 for p in live if p.ready))

    sim.every(1.0, watch)
    assert sim.apply(RestartWorkload("default", "Deployment", "web", restarted_at=3600)).ok
    wl = sim.snapshot().workloads["Deployment/default/web"]
    assert wl.template.annotations[RESTARTED_AT] == "2026-01-05T01:00:00Z"
    sim.run(120)
    new = [p for p in pods_of(sim, "web")]
    assert len(new) == 4 and not ({p.name for p in new} & old)
    assert all(p.ready for p in new)
    assert min(ready_counts) >= 3  # maxUnavailable 25% of 4
    assert max(totals) <= 5  # maxSurge 25% of 4
    rs = [w for w in sim.snapshot().workloads.values() if w.kind == "ReplicaSet"]
    assert len(rs) == 1 and rs[0].replicas == 4 and new[0].owner.name == rs[0].name


def test_hpa_scales_up_on_utilisation_and_back_down():
    sim = make_sim(
        [
            workload(
                "web",
                2,
                load_shared=True,
                containers=[container(cpu="450m", memory="100Mi")],
            )
        ],
        nodes=2,
        cpu="4",
        hpas=[
            {
                "name": "web",
                "namespace": "default",
                "target": {"kind": "Deployment", "name": "web"},
                "min_replicas": 2,
                "max_replicas": 6,
                "metrics": [{"resource": "cpu", "target_utilization": 50}],
            }
        ],
        hpa_sync_period="15s",
    )
    # 2 x 450m of 500m requests = 90% > 50%: scale to ceil(2 * 1.8) = 4.
    sim.run(120)
    scaled = sim.events.query("HPAScaled")
    assert scaled and scaled[0].details["replicas"] == 4
    assert "cpu resource utilization (percentage of request) above target" in scaled[0].message
    sim.run(600)
    # The shared load spread over 4 pods: 225m each = 45%, within tolerance: stays at 4.
    assert sim.snapshot().workloads["Deployment/default/web"].replicas == 4
    assert len([p for p in pods_of(sim, "web") if p.ready]) == 4


def test_hpa_does_not_flap_when_usage_is_sampled_coarsely():
    sim = make_sim(
        [workload("web", 2, load_shared=True, containers=[container(cpu="450m", memory="1Mi")])],
        nodes=2,
        cpu="4",
        step=300,
        hpas=[
            {
                "name": "web",
                "target": {"name": "web"},
                "min_replicas": 2,
                "max_replicas": 6,
                "metrics": [{"resource": "cpu", "target_utilization": 50}],
            }
        ],
    )
    sim.run(4 * 3600)
    # One scale-up to 4 (as at a 1-minute step), then steady: new pods that became Ready
    # after the last sample are not counted against the old sample's usage.
    assert [e.details["replicas"] for e in sim.events.query("HPAScaled")] == [4]


def test_scale_metadata_status_and_event_actions():
    sim = make_sim([workload("web", 1)])
    p = pods_of(sim, "web")[0]
    res = sim.apply(PatchPodMetadata("default", p.name, annotations={"x": "1", "y": None}))
    assert res.ok and sim.pod("default", p.name).annotations["x"] == "1"
    assert sim.apply(PatchPodMetadata("default", "nope")).code == 404
    assert sim.apply(WriteTargetStatus("default", "t", {"a": {"b": 1}})).ok
    assert sim.apply(WriteTargetStatus("default", "t", {"a": {"c": 2}})).ok
    assert sim.target_status[("AIScaleTarget", "default", "t")] == {"a": {"b": 1, "c": 2}}
    assert sim.apply(EmitEvent("default", "Deployment", "web", "CircuitBreakerOpened", "m")).ok
    assert sim.events.query("Event")[0].reason == "CircuitBreakerOpened"
    assert sim.summary()["workloads"][0]["breaker_openings"] == 1
    seen: list[tuple[str, int]] = []

    def scale_hook(wl: Workload, replicas: int, now: float) -> int:
        seen.append((wl.key, replicas))
        return max(replicas, 2)

    sim.scale_hook = scale_hook
    assert sim.apply(PatchScale("default", "Deployment", "web", 0)).ok
    sim.run(10)
    assert seen == [("Deployment/default/web", 0)]
    assert len(pods_of(sim, "web")) == 2


def test_snapshot_is_a_point_in_time_view():
    sim = make_sim([workload("web", 1)])
    snap = sim.snapshot()
    p = snap.pods[0]
    sim.apply(PatchPodMetadata("default", p.name, annotations={"later": "yes"}))
    assert "later" not in p.annotations
    assert "later" in sim.snapshot().pods[0].annotations


def test_statefulset_recreates_an_ordinal_evicted_by_node_pressure():
    from foresize.core.api.quantity import MIB

    sim = make_sim(
        [workload("db", 1, kind="StatefulSet", containers=[container(req={}, lim={})])],
        memory="1Gi",
    )
    old_uid = sim.pod("default", "db-0").uid
    sim.set_usage("default", "db-0", "app", memory=1000 * MIB)
    sim.run(60)
    assert sim.events.count("NodePressureEviction", object="Pod/default/db-0") == 1
    sim.run(30)
    pod = sim.pod("default", "db-0")
    assert pod.uid != old_uid and pod.phase == "Running" and pod.ready


def test_breaker_openings_are_attributed_through_the_target_ref():
    from types import SimpleNamespace as NS

    sim = make_sim([workload("web", 1), workload("api", 1)])
    sim.targets.append(
        NS(
            metadata=NS(name="shop-api", namespace="default"),
            spec=NS(scaleTargetRef=NS(kind="Deployment", name="api")),
        )
    )
    sim.apply(EmitEvent("default", "AIScaleTarget", "shop-api", "CircuitBreakerOpen", "m"))
    rows = {r["name"]: r for r in sim.summary()["workloads"]}
    assert rows["Deployment/default/api"]["breaker_openings"] == 1
    assert rows["Deployment/default/web"]["breaker_openings"] == 0
