"""Builders shared by the tests (moved out of test_scenario_vertical.py)."""

from __future__ import annotations

from typing import Any

from foresize.core.cluster.model import ContainerSuggestion as CS
from foresize.core.cluster.model import Suggestion
from foresize.core.vertical import WorkerConfig
from foresize.shells.sim.cluster import SimCluster
from foresize.shells.sim.operator import OperatorOptions, SimOperator
from foresize.shells.sim.recommenders import FixedRecommender
from foresize.shells.sim.scenario import parse_scenario


def operator(sim: Any, mode: str, *, guard: bool = True, **opts: Any) -> SimOperator:
    options = OperatorOptions(
        update_mode=mode,
        min_lookback=0.0,
        worker=WorkerConfig(capacity_guard=guard),
        **opts,
    )
    return SimOperator(sim, FixedRecommender({}), options).install()


def suggest(op: SimOperator, name: str, uid: str = "s1", **containers: Any) -> None:
    op.set_suggestion(
        f"default/{name}",
        Suggestion(uid, op.sim.now, {c: CS(c, *rl) for c, rl in containers.items()}),
    )


def evicted(sim: Any, prefix: str = "Pod/default/") -> list[Any]:
    return sim.events.query("Evicted", object_prefix=prefix)


# Helpers shared by the simulator tests (and a check that they build what they say).


def container(
    name: str = "app",
    req: dict[str, Any] | None = None,
    lim: dict[str, Any] | None = None,
    cpu: Any = "10m",
    memory: Any = "10Mi",
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "requests": req if req is not None else {"cpu": "500m", "memory": "512Mi"},
        "limits": lim if lim is not None else {"cpu": "1", "memory": "1Gi"},
        "usage": {"cpu": cpu, "memory": memory},
    }
    c.update(extra)
    return c


def workload(name: str, replicas: int = 1, kind: str = "Deployment", **kw: Any) -> dict[str, Any]:
    w: dict[str, Any] = {
        "kind": kind,
        "name": name,
        "namespace": "default",
        "replicas": replicas,
        "readiness_delay": "5s",
        "termination_grace": "10s",
        "jitter": 0,
        "containers": [container()],
    }
    w.update(kw)
    return w


def make_sim(
    workloads: list[dict[str, Any]],
    *,
    nodes: int = 1,
    cpu: str = "2",
    memory: str = "8Gi",
    seed: int = 1,
    settle: float = 30.0,
    step: float = 60.0,
    **top: Any,
) -> SimCluster:
    data = {
        "name": "test",
        "nodes": [{"name": "n", "count": nodes, "cpu": cpu, "memory": memory}],
        "workloads": workloads,
        **top,
    }
    sim = SimCluster(parse_scenario(data, "<test>"), seed=seed, step=step)
    if settle:
        sim.run(settle)
    return sim


def pods_of(sim: SimCluster, name: str, kind: str = "Deployment") -> list:
    return sim.pods_of(kind, "default", name)
