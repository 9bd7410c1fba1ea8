"""What Foresize will do, published for node autoscalers (`cluster.pending`): a pod's
coming size, the `foresize.io/coming-resources` annotation, the demand per node pool.
The worker's half (which pods) is in tests/core/vertical/test_vertical_coming.py."""

from __future__ import annotations

import json

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EvictPod, PatchPodMetadata
from foresize.core.cluster.boost import BoostPolicy
from foresize.core.cluster.model import Container, Node, ResourceRequirements
from foresize.core.cluster.pending import (
    COMING_ANNOTATION,
    DEFERRED,
    RECREATE,
    WAITING_FOR_ROOM,
    coming_size,
    node_pool,
    pending_demand,
    publish,
)
from support.vertical import pod, snap


def test_the_upsize_counts_from_what_the_kubelet_allocated() -> None:
    # A Deferred grow: the spec already asks 500m, the kubelet gave 100m.
    p = pod("p", cpu=500, mem=200 * MIB, alloc={"cpu": 100, "memory": 200 * MIB})
    got = coming_size(p, {"app": {"cpu": 500, "memory": 200 * MIB}}, DEFERRED)
    assert got is not None
    assert got.upsize == {"cpu": 400}  # memory does not grow: no entry
    assert got.pod_requests == {"cpu": 500, "memory": 200 * MIB}
    assert got.containers == {"app": {"cpu": 500, "memory": 200 * MIB}}
    assert (got.pod, got.uid, got.node, got.cause) == ("default/p", "uid-p", "n1", DEFERRED)
    # Nothing grows: nothing is coming.
    assert coming_size(pod("q"), {"app": {"cpu": 50}}, WAITING_FOR_ROOM) is None


def test_the_pod_total_counts_sidecars_as_the_scheduler_does() -> None:
    p = pod("p", cpu=100)
    side = Container("proxy", ResourceRequirements({"cpu": 50, "memory": 64 * MIB}))
    p.init_containers = [side]
    side.restart_policy = "Always"
    got = coming_size(p, {"app": {"cpu": 300}}, RECREATE)
    assert got is not None and got.pod_requests["cpu"] == 350 and got.upsize["cpu"] == 200


def test_a_recreated_pod_comes_back_boosted_as_the_webhook_admits_it() -> None:
    boost = BoostPolicy(factor=2.0)
    p = pod("p", cpu=100)
    got = coming_size(p, {"app": {"cpu": 300}}, RECREATE, boost, {"app": None})
    assert got is not None and got.boosted
    assert got.containers["app"]["cpu"] == 600 and got.upsize["cpu"] == 500
    # Bounded by the container's upper bound, as admission bounds it.
    got = coming_size(p, {"app": {"cpu": 300}}, RECREATE, boost, {"app": 400})
    assert got is not None and got.containers["app"]["cpu"] == 400
    # An in-place upsize is no admission: no boost.
    got = coming_size(p, {"app": {"cpu": 300}}, WAITING_FOR_ROOM, boost, {"app": None})
    assert got is not None and not got.boosted and got.containers["app"]["cpu"] == 300
    # A container the target does not size is not boosted.
    got = coming_size(p, {"app": {"cpu": 300}}, RECREATE, boost, {})
    assert got is not None and not got.boosted


def test_the_annotation_is_versioned_compact_json_with_kubernetes_quantities() -> None:
    p = pod("p", cpu=100, mem=128 * MIB)
    got = coming_size(p, {"app": {"cpu": 1500, "memory": 256 * MIB}}, RECREATE)
    assert got is not None
    s = snap([p], [])
    _, patches = publish(s, [got], [])
    (patch,) = patches
    assert isinstance(patch, PatchPodMetadata) and patch.name == "p"
    value = patch.annotations[COMING_ANNOTATION]
    assert value is not None and " " not in value
    assert json.loads(value) == {
        "version": 1,
        "cause": "recreate",
        "containers": {"app": {"requests": {"cpu": "1500m", "memory": "256Mi"}}},
        "pod": {"requests": {"cpu": "1500m", "memory": "256Mi"}},
        "upsize": {"cpu": "1400m", "memory": "128Mi"},
        "boosted": False,
    }


def test_annotations_are_set_once_removed_when_done_and_left_on_evicted_pods() -> None:
    a, b, c = pod("a", cpu=100), pod("b", cpu=100), pod("c", cpu=100)
    grow = {"app": {"cpu": 400}}
    comings = [coming_size(x, grow, RECREATE) for x in (a, b)]
    s = snap([a, b, c], [])
    _, patches = publish(s, [x for x in comings if x is not None], [EvictPod("default", "b")])
    assert [(x.name, bool(x.annotations[COMING_ANNOTATION])) for x in patches] == [("a", True)]
    # Written: the next pass with the same size patches nothing.
    a.annotations[COMING_ANNOTATION] = patches[0].annotations[COMING_ANNOTATION] or ""
    c.annotations[COMING_ANNOTATION] = "stale"
    _, again = publish(s, [x for x in comings if x is not None and x.pod == "default/a"], [])
    assert [(x.name, x.annotations) for x in again] == [("c", {COMING_ANNOTATION: None})]
    # A pod recreated under the same name is another pod: its predecessor's size is not its.
    new_a = pod("a", cpu=100)
    new_a.uid = "uid-a2"
    _, fresh = publish(snap([new_a], []), [x for x in comings if x is not None], [])
    assert fresh == []


def test_the_node_pool_is_read_from_the_first_label_present() -> None:
    both = Node("n", labels={"karpenter.sh/nodepool": "general", "team": "x"})
    assert node_pool(both) == "general"
    assert node_pool(both, ("team",)) == "x"
    assert node_pool(Node("m", labels={"cloud.google.com/gke-nodepool": "pool-1"})) == "pool-1"
    assert node_pool(Node("bare")) == "" and node_pool(None) == ""


def test_the_demand_sums_the_upsizes_by_pool_and_counts_pods_by_cause() -> None:
    nodes = {
        "n1": Node("n1", labels={"karpenter.sh/nodepool": "general"}),
        "n2": Node("n2", labels={"karpenter.sh/nodepool": "memory"}),
    }
    ps = [pod("a", "n1", cpu=100), pod("b", "n1", cpu=100), pod("c", "n2", mem=100 * MIB)]
    comings = [
        coming_size(ps[0], {"app": {"cpu": 300}}, RECREATE),
        coming_size(ps[1], {"app": {"cpu": 150}}, WAITING_FOR_ROOM),
        coming_size(ps[2], {"app": {"memory": 300 * MIB}}, DEFERRED),
    ]
    demand = pending_demand([c for c in comings if c is not None], nodes)
    assert demand.by_pool == {
        ("general", "cpu"): 250,
        ("general", "memory"): 0,
        ("memory", "cpu"): 0,
        ("memory", "memory"): 200 * MIB,
    }
    assert demand.pods_by_pool == {
        ("general", RECREATE): 1,
        ("general", WAITING_FOR_ROOM): 1,
        ("memory", DEFERRED): 1,
    }
