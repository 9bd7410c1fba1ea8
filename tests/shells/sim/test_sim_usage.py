"""Usage generators, OOM kills, throttling, node pressure, observers and reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.core.api.quantity import MIB
from foresize.shells.sim.objects import ContainerKey
from foresize.shells.sim.scenario import parse_scenario
from foresize.shells.sim.usage import GeneratorSpec, UsageState
from support import paths
from support.sim import container, make_sim, pods_of, workload


def test_metrics_never_show_memory_above_the_limit():
    """cgroups kill at the limit: the observed working set is capped there, and the
    demand above it shows only as an OOM kill (the recommender must not see more)."""
    sim = make_sim([workload("a")])
    pod = pods_of(sim, "a")[0]
    seen: list[float] = []
    sim.on_usage(lambda now, keys, cpu, mem: seen.extend(np.asarray(mem).tolist()))
    sim.set_usage("default", pod.name, "app", memory=1500 * MIB)  # limit 1Gi
    sim.run(600)
    assert sim.events.count("OOMKilled") > 0
    assert seen and max(seen) <= 1024 * MIB
    assert max(seen) == 1024 * MIB  # at the limit while it ran


def test_oom_kill_above_the_memory_limit():
    sim = make_sim([workload("a")])
    pod = pods_of(sim, "a")[0]
    sim.set_usage("default", pod.name, "app", memory=1100 * MIB)  # limit 1Gi
    readiness: list[bool] = []
    sim.every(1.0, lambda s, now: readiness.append(s.pod("default", pod.name).ready))
    sim.run(60)
    ooms = sim.events.query("OOMKilled", object=f"Pod/default/{pod.name}")
    assert len(ooms) == 1
    assert ooms[0].details["limit_bytes"] == 1024 * MIB
    assert ooms[0].details["usage_bytes"] == 1100 * MIB
    pod = sim.pod("default", pod.name)
    st = pod.status_of("app")
    assert st.restart_count == 1 and st.last_termination_reason == "OOMKilled"
    # The pod stays Running; the container is down for its back-off, then Ready again.
    assert pod.phase == "Running" and False in readiness and readiness[-1] is True
    # Crash back-off: 10s, 20s, 40s ... so far fewer kills than steps.
    sim.run(3600)
    kills = sim.summary()["workloads"][0]["oom_kills"]
    assert 5 <= kills < 60
    # Below the limit nothing happens.
    sim.set_usage("default", pod.name, "app", memory=900 * MIB)
    sim.run(1200)
    assert sim.summary()["workloads"][0]["oom_kills"] == kills


def test_throttling_above_the_cpu_limit():
    sim = make_sim([workload("a"), workload("b")])
    a, b = pods_of(sim, "a")[0], pods_of(sim, "b")[0]
    sim.set_usage("default", a.name, "app", cpu=1.5)  # limit 1 core
    sim.set_usage("default", b.name, "app", cpu=0.9)
    sim.run(600)
    assert sim.container_usage("default", a.name, "app")[0] == 1.0  # capped at the limit
    assert sim.container_usage("default", b.name, "app")[0] == 0.9
    rows = {r["name"]: r for r in sim.summary()["workloads"]}
    assert rows["Deployment/default/a"]["throttled_seconds"] == 600
    assert rows["Deployment/default/b"]["throttled_seconds"] == 0
    assert (
        rows["Deployment/default/a"]["cpu_demand_core_hours"]
        > (rows["Deployment/default/a"]["cpu_used_core_hours"])
    )


def test_node_pressure_evicts_best_effort_first():
    sim = make_sim(
        [
            workload("be", containers=[container(req={}, lim={})]),
            workload("burst", containers=[container(req={"cpu": "100m", "memory": "100Mi"})]),
            workload(
                "guar",
                containers=[
                    container(
                        req={"cpu": "100m", "memory": "3Gi"}, lim={"cpu": "100m", "memory": "3Gi"}
                    )
                ],
            ),
        ],
        memory="4Gi",
    )
    be, burst, guar = (pods_of(sim, n)[0] for n in ("be", "burst", "guar"))
    sim.set_usage("default", be.name, "app", memory=1000 * MIB)
    sim.set_usage("default", burst.name, "app", memory=900 * MIB)
    sim.set_usage("default", guar.name, "app", memory=2500 * MIB)
    sim.run(60)
    evicted = sim.events.query("NodePressureEviction")
    assert [e.object for e in evicted] == [f"Pod/default/{be.name}"]
    assert evicted[0].details["qos"] == "BestEffort"
    assert sim.pod("default", be.name).phase == "Failed"
    assert sim.pod("default", guar.name).phase == "Running"
    # The controller replaces the failed pod.
    assert len([p for p in pods_of(sim, "be") if p.phase in ("Pending", "Running")]) == 1


def test_same_seed_same_event_log_and_different_seed_differs():
    def run(seed: int) -> str:
        sim = make_sim(
            [
                workload(
                    "a",
                    3,
                    jitter=0.2,
                    containers=[
                        container(
                            cpu={"generator": "spiky", "base": "600m", "noise": 0.3},
                            memory={
                                "generator": "leak",
                                "base": "600Mi",
                                "growth_per_hour": "200Mi",
                            },
                        )
                    ],
                )
            ],
            nodes=2,
            seed=seed,
            settle=0,
        )
        sim.run(6 * 3600)
        assert sim.events.count("OOMKilled") > 0
        return sim.events.fingerprint()

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_generators_shape_usage():
    u = UsageState(capacity=8)
    slots = [u.allocate() for _ in range(4)]
    for s in slots:
        u.active[s] = True
    u.set_generator(slots[0], "cpu", GeneratorSpec("constant", base=0.5))
    u.set_generator(
        slots[1], "cpu", GeneratorSpec("diurnal", base=1.0, amplitude=0.5, peak_hour=14)
    )
    u.set_generator(
        slots[2], "cpu", GeneratorSpec("weekly", base=1.0, weekend_factor=0.25, peak_hour=0)
    )
    u.set_generator(slots[3], "memory", GeneratorSpec("leak", base=100.0, growth_per_second=1.0))
    idx = np.array(slots)
    rng = np.random.default_rng(0)
    one = np.ones(4)
    at = {h: u.step(h * 3600.0, idx, one, rng) for h in (2, 14, 24 * 5, 26)}
    assert at[14][0][0] == at[2][0][0] == 0.5
    assert at[14][0][1] == 1.5 and abs(at[2][0][1] - 0.5) < 1e-9  # peak and trough
    assert at[24 * 5][0][2] == 0.25 and at[26][0][2] == 1.0  # Saturday vs Tuesday
    assert at[26][1][3] - at[2][1][3] == 24 * 3600.0  # linear growth since start


def test_trace_replay_from_csv(tmp_path):
    trace = tmp_path / "cpu.csv"
    trace.write_text("ts,value\n0,0.1\n60,0.2\n120,0.3\n")
    data = {
        "nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}],
        "workloads": [
            workload(
                "t",
                containers=[
                    container(cpu={"generator": "trace", "file": "cpu.csv", "step": "60s"})
                ],
            )
        ],
    }
    sc = parse_scenario(data, str(tmp_path / "s.yaml"), tmp_path)
    from foresize.shells.sim.cluster import SimCluster

    sim = SimCluster(sc, seed=0)
    seen: list[float] = []
    sim.on_usage(lambda now, keys, cpu, mem: seen.append(float(cpu[0])) if len(cpu) else None)
    sim.run(60 * 5)
    # Step 0 happens before the pod is bound; then 60s, 120s, ... replay (wrapping).
    assert seen[:5] == [0.2, 0.3, 0.1, 0.2, 0.3]
    canonical = tmp_path / "canon.csv"
    canonical.write_text(
        "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes\n"
        "0,ns,w,p1,c,1.0,100\n0,ns,w,p2,c,3.0,300\n60,ns,w,p1,c,2.0,200\n60,ns,x,p9,c,9,9\n"
    )
    from foresize.shells.sim.usage import load_trace

    assert load_trace(canonical, "cpu", select={"workload": "w"}).tolist() == [2.0, 2.0]
    assert load_trace(canonical, "memory", select={"workload": "w"}).tolist() == [200.0, 200.0]


def test_usage_observer_gets_vectors_for_all_running_containers():
    sim = make_sim([workload("a", 3), workload("b", 2, kind="StatefulSet")], nodes=2, settle=0)
    calls = []

    def observe(now, keys, cpu, mem):
        calls.append((now, list(keys), cpu.copy(), mem.copy()))

    sim.on_usage(observe)
    sim.run(180)
    now, keys, cpu, mem = calls[-1]
    assert now == 180 and len(keys) == 5 and cpu.shape == (5,) and mem.shape == (5,)
    assert all(isinstance(k, ContainerKey) for k in keys)
    assert {k.workload for k in keys} == {"Deployment/a", "StatefulSet/b"}
    assert ContainerKey("default", "StatefulSet/b", "b-0", "app") in keys
    assert np.allclose(cpu, 0.01) and np.allclose(mem, 10 * MIB)


def test_trace_replay_of_a_real_bitbrains_vm():

    trace = paths.DATA / "traces/bitbrains-rnd-2013-07/1.csv.gz"
    data = {
        "nodes": [{"name": "n", "cpu": "8", "memory": "32Gi"}],
        "workloads": [
            workload(
                "vm",
                containers=[
                    container(
                        req={"cpu": "2", "memory": "8Gi"},
                        lim={},
                        cpu={"generator": "trace", "file": str(trace), "format": "bitbrains"},
                        memory={"generator": "trace", "file": str(trace), "format": "bitbrains"},
                    )
                ],
            )
        ],
    }
    from foresize.shells.sim.cluster import SimCluster

    sc = parse_scenario(data, "<real trace>")
    gen = sc.workloads[0].containers[0].cpu
    assert gen.trace_step == 300 and gen.trace is not None and gen.trace.size > 1000
    sim = SimCluster(sc, seed=0)
    cpu_seen = []
    sim.on_usage(lambda now, keys, cpu, mem: cpu_seen.extend(cpu.tolist()))
    sim.run(6 * 3600)
    assert len(set(cpu_seen)) > 10  # it follows the trace, not a constant


@pytest.mark.slow
def test_runs_are_reproducible_across_processes():
    import json
    import os
    import subprocess
    import sys

    def run(hash_seed: str) -> dict:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-m", "foresize", "simulate", "-d", "30h", "--json", "--seed", "9"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        return json.loads(out.stdout)

    a, b = run("1"), run("2")
    assert a["event_log_sha256"] == b["event_log_sha256"]
    assert a["events"]["JobCompleted"] >= 1  # the periodic Job ran and was cleaned up
    assert a == b


def test_cpu_contention_shares_an_overcommitted_node_by_request():
    # Two pods without CPU limits on a 2-core node, requests 1500m and 500m.
    sim = make_sim(
        [
            workload("big", containers=[container(req={"cpu": "1500m", "memory": "64Mi"}, lim={})]),
            workload(
                "small", containers=[container(req={"cpu": "500m", "memory": "64Mi"}, lim={})]
            ),
        ]
    )
    big, small = pods_of(sim, "big")[0], pods_of(sim, "small")[0]
    sim.set_usage("default", big.name, "app", cpu=3.0)
    sim.set_usage("default", small.name, "app", cpu=0.2)
    sim.run(60)
    # small gets all it wants (0.2 < its 0.5 share); big gets the rest of the 2 cores.
    assert sim.container_usage("default", small.name, "app")[0] == 0.2
    assert abs(sim.container_usage("default", big.name, "app")[0] - 1.8) < 1e-9
    sim.set_usage("default", small.name, "app", cpu=3.0)
    sim.run(60)
    assert abs(sim.container_usage("default", big.name, "app")[0] - 1.5) < 1e-9
    assert abs(sim.container_usage("default", small.name, "app")[0] - 0.5) < 1e-9
