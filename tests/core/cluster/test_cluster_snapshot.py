"""The snapshot's pod indexes: by node, and by top-level controller (a ReplicaSet's pods
belong to its Deployment), resolved once per direct owner."""

from __future__ import annotations

from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    HPAMetric,
    OwnerRef,
    Pod,
    VerticalClaim,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot


def _pod(name: str, owner: OwnerRef | None, namespace: str = "shop", node: str = "n1") -> Pod:
    return Pod(namespace=namespace, name=name, uid=name, owner=owner, node_name=node)


def test_pods_are_indexed_by_their_top_controller_and_node() -> None:
    web = Workload("Deployment", "shop", "web")
    api = Workload("Deployment", "shop", "api")
    cache = Workload("StatefulSet", "shop", "cache")
    workloads = {
        w.key: w
        for w in (
            web,
            api,
            cache,
            # A StatefulSet named like a ReplicaSet: the owner's kind tells them apart.
            Workload("StatefulSet", "shop", "web-1"),
            Workload("ReplicaSet", "shop", "web-1", owner=OwnerRef("Deployment", "web")),
            Workload("ReplicaSet", "shop", "web-2", owner=OwnerRef("Deployment", "web")),
            Workload("ReplicaSet", "shop", "api-1", owner=OwnerRef("Deployment", "api")),
            # An orphaned ReplicaSet (its Deployment is gone) is its pods' top controller.
            Workload("ReplicaSet", "shop", "old-1", owner=OwnerRef("Deployment", "old")),
        )
    }
    rs = lambda name: OwnerRef("ReplicaSet", name)  # noqa: E731
    pods = [
        _pod("web-1-a", rs("web-1")),
        _pod("api-1-a", rs("api-1"), node="n2"),
        _pod("web-1-b", rs("web-1"), node="n2"),
        _pod("web-2-a", rs("web-2")),
        _pod("cache-0", OwnerRef("StatefulSet", "cache")),
        _pod("web-1-0", OwnerRef("StatefulSet", "web-1")),
        _pod("old-1-a", rs("old-1")),
        _pod("bare", None),
        # Same names in another namespace: not the shop's ReplicaSet.
        _pod("web-1-x", rs("web-1"), namespace="other"),
    ]
    snap = ClusterSnapshot(now=0.0, pods=pods, workloads=workloads)
    assert [p.name for p in snap.pods_of(web)] == ["web-1-a", "web-1-b", "web-2-a"]
    assert [p.name for p in snap.pods_of(api)] == ["api-1-a"]
    assert [p.name for p in snap.pods_of(cache)] == ["cache-0"]
    assert [p.name for p in snap.pods_of(workloads["StatefulSet/shop/web-1"])] == ["web-1-0"]
    orphaned = workloads["ReplicaSet/shop/old-1"]
    assert [p.name for p in snap.pods_of(orphaned)] == ["old-1-a"]
    assert [p.name for p in snap.pods_on_node("n2")] == ["api-1-a", "web-1-b"]
    for p in pods:
        top = snap.top_owner(p)
        assert (p in snap.pods_of(top)) if top is not None else p.name in ("bare", "web-1-x")


def _hpa(namespace: str, name: str, target: str) -> HorizontalPodAutoscaler:
    return HorizontalPodAutoscaler(
        namespace, name, "Deployment", target, 1, 5, [HPAMetric("Resource", "cpu", 70)]
    )


def test_hpa_for_is_the_first_hpa_of_the_workload_and_follows_the_list() -> None:
    web = Workload("Deployment", "shop", "web")
    first, second = _hpa("shop", "a", "web"), _hpa("shop", "b", "web")
    snap = ClusterSnapshot(
        now=0.0, hpas=[_hpa("other", "c", "web"), first, second, _hpa("shop", "d", "api")]
    )
    assert snap.hpa_for(web) is first
    assert snap.hpa_for(Workload("StatefulSet", "shop", "web")) is None
    # The index follows the list: appended, or replaced by another list.
    snap.hpas.insert(0, second)
    assert snap.hpa_for(web) is second
    # Another list of the same length: rebuilt all the same.
    snap.hpas = [first, second, second, second, second]
    assert snap.hpa_for(web) is first
    assert snap.hpa_for(Workload("Deployment", "shop", "api")) is None


def test_vertical_claim_for_is_the_first_acting_claim_by_kind_and_name() -> None:
    def claim(kind: str, name: str, target: str, mode: str = "Auto") -> VerticalClaim:
        return VerticalClaim(kind, "shop", name, "Deployment", target, mode)

    snap = ClusterSnapshot(
        now=0.0,
        vertical_claims=[
            claim("VerticalPodAutoscaler", "z", "web"),
            claim("VerticalPodAutoscaler", "off", "web", "Off"),
            claim("MultidimPodAutoscaler", "m", "web"),
            claim("VerticalPodAutoscaler", "api", "api"),
        ],
    )
    got = snap.vertical_claim_for("Deployment", "shop", "web")
    assert got is not None and (got.kind, got.name) == ("MultidimPodAutoscaler", "m")
    assert snap.vertical_claim_for("Deployment", "other", "web") is None
    snap.vertical_claims.append(claim("MultidimPodAutoscaler", "a", "web"))
    got = snap.vertical_claim_for("Deployment", "shop", "web")
    assert got is not None and got.name == "a"
