"""The validating webhook's checks of the policy hierarchy (`admission.validate`): an
unknown preset, a policy named that does not exist, a cycle and a chain longer than
`MAX_CHAIN` are refused with the field named; ClusterAIScalePolicy is one of `VALIDATORS`."""

from __future__ import annotations

from typing import Any

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.review import review_target
from foresize.core.admission.validate import VALIDATORS, validate_policy, validate_target
from foresize.core.api.types import ClusterAIScalePolicy
from foresize.core.cluster.policies import MAX_CHAIN, PolicyIndex


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScalePolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def target(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, **spec},
    }


def index(*objs: dict[str, Any]) -> AdmissionIndex:
    policies = PolicyIndex.build([ClusterAIScalePolicy.model_validate(o) for o in objs])
    return AdmissionIndex(policies=policies)


def test_an_unknown_preset_is_refused_in_spec_preset():
    (problem,) = validate_policy(policy("team", preset="cheap"), index())
    assert problem.startswith("spec.preset: ") and "cost" in problem


def test_a_policy_starting_from_one_that_does_not_exist_is_refused():
    assert validate_policy(policy("team", policy="base"), index()) == [
        "spec.policy: ClusterAIScalePolicy 'base' does not exist"
    ]
    assert validate_policy(policy("team", policy="base"), index(policy("base"))) == []


def test_a_cycle_is_refused_with_the_chain_named():
    """b exists and starts from a: making a start from b closes the loop."""
    (problem,) = validate_policy(policy("a", policy="b"), index(policy("b", policy="a")))
    assert problem == "spec.policy: cycle a -> b -> a"
    (own,) = validate_policy(policy("a", policy="a"), index())
    assert own == "spec.policy: cycle a -> a"


def test_a_chain_longer_than_max_chain_is_refused():
    chain = [policy(f"p{i}", policy=f"p{i + 1}") for i in range(MAX_CHAIN - 1)]
    last = policy(f"p{MAX_CHAIN - 1}")
    assert validate_policy(chain[0], index(*chain, last)) == []  # MAX_CHAIN deep: fine
    longer = policy("top", policy="p0")
    (problem,) = validate_policy(longer, index(*chain, last))
    assert problem == f"spec.policy: chain longer than {MAX_CHAIN}"


def test_a_change_that_makes_a_chain_starting_from_it_too_long_is_refused():
    """p0 -> ... -> p7 is MAX_CHAIN deep; p7 starting from a new base makes p0's chain
    one longer: refused on p7, naming p0 (p7's own chain is two deep)."""
    chain = [policy(f"p{i}", policy=f"p{i + 1}") for i in range(MAX_CHAIN - 1)]
    known = index(*chain, policy(f"p{MAX_CHAIN - 1}"), policy("base"))
    assert validate_policy(policy(f"p{MAX_CHAIN - 1}", preset="cost"), known) == []
    (problem,) = validate_policy(policy(f"p{MAX_CHAIN - 1}", policy="base"), known)
    assert problem == (
        f"spec.policy: makes the chain of ClusterAIScalePolicy p0 longer than {MAX_CHAIN}"
    )


def test_a_target_naming_a_policy_that_does_not_exist_is_refused_only_where_known():
    obj = target(policy="team", vertical={"mode": "autonomous"})
    assert validate_target(obj, index()) == [
        "spec.policy: ClusterAIScalePolicy 'team' does not exist"
    ]
    assert validate_target(obj, index(policy("team"))) == []
    # An index that does not know the cluster's policies (a --state file with none) checks no names.
    assert validate_target(obj, AdmissionIndex()) == []


def test_the_validating_webhook_refuses_a_policy_with_the_field_named():
    assert set(VALIDATORS) == {"AIScaleTarget", "DaemonSetAutoscaler", "ClusterAIScalePolicy"}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": "CREATE",
            "kind": {"group": "foresize.io", "version": "v1", "kind": "ClusterAIScalePolicy"},
            "object": policy("a", policy="b"),
        },
    }
    answer = review_target(review, index(policy("b", policy="a")), 0.0)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"] == "spec.policy: cycle a -> b -> a"
    review["request"]["object"] = policy("a", preset="performance")
    assert review_target(review, index(), 0.0)["response"]["allowed"] is True
