"""ClusterAIScaleTemplate: create, keep in sync, skip or override, and delete AIScaleTargets."""

from __future__ import annotations

from foresize.core.api.types import parse_target, parse_template
from foresize.core.cluster.model import Workload
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.lifecycle.templates import TEMPLATE_LABEL, plan_templates
from support.admission import target_manifest


def template(name="fleet", conflict="skip", included=None, excluded=None, mode="recommendation"):
    spec = {
        "selector": {"matchLabels": {"tier": "web"}},
        "conflictResolution": conflict,
        "template": {
            "metadata": {"labels": {"team": "platform"}},
            "spec": {
                "vertical": {
                    "mode": mode,
                    "containers": [{"name": "*", "cpu": {"lowerbound": "10m"}}],
                }
            },
        },
    }
    if included is not None:
        spec["includedNamespaces"] = included
    if excluded is not None:
        spec["excludedNamespaces"] = excluded
    return parse_template(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "ClusterAIScaleTemplate",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def wl(kind, ns, name, tier="web"):
    return Workload(kind, ns, name, labels={"tier": tier})


def snap(workloads, targets=(), templates=()):
    return ClusterSnapshot(
        now=0.0,
        workloads={w.key: w for w in workloads},
        targets=list(targets),
        templates=list(templates),
    )


FLEET = [
    wl("Deployment", "shop", "web"),
    wl("StatefulSet", "shop", "db"),
    wl("Deployment", "shop", "batch", tier="batch"),  # labels do not match
    wl("DaemonSet", "shop", "agent"),  # not a template kind
    wl("Deployment", "kube-system", "coredns"),  # system namespace: excluded by default
    wl("Deployment", "blog", "web"),
    wl("ReplicaSet", "shop", "web-abc"),
]


def test_creates_targets_for_matching_workloads_outside_system_namespaces():
    plan = plan_templates(snap(FLEET, templates=[template()]))
    made = {
        (t.metadata.namespace, t.metadata.name, t.spec.scaleTargetRef.kind) for t in plan.create
    }
    assert made == {
        ("shop", "web", "Deployment"),
        ("shop", "db", "StatefulSet"),
        ("blog", "web", "Deployment"),
    }
    t = plan.create[0]
    assert t.metadata.labels == {"team": "platform", TEMPLATE_LABEL: "fleet"}
    assert "foresize.io/revert" in t.metadata.finalizers
    assert t.spec.vertical.mode == "recommendation"
    assert plan.status["fleet"]["targets"] == ["blog/web", "shop/db", "shop/web"]


def test_namespace_filters():
    only_blog = plan_templates(snap(FLEET, templates=[template(included=["blog", "kube-system"])]))
    assert {(t.metadata.namespace, t.metadata.name) for t in only_blog.create} == {
        ("blog", "web"),
        ("kube-system", "coredns"),  # a system namespace only when listed explicitly
    }
    not_shop = plan_templates(snap(FLEET, templates=[template(excluded=["shop"])]))
    assert {(t.metadata.namespace, t.metadata.name) for t in not_shop.create} == {("blog", "web")}


def user_target():
    return parse_target(target_manifest("mine", ref="web", vmode="autonomous"))


def test_conflict_skip_leaves_a_user_target_and_reports_it():
    plan = plan_templates(snap(FLEET, targets=[user_target()], templates=[template()]))
    assert ("shop", "web") not in {(t.metadata.namespace, t.metadata.name) for t in plan.create}
    assert not plan.update and not plan.delete
    assert any("shop/mine" in s and "skip" in s for s in plan.skipped["fleet"])


def test_conflict_override_takes_over_a_user_target():
    plan = plan_templates(
        snap(FLEET, targets=[user_target()], templates=[template(conflict="override")])
    )
    assert len(plan.update) == 1
    updated = plan.update[0]
    assert updated.metadata.name == "mine" and updated.metadata.uid == "uid-mine"
    assert updated.spec.vertical.mode == "recommendation"
    assert updated.metadata.labels[TEMPLATE_LABEL] == "fleet"


def test_owned_targets_follow_the_template_and_are_deleted_when_unmatched():
    first = plan_templates(snap(FLEET, templates=[template()]))
    existing = first.create
    # Same template: nothing to do.
    again = plan_templates(snap(FLEET, targets=existing, templates=[template()]))
    assert not again.create and not again.update and not again.delete
    # The template's spec changes: its targets are updated.
    changed = plan_templates(snap(FLEET, targets=existing, templates=[template(mode="autonomous")]))
    assert len(changed.update) == 3 and all(
        t.spec.vertical.mode == "autonomous" for t in changed.update
    )
    # The workload's labels no longer match: its target goes.
    relabelled = [
        w if w.key != "Deployment/blog/web" else wl("Deployment", "blog", "web", "x") for w in FLEET
    ]
    gone = plan_templates(snap(relabelled, targets=existing, templates=[template()]))
    assert gone.delete == [("blog", "web")]
    # The template is deleted: all its targets go; user targets stay.
    orphaned = plan_templates(snap(FLEET, targets=[*existing, user_target()], templates=[]))
    assert orphaned.delete == [("blog", "web"), ("shop", "db"), ("shop", "web")]


def test_two_templates_never_fight_over_a_workload():
    a, b = template("a-first", conflict="override"), template("b-second", conflict="override")
    created = plan_templates(snap(FLEET, templates=[a, b]))
    assert {t.metadata.labels[TEMPLATE_LABEL] for t in created.create} == {"a-first"}
    later = plan_templates(snap(FLEET, targets=created.create, templates=[a, b]))
    assert not later.update and not later.create and not later.delete
    assert later.skipped["b-second"]


def test_a_shard_planning_some_templates_leaves_the_others_targets_alone():
    a, b = template("a-first"), template("b-second", conflict="override")
    # Shard 2 owns only b: a still claims the workloads first, and a's targets stay.
    created_by_a = plan_templates(snap(FLEET, templates=[a, b]), [a]).create
    shard2 = plan_templates(snap(FLEET, targets=created_by_a, templates=[a, b]), [b])
    assert not shard2.create and not shard2.update and not shard2.delete
    assert set(shard2.status) == {"b-second"}
    # Before a's targets exist, shard 2 still does not create them for b.
    early = plan_templates(snap(FLEET, templates=[a, b]), [b])
    assert not early.create
    # Template a is gone: an overriding template adopts its targets ...
    adopted = plan_templates(snap(FLEET, targets=created_by_a, templates=[b]), [b])
    assert len(adopted.update) == 3 and not adopted.delete
    assert {t.metadata.labels[TEMPLATE_LABEL] for t in adopted.update} == {"b-second"}
    # ... otherwise a shard that owns no template at all still deletes the orphans.
    other = template("c-other")
    other.spec.selector.matchLabels = {"tier": "none"}
    orphans = plan_templates(snap(FLEET, targets=created_by_a, templates=[other]), [other])
    assert len(orphans.delete) == 3
