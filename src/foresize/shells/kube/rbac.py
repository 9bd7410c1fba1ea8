"""The RBAC the operator runs with: its ServiceAccount, a ClusterRole with exactly the calls
it makes cluster-wide and a Role with those in its own namespace, and their bindings.

One home for the rules: `foresize manifests rbac` prints these objects (with labels, beside
the aggregated user roles) and the Helm chart renders the same (tests/front/cli/test_manifests.py);
the strict test API server (`foresize.testing.apiserver`) enforces them for the operator's
requests, so a call they do not grant is a 403 in the tests as in a cluster;
tests/shells/kube/test_rbac_calls.py
compares them both ways with the calls every API call site makes.
"""

from __future__ import annotations

from typing import Any

from foresize.core.cluster.headroom import PRIORITY_CLASS
from foresize.shells.kube.state import PAUSE_CONFIGMAP
from foresize.shells.webhook.configurations import TLS_SECRET

SERVICE_ACCOUNT = "foresize"
# The ClusterRole, Role and bindings, and the webhook configurations it may patch.
NAME = "foresize"
RBAC_API = "rbac.authorization.k8s.io/v1"
# The namespace of the headroom placeholders (`--headroom-namespace`) and its Role.
HEADROOM_NAMESPACE = "foresize-headroom"
HEADROOM_ROLE = "foresize-headroom"

READ = ["get", "list", "watch"]
WATCH = ["list", "watch"]


def rule(groups: list[str], resources: list[str], verbs: list[str], **extra: Any) -> dict:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs, **extra}


def cluster_role_rules() -> list[dict[str, Any]]:
    """Exactly the calls the operator makes cluster-wide, no more."""
    foresize_kinds = ["aiscaletargets", "daemonsetautoscalers", "clusteraiscaletemplates"]
    return [
        # Pods: watched; read when not cached; resized in place; annotated; evicted.
        rule([""], ["pods"], ["get", *WATCH, "patch"]),
        rule([""], ["pods/resize"], ["patch"]),
        rule([""], ["pods/eviction"], ["create"]),
        rule([""], ["nodes"], WATCH),
        # The Namespaces' `foresize.io/policy` label picks their targets' policy.
        rule([""], ["namespaces"], WATCH),
        # Events: created, then their count patched when the same one recurs (aggregation).
        rule([""], ["events"], ["create", "patch"]),
        rule(["apps"], ["replicasets"], WATCH),
        # patch: the restartedAt template annotation when a revert cannot be done in place.
        rule(["apps"], ["deployments", "statefulsets", "daemonsets"], [*WATCH, "patch"]),
        rule(["argoproj.io"], ["rollouts"], [*WATCH, "patch"]),
        # CronJob targets: the CronJobs' pod templates and the Jobs that own their pods.
        rule(["batch"], ["cronjobs", "jobs"], WATCH),
        # Replicas (horizontal autonomous mode).
        rule(["apps"], ["deployments/scale", "statefulsets/scale"], ["patch"]),
        rule(["argoproj.io"], ["rollouts/scale"], ["patch"]),
        rule(["policy"], ["poddisruptionbudgets"], WATCH),
        rule(["autoscaling"], ["horizontalpodautoscalers"], WATCH),
        # Other vertical autoscalers' objects: the workloads they act on are left alone.
        rule(["autoscaling.k8s.io"], ["verticalpodautoscalers"], WATCH),
        rule(["autoscaling.gke.io"], ["multidimpodautoscalers"], WATCH),
        rule(["metrics.k8s.io"], ["pods"], ["list"]),
        # Foresize's own kinds: finalizers (get, then a JSON patch pinned to what was read);
        # templates create, update (patch) and delete targets.
        rule(["foresize.io"], ["aiscaletargets"], ["get", *WATCH, "create", "patch", "delete"]),
        rule(["foresize.io"], foresize_kinds[1:], ["get", *WATCH, "patch"]),
        rule(["foresize.io"], [f"{k}/status" for k in foresize_kinds], ["patch"]),
        # The policy hierarchy's ClusterAIScalePolicies: read only.
        rule(["foresize.io"], ["clusteraiscalepolicies"], WATCH),
        # Kopf's resource observer watches the CRDs (in a cluster; not with --server).
        rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], WATCH),
        # Headroom (`--headroom`): its PriorityClass, read by name and created where missing
        # (a create cannot be limited by name).
        rule(["scheduling.k8s.io"], ["priorityclasses"], ["create"]),
        rule(["scheduling.k8s.io"], ["priorityclasses"], ["get"], resourceNames=[PRIORITY_CLASS]),
        # Only its own webhook configurations, to write the caBundle.
        rule(
            ["admissionregistration.k8s.io"],
            ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            ["get", "patch"],
            resourceNames=[NAME],
        ),
    ]


def role_rules() -> list[dict[str, Any]]:
    """Rights inside the operator's own namespace only."""
    return [
        # list: the member Leases the shares are counted from; delete: a member Lease on
        # shutdown, and a dead replica's (kube/members.py).
        rule(["coordination.k8s.io"], ["leases"], ["get", "list", "create", "patch", "delete"]),
        rule([""], ["configmaps"], ["get"], resourceNames=[PAUSE_CONFIGMAP]),
        # `create` cannot be limited by name (the name is not known when it is authorized);
        # the rest only on the TLS Secret: read at start and on every check, patched by the
        # renewal a third of its lifetime before it expires (kube.md N1).
        rule([""], ["secrets"], ["create"]),
        rule([""], ["secrets"], ["get", "patch"], resourceNames=[TLS_SECRET]),
    ]


def headroom_role_rules() -> list[dict[str, Any]]:
    """Rights inside the headroom namespace only: the placeholder Deployments (read,
    created, their replicas and template patched) and the placeholder pods an upsize
    releases (deleted). Nothing else runs there, so the delete touches nothing else."""
    return [
        rule(["apps"], ["deployments"], ["get", "create", "patch"]),
        rule([""], ["pods"], ["delete"]),
    ]


def operator_rbac(
    namespace: str, headroom_namespace: str = HEADROOM_NAMESPACE
) -> list[dict[str, Any]]:
    """The ServiceAccount, ClusterRole, ClusterRoleBinding, Role and RoleBinding, then the
    headroom namespace with its Role and RoleBinding, in that order, with metadata of name
    and namespace only (`foresize manifests` adds labels)."""
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}

    def ref(kind: str) -> dict[str, str]:
        return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": NAME}

    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace},
        },
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": NAME},
            "rules": cluster_role_rules(),
        },
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME},
            "roleRef": ref("ClusterRole"),
            "subjects": [dict(subject)],
        },
        {
            "apiVersion": RBAC_API,
            "kind": "Role",
            "metadata": {"name": NAME, "namespace": namespace},
            "rules": role_rules(),
        },
        {
            "apiVersion": RBAC_API,
            "kind": "RoleBinding",
            "metadata": {"name": NAME, "namespace": namespace},
            "roleRef": ref("Role"),
            "subjects": [dict(subject)],
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": headroom_namespace}},
        {
            "apiVersion": RBAC_API,
            "kind": "Role",
            "metadata": {"name": HEADROOM_ROLE, "namespace": headroom_namespace},
            "rules": headroom_role_rules(),
        },
        {
            "apiVersion": RBAC_API,
            "kind": "RoleBinding",
            "metadata": {"name": HEADROOM_ROLE, "namespace": headroom_namespace},
            "roleRef": {**ref("Role"), "name": HEADROOM_ROLE},
            "subjects": [dict(subject)],
        },
    ]
