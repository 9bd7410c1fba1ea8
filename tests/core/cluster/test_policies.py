"""The policy hierarchy resolved for a target (`core/cluster/policies.py`): one test per
precedence rule, the fallbacks on bad input, and the snapshot the planners get."""

from __future__ import annotations

from typing import Any

from foresize.core.api.types import AIScaleTarget, ClusterAIScalePolicy
from foresize.core.cluster import policies as policies_module
from foresize.core.cluster.policies import (
    CONDITION,
    PolicyIndex,
    policy_write,
    resolve,
    resolve_snapshot,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import target_view

LABEL = {"foresize.io/policy": "team"}


def policy(name: str, spec: dict[str, Any]) -> ClusterAIScalePolicy:
    return ClusterAIScalePolicy.model_validate({"metadata": {"name": name}, "spec": spec})


def target(spec: dict[str, Any] | None = None, namespace: str = "shop") -> AIScaleTarget:
    return AIScaleTarget.model_validate(
        {
            "metadata": {
                "name": "api",
                "namespace": namespace,
                "uid": "u1",
                "resourceVersion": "1",
            },
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "api"}, **(spec or {})},
        }
    )


def index(*policies: ClusterAIScalePolicy | dict[str, Any]) -> PolicyIndex:
    return PolicyIndex.build(list(policies))


def fields(resolution: Any) -> dict[str, tuple[str, str]]:
    return {k: (v.value, v.source) for k, v in resolution.status.fields.items()}


def test_cluster_default_only_applies_its_preset_and_fields_to_every_target():
    r = resolve(
        target(), index(policy("default", {"preset": "cost", "vertical": {"mode": "autonomous"}}))
    )
    f = fields(r)
    assert f["model.mode"] == ("cost_optimized", "cluster/policy:default/preset:cost")
    assert f["vertical.mode"] == ("autonomous", "cluster/policy:default")
    assert f["model.forecast_blocks"] == ("15m", "default")
    assert r.target.spec.vertical is not None and r.target.spec.vertical.mode == "autonomous"
    assert r.condition.status == "True" and r.condition.reason == "Resolved"
    assert r.status.chain == [
        "cluster/policy:default/preset:cost",
        "cluster/policy:default",
        "target",
    ]


def test_a_namespace_policy_overrides_the_cluster_default():
    r = resolve(
        target(),
        index(
            policy("default", {"preset": "cost", "vertical": {"mode": "autonomous"}}),
            policy("team", {"preset": "performance"}),
        ),
        LABEL,
    )
    f = fields(r)
    assert f["model.mode"] == ("assurance_optimized", "namespace/policy:team/preset:performance")
    assert f["vertical.mode"] == ("autonomous", "cluster/policy:default")  # not overridden


def test_the_workload_policy_overrides_the_namespace_and_the_target_overrides_all():
    r = resolve(
        target({"policy": "critical", "model": {"forecast_buffer_percentage": 40}}),
        index(
            policy("default", {"preset": "cost"}),
            policy("team", {"preset": "balanced"}),
            policy(
                "critical",
                {
                    "preset": "performance",
                    "vertical": {"update_policy": {"update_mode": "in_place_or_recreate"}},
                },
            ),
        ),
        LABEL,
    )
    f = fields(r)
    assert f["model.mode"] == ("assurance_optimized", "workload/policy:critical/preset:performance")
    assert f["vertical.update_policy.update_mode"] == (
        "in_place_or_recreate",
        "workload/policy:critical",
    )
    assert f["model.forecast_buffer_percentage"] == ("40.0", "target")


def test_container_bounds_of_the_target_are_kept_over_a_conflicting_bound_above():
    r = resolve(
        target({"vertical": {"containers": [{"name": "*", "memory": {"lowerbound": "8Gi"}}]}}),
        index(
            policy(
                "default",
                {"vertical": {"containers": [{"name": "*", "memory": {"upperbound": "4Gi"}}]}},
            )
        ),
    )
    assert r.condition.status == "True" and r.condition.reason == "LocalBoundsKept"
    assert "8Gi (target) kept over upperbound 4Gi (cluster/policy:default)" in r.condition.message
    view = target_view(r.target)
    bounds = view.policy_for("app")
    assert bounds is not None and bounds.memory is not None
    assert bounds.memory.lower == 8 * 2**30 and bounds.memory.upper is None
    assert r.status.kept == [
        "vertical.containers[*].memory.lowerbound 8Gi (target) kept over upperbound 4Gi "
        "(cluster/policy:default)"
    ]


def test_a_preset_floor_reaches_the_target_and_a_named_container_keeps_both():
    r = resolve(
        target({"vertical": {"containers": [{"name": "api", "cpu": {"upperbound": "2"}}]}}),
        index(policy("default", {"preset": "balanced"})),
    )
    view = target_view(r.target)
    api = view.policy_for("api")
    assert api is not None and api.cpu is not None
    assert (api.cpu.lower, api.cpu.upper) == (25, 2000)  # balanced's floor, the target's cap


def test_an_unknown_preset_falls_back_to_the_level_above_with_a_condition():
    bad = {
        "metadata": {"name": "team"},
        "spec": {"preset": "cheapest", "vertical": {"mode": "observe"}},
    }
    r = resolve(
        target(),
        index(policy("default", {"preset": "cost", "vertical": {"mode": "autonomous"}}), bad),
        LABEL,
    )
    assert r.condition.status == "False" and r.condition.reason == "UnknownPreset"
    assert "ClusterAIScalePolicy team: spec.preset: must be one of" in r.condition.message
    f = fields(r)
    # The cluster default still holds: never acting without the limits inherited.
    assert f["model.mode"] == ("cost_optimized", "cluster/policy:default/preset:cost")
    assert f["vertical.mode"] == ("autonomous", "cluster/policy:default")
    assert f["vertical.containers[*].cpu.lowerbound"][1] == "cluster/policy:default/preset:cost"


def test_a_missing_namespace_policy_falls_back_to_the_cluster_default():
    r = resolve(
        target(), index(policy("default", {"preset": "balanced"})), {"foresize.io/policy": "gone"}
    )
    assert r.condition.status == "False" and r.condition.reason == "PolicyNotFound"
    assert r.status.problems == [
        "Namespace shop: label foresize.io/policy: ClusterAIScalePolicy 'gone' does not exist; "
        "namespace shop's policy left out"
    ]
    assert fields(r)["model.mode"] == ("balanced", "cluster/policy:default/preset:balanced")


def test_a_missing_workload_policy_falls_back_to_the_namespace_policy():
    r = resolve(target({"policy": "gone"}), index(policy("team", {"preset": "batch"})), LABEL)
    assert r.condition.reason == "PolicyNotFound"
    assert r.status.problems[0].startswith(
        "spec.policy: ClusterAIScalePolicy 'gone' does not exist"
    )
    assert fields(r)["model.mode"] == ("undershoot", "namespace/policy:team/preset:batch")


def test_a_policy_chain_applies_parent_then_preset_then_own_fields():
    r = resolve(
        target({"policy": "child"}),
        index(
            policy(
                "base",
                {"model": {"forecast_buffer_percentage": 30}, "vertical": {"mode": "autonomous"}},
            ),
            policy("child", {"policy": "base", "preset": "cost"}),
        ),
    )
    f = fields(r)
    # The preset (above the parent) sets the buffer to 0; the parent's mode remains.
    assert f["model.forecast_buffer_percentage"] == ("0.0", "workload/policy:child/preset:cost")
    assert f["vertical.mode"] == ("autonomous", "workload/policy:child/policy:base")


def test_a_cycle_between_policies_is_left_out_with_the_chain_named():
    r = resolve(
        target({"policy": "a"}),
        index(policy("a", {"policy": "b"}), policy("b", {"policy": "a", "preset": "cost"})),
    )
    assert r.condition.reason == "PolicyCycle"
    assert "cycle a -> b -> a" in r.condition.message
    assert fields(r)["model.mode"] == ("balanced", "default")


def test_a_level_that_makes_the_spec_invalid_is_left_out():
    # horizontal autonomous from the namespace + vertical autonomous on the target: invalid.
    r = resolve(
        target({"vertical": {"mode": "autonomous"}}),
        index(policy("team", {"horizontal": {"mode": "autonomous"}})),
        LABEL,
    )
    assert r.condition.reason == "InvalidPolicy"
    assert "only one of vertical.mode and horizontal.mode may be autonomous" in r.condition.message
    assert r.target.spec.horizontal is None


def test_a_target_in_no_hierarchy_is_handed_on_unchanged_with_no_write():
    t = target({"vertical": {"mode": "autonomous"}})
    snap = ClusterSnapshot(now=0.0, targets=[t])
    resolved, writes = resolve_snapshot(snap)
    assert resolved.targets[0] is t and writes == []


def test_the_snapshot_carries_effective_targets_and_writes_the_policy_once():
    t = target()
    snap = ClusterSnapshot(
        now=50.0,
        targets=[t],
        policies=[policy("default", {"preset": "performance", "vertical": {"mode": "autonomous"}})],
    )
    resolved, writes = resolve_snapshot(snap)
    view = target_view(resolved.targets[0])
    assert view.vertical_autonomous and view.update_mode == "in_place"
    (write,) = writes
    assert write.status["policy"]["fields"]["model.mode"] == {
        "value": "assurance_optimized",
        "source": "cluster/policy:default/preset:performance",
    }
    (cond,) = [c for c in write.status["conditions"] if c["type"] == CONDITION]
    assert cond["status"] == "True"
    # Resolving the same inputs again gives the same object (the planners' memo holds).
    again, _ = resolve_snapshot(snap)
    assert again.targets[0] is resolved.targets[0]
    # Once the status says it, nothing more is written.
    written = t.model_copy(
        update={"status": t.status.model_validate({**t.status.model_dump(), **write.status})}
    )
    assert (
        policy_write(written, resolve(written, PolicyIndex.build(snap.policies), None, 60.0))
        is None
    )
    assert resolve_snapshot(resolved)[1] == []  # a resolved snapshot is not resolved twice


def test_a_cluster_of_targets_under_a_default_policy_is_resolved_once_not_every_pass():
    # More targets than the 4,096 entries the memo once held, cleared whole: then every
    # pass resolved every target again and handed the planners new objects (issue 26).
    targets = [
        AIScaleTarget.model_validate(
            {
                "metadata": {
                    "name": f"t{i}",
                    "namespace": "shop",
                    "uid": f"uid-{i}",
                    "resourceVersion": "1",
                },
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": f"w{i}"}},
            }
        )
        for i in range(4500)
    ]
    policies_module._memo.clear()  # other tests' targets stay out of the count below
    snap = ClusterSnapshot(
        now=50.0, targets=targets, policies=[policy("default", {"preset": "cost"})]
    )
    first, _ = resolve_snapshot(snap)
    again, _ = resolve_snapshot(snap)
    assert all(a is b for a, b in zip(again.targets, first.targets, strict=True))
    # A target that changes replaces its own entry: the memo holds one a uid.
    changed = targets[0].model_copy(
        update={"metadata": targets[0].metadata.model_copy(update={"resourceVersion": "2"})}
    )
    later, _ = resolve_snapshot(
        ClusterSnapshot(now=60.0, targets=[changed, *targets[1:]], policies=snap.policies)
    )
    assert later.targets[0] is not first.targets[0]
    assert all(a is b for a, b in zip(later.targets[1:], first.targets[1:], strict=True))
    assert len(policies_module._memo) == 4500
