"""The policy hierarchy in the kube shell, against the strict API server: the informers
watch ClusterAIScalePolicies and Namespaces, each precedence rule changes what the pass
sends (a resize in place or an eviction: the update mode each level sets), the target's
`status.policy` names where every field came from, is written once and cleared when no
policy applies any more, and a policy that cannot be applied falls back to the level above
with a condition."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.handlers import WATCHED, parse_foresize
from foresize.shells.kube.informer import Informer, Informers
from foresize.shells.kube.shell import KubeShell
from foresize.shells.kube.state import ClusterState
from support.kube_objects import container, deployment, node, pod, replicaset

LABEL = "foresize.io/policy"
UPDATE_MODE = "vertical.update_policy.update_mode"


def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScalePolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def target(name: str, namespace: str, **vertical: Any) -> dict[str, Any]:
    """An autonomous target with a 600m/384Mi suggestion for pods at 200m/256Mi, setting no
    update mode unless told: the levels above choose between a resize and an eviction
    (`recreate` evicts for a memory change)."""
    policy_name = vertical.pop("policy", None)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "vertical": {
            "mode": "autonomous",
            "disruption": {"max_disrupted": "100%", "interval": "1s"},
            **vertical,
        },
    }
    if policy_name:
        spec["policy"] = policy_name
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {
            "hasEnoughDataToScale": True,
            "vertical_suggestion": {
                "uid": f"sugg-{name}",
                "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": "384Mi"}}],
            },
        },
    }


def seed_namespace(server: Any, name: str, labels: dict[str, str] | None = None) -> None:
    server.seed(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}},
        }
    )


def seed_workload(server: Any, name: str, namespace: str) -> None:
    labels = {"app": name}
    dep = server.seed(deployment(name, namespace, labels=labels))
    rs = server.seed(
        replicaset(f"{name}-abc", name, dep["metadata"]["uid"], namespace, labels=labels)
    )
    for i in (1, 2):
        owner = ("ReplicaSet", f"{name}-abc", rs["metadata"]["uid"])
        containers = [container(requests={"cpu": "200m", "memory": "256Mi"})]
        server.seed(
            pod(f"{name}-{i}", namespace, owner=owner, labels=labels, containers=containers)
        )


class Running:
    def __init__(self, server: Any, shell: KubeShell, api: KubeApi, state: ClusterState) -> None:
        self.server, self.shell, self.api, self.state = server, shell, api, state

    async def pass_(self) -> None:
        await self.shell.run_pass()

    def acted(self, namespace: str, name: str) -> str:
        """What this run did to the workload's pods: resized, evicted or nothing."""
        base = f"/api/v1/namespaces/{namespace}/pods/{name}-"
        if self.server.calls("PATCH", f"^{base}[12]/resize$", code=200):
            return "resized"
        if self.server.calls("POST", f"^{base}[12]/eviction$"):
            return "evicted"
        return "nothing"

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        return self.server.get("AIScaleTarget", namespace, name).get("status") or {}

    def source(self, namespace: str, name: str, field: str = UPDATE_MODE) -> str:
        return self.status(namespace, name)["policy"]["fields"][field]["source"]

    def condition(self, namespace: str, name: str) -> dict[str, Any]:
        conditions = self.status(namespace, name).get("conditions") or []
        return next(c for c in conditions if c["type"] == "PolicyResolved")

    async def until(self, seen: Any, seconds: float = 5.0) -> None:
        """Until the watch-fed cache satisfies `seen(state)`."""
        for _ in range(int(seconds / 0.05)):
            if seen(self.state):
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the watches did not deliver the change")


@contextlib.asynccontextmanager
async def running(server: Any) -> AsyncIterator[Running]:
    state = ClusterState(target_parser=parse_foresize)
    api = KubeApi.from_url(server.url)
    executor = KubeExecutor(api, server_version=(1, 34), pod_lookup=state.pod)
    shell = KubeShell(state, executor)
    informers = Informers([Informer(api, state, w) for w in WATCHED if not w.optional])
    stop = asyncio.Event()
    watching = informers.tasks(stop)
    try:
        assert await asyncio.wait_for(informers.wait_synced(stop), 10)
        yield Running(server, shell, api, state)
    finally:
        stop.set()
        for task in watching:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()


async def test_every_level_of_the_hierarchy_decides_what_the_pass_sends(apiserver):
    """cluster default (performance: in place) < the namespace's label (batch: recreate)
    < the target's `spec.policy` (in place) < the target's own fields (recreate)."""
    apiserver.seed(node(cpu="16", memory="32Gi"))
    seed_namespace(apiserver, "plain")
    seed_namespace(apiserver, "shop", {LABEL: "team"})
    apiserver.seed(policy("default", {"preset": "performance"}))
    apiserver.seed(policy("team", {"preset": "batch"}))
    apiserver.seed(policy("fast", {"vertical": {"update_policy": {"update_mode": "in_place"}}}))
    for ns, name, extra in (
        ("plain", "web", {}),
        ("shop", "web", {}),
        ("shop", "api", {"policy": "fast"}),
        ("shop", "db", {"policy": "fast", "update_policy": {"update_mode": "recreate"}}),
    ):
        seed_workload(apiserver, name, ns)
        apiserver.seed(target(name, ns, **extra))
    async with running(apiserver) as run:
        await run.pass_()
        assert run.acted("plain", "web") == "resized"
        assert run.source("plain", "web") == "cluster/policy:default/preset:performance"
        assert run.acted("shop", "web") == "evicted"
        assert run.source("shop", "web") == "namespace/policy:team/preset:batch"
        assert run.acted("shop", "api") == "resized"
        assert run.source("shop", "api") == "workload/policy:fast"
        assert run.acted("shop", "db") == "evicted"
        assert run.source("shop", "db") == "target"
        # A field no level above the cluster sets shows the cluster's value and source.
        assert run.source("shop", "api", "model.mode") == "namespace/policy:team/preset:batch"
        assert run.status("shop", "api")["policy"]["chain"] == [
            "cluster/policy:default/preset:performance",
            "cluster/policy:default",
            "namespace/policy:team/preset:batch",
            "namespace/policy:team",
            "workload/policy:fast",
            "target",
        ]
        assert run.condition("shop", "api")["status"] == "True"
    refused = [(r.method, r.path, r.code) for r in apiserver.requests if r.code >= 400]
    assert refused == [], refused


async def test_a_local_bound_is_kept_over_a_policy_and_the_condition_says_so(apiserver):
    apiserver.seed(node(cpu="16", memory="32Gi"))
    seed_namespace(apiserver, "shop")
    floor = {"name": "*", "cpu": {"lowerbound": "800m"}}
    apiserver.seed(policy("default", {"vertical": {"containers": [floor]}}))
    seed_workload(apiserver, "web", "shop")
    cap = [{"name": "app", "cpu": {"upperbound": "500m"}}]
    apiserver.seed(target("web", "shop", containers=cap, update_policy={"update_mode": "in_place"}))
    async with running(apiserver) as run:
        await run.pass_()
        policy_status = run.status("shop", "web")["policy"]
        assert policy_status["fields"]["vertical.containers[app].cpu.upperbound"] == {
            "value": "500m",
            "source": "target",
        }
        assert "vertical.containers[app].cpu.lowerbound" not in policy_status["fields"]
        (kept,) = policy_status["kept"]
        assert "upperbound 500m (target) kept over lowerbound 800m" in kept
        assert run.condition("shop", "web")["reason"] == "LocalBoundsKept"


async def test_a_policy_that_cannot_apply_falls_back_to_the_level_above(apiserver):
    """A target naming a policy that does not exist, and one naming a cycle the webhook
    would have refused: each gets a False condition naming the problem, and the namespace's
    policy (recreate) still applies: never acting without the limits above."""
    apiserver.seed(node(cpu="16", memory="32Gi"))
    seed_namespace(apiserver, "shop", {LABEL: "team"})
    apiserver.seed(policy("default", {"preset": "performance"}))
    apiserver.seed(policy("team", {"preset": "batch"}))
    apiserver.seed(policy("a", {"policy": "b"}))
    apiserver.seed(policy("b", {"policy": "a"}))
    for name, named in (("web", "missing"), ("api", "a")):
        seed_workload(apiserver, name, "shop")
        apiserver.seed(target(name, "shop", policy=named))
    async with running(apiserver) as run:
        await run.pass_()
        missing = run.condition("shop", "web")
        assert missing["status"] == "False" and missing["reason"] == "PolicyNotFound"
        assert "spec.policy: ClusterAIScalePolicy 'missing' does not exist" in missing["message"]
        cycle = run.condition("shop", "api")
        assert cycle["reason"] == "PolicyCycle" and "a -> b -> a" in cycle["message"]
        for name in ("web", "api"):
            assert run.acted("shop", name) == "evicted"  # the namespace's batch preset
            assert run.source("shop", name) == "namespace/policy:team/preset:batch"
            assert run.status("shop", name)["policy"]["problems"]


async def test_the_policy_status_is_written_once_and_cleared_when_no_policy_applies(apiserver):
    apiserver.seed(node(cpu="16", memory="32Gi"))
    seed_namespace(apiserver, "shop", {LABEL: "team"})
    apiserver.seed(policy("team", {"preset": "performance"}))
    seed_workload(apiserver, "web", "shop")
    apiserver.seed(target("web", "shop"))
    status_path = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status"

    def policy_writes() -> list[Any]:
        return [r for r in apiserver.calls("PATCH", status_path) if "policy" in r.body["status"]]

    async with running(apiserver) as run:
        await run.pass_()
        assert len(policy_writes()) == 1
        assert run.source("shop", "web") == "namespace/policy:team/preset:performance"
        written = run.status("shop", "web")["policy"]
        await run.until(
            lambda s: s.foresize["AIScaleTarget"][("shop", "web")].status.policy is not None
        )
        await run.pass_()
        assert len(policy_writes()) == 1, "an unchanged policy is not written again"
        # The label goes: the target uses no policy any more.
        # (a user's edit: the operator may not patch Namespaces, and the server says so)
        apiserver.update("Namespace", None, "shop", lambda ns: ns["metadata"]["labels"].clear())
        await run.until(lambda s: LABEL not in s.namespaces.get("shop", {}))
        await run.pass_()
        assert len(policy_writes()) == 2
        status = run.status("shop", "web")
        assert "policy" not in status and written
        assert all(c["type"] != "PolicyResolved" for c in status.get("conditions") or [])
