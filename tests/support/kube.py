"""Builders shared by the tests (moved out of test_kube_lifecycle.py)."""

from __future__ import annotations

from foresize.shells.kube.handlers import parse_foresize
from foresize.shells.kube.state import ClusterState
from support.kube_objects import container, deployment, node, replicaset
from support.kube_objects import pod as make_pod
from support.kube_objects import target as make_target

TPATH = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets"


def target(name: str, **meta) -> dict:
    t = make_target(name)
    t["spec"]["vertical"].pop("disruption")
    t["metadata"].update(meta)
    return t


def seed_base(server) -> str:
    """Node n1, Deployment shop/web (template 200m/256Mi) and its ReplicaSet; returns the
    ReplicaSet's uid (the pods' owner)."""
    server.seed(node())
    template = [container(requests={"cpu": "200m", "memory": "256Mi"})]
    dep = server.seed(deployment(containers=template))
    rs = replicaset(deployment_uid=dep["metadata"]["uid"])
    rs["spec"]["template"]["spec"]["containers"] = template
    return server.seed(rs)["metadata"]["uid"]


def pod(name: str, cpu: str, rs_uid: str = "rs-uid") -> dict:
    return make_pod(
        name,
        owner=("ReplicaSet", "web-abc", rs_uid),
        containers=[container(requests={"cpu": cpu, "memory": "256Mi"})],
    )


def base_state() -> ClusterState:
    return ClusterState(target_parser=parse_foresize)
