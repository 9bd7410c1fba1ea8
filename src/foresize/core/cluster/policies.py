"""The effective policy of each AIScaleTarget: the cluster's ClusterAIScalePolicies and the
namespaces' `foresize.io/policy` labels looked up, and the levels merged
(`foresize.core.api.hierarchy`), lowest first:

1. `default`: the API's defaults;
2. `cluster`: the ClusterAIScalePolicy named `default`, if there is one;
3. `namespace`: the policy the target's Namespace names in its `foresize.io/policy` label;
4. `workload`: the policy the target names in `spec.policy`;
5. `target`: the target's own fields, its `vertical.containers` bounds included.

A policy is its preset, under its own fields, above the policy it names in `spec.policy`
(a chain, cycles refused). A level that cannot be applied (an unknown policy, an invalid
one - an unknown preset -, a cycle, or fields that make the target's spec invalid) is left
out, named in `status.policy.problems` and a `PolicyResolved` condition that is False: the
levels above it still apply, so a target never acts without the limits it inherited.

`resolve_snapshot` hands the planners a snapshot whose targets carry their effective spec
(and in their status the effective policy and the condition), so every planner and the pod
webhook read one effective spec; `policy_writes` are the status writes that publish it.
A target that is in no hierarchy (no policies in the cluster, no label, no `spec.policy`)
is handed on unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from foresize.core.api.access import JSONValue, KubeObject
from foresize.core.api.access import first as get
from foresize.core.api.cluster_policy import DEFAULT_POLICY, POLICY_LABEL, ClusterAIScalePolicy
from foresize.core.api.hierarchy import DEFAULT_SOURCE, Layer, Merged, flatten, merge
from foresize.core.api.load import format_validation_error
from foresize.core.api.presets import PRESETS
from foresize.core.api.target import (
    AIScaleTarget,
    AIScaleTargetSpec,
    Condition,
    PolicyField,
    PolicyStatus,
)
from foresize.core.cluster.actions import Action, WriteTargetStatus
from foresize.core.cluster.snapshot import ClusterSnapshot, PolicyObject, TargetObject

CONDITION = "PolicyResolved"
POLICY_KEYS = ("policy", "conditions")  # the status fields a policy write sets
MAX_CHAIN = 8
"""A policy may start from another at most this deep: a longer chain is refused like a
cycle (no one reads a policy eight levels deep; a loop that the webhook missed ends)."""
# The target's fields that are its identity, never a policy's.
_OWN_ONLY = ("scaleTargetRef", "selector", "shadow", "policy")

# Reasons of the PolicyResolved condition.
RESOLVED = "Resolved"
LOCAL_BOUNDS_KEPT = "LocalBoundsKept"
NOT_FOUND = "PolicyNotFound"
UNKNOWN_PRESET = "UnknownPreset"
CYCLE = "PolicyCycle"
INVALID = "InvalidPolicy"


@dataclass(frozen=True, slots=True)
class Problem:
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """A target's effective spec (`target`: the object with it), and what `status.policy`
    and the PolicyResolved condition say."""

    target: AIScaleTarget
    status: PolicyStatus
    condition: Condition


@dataclass(slots=True)
class PolicyIndex:
    """The cluster's policies by name: the object, or the validation error of one that
    does not parse (it got past the webhook: it is reported, never applied)."""

    valid: dict[str, ClusterAIScalePolicy] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, policies: Sequence[PolicyObject]) -> PolicyIndex:
        index = cls()
        for obj in policies:
            if isinstance(obj, ClusterAIScalePolicy):
                index.valid[obj.metadata.name] = obj
                continue
            name = str(get(get(obj, "metadata"), "name", default=""))
            try:
                index.valid[name] = ClusterAIScalePolicy.model_validate(
                    {k: v for k, v in obj.items() if k != "status"}
                )
            except ValidationError as exc:
                index.invalid[name] = "; ".join(format_validation_error(exc).splitlines())
        return index

    def __bool__(self) -> bool:
        return bool(self.valid or self.invalid)


def _own_fields(spec: AIScaleTargetSpec | object, *, drop: Sequence[str]) -> dict[str, JSONValue]:
    """The fields a spec sets (not its defaults), in the API's JSON spelling."""
    dump = getattr(spec, "model_dump", None)
    if dump is None:
        return {}
    values: dict[str, JSONValue] = dump(
        by_alias=True, exclude_unset=True, exclude_none=True, mode="json"
    )
    for key in drop:
        values.pop(key, None)
    return values


def policy_layers(
    name: str, index: PolicyIndex, prefix: str, seen: tuple[str, ...] = (), named_by: str = ""
) -> list[Layer] | Problem:
    """The layers of policy `name`, lowest first: the policy it starts from, its preset,
    its own fields; a Problem where the chain breaks (`named_by`: the field that named
    the first policy of the chain, for the message)."""
    chain = (*seen, name)
    if name in seen:
        return Problem(
            CYCLE, f"ClusterAIScalePolicy {seen[0]}: spec.policy: cycle {' -> '.join(chain)}"
        )
    if len(chain) > MAX_CHAIN:
        return Problem(
            CYCLE, f"ClusterAIScalePolicy {seen[0]}: spec.policy: chain longer than {MAX_CHAIN}"
        )
    if name in index.invalid:
        problem = index.invalid[name]
        reason = UNKNOWN_PRESET if problem.startswith("spec.preset") else INVALID
        return Problem(reason, f"ClusterAIScalePolicy {name}: {problem}")
    policy = index.valid.get(name)
    if policy is None:
        where = f"ClusterAIScalePolicy {seen[-1]}: spec.policy: " if seen else named_by
        return Problem(NOT_FOUND, f"{where}ClusterAIScalePolicy {name!r} does not exist")
    source = f"{prefix}/policy:{name}"
    layers: list[Layer] = []
    if policy.spec.policy is not None:
        parent = policy_layers(policy.spec.policy, index, source, chain)
        if isinstance(parent, Problem):
            return parent
        layers += parent
    if policy.spec.preset is not None:
        layers.append(Layer(f"{source}/preset:{policy.spec.preset}", PRESETS[policy.spec.preset]))
    layers.append(Layer(source, _own_fields(policy.spec, drop=("policy", "preset"))))
    return layers


def _levels(
    target: AIScaleTarget, index: PolicyIndex, namespace_labels: Mapping[str, str] | None
) -> list[tuple[str, list[Layer] | Problem]]:
    levels: list[tuple[str, list[Layer] | Problem]] = []
    if DEFAULT_POLICY in index.valid or DEFAULT_POLICY in index.invalid:
        levels.append(("the cluster default", policy_layers(DEFAULT_POLICY, index, "cluster")))
    namespace = target.metadata.namespace or "default"
    named = (namespace_labels or {}).get(POLICY_LABEL)
    if named:
        where = f"Namespace {namespace}: label {POLICY_LABEL}: "
        found = policy_layers(named, index, "namespace", named_by=where)
        levels.append((f"namespace {namespace}'s policy", found))
    if target.spec.policy:
        found = policy_layers(target.spec.policy, index, "workload", named_by="spec.policy: ")
        levels.append(("spec.policy", found))
    return levels


def _validated(merged: Merged) -> AIScaleTargetSpec | str:
    """The merged layers as a spec, or the spec's validation problems in one line."""
    try:
        return AIScaleTargetSpec.model_validate(merged.values)
    except ValidationError as exc:
        return "; ".join(f"spec.{line}" for line in format_validation_error(exc).splitlines())


def resolve(
    target: AIScaleTarget,
    index: PolicyIndex,
    namespace_labels: Mapping[str, str] | None = None,
    now: float = 0.0,
) -> Resolution:
    """The target's effective spec and where each of its fields came from."""
    own = Layer("target", _own_fields(target.spec, drop=("policy",)))
    accepted: list[Layer] = []
    problems: list[Problem] = []
    # A level is tried merged with the levels accepted below it and the target's own
    # fields; a level left out changes nothing, so the last accepted trial is the result
    # (one merge and one validation a target in the common case, not three and two).
    last: tuple[Merged, AIScaleTargetSpec | str] | None = None
    for what, found in _levels(target, index, namespace_labels):
        if isinstance(found, Problem):
            problems.append(Problem(found.reason, f"{found.message}; {what} left out"))
            continue
        merged = merge([*accepted, *found, own])
        trial = _validated(merged)
        if isinstance(trial, str):
            problems.append(Problem(INVALID, f"{found[-1].source}: {trial}; {what} left out"))
            continue
        accepted += found
        last = (merged, trial)
    layers = [*accepted, own]
    if last is None:
        merged = merge(layers)
        last = (merged, _validated(merged))
    merged, result = last
    spec, kept = (result, merged.kept) if not isinstance(result, str) else (target.spec, [])
    status = _status(spec, merged.sources, [layer.source for layer in layers], kept, problems)
    condition = _condition(target, status, problems, kept, now)
    conditions = [c for c in target.status.conditions if c.type != CONDITION] + [condition]
    effective = target.model_copy(
        update={
            "spec": spec,
            "status": target.status.model_copy(update={"policy": status, "conditions": conditions}),
        }
    )
    return Resolution(effective, status, condition)


def _shown(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _status(
    spec: AIScaleTargetSpec,
    sources: Mapping[str, str],
    chain: list[str],
    kept: list[str],
    problems: list[Problem],
) -> PolicyStatus:
    values = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    for key in _OWN_ONLY:
        values.pop(key, None)
    fields = {
        path: PolicyField(value=_shown(value), source=sources.get(path, DEFAULT_SOURCE))
        for path, value in sorted(flatten(values).items())
    }
    return PolicyStatus(
        chain=chain, fields=fields, kept=list(kept), problems=[p.message for p in problems]
    )


def _condition(
    target: AIScaleTarget,
    status: PolicyStatus,
    problems: list[Problem],
    kept: list[str],
    now: float,
) -> Condition:
    if problems:
        state, reason = "False", problems[0].reason
        message = "; ".join(p.message for p in problems)
    elif kept:
        state, reason, message = "True", LOCAL_BOUNDS_KEPT, "; ".join(kept)
    else:
        state, reason, message = "True", RESOLVED, "levels: " + ", ".join(status.chain)
    before = target.status.condition(CONDITION)
    since = now
    if before is not None and before.status == state and before.lastTransitionTime is not None:
        since = before.lastTransitionTime
    return Condition(
        type=CONDITION,
        status=state,  # type: ignore[arg-type]
        reason=reason,
        message=message if len(message) <= 1000 else message[:997] + "...",
        lastTransitionTime=since,
    )


# --------------------------------------------------------------------- the snapshot

# Resolutions, one a target (its uid; a target without one by its content): the target
# as given, its effective object and its policy write, with the inputs they came from
# (the object's identity and content, the policies' and the namespace's content): every
# pass of both shells resolves every target in a hierarchy, and the planners' memo of
# target views is keyed by the object's identity, so an unchanged input must give back
# the same effective object. One entry a uid, so a changed target replaces its entry and
# the memo holds no stale objects (one is enough: the pass and the admission index
# resolve the same objects, each shell's one store of targets); the limit is far above
# any real target count (at 4,096 entries cleared whole, 10,000 targets under a cluster
# default policy missed on every pass, issue 26). Cleared whole past it.
_MEMO_LIMIT = 1 << 16
_MemoKey = tuple[int, str, str, str]
_memo: dict[str, tuple[_MemoKey, AIScaleTarget, AIScaleTarget, WriteTargetStatus | None]] = {}


def _fingerprint(obj: JSONValue) -> str:
    meta = get(obj, "metadata")
    uid, version = get(meta, "uid"), get(meta, "resourceVersion", "resource_version")
    if uid and version:
        return f"{uid}@{version}"
    dump = getattr(obj, "model_dump_json", None)
    return str(dump()) if dump is not None else json.dumps(obj, sort_keys=True, default=repr)


def in_hierarchy(
    target: TargetObject, index: PolicyIndex, namespaces: Mapping[str, Mapping[str, str]]
) -> bool:
    """Whether any level above the target's own fields could apply to it: the cluster
    default exists, its Namespace names a policy or it names one itself (a policy that
    exists but applies to no level of the target leaves it out of the hierarchy)."""
    if DEFAULT_POLICY in index.valid or DEFAULT_POLICY in index.invalid:
        return True
    namespace = str(get(get(target, "metadata"), "namespace", default="default"))
    return bool(get(get(target, "spec"), "policy")) or POLICY_LABEL in namespaces.get(namespace, {})


def resolved_target(
    target: TargetObject,
    index: PolicyIndex,
    namespaces: Mapping[str, Mapping[str, str]],
    policies_key: str,
    now: float,
    labels_keys: dict[str, str] | None = None,
) -> tuple[TargetObject, WriteTargetStatus | None]:
    """The target with its effective spec (itself when it is not an API model: a manifest
    dict is read as written), and the status write that publishes its policy (None when
    its status already says it). A target in no hierarchy has its policy status cleared.
    `labels_keys`: each namespace's labels as the memo compares them, kept by the caller
    for a pass (a namespace's targets share them)."""
    if not isinstance(target, AIScaleTarget):
        return target, None
    if not in_hierarchy(target, index, namespaces):
        return cleared(target)
    namespace = target.metadata.namespace or "default"
    labels = namespaces.get(namespace, {})
    labels_key = labels_keys.get(namespace) if labels_keys is not None else None
    if labels_key is None:
        labels_key = json.dumps(dict(labels), sort_keys=True)
        if labels_keys is not None:
            labels_keys[namespace] = labels_key
    fingerprint = _fingerprint(target)
    key = (id(target), fingerprint, policies_key, labels_key)
    slot = target.metadata.uid or fingerprint
    hit = _memo.get(slot)
    if hit is not None and hit[0] == key and hit[1] is target:
        return hit[2], hit[3]
    resolution = resolve(target, index, dict(labels), now)
    # The write is a function of this very object and its resolution: kept with them,
    # so a pass over unchanged targets neither compares nor dumps their policies.
    write = policy_write(target, resolution)
    if slot not in _memo and len(_memo) >= _MEMO_LIMIT:
        _memo.clear()
    _memo[slot] = (key, target, resolution.target, write)
    return resolution.target, write


def resolve_snapshot(snapshot: ClusterSnapshot) -> tuple[ClusterSnapshot, list[WriteTargetStatus]]:
    """The snapshot with every target's effective spec, and the status writes that publish
    the effective policies that changed (none for a snapshot already resolved)."""
    if snapshot.policies_resolved:
        return snapshot, []
    index = PolicyIndex.build(snapshot.policies)
    policies_key = "|".join(sorted(_fingerprint(p) for p in snapshot.policies))
    targets: list[TargetObject] = []
    writes: list[WriteTargetStatus] = []
    labels_keys: dict[str, str] = {}  # namespace -> its labels as the memo compares them
    for target in snapshot.targets:
        effective, write = resolved_target(
            target, index, snapshot.namespaces, policies_key, snapshot.now, labels_keys
        )
        targets.append(effective)
        if write is not None:
            writes.append(write)
    return replace(snapshot, targets=targets, policies_resolved=True), writes


def fold_policy_writes(
    actions: Sequence[Action], writes: Sequence[WriteTargetStatus]
) -> list[Action]:
    """`actions` with each policy write folded into the same target's status write among
    them (one status write a target a pass: its fields join that write, the conditions
    of which already carry the PolicyResolved condition, read from the effective
    target); a policy write with no such write to join is appended as it is."""
    by_target = {(w.namespace, w.name): w for w in writes}
    out: list[Action] = []
    for action in actions:
        key = (getattr(action, "namespace", ""), getattr(action, "name", ""))
        write = by_target.get(key) if isinstance(action, WriteTargetStatus) else None
        if write is None or not isinstance(action, WriteTargetStatus) or action.kind != write.kind:
            out.append(action)
            continue
        del by_target[key]
        added = tuple(k for k in write.status if k not in action.status)
        status = {**write.status, **action.status}
        out.append(replace(action, status=status, folded=(*action.folded, *added)))
    return [*out, *by_target.values()]


def cleared(target: AIScaleTarget) -> tuple[AIScaleTarget, WriteTargetStatus | None]:
    """A target that no longer uses any policy (the last policy deleted, the label or
    `spec.policy` removed): its `status.policy` and PolicyResolved condition go, so the
    status never names a policy that no longer applies. Itself, and no write, when its
    status names none."""
    if target.status.policy is None and target.status.condition(CONDITION) is None:
        return target, None
    conditions = [c for c in target.status.conditions if c.type != CONDITION]
    effective = target.model_copy(
        update={
            "status": target.status.model_copy(update={"policy": None, "conditions": conditions})
        }
    )
    write = WriteTargetStatus(
        target.metadata.namespace or "default",
        target.metadata.name,
        {
            "policy": None,  # a merge patch's null removes the field
            "conditions": [c.model_dump(mode="json", exclude_none=True) for c in conditions],
        },
        folded=POLICY_KEYS,
    )
    return effective, write


def _comparable(condition: Condition | None) -> tuple[str, str, str] | None:
    return None if condition is None else (condition.status, condition.reason, condition.message)


def policy_write(target: AIScaleTarget, resolution: Resolution) -> WriteTargetStatus | None:
    """The status write of `status.policy` and the PolicyResolved condition, or None when
    the target's status already says what the resolution does."""
    same_policy = target.status.policy == resolution.status
    same_condition = _comparable(target.status.condition(CONDITION)) == _comparable(
        resolution.condition
    )
    if same_policy and same_condition:
        return None
    conditions = [
        c.model_dump(mode="json", exclude_none=True) for c in resolution.target.status.conditions
    ]
    return WriteTargetStatus(
        target.metadata.namespace or "default",
        target.metadata.name,
        {
            "policy": resolution.status.model_dump(mode="json", exclude_none=True),
            "conditions": conditions,
        },
        folded=POLICY_KEYS,
    )


def namespace_labels(namespaces: Sequence[KubeObject]) -> dict[str, dict[str, str]]:
    """Namespace objects (JSON) to name -> labels, the snapshot's `namespaces`."""
    out: dict[str, dict[str, str]] = {}
    for ns in namespaces:
        meta = get(ns, "metadata", default={})
        labels = get(meta, "labels", default={}) or {}
        out[str(get(meta, "name", default=""))] = {str(k): str(v) for k, v in dict(labels).items()}
    return out


__all__ = [
    "CONDITION",
    "MAX_CHAIN",
    "PolicyIndex",
    "Problem",
    "Resolution",
    "cleared",
    "fold_policy_writes",
    "namespace_labels",
    "policy_layers",
    "policy_write",
    "resolve",
    "resolve_snapshot",
]
