"""Managed runtimes end to end in the simulator (issue 25): the heap fields a scenario
gives a container reach every copy of it (template, admitted pod, resized pod), so the
heap rule of the shared pass applies to what the simulator runs."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import ForesizeRecommender, OperatorOptions, SimOperator
from foresize.shells.sim.scenario import parse_scenario

GIB = 1024 * MIB


def jvm_scenario(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """One Deployment of 2 replicas running `command`, using 300Mi of memory, with
    2Gi requested: a recommender that follows usage would take it far below 1Gi."""
    container: dict[str, Any] = {
        "name": "app",
        "command": command,
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
        "usage": {"cpu": "200m", "memory": "300Mi"},
    }
    if env:
        container["env"] = env
    return {
        "name": "jvm",
        "nodes": [{"name": "n", "count": 2, "cpu": "4", "memory": "16Gi"}],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "svc",
                "replicas": 2,
                "readiness_delay": "5s",
                "containers": [container],
            }
        ],
    }


def run_foresize(data: dict[str, Any], hours: float, **options: Any) -> SimCluster:
    sim = SimCluster(parse_scenario(data, "<test>"), seed=3, step=60)
    opts = OperatorOptions(loop_interval=60.0, min_lookback_to_scale="3h", **options)
    SimOperator(sim, ForesizeRecommender(), opts).install()
    sim.run(hours * 3600)
    return sim


def memory_in_force(sim: SimCluster) -> list[int]:
    return [
        s.resources.requests["memory"]
        for p in sim.pods_of("Deployment", "default", "svc")
        if p.phase == "Running"
        for s in p.container_statuses
    ]


def test_the_heap_floor_holds_for_what_the_simulator_runs() -> None:
    """`java -Xmx1g` at 300Mi: no pod's memory in force goes below 1Gi + non-heap; the
    same service without the flag is sized on its usage (the copy of a container in the
    simulator's template, admission and resize used to drop the command, and with it the
    floor)."""
    jvm = run_foresize(jvm_scenario(["java", "-Xmx1g", "-jar", "/app.jar"]), 6)
    plain = run_foresize(jvm_scenario(["/bin/server"]), 6)
    assert min(memory_in_force(plain)) < GIB  # the recommender did act on usage
    assert min(memory_in_force(jvm)) >= GIB + 256 * MIB
    assert jvm.events.count("ResizeApplied") > 0
    # What the pods run survives admission and in-place resizes: the vertical planner
    # reads the heap from the pod's own spec.
    for pod in jvm.pods_of("Deployment", "default", "svc"):
        assert pod.containers[0].command == ("java", "-Xmx1g", "-jar", "/app.jar")


def test_a_container_copy_keeps_every_field() -> None:
    """`Container.copy` is the one copy: every field survives it (a new field that a
    copy forgot would silently drop what a rule reads, as the heap fields once were)."""
    import dataclasses

    from foresize.core.cluster.model import Container, ResourceRequirements

    c = Container(
        "app",
        ResourceRequirements({"cpu": 100}, {"memory": GIB}),
        {"memory": "RestartContainer"},
        "Always",
        ("java",),
        ("-Xmx1g",),
        {"A": "1", "B": None},
        True,
    )
    for f in dataclasses.fields(Container):
        assert getattr(c.copy(), f.name) == getattr(c, f.name), f.name
    other = ResourceRequirements({"cpu": 5})
    assert c.copy(other).resources is other and c.copy(other).env == c.env


def test_scenario_containers_read_command_args_and_env() -> None:
    data = jvm_scenario(["java"], env={"JAVA_TOOL_OPTIONS": "-Xmx512m"})
    data["workloads"][0]["containers"][0]["args"] = ["-jar", "/app.jar"]
    scenario = parse_scenario(data, "<test>")
    (c,) = scenario.workloads[0].containers
    assert c.command == ("java",) and c.args == ("-jar", "/app.jar")
    assert c.env == {"JAVA_TOOL_OPTIONS": "-Xmx512m"}


def test_a_scenario_env_value_that_is_not_a_string_names_the_field() -> None:
    import pytest

    from foresize.core.errors import ForesizeError

    data = jvm_scenario(["java"], env={"GOMEMLIMIT": ["1GiB"]})  # type: ignore[dict-item]
    with pytest.raises(ForesizeError, match=r"containers\[0\]\.env\.GOMEMLIMIT: must be a string"):
        parse_scenario(data, "<test>")
    data = jvm_scenario(["java", 3])  # type: ignore[list-item]
    with pytest.raises(ForesizeError, match=r"containers\[0\]\.command\[1\]: must be a string"):
        parse_scenario(data, "<test>")


def heap_scenario(command: list[str], limit: str = "4Gi") -> dict[str, Any]:
    """One pod of a runtime whose program wants a 1.5Gi heap, with 200Mi outside it."""
    data = jvm_scenario(command)
    wl = data["workloads"][0]
    wl["replicas"] = 1
    wl["jitter"] = 0.0
    wl["containers"][0].update(
        requests={"cpu": "500m", "memory": limit},
        limits={"memory": limit},
        usage={"cpu": "200m", "memory": "200Mi", "heap": "1536Mi"},
    )
    return data


def working_sets(sim: SimCluster) -> list[float]:
    seen: list[float] = []
    sim.on_usage(lambda _t, _keys, _cpu, mem: seen.extend(mem.tolist()))
    return seen


def test_a_runtimes_heap_is_capped_at_the_ceiling_its_spec_fixes() -> None:
    """`usage.heap`: the program wants 1.5Gi of heap; under `-Xmx1g` it holds 1Gi (the
    rest is time at the ceiling, counted), under a 50% share of a 4Gi limit all of it,
    and without a managed runtime all of it too."""
    results = {}
    for name, command in (
        ("xmx1g", ["java", "-Xmx1g", "-jar", "/app.jar"]),
        ("percent", ["java", "-XX:MaxRAMPercentage=50", "-jar", "/app.jar"]),
        ("plain", ["/bin/server"]),
    ):
        sim = SimCluster(parse_scenario(heap_scenario(command), "<test>"), seed=3, step=60)
        seen = working_sets(sim)
        sim.run(600)
        results[name] = (max(seen), sim.metering.heap_capped_s.get("Deployment/svc", 0.0))
    assert results["xmx1g"][0] == GIB + 200 * MIB
    assert results["xmx1g"][1] > 0
    assert results["percent"] == (1536 * MIB + 200 * MIB, 0.0)
    assert results["plain"] == (1536 * MIB + 200 * MIB, 0.0)


def test_the_heap_ceiling_is_read_from_the_spec_as_admitted() -> None:
    """A webhook that rewrites `-Xmx1g` to `-Xmx2g` at admission: the runtime takes the
    rewritten flag, so the heap the program wants fits (the template's flag would cap it
    at 1Gi)."""
    import dataclasses

    def rewrite(pod: Any, _workload: Any, _now: float) -> Any:
        containers = [
            c.copy() if c.name != "app" else dataclasses.replace(c, command=("java", "-Xmx2g"))
            for c in pod.containers
        ]
        return dataclasses.replace(pod, containers=containers)

    data = heap_scenario(["java", "-Xmx1g", "-jar", "/app.jar"])
    sim = SimCluster(parse_scenario(data, "<test>"), seed=3, step=60, admission_hook=rewrite)
    seen = working_sets(sim)
    sim.run(600)
    (pod,) = sim.pods_of("Deployment", "default", "svc")
    assert pod.containers[0].command == ("java", "-Xmx2g")
    assert max(seen) == 1536 * MIB + 200 * MIB
    assert sim.metering.heap_capped_s == {}


def test_a_scenario_heap_generator_is_read_and_a_bad_one_names_the_field() -> None:
    import pytest

    from foresize.core.errors import ForesizeError

    (c,) = parse_scenario(heap_scenario(["java"]), "<test>").workloads[0].containers
    assert c.heap is not None and c.heap.base == 1536 * MIB
    data = heap_scenario(["java"])
    data["workloads"][0]["containers"][0]["usage"]["heap"] = "lots"
    with pytest.raises(ForesizeError, match=r"containers\[0\]\.usage\.heap"):
        parse_scenario(data, "<test>")
