"""ClusterAIScaleTemplate (pure): which AIScaleTargets to create, update and delete.

For every template (in name order) and every Deployment/StatefulSet/Rollout of the kinds
it lists whose labels match its selector, in a namespace it selects (system namespaces
only when listed in includedNamespaces), the template wants one AIScaleTarget named after
the workload, labelled `foresize.io/template: <template>` and carrying the
`foresize.io/revert` finalizer.

- No target for the workload yet -> create.
- A target this template made -> update it when its spec differs from the template's.
- A target someone else made (a user, or a target created by hand): `conflictResolution:
  skip` leaves it and reports it; `override` replaces its spec and labels it as the
  template's. A target made by *another template* is never overridden (the first
  template by name wins), so two overriding templates cannot fight.
- A target this template made whose workload is gone or no longer matches, or whose
  template is gone -> delete (the revert finalizer then puts its pods back).

The shell creates/updates/deletes the returned objects and writes `plan.status` into
each template's status.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from foresize.core.api.target import AIScaleTarget
from foresize.core.api.template import ClusterAIScaleTemplate
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target_fields import normalise_kind
from foresize.core.lifecycle.revert import REVERT_FINALIZER

TEMPLATE_LABEL = "foresize.io/template"
_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "Rollout")


@dataclass(slots=True)
class TemplatePlan:
    create: list[AIScaleTarget] = field(default_factory=list)
    update: list[AIScaleTarget] = field(default_factory=list)  # the full object
    delete: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # template -> "ns/name: why"
    status: dict[str, dict[str, Any]] = field(default_factory=dict)  # template -> status


def _ref(target: AIScaleTarget) -> tuple[str, str, str] | None:
    ref = target.spec.scaleTargetRef
    if ref is None:
        return None
    return (
        normalise_kind(ref.kind),
        str(target.metadata.namespace or "default"),
        str(ref.name),
    )


def _owner_template(target: AIScaleTarget) -> str | None:
    return target.metadata.labels.get(TEMPLATE_LABEL)


def _spec_json(target: AIScaleTarget) -> dict[str, Any]:
    spec: dict[str, Any] = target.spec.model_dump(
        by_alias=True, exclude_none=True, exclude_unset=True, mode="json"
    )
    return spec


@dataclass(slots=True)
class _Claims:
    """One planning pass's bookkeeping: which workloads are claimed, which targets wanted."""

    plan: TemplatePlan
    planned_names: set[str]  # the templates this shard plans
    live_names: set[str]  # templates not being deleted
    by_ref: dict[tuple[str, str, str], AIScaleTarget] = field(default_factory=dict)
    by_name: dict[tuple[str, str], AIScaleTarget] = field(default_factory=dict)
    claimed: set[tuple[str, str, str]] = field(default_factory=set)
    wanted: set[tuple[str, str]] = field(default_factory=set)

    def take(self, ref: tuple[str, str, str], namespace: str, name: str) -> None:
        self.claimed.add(ref)
        self.wanted.add((namespace, name))


def plan_templates(
    snapshot: ClusterSnapshot, templates: Iterable[ClusterAIScaleTemplate] | None = None
) -> TemplatePlan:
    """Reconcile `templates` (default: all of `snapshot.templates`) against the snapshot's
    workloads and AIScaleTargets.

    A shard passes only the templates it owns: claims are still decided over every
    template in the snapshot (the first by name wins, whichever shard plans it), but
    only the given templates' targets are created, updated, reported or deleted. Targets
    of a template that exists nowhere are deleted by any shard (idempotent)."""
    everything = {t.metadata.name: t for t in snapshot.templates}
    planned_names = set(everything) if templates is None else {t.metadata.name for t in templates}
    if templates is not None:
        for t in templates:
            everything.setdefault(t.metadata.name, t)
    ordered = sorted(everything.values(), key=lambda t: t.metadata.name)
    live_names = {t.metadata.name for t in ordered if t.metadata.deletion_timestamp is None}
    claims = _Claims(TemplatePlan(), planned_names, live_names)
    for target in _models(snapshot):
        ref = _ref(target)
        if ref is not None:
            claims.by_ref.setdefault(ref, target)
        claims.by_name[(str(target.metadata.namespace or "default"), target.metadata.name)] = target
    for tmpl in ordered:
        if tmpl.metadata.deletion_timestamp is None:
            _plan_template(snapshot, tmpl, claims)
    _plan_deletions(snapshot, claims)
    return claims.plan


def _models(snapshot: ClusterSnapshot) -> list[AIScaleTarget]:
    """The snapshot's targets as the API models this planner copies and compares (both
    shells parse every object into one; a manifest dict is not a template's to manage)."""
    return [t for t in snapshot.targets if isinstance(t, AIScaleTarget)]


def _plan_template(
    snapshot: ClusterSnapshot, tmpl: ClusterAIScaleTemplate, claims: _Claims
) -> None:
    """Claim the workloads one template selects (in key order); record its status."""
    name = tmpl.metadata.name
    spec = tmpl.spec
    mine = name in claims.planned_names
    made: list[str] = []
    skipped: list[str] = []
    for wl in sorted(snapshot.workloads.values(), key=lambda w: w.key):
        kind = normalise_kind(wl.kind)
        if kind not in _TEMPLATE_KINDS or kind not in spec.kinds:
            continue
        if not spec.selects_namespace(wl.namespace) or not spec.selector.matches(wl.labels):
            continue
        ref = (kind, wl.namespace, wl.name)
        if ref in claims.claimed:
            skipped.append(f"{wl.namespace}/{wl.name}: already claimed by an earlier template")
            continue
        desired = spec.build_target(kind, wl.name, wl.namespace, name)
        if REVERT_FINALIZER not in desired.metadata.finalizers:
            desired.metadata.finalizers.append(REVERT_FINALIZER)
        held, what = _claim_one(claims, ref, desired, tmpl, mine)
        (made if held else skipped).append(what)
    if mine:
        claims.plan.skipped[name] = skipped
        claims.plan.status[name] = {"targets": sorted(made), "skipped": skipped}


def _claim_one(
    claims: _Claims,
    ref: tuple[str, str, str],
    desired: AIScaleTarget,
    tmpl: ClusterAIScaleTemplate,
    mine: bool,
) -> tuple[bool, str]:
    """Decide one selected workload: (True, "ns/name") when the template holds its target
    (created, kept or taken over), else (False, why it is skipped)."""
    _, namespace, wl_name = ref
    name = tmpl.metadata.name
    existing = claims.by_ref.get(ref)
    if existing is None:
        if claims.by_name.get((namespace, wl_name)) is not None:
            return (
                False,
                f"{namespace}/{wl_name}: an AIScaleTarget of that name targets another workload",
            )
        claims.take(ref, namespace, wl_name)
        if mine:
            claims.plan.create.append(desired)
        return True, f"{namespace}/{wl_name}"
    owner = _owner_template(existing)
    ex_ns, ex_name = str(existing.metadata.namespace), existing.metadata.name
    ex_key = f"{existing.metadata.namespace}/{ex_name}"
    if owner == name:
        claims.take(ref, ex_ns, ex_name)
        if mine and _spec_json(existing) != _spec_json(desired):
            claims.plan.update.append(_updated(existing, desired, name))
        return True, ex_key
    if owner is not None and owner in claims.live_names:
        return False, f"{ex_key}: managed by template {owner}"
    if tmpl.spec.conflictResolution != "override":
        return False, f"{ex_key}: exists and conflictResolution is skip"
    claims.take(ref, ex_ns, ex_name)
    if mine:
        claims.plan.update.append(_updated(existing, desired, name))
    return True, ex_key


def _plan_deletions(snapshot: ClusterSnapshot, claims: _Claims) -> None:
    """Targets a template made that it no longer wants (or whose template is gone)."""
    plan = claims.plan
    for t in _models(snapshot):
        owner = _owner_template(t)
        key = (str(t.metadata.namespace or "default"), t.metadata.name)
        if owner is None or key in claims.wanted or t.metadata.deletion_timestamp is not None:
            continue
        if owner in claims.planned_names or owner not in claims.live_names:
            plan.delete.append(key)
    plan.delete.sort()


def _updated(existing: AIScaleTarget, desired: AIScaleTarget, template: str) -> AIScaleTarget:
    """`existing` with the template's spec and ownership label (identity kept)."""
    obj = existing.model_copy(deep=True)
    obj.spec = desired.spec.model_copy(deep=True)
    obj.metadata.labels = {**obj.metadata.labels, TEMPLATE_LABEL: template}
    if REVERT_FINALIZER not in obj.metadata.finalizers:
        obj.metadata.finalizers = [*obj.metadata.finalizers, REVERT_FINALIZER]
    return obj
