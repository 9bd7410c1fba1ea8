"""The policy hierarchy in the pass (`reconcile.plan_pass` over `cluster.policies`): every
planner and the pod webhook read a target's effective spec, and the effective policy is
published in the target's one status write of the pass, only when it changes."""

from __future__ import annotations

from typing import Any

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import mutate_pod
from foresize.core.api.quantity import MIB
from foresize.core.api.types import AIScaleTarget, ClusterAIScalePolicy, parse_target
from foresize.core.cluster.actions import EvictPod, ResizePod, WriteTargetStatus
from foresize.core.cluster.policies import CONDITION
from foresize.core.reconcile import ActionQueue, ReconcileState, plan_pass
from support.vertical import apply_ok, of, pod, snap, sugg


def policy(name: str, spec: dict[str, Any]) -> ClusterAIScalePolicy:
    return ClusterAIScalePolicy.model_validate(
        {"metadata": {"name": name, "uid": f"p-{name}", "resourceVersion": "1"}, "spec": spec}
    )


def target(status: dict[str, Any] | None = None, **spec: Any) -> AIScaleTarget:
    """An autonomous target that sets nothing else: the levels above show through."""
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "default", "uid": "t-web"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {"mode": "autonomous"},
                **spec,
            },
            **({"status": status} if status else {}),
        }
    )


def stale_pods() -> list:
    return [pod(f"web-{i}", cpu=100, mem=100 * MIB) for i in range(4)]


def run(s: Any, state: ReconcileState | None = None) -> tuple[list, ReconcileState]:
    out = plan_pass(s, 0.0, state or ReconcileState(), None, suggestions=sugg(cpu=300))
    return out.actions, out.state


def test_the_cluster_default_policy_changes_what_the_pass_does():
    """performance sets `in_place`: the pods are resized, where the API's default
    (`recreate`) evicts them."""
    alone, _ = run(snap(stale_pods(), [target()]))
    assert of(alone, EvictPod) and not of(alone, ResizePod)
    s = snap(stale_pods(), [target()])
    s.policies = [policy("default", {"preset": "performance"})]
    under, _ = run(s)
    assert of(under, ResizePod) and not of(under, EvictPod)


def test_a_namespace_label_picks_its_policy_and_the_target_fields_still_win():
    s = snap(stale_pods(), [target()])
    s.policies = [policy("default", {"preset": "performance"}), policy("team", {"preset": "batch"})]
    s.namespaces = {"default": {"foresize.io/policy": "team"}}
    batch, _ = run(s)
    assert of(batch, EvictPod) and not of(batch, ResizePod)  # batch: recreate
    own = target(vertical={"mode": "autonomous", "update_policy": {"update_mode": "in_place"}})
    s.targets = [own]
    mine, _ = run(s)
    assert of(mine, ResizePod) and not of(mine, EvictPod)  # the target's own field wins


def test_the_effective_policy_joins_the_target_s_one_status_write_and_is_not_written_again():
    def writes(actions: list) -> list[WriteTargetStatus]:
        return [a for a in of(actions, WriteTargetStatus) if a.name == "web"]

    own = {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}}
    settled = [pod(f"web-{i}", cpu=300, mem=200 * MIB) for i in range(4)]  # as suggested
    s = snap(settled, [target(vertical=own)])
    without, _ = run(s)  # the same actions with the policy: nothing to resize
    s.policies = [policy("default", {"preset": "performance"})]
    actions, state = run(s)
    assert len(writes(actions)) == len(writes(without))  # no write added for the policy
    (write,) = [w for w in writes(actions) if "policy" in w.status]
    assert "pods_resized" in write.status  # the worker's write ...
    policy_status = write.status["policy"]  # ... carries the policy
    assert policy_status["fields"]["model.mode"] == {
        "value": "assurance_optimized",
        "source": "cluster/policy:default/preset:performance",
    }
    assert policy_status["fields"]["vertical.update_policy.update_mode"]["source"] == "target"
    (cond,) = [c for c in write.status["conditions"] if c["type"] == CONDITION]
    assert cond["status"] == "True"
    queue = ActionQueue(actions, state.worker, 0.0)
    while (a := queue.next()) is not None:
        queue.feed(a, apply_ok(a))
    state.worker = queue.state
    # The write landed: the target as the API server now holds it.
    landed = target(
        status={"policy": policy_status, "conditions": write.status["conditions"]}, vertical=own
    )
    s.targets = [landed]
    again, _ = run(s, state)
    assert of(again, WriteTargetStatus) == []


def test_a_target_that_no_longer_uses_any_policy_has_its_policy_status_cleared():
    shown = {
        "policy": {"chain": ["cluster/policy:default", "target"], "fields": {}},
        "conditions": [{"type": CONDITION, "status": "True", "reason": "Resolved"}],
    }
    s = snap(stale_pods(), [target(status=shown)])  # the default policy was deleted
    actions, _ = run(s)
    (write,) = [a for a in of(actions, WriteTargetStatus) if "policy" in a.status]
    assert write.status["policy"] is None and "pods_resized" in write.status
    assert all(c["type"] != CONDITION for c in write.status["conditions"])


def test_pods_are_admitted_at_the_size_the_effective_policy_gives():
    """The cluster default's 100m floor (performance) raises a 20m suggestion at admission."""
    s = snap(stale_pods(), [target()])
    new = pod("web-new", cpu=100, mem=100 * MIB)
    workload = s.workloads["Deployment/default/web"]
    alone, _ = mutate_pod(new, workload, AdmissionIndex.from_snapshot(s, suggestions=sugg(20)), 0.0)
    s.policies = [policy("default", {"preset": "performance"})]
    index = AdmissionIndex.from_snapshot(s, suggestions=sugg(20))
    under, _ = mutate_pod(new, workload, index, 0.0)
    assert alone.containers[0].resources.requests["cpu"] == 20
    assert under.containers[0].resources.requests["cpu"] == 100
    assert index.policies is not None and "default" in index.policies.valid
