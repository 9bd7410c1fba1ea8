"""What the webhooks look things up in: targets by workload, selector targets by namespace,
DaemonSetAutoscalers by DaemonSet, the controller chain, the resources HPAs scale on, and
the cluster-wide pause flag.

Built once from a `ClusterSnapshot` (plus optional suggestion/prediction overrides the
planners hold in memory) and then only read, so one index serves many concurrent
requests without locking. Rebuild it when the snapshot changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from foresize.core.api.quantity import CPU
from foresize.core.cluster.coordination import coordination_problem
from foresize.core.cluster.jobs import CRONJOB, JOB, JOB_GROUP, cronjob_of_job_name, job_group_of
from foresize.core.cluster.model import (
    HorizontalPodAutoscaler,
    Node,
    OwnerRef,
    Pod,
    Suggestion,
    VerticalClaim,
    Workload,
)
from foresize.core.cluster.policies import PolicyIndex, resolve_snapshot
from foresize.core.cluster.snapshot import ClusterSnapshot, DsaObject, TargetObject, claim_for
from foresize.core.cluster.target import TargetView, dsa_view, target_view

# Labels a ReplicaSet's pods carry whose value is the suffix of the ReplicaSet's name.
_HASH_LABELS = ("pod-template-hash", "rollouts-pod-template-hash")


def largest_node_cpu(nodes: Iterable[Node]) -> int | None:
    """The largest allocatable CPU of a ready, schedulable node (None: no such node)."""
    cpus = [n.allocatable.get(CPU, 0) for n in nodes if n.ready and not n.unschedulable]
    return max(cpus) if cpus else None


@dataclass(slots=True)
class AdmissionIndex:
    targets: list[TargetView] = field(default_factory=list)
    dsas: list[TargetView] = field(default_factory=list)
    # key kind/ns/name; read only (may be a live mapping owned by the shell).
    workloads: Mapping[str, Workload] = field(default_factory=dict)
    paused: bool = False
    by_ref: dict[tuple[str, str, str], TargetView] = field(default_factory=dict)
    by_daemonset: dict[tuple[str, str], TargetView] = field(default_factory=dict)
    selector_targets: dict[str, list[TargetView]] = field(default_factory=dict)
    # (kind, namespace, name) of a workload -> the resources its HPA(s) scale on by
    # utilisation; admission leaves those alone like the vertical planner does.
    hpa_resources: dict[tuple[str, str, str], frozenset[str]] = field(default_factory=dict)
    # the same workloads -> whether their HPA(s) can be coordinated with (one HPA that
    # `cluster.coordination` accepts); under `coordinate` only those are not left alone.
    hpa_coordinable: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    # Other vertical autoscalers' objects: a workload one acts on is left alone.
    vertical_claims: list[VerticalClaim] = field(default_factory=list)
    # Overrides the planners hold in memory, keyed by "namespace/name" of the target; they
    # win over what the objects' status says. Read at decision time, so the shell may
    # update these mappings in place without rebuilding the index.
    suggestions: Mapping[str, Suggestion] = field(default_factory=dict)
    oom_floors: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    predictions: Mapping[str, int] = field(default_factory=dict)
    dsa_suggestions: Mapping[str, Suggestion] = field(default_factory=dict)
    # The largest allocatable CPU of a ready node (millicores; None: not known): a start-up
    # boost is clamped so the pod fits it (`cluster.boost.fit_to_node`).
    max_node_cpu: int | None = None
    # The cluster's ClusterAIScalePolicies (`cluster.policies`): the validating webhook
    # refuses a target or policy naming one that does not exist, or a cycle. None: this
    # index does not know them (a `--state` file with no policy), and names are not checked.
    policies: PolicyIndex | None = None

    @classmethod
    def build(
        cls,
        targets: Iterable[TargetObject | TargetView] = (),
        *,
        daemonset_autoscalers: Iterable[DsaObject | TargetView] = (),
        workloads: Mapping[str, Workload] | None = None,
        hpas: Iterable[HorizontalPodAutoscaler] = (),
        vertical_claims: Iterable[VerticalClaim] = (),
        paused: bool = False,
        suggestions: Mapping[str, Suggestion] | None = None,
        oom_floors: Mapping[str, Mapping[str, int]] | None = None,
        predictions: Mapping[str, int] | None = None,
        dsa_suggestions: Mapping[str, Suggestion] | None = None,
        max_node_cpu: int | None = None,
        policies: PolicyIndex | None = None,
    ) -> AdmissionIndex:
        """Index targets (API models, manifest dicts or `TargetView`s; with their
        effective spec where a policy hierarchy applies: `from_snapshot` resolves it). The
        mappings are keyed by "namespace/name" of the target and override what its status
        says."""
        index = cls(
            max_node_cpu=max_node_cpu,
            policies=policies,
            workloads=workloads if workloads is not None else {},
            paused=paused,
            suggestions=suggestions if suggestions is not None else {},
            oom_floors=oom_floors if oom_floors is not None else {},
            predictions=predictions if predictions is not None else {},
            dsa_suggestions=dsa_suggestions if dsa_suggestions is not None else {},
            vertical_claims=list(vertical_claims),
        )
        for obj in targets:
            view = target_view(obj)
            index.targets.append(view)
            if view.ref_kind and view.ref_name:
                index.by_ref[(view.ref_kind, view.namespace, view.ref_name)] = view
            elif view.has_selector:
                index.selector_targets.setdefault(view.namespace, []).append(view)
        for dsa in daemonset_autoscalers:
            view = dsa_view(dsa)
            index.dsas.append(view)
            index.by_daemonset[(view.namespace, view.ref_name)] = view
        for hpa in hpas:
            resources = hpa.scaling_resources()
            if resources:
                key = (hpa.target_kind, hpa.namespace, hpa.target_name)
                index.hpa_coordinable[key] = (
                    key not in index.hpa_resources and coordination_problem(hpa) is None
                )
                index.hpa_resources[key] = index.hpa_resources.get(key, frozenset()) | resources
        return index

    @classmethod
    def from_snapshot(
        cls,
        snapshot: ClusterSnapshot,
        *,
        suggestions: Mapping[str, Suggestion] | None = None,
        oom_floors: Mapping[str, Mapping[str, int]] | None = None,
        predictions: Mapping[str, int] | None = None,
        dsa_suggestions: Mapping[str, Suggestion] | None = None,
    ) -> AdmissionIndex:
        """The index of `snapshot`'s targets with their effective spec: a pod is created
        at the size the policy in force gives it (the pass reads the same spec)."""
        policies = PolicyIndex.build(snapshot.policies)
        snapshot, _ = resolve_snapshot(snapshot)
        return cls.build(
            snapshot.targets,
            policies=policies,
            daemonset_autoscalers=snapshot.daemonset_autoscalers,
            workloads=snapshot.workloads,
            hpas=snapshot.hpas,
            vertical_claims=snapshot.vertical_claims,
            paused=snapshot.paused,
            suggestions=suggestions,
            oom_floors=oom_floors,
            predictions=predictions,
            dsa_suggestions=dsa_suggestions,
            max_node_cpu=largest_node_cpu(snapshot.nodes.values()),
        )

    # -- current values (overrides first) -----------------------------------------------

    def suggestion_of(self, view: TargetView) -> Suggestion | None:
        source = self.dsa_suggestions if view.kind == "DaemonSetAutoscaler" else self.suggestions
        found = source.get(view.key)
        return found if found is not None else view.suggestion

    def oom_floor_of(self, view: TargetView, container: str, now: float) -> int | None:
        floors = self.oom_floors.get(view.key)
        if floors is not None:
            return floors.get(container) or floors.get("*") or None
        return view.oom_floor_for(container, now)

    def has_oom_floor(self, view: TargetView) -> bool:
        return bool(self.oom_floors.get(view.key) or view.oom_floor)

    def predicted_of(self, view: TargetView) -> int | None:
        found = self.predictions.get(view.key)
        return found if found is not None else view.predicted_replicas

    def hpa_left_alone(
        self, view: TargetView, namespace: str, workload: tuple[str, str] | None
    ) -> frozenset[str]:
        """The resources admission must leave at their template values for a pod of
        `workload` ((kind, name) of its top controller) under `view`: those an HPA on the
        workload scales on, unless the target opted in with `hpa_resource_policy:
        override`, or `coordinate` with an HPA it can coordinate with (the suggestion then
        carries the coordinated request, or none). The same rule the vertical planner
        applies to running pods, so new and running replicas agree and the HPA's
        utilisation arithmetic does not shift."""
        if view.hpa_resource_policy == "override" or view.kind != "AIScaleTarget":
            return frozenset()
        if view.ref_kind and view.ref_name:
            workload = (view.ref_kind, view.ref_name)
        if workload is None:
            return frozenset()
        key = (workload[0], namespace, workload[1])
        if view.hpa_resource_policy == "coordinate" and self.hpa_coordinable.get(key):
            return frozenset()
        return self.hpa_resources.get(key, frozenset())

    def claimed_by(
        self, view: TargetView, namespace: str, workload: tuple[str, str] | None
    ) -> VerticalClaim | None:
        """Another vertical autoscaler acting on the pod's workload (the target's, or the
        pod's top controller for a selector target): admission leaves the pod alone, as
        the vertical planner leaves the running ones."""
        if view.ref_kind and view.ref_name:
            workload = (view.ref_kind, view.ref_name)
        if workload is None or not self.vertical_claims:
            return None
        return claim_for(self.vertical_claims, workload[0], namespace, workload[1])

    # -- owner chain ---------------------------------------------------------------------

    def top_owner_ref(
        self, namespace: str, owner: OwnerRef | Workload | None, labels: Mapping[str, str]
    ) -> tuple[str, str] | None:
        """(kind, name) of the top controller: ReplicaSet -> Deployment/Rollout, Job ->
        CronJob.

        A ReplicaSet the index does not know (the kube shell need not list them all) is
        resolved from its name: `<deployment>-<pod-template-hash>`; a Job likewise from
        the CronJob controller's naming (`cluster.jobs`); a bare Job whose pod carries
        `foresize.io/job-group` of a JobGroup target: that group."""
        if owner is None:
            return None
        if isinstance(owner, Workload):
            if owner.kind in ("ReplicaSet", JOB) and owner.owner is not None:
                return owner.owner.kind, owner.owner.name
            if owner.kind not in ("ReplicaSet", JOB):
                return owner.kind, owner.name
            kind, name = owner.kind, owner.name
        else:
            kind, name = owner.kind, owner.name
        if kind == JOB:
            top = self._job_owner(namespace, name)
            group = job_group_of(labels) if top == (JOB, name) else None
            if group is not None and (JOB_GROUP, namespace, group) in self.by_ref:
                return JOB_GROUP, group  # a bare Job of a sized group (`cluster.jobs`)
            return top
        if kind != "ReplicaSet":
            return kind, name
        rs = self.workloads.get(f"ReplicaSet/{namespace}/{name}")
        if rs is not None and rs.owner is not None:
            return rs.owner.kind, rs.owner.name
        for label in _HASH_LABELS:
            suffix = labels.get(label)
            if suffix and name.endswith("-" + suffix):
                parent = name[: -len(suffix) - 1]
                kind = "Rollout" if label.startswith("rollouts") else "Deployment"
                return kind, parent
        return "ReplicaSet", name

    def _job_owner(self, namespace: str, name: str) -> tuple[str, str]:
        """A Job's CronJob, from the Job object if the index has it, else from its name
        where a CronJob of that name is a target's; else the Job itself."""
        job = self.workloads.get(f"{JOB}/{namespace}/{name}")
        if job is not None:
            return (job.owner.kind, job.owner.name) if job.owner is not None else (JOB, name)
        cronjob = cronjob_of_job_name(name)
        if cronjob is not None and (CRONJOB, namespace, cronjob) in self.by_ref:
            return CRONJOB, cronjob
        return JOB, name

    # -- lookups -------------------------------------------------------------------------

    def target_for(self, kind: str, namespace: str, name: str) -> TargetView | None:
        return self.by_ref.get((kind, namespace, name))

    def target_for_pod(
        self, pod: Pod, owner: OwnerRef | Workload | None = None
    ) -> TargetView | None:
        """The AIScaleTarget or DaemonSetAutoscaler that governs `pod`, if any.

        A scaleTargetRef target wins over a selector target; a pod that two selector
        targets select belongs to neither (the disruption worker leaves such pods alone
        and reports the overlap on the targets)."""
        ref = self.top_owner_ref(
            pod.namespace, owner if owner is not None else pod.owner, pod.labels
        )
        if ref is not None:
            kind, name = ref
            if kind == "DaemonSet":
                dsa = self.by_daemonset.get((pod.namespace, name))
                if dsa is not None:
                    return dsa
            view = self.by_ref.get((kind, pod.namespace, name))
            if view is not None:
                return view
        chosen = [v for v in self.selector_targets.get(pod.namespace, ()) if v.selects(pod.labels)]
        return chosen[0] if len(chosen) == 1 else None
