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

from foresize.api.access import first as get
from foresize.cluster.snapshot import ClusterSnapshot
from foresize.cluster.target import normalise_kind
from foresize.lifecycle.revert import REVERT_FINALIZER

TEMPLATE_LABEL = "foresize.io/template"
_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "Rollout")


@dataclass(slots=True)
class TemplatePlan:
    create: list[Any] = field(default_factory=list)  # AIScaleTarget models
    update: list[Any] = field(default_factory=list)  # AIScaleTarget models (full object)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # template -> "ns/name: why"
    status: dict[str, dict[str, Any]] = field(default_factory=dict)  # template -> status


def _ref(target: Any) -> tuple[str, str, str] | None:
    ref = get(get(target, "spec"), "scaleTargetRef")
    if ref is None:
        return None
    meta = get(target, "metadata")
    return (
        normalise_kind(get(ref, "kind")),
        str(get(meta, "namespace") or "default"),
        str(get(ref, "name")),
    )


def _owner_template(target: Any) -> str | None:
    labels = get(get(target, "metadata"), "labels", default={}) or {}
    return labels.get(TEMPLATE_LABEL)


def _spec_json(target: Any) -> dict[str, Any]:
    spec: dict[str, Any] = target.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    return spec


def plan_templates(
    snapshot: ClusterSnapshot, templates: Iterable[Any] | None = None
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
    templates = sorted(everything.values(), key=lambda t: t.metadata.name)
    plan = TemplatePlan()
    by_ref: dict[tuple[str, str, str], Any] = {}
    by_name: dict[tuple[str, str], Any] = {}
    for t in snapshot.targets:
        ref = _ref(t)
        if ref is not None:
            by_ref.setdefault(ref, t)
        by_name[(str(t.metadata.namespace or "default"), t.metadata.name)] = t
    claimed: set[tuple[str, str, str]] = set()
    live_names = {t.metadata.name for t in templates if t.metadata.deletion_timestamp is None}
    wanted: set[tuple[str, str]] = set()
    for tmpl in templates:
        name = tmpl.metadata.name
        spec = tmpl.spec
        mine = name in planned_names
        made: list[str] = []
        skipped: list[str] = []
        if tmpl.metadata.deletion_timestamp is not None:
            continue
        for wl in sorted(snapshot.workloads.values(), key=lambda w: w.key):
            kind = normalise_kind(wl.kind)
            if kind not in _TEMPLATE_KINDS or kind not in spec.kinds:
                continue
            if not spec.selects_namespace(wl.namespace) or not spec.selector.matches(wl.labels):
                continue
            ref = (kind, wl.namespace, wl.name)
            if ref in claimed:
                skipped.append(f"{wl.namespace}/{wl.name}: already claimed by an earlier template")
                continue
            desired = spec.build_target(kind, wl.name, wl.namespace, name)
            if REVERT_FINALIZER not in desired.metadata.finalizers:
                desired.metadata.finalizers.append(REVERT_FINALIZER)
            existing = by_ref.get(ref)
            if existing is None:
                clash = by_name.get((wl.namespace, wl.name))
                if clash is not None:
                    skipped.append(
                        f"{wl.namespace}/{wl.name}: an AIScaleTarget of that name targets "
                        "another workload"
                    )
                    continue
                claimed.add(ref)
                wanted.add((wl.namespace, wl.name))
                if mine:
                    plan.create.append(desired)
                made.append(f"{wl.namespace}/{wl.name}")
                continue
            owner = _owner_template(existing)
            ex_key = f"{existing.metadata.namespace}/{existing.metadata.name}"
            if owner == name:
                claimed.add(ref)
                wanted.add((str(existing.metadata.namespace), existing.metadata.name))
                made.append(ex_key)
                if mine and _spec_json(existing) != _spec_json(desired):
                    plan.update.append(_updated(existing, desired, name))
                continue
            if owner is not None and owner in live_names:
                skipped.append(f"{ex_key}: managed by template {owner}")
                continue
            if spec.conflictResolution == "override":
                claimed.add(ref)
                wanted.add((str(existing.metadata.namespace), existing.metadata.name))
                made.append(ex_key)
                if mine:
                    plan.update.append(_updated(existing, desired, name))
            else:
                skipped.append(f"{ex_key}: exists and conflictResolution is skip")
        if mine:
            plan.skipped[name] = skipped
            plan.status[name] = {"targets": sorted(made), "skipped": skipped}
    for t in snapshot.targets:
        owner = _owner_template(t)
        key = (str(t.metadata.namespace or "default"), t.metadata.name)
        if owner is None or key in wanted or t.metadata.deletion_timestamp is not None:
            continue
        if owner in planned_names or owner not in live_names:
            plan.delete.append(key)
    plan.delete.sort()
    return plan


def _updated(existing: Any, desired: Any, template: str) -> Any:
    """`existing` with the template's spec and ownership label (identity kept)."""
    obj = existing.model_copy(deep=True)
    obj.spec = desired.spec.model_copy(deep=True)
    obj.metadata.labels = {**obj.metadata.labels, TEMPLATE_LABEL: template}
    if REVERT_FINALIZER not in obj.metadata.finalizers:
        obj.metadata.finalizers = [*obj.metadata.finalizers, REVERT_FINALIZER]
    return obj
