"""End-to-end scenarios of the disruption worker on the simulated cluster (architecture §3.2).

Each runs the real planner through `SimOperator` against `SimCluster` (scheduler, kubelet
resize, controllers, Eviction API, admission hook), with fixed suggestions so the rule
under test is the only moving part.
"""

from __future__ import annotations

import itertools
from typing import Any

from foresize.core.api.quantity import GIB, MIB
from foresize.core.api.types import parse_timestamp
from foresize.core.cluster.actions import PatchScale
from foresize.core.cluster.model import POD_RESIZE_IN_PROGRESS, POD_RESIZE_PENDING
from foresize.shells.sim.operator import OperatorOptions, SimOperator
from support.sim import container, evicted, make_sim, operator, pods_of, suggest, workload


def run_in_steps(sim: Any, until: float, step: float, check: Any) -> None:
    while sim.now < until:
        sim.run(step)
        check()


# --------------------------------------------------------------------------- in_place


def _full_node(guard: bool) -> None:
    sim = make_sim(
        [
            workload(
                "a",
                containers=[
                    container(
                        req={"cpu": "500m", "memory": "256Mi"}, lim={"cpu": "2", "memory": "1Gi"}
                    )
                ],
            ),
            workload(
                "b",
                containers=[
                    container(
                        req={"cpu": "1200m", "memory": "256Mi"}, lim={"cpu": "2", "memory": "1Gi"}
                    )
                ],
            ),
        ]
    )
    # Without the guard the kubelet defers it; held as it is (`never`: the default
    # release after a minute is tested in test_vertical_release_deferred).
    hold = {} if guard else {"release_deferred": "never"}
    op = operator(sim, "in_place", guard=guard, disruption=hold, targets=["Deployment/default/a"])
    (pod,) = pods_of(sim, "a")
    suggest(op, "a", app=({"cpu": 1000, "memory": 256 * MIB}, {"cpu": 2000, "memory": GIB}))
    sim.run(900)
    now = sim.pod("default", pod.name)
    assert now is not None and now.uid == pod.uid, "never evicted or recreated"
    assert now.status_of("app").allocated["cpu"] == 500, "keeps running on its old allocation"
    assert now.status_of("app").restart_count == 0
    deferred = now.condition(POD_RESIZE_PENDING)
    if guard:
        # Not sent at all: nothing sits Deferred holding the larger request on the node.
        assert deferred is None and now.containers[0].resources.requests["cpu"] == 500
        assert sim.events.count("Event", reason="ResizeWaitingForCapacity") >= 1
        assert (
            sim.target_status[("AIScaleTarget", "default", "a")]["pods_waiting_for_capacity"] == 1
        )
    else:
        assert deferred is not None and deferred.reason == "Deferred"
        assert sim.target_status[("AIScaleTarget", "default", "a")]["pods_stalled"] == 1
    # Another pod leaves: the resize lands, in place.
    sim.apply(PatchScale("default", "Deployment", "b", 0))
    sim.run(120)
    now = sim.pod("default", pod.name)
    assert now is not None and now.uid == pod.uid
    assert now.status_of("app").allocated["cpu"] == 1000
    assert not evicted(sim)


def test_in_place_upsize_on_a_full_node_waits_and_lands_when_a_pod_leaves() -> None:
    _full_node(guard=True)


def test_in_place_deferred_stall_is_never_evicted() -> None:
    _full_node(guard=False)


# --------------------------------------------------------------------------- stall fallback


def _error_stall(restart_at: float | None = None) -> tuple[Any, SimOperator, Any, float]:
    sim = make_sim(
        [
            workload(
                "c",
                3,
                containers=[
                    container(
                        req={"cpu": "200m", "memory": "512Mi"}, lim={"cpu": "1", "memory": "1Gi"}
                    )
                ],
            )
        ],
        nodes=2,
    )
    op = operator(
        sim,
        "in_place_or_recreate",
        disruption={"max_disrupted": 3},
        targets=["Deployment/default/c"],
    )
    pods = sorted(pods_of(sim, "c"), key=lambda p: p.name)
    stuck = pods[0]
    sim.set_usage("default", stuck.name, "app", memory=900 * MIB)
    sim.run(60)
    suggest(op, "c", app=({"cpu": 200, "memory": 384 * MIB}, {"cpu": 1000, "memory": 768 * MIB}))
    key = "default/c"
    first_seen: float | None = None
    restarted = False

    def check() -> None:
        nonlocal first_seen, restarted
        ts = op.state.targets.get(key)
        if first_seen is None and ts is not None and stuck.uid in ts.stalls:
            first_seen = ts.stalls[stuck.uid].first_seen
        if first_seen is not None and not evicted(sim):
            live = sim.pod("default", stuck.name)
            assert live is not None
            cond = live.condition(POD_RESIZE_IN_PROGRESS)
            assert cond is not None and cond.reason == "Error"
            assert sim.now < first_seen + 120 + op.opt.loop_interval
        if (
            restart_at is not None
            and not restarted
            and first_seen is not None
            and sim.now >= first_seen + restart_at
        ):
            op.restart()
            restarted = True

    run_in_steps(sim, sim.now + 400, 1.0, check)
    assert first_seen is not None
    return sim, op, stuck, first_seen


def test_memory_limit_below_usage_stalls_and_only_that_pod_is_evicted_after_2m() -> None:
    sim, op, stuck, first_seen = _error_stall()
    evs = evicted(sim)
    assert [e.object for e in evs] == [f"Pod/default/{stuck.name}"], "only the stalled pod"
    assert first_seen + 119 < evs[0].time <= first_seen + 120 + op.opt.loop_interval
    # The others resized in place, and the recreated pod has the suggested resources.
    for p in pods_of(sim, "c"):
        assert p.containers[0].resources.requests["memory"] == 384 * MIB
        assert p.containers[0].resources.limits["memory"] == 768 * MIB
    assert sim.target_status[("AIScaleTarget", "default", "c")]["pods_evicted"] == 1


def test_operator_restart_mid_stall_keeps_the_clock() -> None:
    sim, op, stuck, first_seen = _error_stall(restart_at=60.0)
    evs = evicted(sim)
    assert [e.object for e in evs] == [f"Pod/default/{stuck.name}"]
    # Rebuilt from status: still two minutes after the stall was first seen, not after
    # the restart.
    assert evs[0].time <= first_seen + 120 + op.opt.loop_interval
    assert op.state.targets["default/c"].stall_fallbacks >= 1


# --------------------------------------------------------------------------- PDB


def test_pdb_429_defers_the_rest_and_evicts_later() -> None:
    sim = make_sim(
        [workload("p", 3)],
        nodes=2,
        pdbs=[{"name": "p", "namespace": "default", "selector": {"app": "p"}, "min_available": 3}],
    )
    op = operator(
        sim, "recreate", disruption={"max_disrupted": 3}, targets=["Deployment/default/p"]
    )
    op.record_actions = True
    suggest(op, "p", app=({"cpu": 500, "memory": 256 * MIB}, {"cpu": 1000, "memory": GIB}))
    sim.run(20)
    refused = sim.events.query("EvictionRefused")
    assert len(refused) == 1, "one 429, then nothing else of that target in that run"
    first = refused[0].time
    sends = [t for t, a, _ in op.applied if type(a).__name__ == "EvictPod"]
    assert sends == [first]
    assert not evicted(sim)
    sim.run(120)
    assert not evicted(sim)  # still refused on later runs, never more than one try a run
    runs = {e.time for e in sim.events.query("EvictionRefused")}
    assert len(runs) == len(sim.events.query("EvictionRefused"))
    sim.update_pdb("default", "p", min_available=2)
    sim.run(600)
    assert evicted(sim), "evicted in a later run once the PDB allows it"
    for p in pods_of(sim, "p"):
        assert p.containers[0].resources.requests["memory"] == 256 * MIB


# --------------------------------------------------------------------------- batching


def test_batches_of_two_of_ten_at_least_60s_apart_counting_not_ready() -> None:
    sim = make_sim(
        [
            workload(
                "w",
                10,
                readiness_delay="20s",
                containers=[
                    container(
                        req={"cpu": "100m", "memory": "256Mi"}, lim={"cpu": "1", "memory": "512Mi"}
                    )
                ],
            )
        ],
        nodes=2,
        cpu="4",
    )
    op = operator(sim, "recreate", targets=["Deployment/default/w"])
    # One pod is crash-looping (OOM above its limit): not Ready most of the time.
    sick = sorted(pods_of(sim, "w"), key=lambda p: p.name)[0]
    sim.set_usage("default", sick.name, "app", memory=600 * MIB)
    sim.run(30)
    suggest(op, "w", app=({"cpu": 100, "memory": 200 * MIB}, {"cpu": 1000, "memory": 400 * MIB}))
    worst = 0

    def check() -> None:
        nonlocal worst
        live = [p for p in pods_of(sim, "w") if p.deletion_time is None and p.ready]
        worst = max(worst, 10 - len(live))

    run_in_steps(sim, sim.now + 1500, 2.0, check)
    assert worst <= 2
    times = sorted({e.time for e in evicted(sim)})
    assert len(times) >= 3
    assert all(b - a >= 60 for a, b in itertools.pairwise(times))
    # The not-Ready pod took a slot: some batch evicted only one pod.
    per_batch = [sum(1 for e in evicted(sim) if e.time == t) for t in times]
    assert max(per_batch) <= 2 and min(per_batch) == 1
    assert all(p.containers[0].resources.requests["memory"] == 200 * MIB for p in pods_of(sim, "w"))


# --------------------------------------------------------------------------- circuit breaker


def test_circuit_breaker_opens_backs_off_probes_and_closes() -> None:
    sim = make_sim([workload("s", 2)], nodes=2)
    op = operator(
        sim, "recreate", disruption={"max_disrupted": 1}, targets=["Deployment/default/s"]
    )
    op.admission.enabled = False  # the webhook is down: pods come back stale
    suggest(op, "s", app=({"cpu": 500, "memory": 256 * MIB}, {"cpu": 1000, "memory": GIB}))
    key = ("AIScaleTarget", "default", "s")

    def breaker() -> dict[str, Any]:
        return sim.target_status.get(key, {}).get("circuit_breaker", {})

    def run_until(cond: Any, limit: float) -> None:
        end = sim.now + limit
        while not cond() and sim.now < end:
            sim.run(5)
        assert cond()

    run_until(lambda: breaker().get("state") == "open", 900)
    assert len(evicted(sim)) == 3, "opens after 3 no-progress cycles"
    cb = breaker()
    # Typed as the CRD says: a duration string and date-time strings.
    assert cb["no_progress_cycles"] == 3 and cb["backoff"] == "1m"
    assert sim.events.count("Event", reason="CircuitBreakerOpen") == 1
    # No eviction during the back-off; one probe when it ends.
    sim.run(parse_timestamp(cb["retry_at"]) - 5 - sim.now)
    assert len(evicted(sim)) == 3
    run_until(lambda: len(evicted(sim)) == 4, 60)
    # The probe came back stale: open again, twice the wait.
    run_until(lambda: breaker().get("state") == "open" and breaker().get("backoff") == "2m", 60)
    cb = breaker()
    sim.run(parse_timestamp(cb["retry_at"]) - 5 - sim.now)
    assert len(evicted(sim)) == 4
    # The hook is back: the next probe comes back right and closes the breaker.
    op.admission.enabled = True
    run_until(lambda: breaker().get("state") == "closed", 120)
    assert len(evicted(sim)) == 5
    sim.run(300)
    assert all(p.containers[0].resources.requests["memory"] == 256 * MIB for p in pods_of(sim, "s"))
    assert sim.summary(policy="foresize")["totals"]["breaker_openings"] == 2


# --------------------------------------------------------------------------- capacity


def _concurrent(guard: bool) -> tuple[Any, float]:
    sim = make_sim(
        [
            workload(
                "u",
                3,
                containers=[
                    container(
                        req={"cpu": "400m", "memory": "256Mi"}, lim={"cpu": "2", "memory": "1Gi"}
                    )
                ],
            )
        ],
        cpu="2",
    )
    before = {p.name: p.uid for p in pods_of(sim, "u")}
    sim.add_node("spare", 2000, 8 * GIB)  # room elsewhere for the one that cannot fit
    op = operator(
        sim,
        "in_place_or_recreate",
        guard=guard,
        disruption={"max_disrupted": 3},
        targets=["Deployment/default/u"],
    )
    suggest(op, "u", app=({"cpu": 800, "memory": 256 * MIB}, {"cpu": 2000, "memory": GIB}))
    start = sim.now
    sim.run(400)
    pods = pods_of(sim, "u")
    stayed = [p for p in pods if before.get(p.name) == p.uid]
    assert len(stayed) == 2, "the two that fit resized in place"
    assert {p.node_name for p in stayed} == {"n"}
    assert len(evicted(sim)) == 1, "the third followed its fallback"
    moved = [p for p in pods if p not in stayed]
    assert [p.node_name for p in moved] == ["spare"]
    assert all(p.phase == "Running" for p in pods)
    assert all(p.status_of("app").allocated["cpu"] == 800 for p in pods)
    return sim, start


def test_concurrent_upsizes_on_one_node_fit_or_fall_back() -> None:
    sim, start = _concurrent(guard=True)
    # The guard never sent the one that could not fit: evicted at once, nothing Deferred.
    assert sim.events.count("ResizeDeferred") == 0
    assert evicted(sim)[0].time - start < 60


def test_concurrent_upsizes_without_the_guard_stall_then_fall_back() -> None:
    sim, start = _concurrent(guard=False)
    # All three were sent; the one that did not fit sat Deferred for the stall timeout.
    assert sim.events.count("ResizeDeferred") == 1
    assert evicted(sim)[0].time - start >= 120


def _safety(guard: bool) -> Any:
    sim = make_sim(
        [
            workload(
                "api",
                3,
                priority_class="high",
                containers=[
                    container(
                        req={"cpu": "200m", "memory": "1Gi"}, lim={"cpu": "1", "memory": "4Gi"}
                    )
                ],
            ),
            workload(
                "batch",
                2,
                priority_class="low",
                containers=[
                    container(
                        req={"cpu": "200m", "memory": "1Gi"}, lim={"cpu": "1", "memory": "2Gi"}
                    )
                ],
            ),
            workload(
                "web",
                1,
                priority_class="high",
                readiness_delay="1s",
                containers=[
                    container(
                        req={"cpu": "500m", "memory": "256Mi"},
                        lim={"cpu": "1", "memory": "512Mi"},
                        cpu="900m",
                    )
                ],
            ),
        ],
        cpu="16",
        memory="8Gi",
        settle=20.0,
        priority_classes={"high": 1000, "low": 0},
        hpa_sync_period="60s",
        hpas=[
            {
                "name": "web",
                "namespace": "default",
                "target": {"kind": "Deployment", "name": "web"},
                "min_replicas": 1,
                "max_replicas": 3,
                "metrics": [{"resource": "cpu", "target_utilization": 60}],
            }
        ],
    )
    op = operator(
        sim,
        "in_place",
        guard=guard,
        disruption={"max_disrupted": 3},
        targets=["Deployment/default/api"],
    )
    suggest(op, "api", app=({"cpu": 200, "memory": 2 * GIB}, {"cpu": 1000, "memory": 4 * GIB}))
    sim.run(600)
    return sim


def test_scheduler_safety_without_the_guard_preempts_unrelated_pods() -> None:
    sim = _safety(guard=False)
    assert sim.workloads["Deployment/default/web"].replicas == 3
    assert sim.events.count("Preempted") >= 1
    assert sim.events.count("ResizeDeferred") >= 1, "a Deferred upsize held capacity"


def test_scheduler_safety_with_the_guard_preempts_nothing() -> None:
    sim = _safety(guard=True)
    assert sim.workloads["Deployment/default/web"].replicas == 3
    assert sim.events.count("Preempted") == 0
    assert all(p.phase == "Running" for p in sim.pods.values())
    assert sim.events.count("ResizeDeferred") == 0, "no Deferred resize holds capacity"
    # Two upsizes fitted and landed; the third waits and is reported.
    grown = [p for p in pods_of(sim, "api") if p.status_of("app").allocated["memory"] == 2 * GIB]
    assert len(grown) == 2
    assert sim.events.count("Event", reason="ResizeWaitingForCapacity") >= 1


# --------------------------------------------------------------------------- OOM


def test_oom_remediation_raises_memory_at_once_and_compounds_every_2_minutes() -> None:
    from foresize.shells.sim.recommenders import ForesizeRecommender

    sim = make_sim(
        [
            workload(
                "m",
                containers=[
                    container(
                        req={"cpu": "100m", "memory": "256Mi"},
                        lim={"cpu": "1", "memory": "512Mi"},
                        memory="200Mi",
                    )
                ],
            )
        ],
        memory="16Gi",
    )
    options = OperatorOptions(update_mode="in_place", min_lookback=0.0)
    SimOperator(sim, ForesizeRecommender(), options).install()
    sim.run(3600)  # an hour of history
    (pod,) = pods_of(sim, "m")
    sim.set_usage("default", pod.name, "app", memory=1500 * MIB)
    limits: list[tuple[float, int]] = []
    seen: set[int] = set()

    def check() -> None:
        p = sim.pod("default", pod.name)
        lim = p.containers[0].resources.limits["memory"]
        if lim not in seen:
            seen.add(lim)
            limits.append((sim.now, lim))

    run_in_steps(sim, sim.now + 900, 5.0, check)
    ooms = [e.time for e in sim.events.query("OOMKilled")]
    assert ooms, "the pod was OOM-killed"
    assert sim.pod("default", pod.name).uid == pod.uid, "remediated in place, not recreated"
    raised = [(t, lim) for t, lim in limits[1:] if lim > limits[0][1]]
    assert raised, "memory raised after the OOM"
    # At once: within a worker pass (15 s) of the first kill.
    assert raised[0][0] - ooms[0] <= 15 + 5
    # Compounding while OOMs continue, bumps at least 2 minutes apart, until it fits.
    assert len(raised) >= 2
    assert raised[1][0] - raised[0][0] >= 120 - 5
    assert raised[-1][1] >= 1500 * MIB
    assert max(ooms) < raised[-1][0] + 1, (ooms, raised)


# --------------------------------------------------------------------------- HPA guard


def test_hpa_resource_left_alone_on_running_and_new_pods() -> None:
    sim = make_sim(
        [
            workload(
                "h",
                2,
                containers=[
                    container(
                        req={"cpu": "500m", "memory": "512Mi"},
                        lim={"cpu": "1", "memory": "1Gi"},
                        cpu="900m",
                    )
                ],
            )
        ],
        nodes=2,
        cpu="4",
        hpas=[
            {
                "name": "h",
                "namespace": "default",
                "target": {"kind": "Deployment", "name": "h"},
                "min_replicas": 2,
                "max_replicas": 5,
                "metrics": [{"resource": "cpu", "target_utilization": 80}],
            }
        ],
    )
    op = operator(
        sim, "in_place", disruption={"max_disrupted": 5}, targets=["Deployment/default/h"]
    )
    suggest(op, "h", app=({"cpu": 300, "memory": 256 * MIB}, {"cpu": 600, "memory": 512 * MIB}))
    sim.run(300)  # the HPA adds replicas (new pods, through the admission hook)
    pods = pods_of(sim, "h")
    assert len(pods) >= 3
    for p in pods:
        assert p.containers[0].resources.requests == {"cpu": 500, "memory": 256 * MIB}
    assert sim.events.count("Event", reason="HPAResourceLeftAlone") == 1
    notes = sim.target_status[("AIScaleTarget", "default", "h")]["vertical_notes"]
    assert any("cpu" in n for n in notes)


def test_several_pdbs_500_is_reported_and_not_hot_looped() -> None:
    sim = make_sim(
        [workload("d", 1)],
        pdbs=[
            {"name": "one", "namespace": "default", "selector": {"app": "d"}, "min_available": 0},
            {"name": "two", "namespace": "default", "selector": {"app": "d"}, "min_available": 0},
        ],
    )
    # One replica: the target allows evicting it, so the eviction reaches the PDBs.
    op = operator(sim, "recreate", targets=["Deployment/default/d"], min_replicas=1)
    suggest(op, "d", app=({"cpu": 500, "memory": 256 * MIB}, {"cpu": 1000, "memory": GIB}))
    sim.run(300)
    refused = sim.events.query("EvictionRefused")
    assert len(refused) == 1, "tried once, then left alone"
    assert sim.events.count("Event", reason="EvictionFailed") == 1
    assert not evicted(sim)


def test_release_deferred_after_frees_the_capacity_a_deferred_upsize_holds() -> None:
    def run(release: str | None) -> Any:
        sim = make_sim(
            [
                workload(
                    "a",
                    containers=[
                        container(
                            req={"cpu": "500m", "memory": "256Mi"},
                            lim={"cpu": "2", "memory": "1Gi"},
                        )
                    ],
                ),
                workload(
                    "b",
                    containers=[
                        container(
                            req={"cpu": "1200m", "memory": "256Mi"},
                            lim={"cpu": "2", "memory": "1Gi"},
                        )
                    ],
                ),
            ]
        )
        disruption = (
            {"release_deferred_after": release, "release_deferred": "allocated"}
            if release
            else {"release_deferred": "never"}
        )
        op = operator(
            sim, "in_place", guard=False, disruption=disruption, targets=["Deployment/default/a"]
        )
        suggest(op, "a", app=({"cpu": 1000, "memory": 256 * MIB}, {"cpu": 2000, "memory": GIB}))
        sim.run(400)
        return sim, pods_of(sim, "a")[0]

    sim, held = run(None)
    assert held.condition(POD_RESIZE_PENDING) is not None  # waits, charged at 1000m
    assert sim.node_free("n")[0] == 2000 - 1000 - 1200
    sim, released = run("3m")
    assert released.condition(POD_RESIZE_PENDING) is None
    assert released.containers[0].resources.requests["cpu"] == 500  # back to allocated
    assert sim.node_free("n")[0] == 2000 - 500 - 1200
    assert sim.events.count("Event", reason="ResizeReleased") == 1
