"""Sharding in the kube shell against kmock: two operator replicas holding different shard
Leases act on disjoint targets. Only the replica owning a target (or DaemonSetAutoscaler)
reverts its pods when it leaves autonomous mode, and only the shard-0 holder reconciles
ClusterAIScaleTemplates (against every target, whichever shard it is in)."""

from __future__ import annotations

import copy

import kmock

from foresize.kube.api import KubeApi
from foresize.kube.executor import KubeExecutor
from foresize.kube.handlers import parse_foresize
from foresize.kube.leader import ShardManager, shard_of
from foresize.kube.shell import KubeShell
from foresize.kube.state import ClusterState

R = kmock.resource
PODS = R("v1/pods")
TARGETS = R("foresize.io/v1/aiscaletargets")
DSAS = R("foresize.io/v1/daemonsetautoscalers")
TEMPLATES = R("foresize.io/v1/clusteraiscaletemplates")
NOW = 1_780_000_000.0
LEFT_AUTONOMOUS = {"lifecycle": {"observed_mode": "autonomous"}}


def _pod(ns: str, name: str, owner: tuple[str, str], container: str, cpu: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "labels": {"app": owner[1]},
            "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": container, "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": container,
                    "ready": True,
                    "allocatedResources": {"cpu": cpu, "memory": "256Mi"},
                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
                }
            ],
        },
    }


def _template(container: str, cpu: str) -> dict:
    return {
        "metadata": {"labels": {"app": "x"}},
        "spec": {
            "containers": [
                {"name": container, "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
            ]
        },
    }


def objects() -> list[tuple[str, dict]]:
    """A Deployment `shop/web` with its AIScaleTarget and a DaemonSet `ops/agent` with its
    DaemonSetAutoscaler, both just switched from autonomous to recommendation (their
    status says the last mode seen was autonomous); their pods still carry Foresize's
    600m while the templates say 200m."""
    target = {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "t-web",
            "resourceVersion": "5",
            "finalizers": ["foresize.io/revert"],
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "vertical": {"mode": "recommendation", "update_policy": {"update_mode": "in_place"}},
        },
        "status": LEFT_AUTONOMOUS,
    }
    dsa = {
        "apiVersion": "foresize.io/v1",
        "kind": "DaemonSetAutoscaler",
        "metadata": {
            "name": "agent",
            "namespace": "ops",
            "uid": "d-agent",
            "resourceVersion": "7",
            "finalizers": ["foresize.io/revert"],
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "scaleMode": "recommendation",
        },
        "status": LEFT_AUTONOMOUS,
    }
    return [
        (
            "Node",
            {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}},
        ),
        (
            "Deployment",
            {
                "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "front"}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": _template("app", "200m"),
                },
            },
        ),
        (
            "ReplicaSet",
            {
                "metadata": {
                    "name": "web-abc",
                    "namespace": "shop",
                    "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
                },
                "spec": {"replicas": 1, "template": _template("app", "200m")},
            },
        ),
        (
            "DaemonSet",
            {
                "metadata": {"name": "agent", "namespace": "ops"},
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": _template("agent", "200m"),
                },
                "status": {"desiredNumberScheduled": 1},
            },
        ),
        ("Pod", _pod("shop", "web-abc-1", ("ReplicaSet", "web-abc"), "app", "600m")),
        ("Pod", _pod("ops", "agent-n1", ("DaemonSet", "agent"), "agent", "600m")),
        ("AIScaleTarget", target),
        ("DaemonSetAutoscaler", dsa),
    ]


def seed(kmock_server) -> None:
    for kind, obj in objects():
        meta = obj["metadata"]
        if kind == "Pod":
            kmock_server.objects[PODS, meta["namespace"], meta["name"]] = copy.deepcopy(obj)
        elif kind == "AIScaleTarget":
            kmock_server.objects[TARGETS, meta["namespace"], meta["name"]] = copy.deepcopy(obj)
        elif kind == "DaemonSetAutoscaler":
            kmock_server.objects[DSAS, meta["namespace"], meta["name"]] = copy.deepcopy(obj)


def replica_state(extra: list[tuple[str, dict]] = ()) -> ClusterState:
    """What one replica's watches hold (each replica has its own)."""
    state = ClusterState(target_parser=parse_foresize)
    for kind, obj in [*objects(), *extra]:
        state.apply_event(kind, "ADDED", copy.deepcopy(obj))
    return state


async def two_replicas(api: KubeApi, extra: list[tuple[str, dict]] = ()):
    """Replica a takes the free shard 0, then replica b (shard 0 is live) takes shard 1."""
    shells = {}
    for identity in ("a", "b"):
        shards = ShardManager(api, "foresize", identity, shards=2, max_shards=1)
        await shards.round()
        state = replica_state(extra)
        shells[identity] = KubeShell(
            state, KubeExecutor(api, pod_lookup=state.pod), shards=shards, clock=lambda: NOW
        )
    assert shells["a"].shards.owned == {0} and shells["b"].shards.owned == {1}
    return shells


def resized(kmock_server) -> list[str]:
    return sorted(
        r.url.path.split("/")[-2] for r in kmock_server["patch"] if r.url.path.endswith("/resize")
    )


async def test_only_the_owning_replica_reverts_the_pods(kmock):
    # Both objects hash to shard 0 (held by replica a).
    assert shard_of("shop/web", 2) == 0 and shard_of("ops/agent", 2) == 0
    seed(kmock)
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        shells = await two_replicas(api)
        before = len(kmock["patch"])
        await shells["b"].run_pass()
        b_writes = [r.url.path for r in list(kmock["patch"])[before:]]
        assert resized(kmock) == []
        assert not [p for p in b_writes if "web" in p or "agent" in p], b_writes
        await shells["a"].run_pass()
        assert resized(kmock) == ["agent-n1", "web-abc-1"]
        for r in kmock["patch"]:
            if r.url.path.endswith("/resize"):
                assert {
                    "op": "add",
                    "path": "/spec/containers/0/resources/requests/cpu",
                    "value": "200m",
                } in r.data
    finally:
        await api.close()


async def test_a_revert_handed_over_is_not_continued_by_the_old_holder(kmock):
    seed(kmock)
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        shells = await two_replicas(api)
        a = shells["a"]
        await a.run_pass()
        assert resized(kmock) == ["agent-n1", "web-abc-1"]
        # The kubelet has not actuated yet (pods still at 600m) when replica a loses shard 0.
        a.shards.electors[0].held = False
        await a.run_pass()
        assert resized(kmock) == ["agent-n1", "web-abc-1"], "the old holder kept reverting"
    finally:
        await api.close()


TEMPLATE = {
    "apiVersion": "foresize.io/v1",
    "kind": "ClusterAIScaleTemplate",
    "metadata": {"name": "a", "uid": "tpl-a"},
    "spec": {
        "selector": {"matchLabels": {"tier": "front"}},
        "template": {"spec": {"vertical": {"mode": "autonomous"}}},
    },
}


async def test_templates_are_reconciled_by_the_shard_0_holder_against_all_targets(kmock):
    # The template's own key hashes to shard 1, the target it claims to shard 0: the
    # template must still see that target (no second create) and be reconciled once.
    assert shard_of("cluster/a", 2) == 1 and shard_of("shop/web", 2) == 0
    seed(kmock)
    kmock.objects[TEMPLATES, None, "a"] = copy.deepcopy(TEMPLATE)
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    tpath = "/apis/foresize.io/v1/clusteraiscaletemplates/a/status"
    try:
        shells = await two_replicas(api, [("ClusterAIScaleTemplate", TEMPLATE)])
        before = len(kmock["patch"])
        await shells["b"].run_pass()
        assert not [r for r in list(kmock["patch"])[before:] if r.url.path == tpath]
        await shells["a"].run_pass()
        # shop/web exists (not made by the template, conflictResolution skip): no POST, and
        # the status says why it was skipped.
        assert not list(kmock["post"]) or all(
            "aiscaletargets" not in r.url.path for r in kmock["post"]
        )
        (status,) = [r.data["status"] for r in kmock["patch"] if r.url.path == tpath]
        assert status["targets"] == [] and "shop/web" in status["skipped"][0]
    finally:
        await api.close()
