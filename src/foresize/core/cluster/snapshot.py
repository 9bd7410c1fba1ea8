"""A point-in-time view of the cluster: what every planner takes as input."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TypeAlias

from foresize.core.api.access import KubeObject
from foresize.core.api.cluster_policy import ClusterAIScalePolicy
from foresize.core.api.daemonset import DaemonSetAutoscaler
from foresize.core.api.selectors import selector_matches
from foresize.core.api.target import AIScaleTarget
from foresize.core.api.template import ClusterAIScaleTemplate
from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    Node,
    Pod,
    PodDisruptionBudget,
    VerticalClaim,
    Workload,
)

TOP_LEVEL_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Rollout", "CronJob")
# The controllers a top-level workload runs its pods through: a Deployment or Rollout its
# ReplicaSets, a CronJob its Jobs (`cluster.jobs`).
_INTERMEDIATE_KINDS = ("ReplicaSet", "Job")

# A Foresize object as the shells hand it in: the API model both shells parse every object
# into, or the same object as a manifest dict (a hand-written fixture). The planners read
# either only through the one read-model (`cluster.target.target_view` / `dsa_view`).
TargetObject: TypeAlias = AIScaleTarget | KubeObject
DsaObject: TypeAlias = DaemonSetAutoscaler | KubeObject
# A ClusterAIScalePolicy: the API model, or its JSON when it does not parse (one that got
# past the webhook): the hierarchy reports it (`cluster.policies`), never applies it.
PolicyObject: TypeAlias = ClusterAIScalePolicy | KubeObject


# A workload as the indexes key it: (namespace, kind, name).
WorkloadKey: TypeAlias = tuple[str, str, str]


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """matchLabels only (`api.selectors`: an empty selector matches nothing)."""
    return selector_matches(selector, (), labels)


def claim_for(
    claims: list[VerticalClaim], kind: str, namespace: str, name: str
) -> VerticalClaim | None:
    """The acting claim on workload kind/namespace/name, the same one every time."""
    found = [
        c
        for c in claims
        if c.acting and c.namespace == namespace and c.target_kind == kind and c.target_name == name
    ]
    return min(found, key=lambda c: (c.kind, c.name)) if found else None


@dataclass(slots=True)
class ClusterSnapshot:
    now: float
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    workloads: dict[str, Workload] = field(default_factory=dict)  # key: kind/ns/name
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    hpas: list[HorizontalPodAutoscaler] = field(default_factory=list)
    # Other vertical autoscalers' objects (VPAs, ...): a workload one acts on is not
    # Foresize's to resize.
    vertical_claims: list[VerticalClaim] = field(default_factory=list)
    # Foresize objects (pydantic API models from foresize.core.api, or their dicts).
    targets: list[TargetObject] = field(default_factory=list)
    daemonset_autoscalers: list[DsaObject] = field(default_factory=list)
    templates: list[ClusterAIScaleTemplate] = field(default_factory=list)
    # The policy hierarchy's inputs (`cluster.policies`): ClusterAIScalePolicies, and the
    # labels of each Namespace by name (only `foresize.io/policy` is read).
    policies: list[PolicyObject] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # The targets carry their effective spec already (`cluster.policies.resolve_snapshot`).
    policies_resolved: bool = False
    server_version: tuple[int, int] = (1, 35)
    paused: bool = False  # cluster-wide pause (ConfigMap flag)
    # "Revert everything now" (the pause ConfigMap's `revert: "true"`, which also pauses):
    # every autonomous target's pods go back to their templates (`lifecycle.planner`).
    revert_all: bool = False
    # The pod webhook is serving (server up, certificate valid). An evicted pod gets its
    # new size only through it, so the vertical worker holds evictions while this is
    # False. The shells derive it: the operator from its webhook server, the simulator
    # from its admission hook; True where nothing tells (the circuit breaker still acts).
    admission_healthy: bool = True
    _by_node: dict[str, list[Pod]] | None = None
    _by_owner: dict[str, list[Pod]] | None = None
    # The first HPA and the claims per workload (namespace, kind, name), with the list and
    # the length each was built from (rebuilt when either differs): a planner asks once
    # per target, and a scan of every HPA per target grows with the square of the cluster.
    _hpa_index: (
        tuple[list[HorizontalPodAutoscaler], int, dict[WorkloadKey, HorizontalPodAutoscaler]] | None
    ) = None
    _claim_index: tuple[list[VerticalClaim], int, dict[WorkloadKey, list[VerticalClaim]]] | None = (
        None
    )
    # The kinds of top-level workload per (namespace, name), with the dict and the length
    # it was built from (rebuilt when either differs), as for the HPA index.
    _kinds_index: tuple[dict[str, Workload], int, dict[tuple[str, str], frozenset[str]]] | None = (
        None
    )

    def workload(self, kind: str, namespace: str, name: str) -> Workload | None:
        return self.workloads.get(f"{kind}/{namespace}/{name}")

    def workload_kinds(self, namespace: str, name: str) -> frozenset[str]:
        """The kinds of the workloads named `name` in `namespace` that are nobody's part
        (a Deployment's ReplicaSet and a CronJob's Job are their owner's)."""
        index = self._kinds_index
        if index is None or index[0] is not self.workloads or index[1] != len(self.workloads):
            kinds: dict[tuple[str, str], set[str]] = defaultdict(set)
            for wl in self.workloads.values():
                if not (wl.kind in _INTERMEDIATE_KINDS and wl.owner is not None):
                    kinds[(wl.namespace, wl.name)].add(wl.kind)
            built = {k: frozenset(v) for k, v in kinds.items()}
            index = self._kinds_index = (self.workloads, len(self.workloads), built)
        return index[2].get((namespace, name), frozenset())

    def top_owner(self, pod: Pod) -> Workload | None:
        """Resolve the pod's controller chain: ReplicaSet -> Deployment/Rollout, Job ->
        CronJob, or direct."""
        if pod.owner is None:
            return None
        wl = self.workload(pod.owner.kind, pod.namespace, pod.owner.name)
        if wl is None:
            return None
        if wl.kind in _INTERMEDIATE_KINDS and wl.owner is not None:
            parent = self.workload(wl.owner.kind, pod.namespace, wl.owner.name)
            return parent if parent is not None else wl
        return wl

    def _index(self) -> None:
        by_node: dict[str, list[Pod]] = defaultdict(list)
        by_owner: dict[str, list[Pod]] = defaultdict(list)
        # A controller's pods share its chain: resolved once per direct owner.
        tops: dict[tuple[str, str, str], str | None] = {}
        for p in self.pods:
            if p.node_name:
                by_node[p.node_name].append(p)
            if p.owner is None:
                continue
            direct = (p.owner.kind, p.namespace, p.owner.name)
            if direct in tops:
                top = tops[direct]
            else:
                owner = self.top_owner(p)
                top = tops[direct] = owner.key if owner is not None else None
            if top is not None:
                by_owner[top].append(p)
        self._by_node = dict(by_node)
        self._by_owner = dict(by_owner)

    def pods_on_node(self, node: str) -> list[Pod]:
        if self._by_node is None:
            self._index()
        assert self._by_node is not None
        return self._by_node.get(node, [])

    def pods_of(self, workload: Workload) -> list[Pod]:
        if self._by_owner is None:
            self._index()
        assert self._by_owner is not None
        return self._by_owner.get(workload.key, [])

    def vertical_claim_for(self, kind: str, namespace: str, name: str) -> VerticalClaim | None:
        """The first (by kind and name) other vertical autoscaler acting on the workload."""
        if not self.vertical_claims:
            return None
        claims = self.vertical_claims
        index = self._claim_index
        if index is None or index[0] is not claims or index[1] != len(claims):
            by_workload: dict[WorkloadKey, list[VerticalClaim]] = {}
            for c in claims:
                by_workload.setdefault((c.namespace, c.target_kind, c.target_name), []).append(c)
            index = self._claim_index = (claims, len(claims), by_workload)
        return claim_for(index[2].get((namespace, kind, name), []), kind, namespace, name)

    def hpa_for(self, workload: Workload) -> HorizontalPodAutoscaler | None:
        """The first HPA (in the snapshot's order) whose scaleTargetRef is the workload."""
        return self.hpa_naming(workload.namespace, workload.kind, workload.name)

    def hpa_naming(self, namespace: str, kind: str, name: str) -> HorizontalPodAutoscaler | None:
        """The first HPA whose scaleTargetRef names kind/name in namespace, whether or not
        that workload exists (an HPA naming a missing target is reported)."""
        if not self.hpas:
            return None
        hpas = self.hpas
        index = self._hpa_index
        if index is None or index[0] is not hpas or index[1] != len(hpas):
            first: dict[WorkloadKey, HorizontalPodAutoscaler] = {}
            for h in hpas:
                first.setdefault((h.namespace, h.target_kind, h.target_name), h)
            index = self._hpa_index = (hpas, len(hpas), first)
        return index[2].get((namespace, kind, name))
