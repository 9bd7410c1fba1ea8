"""Fuzzing (hypothesis, derandomized and bounded) of the policy hierarchy's inputs that
cross a trust boundary: ClusterAIScalePolicy objects (anyone with the right to create one,
or an object that got past a webhook that was down) and the `foresize.io/policy` label of
a Namespace. Whatever they hold, the webhook answers with the request's uid and any refusal
names a field; the pass's resolution never raises, every target keeps a valid effective
spec and its own fields, and a level that cannot apply is reported, never applied."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.review import review_target
from foresize.core.admission.validate import validate_policy
from foresize.core.api.types import AIScaleTarget, AIScaleTargetSpec
from foresize.core.cluster.policies import CONDITION, PolicyIndex, resolve_snapshot
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import target_view

_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAMES = st.sampled_from(["default", "team", "fast", "a", "b", "missing", "", "Bad_Name", "x" * 300])
JUNK: Any = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
QUANTITY = st.sampled_from(["10m", "500m", "2", "64Mi", "1Gi", "-1", "lots", "1e400", 0, 3.5])


@st.composite
def containers(draw: Any) -> list[Any]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        entry: dict[str, Any] = {"name": draw(st.sampled_from(["*", "app", "sidecar", ""]))}
        for resource in ("cpu", "memory"):
            if draw(st.booleans()):
                bounds = {}
                for bound in ("lowerbound", "upperbound"):
                    if draw(st.booleans()):
                        bounds[bound] = draw(QUANTITY)
                entry[resource] = bounds
        out.append(entry if draw(st.integers(0, 9)) else draw(JUNK))
    return out


@st.composite
def policy_specs(draw: Any) -> Any:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["preset"] = draw(
            st.sampled_from(["cost", "balanced", "performance", "batch", "cheap", 3])
        )
    if draw(st.booleans()):
        spec["policy"] = draw(NAMES)
    if draw(st.booleans()):
        spec["model"] = {
            "mode": draw(st.sampled_from(["cost_optimized", "percentile", "nope"])),
            **(
                {"percentile_value": draw(st.sampled_from([50, 99, 200, "x"]))}
                if draw(st.booleans())
                else {}
            ),
        }
    if draw(st.booleans()):
        vertical: dict[str, Any] = {
            "mode": draw(st.sampled_from(["autonomous", "recommendation", "off", "weird"]))
        }
        if draw(st.booleans()):
            vertical["containers"] = draw(containers())
        if draw(st.booleans()):
            vertical["update_policy"] = {
                "update_mode": draw(st.sampled_from(["in_place", "recreate", "later"]))
            }
        spec["vertical"] = vertical
    if draw(st.integers(0, 5)) == 0:
        spec[draw(st.text(max_size=6))] = draw(JUNK)
    return spec if draw(st.integers(0, 12)) else draw(JUNK)


@st.composite
def policy_objects(draw: Any) -> dict[str, Any]:
    meta: Any = {"name": draw(NAMES)}
    if draw(st.integers(0, 12)) == 0:
        meta = draw(JUNK)
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "ClusterAIScalePolicy",
        "metadata": meta,
        "spec": draw(policy_specs()),
    }


def target(policy: str | None) -> AIScaleTarget:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "vertical": {"containers": [{"name": "app", "memory": {"upperbound": "2Gi"}}]},
    }
    if policy:
        spec["policy"] = policy
    return AIScaleTarget.model_validate(
        {
            "metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "1"},
            "spec": spec,
        }
    )


@_SETTINGS
@given(obj=policy_objects(), others=st.lists(policy_objects(), max_size=3))
def test_the_webhook_answers_every_policy_and_names_the_field_it_refuses(obj, others):
    valid = PolicyIndex.build([o for o in others if isinstance(o.get("metadata"), dict)])
    problems = validate_policy(obj, AdmissionIndex(policies=valid))
    for problem in problems:
        assert isinstance(problem, str)
        assert problem.startswith(("spec", "metadata", "kind", "apiVersion")), problem
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": "CREATE",
            "kind": {"kind": "ClusterAIScalePolicy"},
            "object": obj,
        },
    }
    answer = review_target(review, AdmissionIndex(policies=valid), 0.0)["response"]
    assert answer["uid"] == "u1"
    assert answer["allowed"] is (not problems)


@_SETTINGS
@given(
    objs=st.lists(policy_objects(), max_size=4),
    label=st.one_of(st.none(), NAMES, st.text(max_size=20)),
    # A target's own spec.policy is a valid name (its model refuses others first).
    named=st.one_of(st.none(), st.sampled_from(["default", "team", "fast", "a", "missing"])),
)
def test_resolution_never_raises_and_keeps_the_target_s_own_fields(objs, label, named):
    own = target(named)
    labels = {"foresize.io/policy": label} if label is not None else {}
    snap = ClusterSnapshot(now=0.0, targets=[own], policies=objs, namespaces={"shop": labels})
    resolved, writes = resolve_snapshot(snap)
    (effective,) = resolved.targets
    AIScaleTargetSpec.model_validate(effective.spec.model_dump(by_alias=True, exclude_none=True))
    view = target_view(effective)
    assert view.ref_name == "web"
    app = next(c for c in effective.spec.vertical.containers if c.name == "app")
    assert app.memory is not None and app.memory.upperbound is not None  # the local bound
    status = effective.status.policy
    if status is None:  # in no hierarchy: handed on unchanged
        assert effective is own and writes == []
        return
    condition = effective.status.condition(CONDITION)
    assert condition is not None
    assert (condition.status == "False") is bool(status.problems)
    assert all(isinstance(p, str) and p for p in status.problems)
