"""Sharding in the kube shell against the strict API server: two operator replicas
holding different shard Leases act on disjoint targets. Only the replica owning a target
(or DaemonSetAutoscaler) reverts its pods when it leaves autonomous mode, and only the
shard-0 holder reconciles ClusterAIScaleTemplates (against every target, whichever shard
it is in)."""

from __future__ import annotations

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.handlers import parse_foresize
from foresize.shells.kube.leader import ShardManager, shard_of
from foresize.shells.kube.shell import KubeShell
from foresize.shells.kube.state import ClusterState
from support.kube_objects import (
    container,
    deployment,
    load_state,
    namespace,
    node,
    pod,
    replicaset,
    workload,
)

NOW = 1_780_000_000.0
LEFT_AUTONOMOUS = {"lifecycle": {"observed_mode": "autonomous"}}


def seed(server) -> None:
    """A Deployment `shop/web` with its AIScaleTarget and a DaemonSet `ops/agent` with its
    DaemonSetAutoscaler, both just switched from autonomous to recommendation (their
    status says the last mode seen was autonomous); their pods still carry Foresize's
    600m while the templates say 200m."""
    server.seed(namespace("foresize"))
    server.seed(node(cpu="8", memory="16Gi"))
    web = [container("app", {"cpu": "200m", "memory": "256Mi"})]
    dep = deployment(replicas=1, containers=web)
    dep["metadata"]["labels"]["tier"] = "front"
    dep_uid = server.seed(dep)["metadata"]["uid"]
    rs = replicaset(deployment_uid=dep_uid, replicas=1)
    rs["spec"]["template"]["spec"]["containers"] = web
    rs_uid = server.seed(rs)["metadata"]["uid"]
    agent = [container("agent", {"cpu": "200m", "memory": "256Mi"})]
    ds_uid = server.seed(
        workload("DaemonSet", "agent", "ops", labels={"app": "agent"}, containers=agent)
    )["metadata"]["uid"]
    server.seed(
        pod(
            "web-abc-1",
            owner=("ReplicaSet", "web-abc", rs_uid),
            containers=[container("app", {"cpu": "600m", "memory": "256Mi"})],
        )
    )
    server.seed(
        pod(
            "agent-n1",
            "ops",
            owner=("DaemonSet", "agent", ds_uid),
            labels={"app": "agent"},
            containers=[container("agent", {"cpu": "600m", "memory": "256Mi"})],
        )
    )
    server.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop", "finalizers": ["foresize.io/revert"]},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "recommendation",
                    "update_policy": {"update_mode": "in_place"},
                },
            },
            "status": LEFT_AUTONOMOUS,
        }
    )
    server.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "ops", "finalizers": ["foresize.io/revert"]},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                "scaleMode": "recommendation",
            },
            "status": LEFT_AUTONOMOUS,
        }
    )


def replica_state(server) -> ClusterState:
    """What one replica's watches hold (each replica has its own)."""
    state = ClusterState(target_parser=parse_foresize)
    load_state(server, state)
    return state


async def two_replicas(api: KubeApi, server):
    """Replica a takes the free shard 0, then replica b (shard 0 is live) takes shard 1."""
    shells = {}
    for identity in ("a", "b"):
        shards = ShardManager(api, "foresize", identity, shards=2, max_shards=1)
        await shards.round()
        state = replica_state(server)
        shells[identity] = KubeShell(
            state, KubeExecutor(api, pod_lookup=state.pod), shards=shards, clock=lambda: NOW
        )
    assert shells["a"].shards.owned == {0} and shells["b"].shards.owned == {1}
    return shells


def resized(server) -> list[str]:
    return sorted(r.path.split("/")[-2] for r in server.calls("PATCH", "/resize$", code=200))


async def test_only_the_owning_replica_reverts_the_pods(apiserver):
    # Both objects hash to shard 0 (held by replica a).
    assert shard_of("shop/web", 2) == 0 and shard_of("ops/agent", 2) == 0
    seed(apiserver)
    api = KubeApi.from_url(apiserver.url)
    try:
        shells = await two_replicas(api, apiserver)
        before = len(apiserver.requests)
        await shells["b"].run_pass()
        b_writes = [r.path for r in apiserver.requests[before:] if r.method == "PATCH"]
        assert resized(apiserver) == []
        assert not [p for p in b_writes if "web" in p or "agent" in p], b_writes
        await shells["a"].run_pass()
        assert resized(apiserver) == ["agent-n1", "web-abc-1"]
        for r in apiserver.calls("PATCH", "/resize$"):
            assert {
                "op": "add",
                "path": "/spec/containers/0/resources/requests/cpu",
                "value": "200m",
            } in r.body
    finally:
        await api.close()


def _counters(shell: KubeShell, target: str) -> dict[tuple[str, str], float]:
    """(counter, source or outcome) -> summed value of `target`'s exported label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str], float] = {}
    text = shell.metrics.exposition().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_total") and s.labels.get("target") == target:
                key = (s.name, s.labels.get("source") or s.labels["outcome"])
                out[key] = out.get(key, 0.0) + s.value
    return out


async def test_each_replica_exports_the_counters_it_may_count_at_zero_before_its_pass_acts(
    apiserver,
):
    """seed.md N1: a pass declares its counters before its actions, so the revert's first
    resizes are increases from 0. The replica not holding the shard exports only the
    webhook's (admission) label sets, the one that does also the in-place and resize ones."""
    seed(apiserver)
    api = KubeApi.from_url(apiserver.url)
    try:
        shells = await two_replicas(api, apiserver)
        await shells["b"].run_pass()
        changes, resizes = "foresize_request_changes_total", "foresize_resizes_total"
        assert _counters(shells["b"], "shop/web") == {(changes, "admission"): 0.0}
        a = shells["a"]
        await a.run_pass()
        assert resized(apiserver) == ["agent-n1", "web-abc-1"]
        got = _counters(a, "shop/web")
        assert got[(changes, "admission")] == 0.0 and got[(changes, "in_place")] == 1.0
        assert got[(resizes, "success")] == 1.0
        assert {k: v for k, v in got.items() if k[0] == resizes} == {
            (resizes, outcome): 1.0 if outcome == "success" else 0.0
            for outcome in ("success", "deferred", "rejected", "error")
        }
    finally:
        await api.close()


async def test_a_revert_handed_over_is_not_continued_by_the_old_holder(apiserver):
    seed(apiserver)
    api = KubeApi.from_url(apiserver.url)
    try:
        shells = await two_replicas(api, apiserver)
        a = shells["a"]
        await a.run_pass()
        assert resized(apiserver) == ["agent-n1", "web-abc-1"]
        # The kubelet has not actuated yet (pods still at 600m) when replica a loses shard 0.
        a.shards.electors[0].held = False
        await a.run_pass()
        assert resized(apiserver) == ["agent-n1", "web-abc-1"], "the old holder kept reverting"
    finally:
        await api.close()


TEMPLATE = {
    "apiVersion": "foresize.io/v1",
    "kind": "ClusterAIScaleTemplate",
    "metadata": {"name": "a"},
    "spec": {
        "selector": {"matchLabels": {"tier": "front"}},
        "template": {"spec": {"vertical": {"mode": "autonomous"}}},
    },
}


async def test_templates_are_reconciled_by_the_shard_0_holder_against_all_targets(apiserver):
    # The template's own key hashes to shard 1, the target it claims to shard 0: the
    # template must still see that target (no second create) and be reconciled once.
    assert shard_of("cluster/a", 2) == 1 and shard_of("shop/web", 2) == 0
    seed(apiserver)
    apiserver.seed(TEMPLATE)
    api = KubeApi.from_url(apiserver.url)
    tpath = "/apis/foresize.io/v1/clusteraiscaletemplates/a/status"
    try:
        shells = await two_replicas(api, apiserver)
        before = len(apiserver.requests)
        await shells["b"].run_pass()
        assert not [r for r in apiserver.requests[before:] if r.path == tpath]
        await shells["a"].run_pass()
        # shop/web exists (not made by the template, conflictResolution skip): no POST, and
        # the status says why it was skipped.
        assert not apiserver.calls("POST", "aiscaletargets")
        (status,) = [r.body["status"] for r in apiserver.calls("PATCH", f"^{tpath}$", code=200)]
        assert status["targets"] == [] and "shop/web" in status["skipped"][0]
    finally:
        await api.close()
