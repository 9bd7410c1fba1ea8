"""The memo behind `target_view`/`dsa_view`: an unchanged object is read once, and a
changed one (mutated in place, or a new object) is never given a stale view."""

from __future__ import annotations

import copy
from typing import Any

from foresize.core.api.types import parse_target
from foresize.core.cluster.target import dsa_view, target_view


def _manifest() -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "t-web", "generation": 1},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "vertical": {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}},
        },
    }


def test_unchanged_object_reuses_its_view() -> None:
    target = parse_target(_manifest())
    assert target_view(target) is target_view(target)


def test_model_mutated_in_place_gets_a_fresh_view() -> None:
    target = parse_target(_manifest())
    assert target_view(target).vertical_mode == "autonomous"
    target.spec.vertical.mode = "recommendation"  # same object, same resourceVersion
    assert target_view(target).vertical_mode == "recommendation"


def test_dict_mutated_in_place_gets_a_fresh_view() -> None:
    manifest = _manifest()
    assert target_view(manifest).update_mode == "in_place"
    manifest["spec"]["vertical"]["update_policy"]["update_mode"] = "recreate"
    assert target_view(manifest).update_mode == "recreate"
    manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert target_view(manifest).deleting


def test_equal_objects_keep_their_own_source() -> None:
    first = _manifest()
    second = copy.deepcopy(first)
    assert target_view(first).source is first
    assert target_view(second).source is second


def test_daemonset_autoscaler_view_follows_changes() -> None:
    dsa = {
        "kind": "DaemonSetAutoscaler",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"scaleTargetRef": {"name": "agent"}, "percentile": 90},
    }
    assert dsa_view(dsa).percentile == 90.0
    dsa["spec"]["percentile"] = 95
    assert dsa_view(dsa).percentile == 95.0


def test_object_with_a_resource_version_is_recognised_by_it(monkeypatch) -> None:
    """A served object (uid + resourceVersion) is identified by its version, as Kubernetes
    clients' caches do: it is not serialised on every read (what made every pass slow),
    and a new version of it (a new object, as both shells hand out) is read afresh."""
    manifest = _manifest()
    manifest["metadata"]["resourceVersion"] = "41"
    target = parse_target(manifest)
    first = target_view(target)

    def no_dump(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("a versioned object must not be serialised")

    monkeypatch.setattr(type(target), "model_dump_json", no_dump)
    assert target_view(target) is first
    manifest["metadata"]["resourceVersion"] = "42"
    manifest["spec"]["vertical"]["mode"] = "observe"
    newer = parse_target(manifest)
    assert target_view(newer).vertical_mode == "observe"


def test_ten_thousand_served_targets_are_each_read_once_a_pass() -> None:
    """Issue 26: a pass reads every target. Keyed by object identity and cleared whole at
    4,096 entries, the memo forgot every view in each pass of a 10,000-target cluster."""
    targets = []
    for i in range(10_000):
        manifest = _manifest()
        manifest["metadata"].update(name=f"web-{i}", uid=f"t-{i}", resourceVersion=str(i))
        targets.append(parse_target(manifest))
    first = [target_view(t) for t in targets]
    assert all(target_view(t) is view for t, view in zip(targets, first, strict=True))


def test_two_objects_of_one_version_keep_their_own_views() -> None:
    """The policy hierarchy's effective target is a copy with the same uid and
    resourceVersion but another spec (`cluster.policies`): each object its own view."""
    manifest = _manifest()
    manifest["metadata"]["resourceVersion"] = "7"
    written = parse_target(manifest)
    effective = written.model_copy(deep=True)
    effective.spec.vertical.mode = "observe"  # before anyone read it
    assert target_view(written).vertical_mode == "autonomous"
    assert target_view(effective).vertical_mode == "observe"
    assert target_view(written).vertical_mode == "autonomous"
