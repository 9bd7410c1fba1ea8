"""AIScaleTarget, DaemonSetAutoscaler and ClusterAIScalePolicy validation for the webhook
(pure; `VALIDATORS` by kind): the API model's own rules, plus what no model can check
because it needs the other objects of the cluster: no second AIScaleTarget for the same
workload, no second DaemonSetAutoscaler for the same DaemonSet, a policy named in
`spec.policy` exists and its chain has no cycle and is at most `cluster.policies.MAX_CHAIN`
deep; and what needs the zone database: the maintenance windows' zones exist and the
windows do not overlap.

Every rule on one object lives once, in the API model (`foresize.core.api`), the CRD's
CEL rules mirror them with the same messages, and every message starts with the field
path it is about (`spec.vertical.containers[1].name`): the webhook, `foresize validate`
and the API server say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import ValidationError

from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.access import first as get
from foresize.core.api.cluster_policy import ClusterAIScalePolicy
from foresize.core.api.duration import shown
from foresize.core.api.types import KINDS, format_validation_error
from foresize.core.cluster.policies import MAX_CHAIN, PolicyIndex, Problem, policy_layers
from foresize.core.cluster.target_fields import normalise_kind
from foresize.core.cluster.windows import TimeZones, read_maintenance, window_problems
from foresize.core.errors import ForesizeError


def validate_target(
    obj: object, index: AdmissionIndex | None = None, zones: TimeZones | None = None
) -> list[str]:
    """Problems with an AIScaleTarget (manifest dict or API model); [] when valid. An object
    of the wrong shape (a list where a map belongs; the CRD schema refuses those first) is a
    problem too, never an exception the webhook would have to answer with allow. `zones`:
    the zone database the maintenance windows are checked with (their zones must exist,
    windows of different zones must not overlap); without it only what needs none."""
    try:
        problems = model_errors(obj, "AIScaleTarget")
        if not problems:
            problems = window_errors(obj, zones) + named_policy_errors(
                obj, index.policies if index is not None else None
            )
        return [*problems, *_second_target(obj, index)]
    except (TypeError, AttributeError, ValueError) as exc:
        return [_malformed(exc)]


def window_errors(obj: object, zones: TimeZones | None) -> list[str]:
    """What the maintenance windows of a valid object get wrong: a schedule field out of
    range (the model checks a schedule's shape alone), and taken together a zone the
    database does not know, overlapping windows (`cluster.windows.window_problems`). The
    windows of an AIScaleTarget or ClusterAIScalePolicy (`spec.vertical`) and of a
    ClusterAIScaleTemplate's target (`spec.template.spec.vertical`)."""
    spec = get(obj, "spec")
    where = "spec"
    if get(obj, "kind") == "ClusterAIScaleTemplate":
        spec, where = get(get(spec, "template"), "spec"), "spec.template.spec"
    vertical = get(spec, "vertical")
    try:
        policy = read_maintenance(vertical, f"{where}.vertical")
    except ForesizeError as exc:
        return [str(exc)]
    if policy is None:
        return []
    return [
        *policy.problems,
        *window_problems(policy.windows, zones, f"{where}.vertical.maintenance"),
    ]


def named_policy_errors(obj: object, policies: PolicyIndex | None) -> list[str]:
    """The policy a target names in `spec.policy` is one of `policies` and its chain can be
    applied (None: the policies are not known, nothing is checked)."""
    named = get(get(obj, "spec"), "policy")
    if policies is None or not named:
        return []
    found = policy_layers(str(named), policies, "workload", named_by="spec.policy: ")
    if not isinstance(found, Problem):
        return []
    message = found.message
    return [message if message.startswith("spec.policy: ") else f"spec.policy: {message}"]


def validate_policy(
    obj: object, index: AdmissionIndex | None = None, zones: TimeZones | None = None
) -> list[str]:
    """Problems with a ClusterAIScalePolicy: the API model's rules (an unknown preset is
    named in `spec.preset`), and, where the cluster's policies are known, the chain it
    starts (`spec.policy`) with the object in place of the one of its name: every policy
    in it exists, no cycle, at most MAX_CHAIN deep; and no chain of a policy that starts
    from it grows longer than MAX_CHAIN."""
    try:
        problems = model_errors(obj, "ClusterAIScalePolicy") or window_errors(obj, zones)
        if problems:
            return problems
        return policy_chain_errors(obj, index.policies if index is not None else None)
    except (TypeError, AttributeError, ValueError) as exc:
        return [_malformed(exc)]


def policy_chain_errors(obj: object, policies: PolicyIndex | None) -> list[str]:
    """The chain of a valid ClusterAIScalePolicy among `policies` (None: not known)."""
    if policies is None:
        return []
    policy = (
        obj
        if isinstance(obj, ClusterAIScalePolicy)
        else ClusterAIScalePolicy.model_validate(
            {k: v for k, v in dict(obj).items() if k != "status"}  # type: ignore[call-overload]
        )
    )
    name = policy.metadata.name
    trial = PolicyIndex(
        valid={**policies.valid, name: policy},
        invalid={k: v for k, v in policies.invalid.items() if k != name},
    )
    found = policy_layers(name, trial, "cluster")
    if not isinstance(found, Problem):
        return _lengthened(name, policies, trial)
    own = f"ClusterAIScalePolicy {name}: "
    message = found.message.removeprefix(own)
    return [message if message.startswith("spec.policy: ") else f"spec.policy: {message}"]


def _lengthened(name: str, before: PolicyIndex, after: PolicyIndex) -> list[str]:
    """The policies that start from `name` (directly or further down) whose chain the
    change makes longer than MAX_CHAIN: their chain was applied, it would no longer be
    (a cycle always runs through the changed policy, so its own chain finds it)."""
    too_long = f"chain longer than {MAX_CHAIN}"
    return [
        f"spec.policy: makes the chain of ClusterAIScalePolicy {other} longer than {MAX_CHAIN}"
        for other in sorted(after.valid)
        if other != name
        and _chain_problem(other, after, too_long)
        and not _chain_problem(other, before, too_long)
    ]


def _chain_problem(name: str, index: PolicyIndex, text: str) -> bool:
    found = policy_layers(name, index, "cluster")
    return isinstance(found, Problem) and text in found.message


def validate_daemonset_autoscaler(obj: object, index: AdmissionIndex | None = None) -> list[str]:
    """Problems with a DaemonSetAutoscaler: the API model's rules and a second DSA for the
    same DaemonSet."""
    try:
        return [*model_errors(obj, "DaemonSetAutoscaler"), *_second_autoscaler(obj, index)]
    except (TypeError, AttributeError, ValueError) as exc:
        return [_malformed(exc)]


def model_errors(obj: object, kind: str) -> list[str]:
    """What the API model of `kind` refuses, one `path: problem` line each (the words the
    CLI uses). An API model passed in was validated when it was built."""
    if not isinstance(obj, Mapping):
        return []
    data = {k: v for k, v in obj.items() if k != "status"}
    try:
        KINDS[kind].model_validate(data)
    except ValidationError as exc:
        return format_validation_error(exc).splitlines()
    return []


def _second_target(obj: object, index: AdmissionIndex | None) -> list[str]:
    """Another AIScaleTarget already targets the same workload (needs the cluster's view)."""
    spec = get(obj, "spec")
    ref = get(spec, "scaleTargetRef", "scale_target_ref") if spec is not None else None
    if index is None or ref is None:
        return []
    meta = get(obj, "metadata", default={})
    namespace = str(get(meta, "namespace", default="default"))
    kind = normalise_kind(get(ref, "kind"))
    other = index.target_for(kind, namespace, str(get(ref, "name", default="")))
    if other is None or other.name == str(get(meta, "name", default="")):
        return []
    return [
        f"spec.scaleTargetRef: {kind} {namespace}/{get(ref, 'name')} is already targeted "
        f"by AIScaleTarget {other.key}"
    ]


def _second_autoscaler(obj: object, index: AdmissionIndex | None) -> list[str]:
    """Another DaemonSetAutoscaler already scales the same DaemonSet."""
    spec = get(obj, "spec")
    ref = str(get(get(spec, "scaleTargetRef"), "name", default="")) if spec is not None else ""
    if index is None or not ref:
        return []
    meta = get(obj, "metadata", default={})
    namespace = str(get(meta, "namespace", default="default"))
    other = index.by_daemonset.get((namespace, ref))
    if other is None or other.name == str(get(meta, "name", default="")):
        return []
    return [
        f"spec.scaleTargetRef: DaemonSet {namespace}/{ref} is already autoscaled by "
        f"DaemonSetAutoscaler {other.key}"
    ]


def _malformed(exc: Exception) -> str:
    return f"spec: malformed object ({type(exc).__name__}: {shown(str(exc), 120)})"


Validator = Callable[[object, AdmissionIndex | None, TimeZones | None], list[str]]

VALIDATORS: dict[str, Validator] = {
    "AIScaleTarget": validate_target,
    "DaemonSetAutoscaler": lambda obj, index, _zones: validate_daemonset_autoscaler(obj, index),
    "ClusterAIScalePolicy": lambda obj, index, zones: validate_policy(obj, index, zones),
}
"""The validating webhook's checks by kind (`review.review_target`)."""
