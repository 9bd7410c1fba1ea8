"""The simulator runs the pass that publishes what Foresize will do (`cluster.pending`):
the pods carry `foresize.io/coming-resources` (applied through the simulated API server,
logged as `PodMetadataPatched`) and the operator records the pending upsize demand per
node pool (`SimOperator.pending`, `pending_log`), as the kube shell exports it."""

from __future__ import annotations

import json
from typing import Any

from foresize.core.api.quantity import GIB, MIB
from foresize.core.cluster.pending import COMING_ANNOTATION, DEFERRED, WAITING_FOR_ROOM
from support.sim import container, make_sim, operator, pods_of, suggest, workload


def two_on_one_node() -> Any:
    """a (500m) wants 1000m on a 2-CPU node where b holds 1200m: 300m short."""
    return make_sim(
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


def run(guard: bool) -> tuple[Any, Any]:
    sim = two_on_one_node()
    op = operator(sim, "in_place", guard=guard, targets=["Deployment/default/a"])
    suggest(op, "a", app=({"cpu": 1000, "memory": 256 * MIB}, {"cpu": 2000, "memory": GIB}))
    sim.run(300)
    return sim, op


def test_an_upsize_the_guard_holds_is_published_on_the_pod_and_in_the_demand() -> None:
    sim, op = run(guard=True)
    (a,) = pods_of(sim, "a")
    doc = json.loads(a.annotations[COMING_ANNOTATION])
    assert doc["cause"] == WAITING_FOR_ROOM and doc["upsize"] == {"cpu": "500m"}
    assert op.pending.by_pool[("", "cpu")] == 500  # the scenario's nodes have no pool label
    assert op.pending_log and op.pending_log[-1][1] == {("", "cpu"): 500}
    patched = sim.events.query("PodMetadataPatched")
    assert len(patched) == 1  # written once, not every pass


def test_a_deferred_upsize_is_published_as_deferred() -> None:
    sim, op = run(guard=False)  # sent without the guard: the kubelet defers it
    (a,) = pods_of(sim, "a")
    assert json.loads(a.annotations[COMING_ANNOTATION])["cause"] == DEFERRED
    assert op.pending.pods_by_pool == {("", DEFERRED): 1}
