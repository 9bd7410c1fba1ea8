"""The start-up boost's guarantees at admission (issue 25 item 2): it never changes the
pod's QoS class, whatever the containers declare and whatever bounds it; a boost no node
could hold is clamped to the largest node's allocatable CPU; every clamp is said (a
warning, the annotation's `bounded`, the target's status while the pod starts)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from foresize.core.admission.pod import decide_pod
from foresize.core.cluster.boost import BOOST_ANNOTATION
from foresize.core.cluster.kubejson import pod_from
from foresize.core.cluster.model import Container, Node
from foresize.core.cluster.qos import qos_class_of
from foresize.core.vertical import WorkerState, plan
from support.admission import idx, pod_json, target_manifest
from support.vertical import pod, snap, target

CONTAINERS = {
    # name -> (requests, limits): every shape a container's CPU can take
    "guaranteed": ({"cpu": "250m", "memory": "256Mi"}, {"cpu": "250m", "memory": "256Mi"}),
    "burstable_cpu_limit": ({"cpu": "100m", "memory": "128Mi"}, {"cpu": "300m"}),
    "burstable_no_cpu_limit": ({"cpu": "100m", "memory": "128Mi"}, {"memory": "512Mi"}),
    "memory_only": ({"memory": "128Mi"}, {"memory": "128Mi"}),
}
BOOSTS = [
    {"cpu_factor": 4},
    {"cpu_factor": 50},
    {"cpu": "3"},
    {"cpu_factor": 8, "max_cpu": "700m"},
]
NODES = [None, 1500]  # no node known; a 1.5-core node (the boost is clamped to it)


def _pod(shapes: tuple[str, ...]) -> dict[str, Any]:
    containers = []
    for i, shape in enumerate(shapes):
        requests, limits = CONTAINERS[shape]
        containers.append(
            {"name": f"c{i}", "resources": {"requests": dict(requests), "limits": dict(limits)}}
        )
    return pod_json(containers=containers)


def _target(boost: dict[str, Any], upper: str | None = None) -> dict[str, Any]:
    cpu: dict[str, str] = {"lowerbound": "10m"}
    if upper is not None:
        cpu["upperbound"] = upper
    t = target_manifest(
        containers=[{"name": "*", "cpu": cpu, "memory": {"lowerbound": "16Mi"}}], suggestion={}
    )
    t["spec"]["vertical"]["startup_boost"] = boost
    return t


@pytest.mark.parametrize(
    ("shapes", "boost", "node_cpu", "upper"),
    [
        (shapes, boost, node, upper)
        for shapes in [
            *((s,) for s in CONTAINERS),
            ("guaranteed", "burstable_cpu_limit"),
            ("burstable_no_cpu_limit", "memory_only"),
            ("guaranteed", "guaranteed"),
        ]
        for boost, node, upper in itertools.product(BOOSTS, NODES, (None, "900m"))
    ],
)
def test_the_boost_never_changes_the_qos_class(shapes, boost, node_cpu, upper) -> None:
    raw = _pod(shapes)
    before = pod_from(raw, strict=True)
    index = idx(_target(boost, upper), max_node_cpu=node_cpu)
    decision = decide_pod(before, None, index, 0.0)
    after = [
        Container(c.name, decision.containers.get(c.name, c.resources)) for c in before.containers
    ]
    assert qos_class_of(after) == qos_class_of(before.containers)
    for c in after:
        requests, limits = c.resources.requests, c.resources.limits
        assert "cpu" in requests or "cpu" not in limits  # no CPU request added
        if "cpu" in limits:
            assert requests["cpu"] <= limits["cpu"]
    if node_cpu is not None:
        assert sum(c.resources.requests.get("cpu", 0) for c in after) <= node_cpu


def test_a_boost_no_node_could_hold_is_clamped_to_the_largest_node_and_says_so() -> None:
    raw = _pod(("burstable_cpu_limit", "burstable_cpu_limit"))  # 2 x 100m, limits 300m
    index = idx(_target({"cpu_factor": 20}), max_node_cpu=1000)
    decision = decide_pod(pod_from(raw, strict=True), None, index, 0.0)
    requests = [decision.containers[n].requests["cpu"] for n in ("c0", "c1")]
    limits = [decision.containers[n].limits["cpu"] for n in ("c0", "c1")]
    assert requests == [500, 500]  # 4000m wanted; the pod fits the 1-core node
    assert limits == [1500, 1500]  # the limit moved by the same factor (x5)
    note = "boost bounded by the largest node's allocatable CPU (1000m): the pod would ask 4000m"
    assert f"foresize: {note}" in decision.warnings
    assert json.loads(decision.annotations[BOOST_ANNOTATION])["bounded"] == [note]


def test_the_largest_ready_schedulable_node_bounds_it() -> None:
    from foresize.core.admission.index import AdmissionIndex
    from foresize.core.cluster.snapshot import ClusterSnapshot

    nodes = {
        "small": Node("small", {"cpu": 2000}),
        "cordoned": Node("cordoned", {"cpu": 64000}, unschedulable=True),
        "down": Node("down", {"cpu": 32000}, ready=False),
        "big": Node("big", {"cpu": 8000}),
    }
    assert AdmissionIndex.from_snapshot(ClusterSnapshot(0.0, nodes=nodes)).max_node_cpu == 8000
    assert AdmissionIndex.from_snapshot(ClusterSnapshot(0.0)).max_node_cpu is None


def test_a_clamped_boost_is_said_in_the_targets_status_while_the_pod_starts() -> None:
    p = pod("p0", cpu=1000, ready=False)
    note = "boost bounded by the largest node's allocatable CPU (1000m): the pod would ask 4000m"
    p.annotations[BOOST_ANNOTATION] = json.dumps(
        {"containers": {"app": {"request": 250}}, "bounded": [note]}
    )
    actions, _ = plan(snap([p], [target("in_place")]), 100.0, WorkerState(), suggestions={})
    (status,) = [a.status for a in actions if type(a).__name__ == "WriteTargetStatus"]
    assert status["pods_starting_boosted"] == 1
    assert f"start-up boost of pod p0 clamped: {note}" in status["vertical_notes"]
