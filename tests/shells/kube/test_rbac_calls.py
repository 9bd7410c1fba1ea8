"""RBAC is exactly what the code calls: the shipped ClusterRole and Role are compared, both
ways, with the requests the strict API server records while the real operator runs, while
the executor carries out every kind of core action and Foresize-object call, and while the
webhook certificate is renewed.

A call the roles do not allow fails in a cluster with 403 (the strict server enforces the
shipped roles, so it fails here too); a grant no call uses is blast radius for nothing
(kube.md GAP 16). Nothing here lists the calls by hand: they come from the request log, and
every place in the source that calls the API is reached (a new call site, or a path no run
takes such as the certificate renewal was, kube.md N1, fails the test until a run takes
it)."""

from __future__ import annotations

import ast
import asyncio
import copy
import datetime as dt
import json
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from foresize.core.cluster import actions as core
from foresize.front.cli.manifests import build
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.operator import run_operator
from foresize.shells.kube.options import OperatorOptions
from foresize.shells.kube.rbac import (
    HEADROOM_NAMESPACE,
    HEADROOM_ROLE,
    NAME,
)
from foresize.shells.kube.tls import WebhookCertificate
from foresize.shells.webhook.configurations import TLS_SECRET, WEBHOOK_SERVICE
from foresize.testing.apiserver import RecordedRequest, StrictApiServer
from foresize.testing.ports import free_port
from support.kube_objects import (
    MPA_CRD,
    SUGGESTION,
    VPA_CRD,
    container,
    deployment,
    namespace,
    node,
    pod,
    replicaset,
    target,
    vpa,
    workload,
)
from support.paths import ROOT

OPERATOR_NS = "foresize-system"

ROLLOUT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "rollouts.argoproj.io"},
    "spec": {
        "group": "argoproj.io",
        "names": {"kind": "Rollout", "plural": "rollouts", "singular": "rollout"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
            }
        ],
    },
}


def seed_cluster(server: StrictApiServer) -> dict[str, str]:
    """A small cluster: a Deployment with pods and an autonomous target, a StatefulSet, a
    DaemonSet, an Argo Rollout, and the operator's webhook configurations."""
    server.seed(ROLLOUT_CRD)
    server.seed(VPA_CRD)
    server.seed(MPA_CRD)
    server.seed(namespace(OPERATOR_NS))
    # A member Lease a killed replica left hours ago: the holder of shard 0 deletes it.
    server.seed(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "foresize-replica-gone",
                "namespace": OPERATOR_NS,
                "labels": {"foresize.io/member": "true"},
            },
            "spec": {
                "holderIdentity": "gone",
                "leaseDurationSeconds": 15,
                "renewTime": "2020-01-01T00:00:00.000000Z",
            },
        }
    )
    server.seed(node())
    dep = server.seed(deployment())
    rs = server.seed(replicaset(deployment_uid=dep["metadata"]["uid"]))
    uids = {}
    for name in ("web-1", "web-2"):
        owner = ("ReplicaSet", "web-abc", rs["metadata"]["uid"])
        uids[name] = server.seed(pod(name, owner=owner))["metadata"]["uid"]
    server.seed(target(suggestion=SUGGESTION))
    server.seed(workload("StatefulSet", "db"))
    server.seed(vpa("db", target_kind="StatefulSet", target_name="db", mode="Off"))
    server.seed(workload("DaemonSet", "agent", labels={"app": "agent"}))
    server.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                "scaleMode": "recommendation",
            },
        }
    )
    server.seed(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "ClusterAIScaleTemplate",
            "metadata": {"name": "fleet"},
            "spec": {
                "selector": {"matchLabels": {"tier": "none"}},
                "template": {"spec": {"vertical": {"mode": "recommendation"}}},
            },
        }
    )
    rollout = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "front", "namespace": "shop"},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [container()]}}},
    }
    server.seed(rollout)
    for config in build("webhooks", namespace=OPERATOR_NS):  # as installed
        server.seed(config)
    # A headroom placeholder (its namespace ships with the RBAC).
    server.seed(namespace(HEADROOM_NAMESPACE))
    placeholder = pod("foresize-headroom-x1", HEADROOM_NAMESPACE, owner=None)
    placeholder["spec"]["priority"] = -1
    uids["placeholder"] = server.seed(placeholder)["metadata"]["uid"]
    return uids


async def operator_run(server: StrictApiServer, opts: OperatorOptions) -> None:
    """The real operator as it runs in a cluster (a kubeconfig with a bearer token, so Kopf
    scans CRDs; webhook TLS from the shared Secret) until it has resized."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    try:
        for _ in range(150):
            await asyncio.sleep(0.1)
            if (
                len(server.calls("PATCH", "/resize$", code=200)) >= 2
                and server.calls("PATCH", "webhookconfigurations")
                and server.calls("PATCH", "/leases/", code=200)  # a renewal
                and server.calls("DELETE", "/leases/foresize-replica-gone$")
            ):
                break
        assert len(server.calls("PATCH", "/resize$", code=200)) >= 2
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


def one_of_each_action(uids: dict[str, str]) -> list[core.Action]:
    """One core action of every kind the planners can emit (all of `Action`'s members)."""
    resize = core.ContainerResize("app", requests={"cpu": 300})
    made: dict[type, list[core.Action]] = {
        core.ResizePod: [core.ResizePod("shop", "web-1", (resize,), uid=uids["web-1"])],
        core.PatchPodMetadata: [core.PatchPodMetadata("shop", "web-1", annotations={"a": "b"})],
        core.EvictPod: [core.EvictPod("shop", "web-2", target="shop/web", uid=uids["web-2"])],
        core.PatchScale: [
            core.PatchScale("shop", kind, name, 3)
            for kind, name in (("Deployment", "web"), ("StatefulSet", "db"), ("Rollout", "front"))
        ],
        core.RestartWorkload: [
            core.RestartWorkload("shop", kind, name, restarted_at=1_780_000_000.0)
            for kind, name in (
                ("Deployment", "web"),
                ("StatefulSet", "db"),
                ("DaemonSet", "agent"),
                ("Rollout", "front"),
            )
        ],
        core.WriteTargetStatus: [
            core.WriteTargetStatus("shop", "web", {"pods_resized": 1}),
            core.WriteTargetStatus("shop", "agent", {}, kind="DaemonSetAutoscaler"),
            core.WriteTargetStatus("", "fleet", {"targets": []}, kind="ClusterAIScaleTemplate"),
        ],
        # Twice: the second of the same Event is its count patched (aggregation).
        core.EmitEvent: [core.EmitEvent("shop", "Pod", "web-1", "Resized", "cpu 300m")] * 2,
        # Twice: created (the PriorityClass too), then the Deployment patched.
        core.EnsureHeadroom: [
            core.EnsureHeadroom(
                HEADROOM_NAMESPACE,
                "foresize-headroom",
                "",
                "karpenter.sh/nodepool",
                n,
                {"cpu": 250, "memory": 2**29},
                "foresize-headroom",
                -1,
            )
            for n in (2, 3)
        ],
        core.ReleaseHeadroom: [
            core.ReleaseHeadroom(
                HEADROOM_NAMESPACE, "foresize-headroom-x1", "n1", uid=uids["placeholder"]
            )
        ],
    }
    kinds = set(typing.get_args(core.Action))
    assert kinds == set(made), f"a new action kind needs an example here: {kinds - set(made)}"
    return [a for group in made.values() for a in group]


async def executor_calls(server: StrictApiServer, uids: dict[str, str], kubeconfig: str) -> None:
    api = KubeApi.from_environment(kubeconfig)
    try:
        executor = KubeExecutor(api, server_version=(1, 34))
        for action in one_of_each_action(uids):
            result = await executor.apply(action)
            assert result.ok, (action, result)
            if isinstance(action, core.EmitEvent):
                # Sent by the Events' own task; one at a time, so the second of the same
                # Event is its count patched, not folded into the first while queued.
                await executor.events.flush()
        # A resize planned for a pod since replaced: 422 on the uid test, then a read to
        # tell a stale plan from a refusal.
        resize = core.ContainerResize("app", requests={"cpu": 300})
        stale = await executor.apply(core.ResizePod("shop", "web-1", (resize,), uid="gone"))
        assert not stale.ok and stale.code == 409, stale
        # The Foresize objects the lifecycle and template planners manage.
        kinds = ("AIScaleTarget", "DaemonSetAutoscaler", "ClusterAIScaleTemplate")
        made = copy.deepcopy(target("made"))
        assert (await executor.create_object("AIScaleTarget", made)).ok
        made["spec"]["vertical"]["mode"] = "recommendation"
        assert (await executor.update_object("AIScaleTarget", made)).ok
        assert (await executor.add_finalizer(kinds[0], "shop", "made", "foresize.io/x")).ok
        assert (await executor.remove_finalizer(kinds[0], "shop", "made", "foresize.io/x")).ok
        assert (await executor.delete_object("AIScaleTarget", "shop", "made")).ok
        for kind, ns, name in ((kinds[1], "shop", "agent"), (kinds[2], "", "fleet")):
            assert (await executor.add_finalizer(kind, ns, name, "foresize.io/x")).ok
            assert (await executor.remove_finalizer(kind, ns, name, "foresize.io/x")).ok
    finally:
        await api.close()


async def certificate_renewal(server: StrictApiServer, kubeconfig: str) -> None:
    """The check a replica makes every --cert-check-interval, 300 days after the operator
    created the Secret: the certificate is renewed in the Secret (a patch) and the caBundle."""
    api = KubeApi.from_environment(kubeconfig)
    later = dt.datetime.now(dt.UTC).timestamp() + 300 * 86400
    try:
        cert = WebhookCertificate(
            api,
            namespace=OPERATOR_NS,
            secret=TLS_SECRET,
            service=WEBHOOK_SERVICE,
            configuration=NAME,
            clock=lambda: later,
        )
        assert await cert.check() == "renewed"
    finally:
        await api.close()


SRC = ROOT / "src" / "foresize"
HTTP_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}


def api_call_sites() -> dict[tuple[str, int], int]:
    """Every call of the kube client in the source, (file, first line) -> last line:
    `api.request("VERB", ...)` and `api.stream(...)` (a watch) in the kube shell and the
    metrics-server adapter."""
    files = [
        *sorted((SRC / "shells" / "kube").glob("*.py")),
        SRC / "adapters" / "history" / "metrics_server.py",
    ]
    sites = {}
    for path in files:
        for call in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            receiver = ast.unparse(call.func.value)
            method = call.args[0] if call.args else None
            is_request = (
                call.func.attr == "request"
                and receiver in ("api", "self.api", "self")
                and isinstance(method, ast.Constant)
                and method.value in HTTP_METHODS
            )
            is_watch = call.func.attr == "stream" and receiver in ("api", "self.api")
            if is_request or is_watch:
                sites[(str(path), call.lineno)] = call.end_lineno or call.lineno
    return sites


@pytest.fixture
def reached(monkeypatch) -> set[tuple[str, int]]:
    """(file, line) of each call to the kube client made while the test runs."""
    lines: set[tuple[str, int]] = set()
    request, stream = KubeApi.request, KubeApi.stream

    async def recorded_request(self, *args, **kwargs):
        caller = sys._getframe(1)
        lines.add((caller.f_code.co_filename, caller.f_lineno))
        return await request(self, *args, **kwargs)

    def recorded_stream(self, *args, **kwargs):
        caller = sys._getframe(1)
        lines.add((caller.f_code.co_filename, caller.f_lineno))
        return stream(self, *args, **kwargs)

    monkeypatch.setattr(KubeApi, "request", recorded_request)
    monkeypatch.setattr(KubeApi, "stream", recorded_stream)
    return lines


def unreached(lines: set[tuple[str, int]]) -> list[str]:
    """The call sites no recorded call came from, as file:line."""
    return sorted(
        f"{Path(file).relative_to(SRC)}:{first}"
        for (file, first), last in api_call_sites().items()
        if not any(f == file and first <= line <= last for f, line in lines)
    )


def allows(rules: list[dict[str, Any]], call: RecordedRequest) -> bool:
    resource = f"{call.resource}/{call.subresource}" if call.subresource else call.resource
    for rule in rules:
        if call.group not in rule["apiGroups"] or resource not in rule["resources"]:
            continue
        if call.verb not in rule["verbs"]:
            continue
        names = rule.get("resourceNames")
        if names and (call.verb in ("create", "list", "watch") or call.name not in names):
            continue
        return True
    return False


async def test_the_roles_grant_exactly_what_the_operator_calls(tmp_path, operator_options, reached):
    server = StrictApiServer(
        bookmark_interval=1.0, token="sa-token", operator_namespace=OPERATOR_NS
    )
    await server.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server.url}}],
                "users": [{"name": "u", "user": {"token": "sa-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    try:
        uids = seed_cluster(server)
        opts = operator_options(
            kubeconfig=str(kubeconfig),
            namespace=OPERATOR_NS,
            webhook_port=free_port(),
            tls_secret=TLS_SECRET,
            webhook_service=WEBHOOK_SERVICE,
            webhook_configuration=NAME,
            suggest_interval=3600,
            lease_retry=0.3,  # a renewal within the run
            shards=2,  # balanced: the member Leases listed, a stale one deleted, ours too
        )
        await operator_run(server, opts)
        await executor_calls(server, uids, str(kubeconfig))
        await certificate_renewal(server, str(kubeconfig))
    finally:
        await server.stop()
    assert unreached(reached) == [], "API call sites no run here reaches"
    docs = {(d["kind"], d["metadata"]["name"]): d for d in build("rbac")}
    cluster_rules = docs[("ClusterRole", NAME)]["rules"]
    role_rules = docs[("Role", NAME)]["rules"]
    headroom_rules = docs[("Role", HEADROOM_ROLE)]["rules"]
    calls = [r for r in server.requests if r.resource]  # not discovery or /version
    assert calls and server.internal_errors == []
    # Every call is allowed: cluster-wide by the ClusterRole, in its namespace by the Role.
    refused = sorted(
        {
            (c.verb, c.group, c.resource, c.subresource, c.namespace, c.name)
            for c in calls
            if not allows(cluster_rules, c)
            and not (c.namespace == OPERATOR_NS and allows(role_rules, c))
            and not (c.namespace == HEADROOM_NAMESPACE and allows(headroom_rules, c))
        }
    )
    assert refused == [], f"calls the roles do not allow: {refused}"
    # Every grant is used by some call.
    unused = []
    scopes = {"Role": OPERATOR_NS, "headroom Role": HEADROOM_NAMESPACE}
    for scope, rules in (
        ("ClusterRole", cluster_rules),
        ("Role", role_rules),
        ("headroom Role", headroom_rules),
    ):
        for rule in rules:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    res, _, sub = resource.partition("/")
                    for verb in rule["verbs"]:
                        used = any(
                            c.group == group
                            and c.resource == res
                            and c.subresource == sub
                            and c.verb == verb
                            and (scope == "ClusterRole" or c.namespace == scopes[scope])
                            for c in calls
                        )
                        if not used:
                            unused.append((scope, group, resource, verb))
    assert unused == [], f"grants no call uses: {unused}"
