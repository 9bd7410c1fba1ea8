"""The pure pod, scale and target decisions (no server): owner chains, QoS, bounds, limits,
OOM floors, pause, DaemonSet seeding, and parity between the JSON path and mutate_pod."""

from __future__ import annotations

import pytest

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import MANAGED_ANNOTATION, decide_pod, mutate_pod
from foresize.core.admission.review import pod_from_json, review_pod, review_scale
from foresize.core.admission.validate import validate_target
from foresize.core.api.cron import cron_error
from foresize.core.api.quantity import GIB, MIB
from foresize.core.api.types import parse_daemonset_autoscaler, parse_target
from foresize.core.cluster.model import (
    Container,
    HorizontalPodAutoscaler,
    HPAMetric,
    OwnerRef,
    Pod,
    PodTemplate,
    ResourceRequirements,
    Workload,
)
from foresize.core.cluster.qos import pod_qos_class
from foresize.core.cluster.snapshot import ClusterSnapshot
from support.admission import (
    SUG,
    apply_patch,
    decode_patch,
    idx,
    pod_json,
    review,
    scale_review,
    target_manifest,
)


def pod(containers, *, owner=OwnerRef("ReplicaSet", "web-5d9f8"), labels=None, ns="shop") -> Pod:
    return Pod(
        namespace=ns,
        name="web-5d9f8-abcde",
        labels=labels if labels is not None else {"app": "web", "pod-template-hash": "5d9f8"},
        owner=owner,
        containers=containers,
    )


def c(name="app", req=None, lim=None) -> Container:
    return Container(name, ResourceRequirements(dict(req or {}), dict(lim or {})))


def test_targets_built_by_tests_are_valid_api_objects():
    # The manifests double as API objects: the index reads the pydantic models.
    t = parse_target(target_manifest(suggestion=SUG, oom_floor={"app": "300Mi"}))
    index = AdmissionIndex.build([t])
    view = index.targets[0]
    assert view.vertical_autonomous and view.suggestion.for_container("app").requests == {
        "cpu": 250,
        "memory": 256 * MIB,
    }
    assert view.oom_floor == {"app": 300 * MIB}


def test_replicaset_chain_via_snapshot_workloads():
    rs = Workload(
        "ReplicaSet", "shop", "web-abc", owner=OwnerRef("Deployment", "web"), template=PodTemplate()
    )
    index = idx(target_manifest(suggestion=SUG), workloads={rs.key: rs})
    p = pod(
        [c(req={"cpu": 100, "memory": 128 * MIB})],
        owner=OwnerRef("ReplicaSet", "web-abc"),
        labels={},
    )
    d = decide_pod(p, None, index, 0.0)
    assert d.changed and d.containers["app"].requests == {"cpu": 250, "memory": 256 * MIB}
    # Without the workloads the unknown ReplicaSet is not guessed without a hash label.
    assert not decide_pod(p, None, idx(target_manifest(suggestion=SUG)), 0.0).changed


def test_statefulset_rollout_and_selector_targets():
    index = idx(
        target_manifest("db", kind="StatefulSet", ref="db", suggestion=SUG),
        target_manifest("ro", kind="Rollout", ref="ro", suggestion=SUG),
        target_manifest("sel", ref=None, selector={"tier": "batch"}, suggestion=SUG),
    )
    base = {"cpu": 100, "memory": 128 * MIB}
    sts = pod([c(req=base)], owner=OwnerRef("StatefulSet", "db"), labels={})
    assert decide_pod(sts, None, index, 0).target.name == "db"
    ro = pod(
        [c(req=base)],
        owner=OwnerRef("ReplicaSet", "ro-7f6c"),
        labels={"rollouts-pod-template-hash": "7f6c"},
    )
    assert decide_pod(ro, None, index, 0).target.name == "ro"
    job = pod([c(req=base)], owner=OwnerRef("Job", "nightly"), labels={"tier": "batch"})
    d = decide_pod(job, None, index, 0)
    assert d.target.name == "sel" and d.changed
    # Another namespace's pod with the same labels is not selected.
    other = pod([c(req=base)], owner=None, labels={"tier": "batch"}, ns="other")
    assert decide_pod(other, None, index, 0).target is None


def test_guaranteed_pod_stays_guaranteed():
    index = idx(target_manifest(suggestion=SUG))
    g = {"cpu": 500, "memory": GIB}
    p = pod([c(req=g, lim=g)])
    new, changed = mutate_pod(p, None, index, 0)
    assert changed and pod_qos_class(new) == "Guaranteed"
    assert (
        new.containers[0].resources.requests
        == new.containers[0].resources.limits
        == {
            "cpu": 250,
            "memory": 256 * MIB,
        }
    )


def test_limit_ratio_applies_only_where_a_limit_is_declared():
    containers = [
        {
            "name": "*",
            "cpu": {"lowerbound": "10m", "limit": {"ratio": 2}},
            "memory": {"lowerbound": "16Mi", "limit": {"ratio": 1.5}},
        }
    ]
    index = idx(target_manifest(suggestion=SUG, containers=containers))
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB}, lim={"memory": 512 * MIB})])
    new, changed = mutate_pod(p, None, index, 0)
    res = new.containers[0].resources
    assert changed
    assert res.requests == {"cpu": 250, "memory": 256 * MIB}
    assert res.limits == {"memory": 384 * MIB}  # no cpu limit added: the key set is kept
    assert pod_qos_class(new) == "Burstable"


def test_request_never_exceeds_an_existing_limit_without_ratio():
    index = idx(target_manifest(suggestion={"app": {"requests": {"cpu": "2", "memory": "256Mi"}}}))
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB}, lim={"cpu": 1000})])
    new, _ = mutate_pod(p, None, index, 0)
    assert new.containers[0].resources.requests["cpu"] == 1000
    assert new.containers[0].resources.limits == {"cpu": 1000}


def test_undeclared_resources_are_not_added():
    index = idx(target_manifest(suggestion=SUG))
    p = pod([c(req={"cpu": 100})])
    new, changed = mutate_pod(p, None, index, 0)
    assert changed and new.containers[0].resources.requests == {"cpu": 250}


def test_best_effort_pod_is_left_alone_with_a_warning():
    index = idx(target_manifest(suggestion=SUG))
    d = decide_pod(pod([c()]), None, index, 0)
    assert not d.changed and "BestEffort" in d.warnings[0]


def test_burstable_never_becomes_guaranteed():
    # cpu and memory limits declared; the suggestion would set requests == limits.
    sug = {"app": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    index = idx(target_manifest(suggestion=sug))
    p = pod([c(req={"cpu": 500, "memory": 512 * MIB}, lim={"cpu": 1000, "memory": GIB})])
    d = decide_pod(p, None, index, 0)
    assert not d.changed and "QoS" in d.warnings[0]


def test_bounds_clamp_the_suggestion():
    containers = [
        {
            "name": "app",
            "cpu": {"lowerbound": "300m", "upperbound": "1"},
            "memory": {"lowerbound": "16Mi", "upperbound": "200Mi"},
        }
    ]
    index = idx(target_manifest(suggestion=SUG, containers=containers))
    new, _ = mutate_pod(pod([c(req={"cpu": 100, "memory": 128 * MIB})]), None, index, 0)
    assert new.containers[0].resources.requests == {"cpu": 300, "memory": 200 * MIB}


def test_container_not_listed_is_not_managed():
    containers = [{"name": "app", "cpu": {"lowerbound": "10m"}}]
    sug = {"*": {"requests": {"cpu": "250m"}}}
    index = idx(target_manifest(suggestion=sug, containers=containers))
    p = pod([c("app", req={"cpu": 100}), c("sidecar", req={"cpu": 100})])
    new, _ = mutate_pod(p, None, index, 0)
    assert [x.resources.requests["cpu"] for x in new.containers] == [250, 100]


def test_oom_floor_raises_memory_even_without_suggestion():
    index = idx(target_manifest(suggestion=None, oom_floor={"app": "600Mi"}))
    new, changed = mutate_pod(pod([c(req={"cpu": 100, "memory": 128 * MIB})]), None, index, 0)
    assert changed and new.containers[0].resources.requests == {"cpu": 100, "memory": 600 * MIB}


def test_paused_cluster_and_deleting_target_leave_template_values():
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB})])
    assert not decide_pod(p, None, idx(target_manifest(suggestion=SUG), paused=True), 0).changed
    t = target_manifest(suggestion=SUG)
    t["metadata"]["deletionTimestamp"] = "2026-11-29T08:00:00Z"
    t["metadata"]["finalizers"] = ["foresize.io/revert"]
    assert not decide_pod(p, None, idx(t), 0).changed


def test_mutate_pod_accepts_a_snapshot_and_a_replicaset_workload_owner():
    rs = Workload("ReplicaSet", "shop", "web-abc", owner=OwnerRef("Deployment", "web"))
    snap = ClusterSnapshot(
        now=0, workloads={rs.key: rs}, targets=[parse_target(target_manifest(suggestion=SUG))]
    )
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB})], owner=None, labels={})
    new, changed = mutate_pod(p, rs, snap, 0)
    assert changed and new.annotations[MANAGED_ANNOTATION] == "true"
    assert p.annotations == {} and p.containers[0].resources.requests["cpu"] == 100  # not mutated


def test_json_path_and_mutate_pod_agree():
    index = idx(
        target_manifest(
            suggestion={"app": {"requests": {"cpu": "333m", "memory": "300Mi"}, "limits": {}}},
            containers=[
                {
                    "name": "*",
                    "cpu": {"lowerbound": "10m"},
                    "memory": {"lowerbound": "1Mi", "limit": {"ratio": 2}},
                }
            ],
        )
    )
    obj = pod_json()
    out = review_pod(review(obj), index, 0.0)
    patched = apply_patch(obj, decode_patch(out))
    via_json = pod_from_json(patched, "shop")
    via_core, changed = mutate_pod(pod_from_json(obj, "shop"), None, index, 0.0)
    assert changed
    assert via_json.containers[0].resources == via_core.containers[0].resources
    assert via_json.annotations == via_core.annotations == {MANAGED_ANNOTATION: "true"}


def test_daemonset_pod_seeded_from_dsa_suggestion():
    dsa = parse_daemonset_autoscaler(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "DaemonSetAutoscaler",
            "metadata": {"name": "agent", "namespace": "mon"},
            "spec": {
                "scaleTargetRef": {"name": "node-agent"},
                "scaleMode": "autonomous",
                "containers": [
                    {"name": "*", "cpu": {"lowerbound": "20m"}, "memory": {"lowerbound": "32Mi"}}
                ],
            },
            "status": {
                "suggestion": {
                    "uid": "d1",
                    "containers": [
                        {"name": "agent", "requests": {"cpu": "50m", "memory": "100Mi"}}
                    ],
                }
            },
        }
    )
    index = AdmissionIndex.build([], daemonset_autoscalers=[dsa])
    p = pod(
        [c("agent", req={"cpu": 200, "memory": 256 * MIB})],
        owner=OwnerRef("DaemonSet", "node-agent"),
        ns="mon",
    )
    new, changed = mutate_pod(p, None, index, 0)
    assert changed and new.containers[0].resources.requests == {"cpu": 50, "memory": 100 * MIB}


def test_scale_decision_rounding_and_bounds():
    index = idx(
        target_manifest(
            "front",
            ref="front",
            vmode=None,
            hmode="autonomous",
            predicted=7,
            min_replicas=2,
            max_replicas=10,
            multiple_of=4,
        )
    )
    out = review_scale(scale_review("front", 3), index, 0.0)
    assert (
        apply_patch(scale_review("front", 3)["request"]["object"], decode_patch(out))["spec"][
            "replicas"
        ]
        == 8
    )
    # The prediction is capped by maxReplicas (multiple of 4 under 10 = 8); a higher write stays.
    assert decode_patch(review_scale(scale_review("front", 12), index, 0.0)) is None


def test_validation_messages_name_fields():
    assert cron_error("*/5 * * * *") is None
    assert "hour" in cron_error("0 25 * * *")
    bad = target_manifest("x", vmode="autonomous", hmode="autonomous")
    bad["spec"]["model"] = {"forecast_cron": "0 99 * * *", "forecast_blocks": "10m"}
    bad["spec"]["vertical"]["containers"] = [
        {"name": "app", "cpu": {"lowerbound": "10m"}},
        {"name": "app", "memory": {"lowerbound": "1Gi", "upperbound": "1Mi"}},
    ]
    # The model's rules, in the model's words: the fields' own checks first...
    assert validate_target(bad) == [
        "spec.model.forecast_cron: '0 99 * * *' hour '99' is outside 0-23",
        "spec.vertical.containers[1].memory.upperbound: 1Mi is below lowerbound 1Gi",
    ]
    # ...then, once they hold, the rules across fields (pydantic runs those only on valid
    # fields), each naming the field it is about.
    bad["spec"]["model"] = {"forecast_cron": "0 9 * * *", "forecast_blocks": "10m"}
    bad["spec"]["vertical"]["containers"][1]["memory"]["upperbound"] = "2Gi"
    assert validate_target(bad) == [
        "spec.vertical.containers[1].name: container 'app' is listed twice (first at"
        " containers[0])",
    ]
    del bad["spec"]["vertical"]["containers"][1]
    assert validate_target(bad) == [
        "spec: only one of vertical.mode and horizontal.mode may be autonomous"
    ]
    # Another target already scales the same Deployment: only the webhook can see that.
    index = idx(target_manifest("first", ref="web"))
    dup = validate_target(target_manifest("second", ref="web"), index)
    assert dup and dup[0].startswith("spec.scaleTargetRef") and "shop/first" in dup[0]
    assert validate_target(target_manifest("first", ref="web"), index) == []


_VERTICAL = ("spec", "vertical")


@pytest.mark.parametrize(
    ("where", "value", "line"),
    [
        # N-08: the webhook re-checked these beside the model; the model's messages now name
        # the same field and say what they got.
        (
            (*_VERTICAL, "containers"),
            [
                {"name": "a", "cpu": {"lowerbound": "10m"}},
                {"name": "a", "cpu": {"lowerbound": "1"}},
            ],
            "spec.vertical.containers[1].name: container 'a' is listed twice (first at"
            " containers[0])",
        ),
        (
            (*_VERTICAL, "containers"),
            [{"name": "a", "memory": {"lowerbound": "1Gi", "upperbound": "1Mi"}}],
            "spec.vertical.containers[0].memory.upperbound: 1Mi is below lowerbound 1Gi",
        ),
        (
            (*_VERTICAL, "containers"),
            [{"name": "a", "cpu": {"lowerbound": "10m", "limit": {"ratio": 0.5}}}],
            "spec.vertical.containers[0].cpu.limit.ratio: Input should be greater than or"
            " equal to 1, got 0.5",
        ),
        (
            (*_VERTICAL, "disruption"),
            {"max_disrupted": "200%"},
            "spec.vertical.disruption.max_disrupted: must be an integer >= 1 or a percentage"
            " (e.g. 3 or 20%), not '200%'",
        ),
        (
            (*_VERTICAL, "update_policy"),
            {"update_mode": "inplace"},
            "spec.vertical.update_policy.update_mode: must be one of initial, recreate,"
            " in_place, in_place_or_recreate, not 'inplace'",
        ),
        (
            ("spec", "scaleTargetRef", "name"),
            "",
            "spec.scaleTargetRef.name: required (must not be empty)",
        ),
        (
            ("spec", "model"),
            {"mode": "percentile", "percentile_value": 150},
            "spec.model.percentile_value: Input should be less than or equal to 100, got 150",
        ),
        (
            ("spec", "model"),
            {"forecast_interval": "30m", "forecast_blocks": "10m"},
            "spec.model: forecast_interval (30m) must not exceed forecast_blocks (10m)",
        ),
    ],
)
def test_the_webhook_answers_each_model_rule_in_the_models_words(where, value, line):
    obj = target_manifest("x")
    parent = obj
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = value
    assert validate_target(obj) == [line]


def test_planner_overrides_are_read_live_and_win_over_status():
    from foresize.core.cluster.model import ContainerSuggestion, Suggestion

    live: dict = {}
    floors: dict = {}
    index = AdmissionIndex.build(
        [parse_target(target_manifest(suggestion=SUG))], suggestions=live, oom_floors=floors
    )
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB})])
    assert decide_pod(p, None, index, 0).containers["app"].requests == {
        "cpu": 250,
        "memory": 256 * MIB,
    }
    live["shop/web"] = Suggestion("s2", 0.0, {"app": ContainerSuggestion("app", {"cpu": 400})})
    floors["shop/web"] = {"app": 700 * MIB}
    assert decide_pod(p, None, index, 0).containers["app"].requests == {
        "cpu": 400,
        "memory": 700 * MIB,
    }


def test_expired_oom_floor_from_status_is_ignored():
    t = target_manifest(suggestion=None, oom_floor={"app": "600Mi"})
    t["status"]["oom_floors"][0]["until"] = "2026-01-05T01:00:00Z"
    index = idx(t)
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB})])
    until = index.targets[0].oom_floor_until["app"]
    assert decide_pod(p, None, index, until - 1).changed
    assert not decide_pod(p, None, index, until + 1).changed


def test_selector_targets_honour_match_expressions():
    t = target_manifest("sel", ref=None, selector={"tier": "batch"}, suggestion=SUG)
    t["spec"]["selector"]["matchExpressions"] = [
        {"key": "track", "operator": "NotIn", "values": ["canary"]}
    ]
    index = idx(t)
    base = {"cpu": 100, "memory": 128 * MIB}
    stable = pod([c(req=base)], owner=None, labels={"tier": "batch", "track": "stable"})
    canary = pod([c(req=base)], owner=None, labels={"tier": "batch", "track": "canary"})
    assert decide_pod(stable, None, index, 0).changed
    assert decide_pod(canary, None, index, 0).target is None
    only_expr = target_manifest("expr", ref=None, selector={}, suggestion=SUG)
    only_expr["spec"]["selector"] = {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    assert decide_pod(canary, None, idx(only_expr), 0).changed


# --------------------------------------------------------------------------- HPA guard


def hpa_on_cpu(kind: str = "Deployment", name: str = "web") -> HorizontalPodAutoscaler:
    return HorizontalPodAutoscaler(
        "shop", name, kind, name, 2, 10, [HPAMetric("Resource", "cpu", 70)]
    )


def test_hpa_scaled_resource_keeps_its_template_value_at_admission():
    # architecture §3.2: by default autonomous mode leaves the HPA's resource alone; admission
    # must agree with the vertical planner so new and running replicas are sized alike.
    leave = parse_target(target_manifest(suggestion=SUG))
    snap = ClusterSnapshot(now=0, targets=[leave], hpas=[hpa_on_cpu()])
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB})])
    new, changed = mutate_pod(p, None, snap, 0)
    assert changed and new.annotations[MANAGED_ANNOTATION] == "true"
    assert new.containers[0].resources.requests == {"cpu": 100, "memory": 256 * MIB}
    # An HPA on another workload, or on a custom metric, does not hold anything back.
    other = ClusterSnapshot(now=0, targets=[leave], hpas=[hpa_on_cpu(name="api")])
    assert mutate_pod(p, None, other, 0)[0].containers[0].resources.requests["cpu"] == 250
    custom = HorizontalPodAutoscaler("shop", "web", "Deployment", "web", 2, 10, [HPAMetric("Pods")])
    snap_custom = ClusterSnapshot(now=0, targets=[leave], hpas=[custom])
    assert mutate_pod(p, None, snap_custom, 0)[0].containers[0].resources.requests["cpu"] == 250
    # Only cpu suggested and the HPA scales on cpu: nothing to change, no annotation.
    only_cpu = parse_target(target_manifest(suggestion={"app": {"requests": {"cpu": "250m"}}}))
    snap_only = ClusterSnapshot(now=0, targets=[only_cpu], hpas=[hpa_on_cpu()])
    new, changed = mutate_pod(p, None, snap_only, 0)
    assert not changed and MANAGED_ANNOTATION not in new.annotations


def test_hpa_override_gives_new_pods_both_resources():
    manifest = target_manifest(suggestion=SUG)
    manifest["spec"]["vertical"]["hpa_resource_policy"] = "override"
    snap = ClusterSnapshot(now=0, targets=[parse_target(manifest)], hpas=[hpa_on_cpu()])
    new, changed = mutate_pod(pod([c(req={"cpu": 100, "memory": 128 * MIB})]), None, snap, 0)
    assert changed
    assert new.containers[0].resources.requests == {"cpu": 250, "memory": 256 * MIB}


def test_hpa_guard_for_selector_target_uses_the_pods_controller():
    t = parse_target(target_manifest(ref=None, selector={"app": "web"}, suggestion=SUG))
    p = pod([c(req={"cpu": 100, "memory": 128 * MIB})])
    on_web = AdmissionIndex.build([t], hpas=[hpa_on_cpu()])
    assert decide_pod(p, None, on_web, 0).containers["app"].requests == {
        "cpu": 100,
        "memory": 256 * MIB,
    }
    on_other = AdmissionIndex.build([t], hpas=[hpa_on_cpu(name="other")])
    assert decide_pod(p, None, on_other, 0).containers["app"].requests["cpu"] == 250


def test_hpa_guard_same_on_the_json_path_and_from_a_state_file(tmp_path):
    import yaml

    from foresize.shells.webhook.state_file import load_state_file
    from support.kube_objects import hpa

    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([target_manifest(suggestion=SUG), hpa()]))
    index = load_state_file(path)
    obj = pod_json()
    patched = apply_patch(obj, decode_patch(review_pod(review(obj), index, 0.0)))
    res = patched["spec"]["containers"][0]["resources"]["requests"]
    assert res["cpu"] == "100m" and res["memory"] == "256Mi"


def test_a_pod_two_selector_targets_select_belongs_to_neither():
    base = {"cpu": 100, "memory": 128 * MIB}
    a = target_manifest("batch", ref=None, selector={"tier": "batch"}, suggestion=SUG)
    b = target_manifest("nightly", ref=None, selector={"job": "nightly"}, suggestion=SUG)
    index = idx(a, b)
    both = pod([c(req=base)], owner=None, labels={"tier": "batch", "job": "nightly"})
    assert decide_pod(both, None, index, 0).target is None
    only = pod([c(req=base)], owner=None, labels={"tier": "batch"})
    assert decide_pod(only, None, index, 0).target.name == "batch"


def test_no_annotation_only_patch_when_no_container_matches_the_decision():
    # Audit reliability F-12: a container whose name is not a string (`"name": 5`) is
    # decided under "5"; the patch then changed no resource but still set the annotation,
    # breaking "annotated only when the webhook changed resources".
    from foresize.core.admission.review import pod_patch
    from foresize.core.cluster.model import ResourceRequirements

    obj = pod_json(containers=[{"name": 5, "image": "x", "resources": {}}])
    assert pod_patch(obj, {"5": ResourceRequirements({"cpu": 300})}) == []
    named = pod_json(containers=[{"name": "app", "image": "x", "resources": {}}])
    ops = pod_patch(named, {"app": ResourceRequirements({"cpu": 300})})
    assert [op["path"] for op in ops] == ["/spec/containers/0/resources", "/metadata/annotations"]


def test_a_create_on_a_pod_subresource_is_never_mutated():
    """Only the creation of a pod itself is sized: a CREATE on a subresource (binding,
    eviction) passes untouched, even if its object looked like a pod."""
    index = idx(target_manifest(suggestion=SUG))
    obj = pod_json()
    assert decode_patch(review_pod(review(obj), index, 0.0)) is not None
    for sub in ("binding", "eviction"):
        out = review_pod(review(obj, sub_resource=sub), index, 0.0)
        assert out["response"]["allowed"] is True
        assert decode_patch(out) is None and "warnings" not in out["response"]


def test_a_pod_the_decision_leaves_as_it_is_gets_no_patch_and_is_not_recorded():
    """Already at the suggested size: no patch (so no managed annotation) and the change
    recorder (metrics, Events) is not told about a change that did not happen."""
    index = idx(target_manifest(suggestion=SUG))
    obj = pod_json(
        containers=[
            {
                "name": "app",
                "image": "nginx",
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
            }
        ]
    )
    told: list = []
    out = review_pod(review(obj), index, 0.0, on_change=lambda p, d: told.append(p))
    assert out["response"]["allowed"] is True and decode_patch(out) is None
    assert told == []


def test_a_failing_change_recorder_never_costs_the_pod_its_patch():
    index = idx(target_manifest(suggestion=SUG))

    def broken(pod, decision):
        raise RuntimeError("metrics backend down")

    out = review_pod(review(pod_json()), index, 0.0, on_change=broken)
    ops = decode_patch(out)
    assert ops is not None and any(op["path"].endswith("/resources") for op in ops)
    assert "warnings" not in out["response"]
