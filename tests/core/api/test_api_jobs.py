"""A target whose scaleTargetRef is a CronJob (`api.jobs`): sized at creation only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.api.types import parse_target
from foresize.core.cluster.target import target_view
from foresize.core.errors import ForesizeError


def _target(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "report", "namespace": "batch"},
        "spec": {"scaleTargetRef": {"kind": "CronJob", "name": "report"}, **spec},
    }


def test_a_cronjob_target_defaults_to_sizing_at_creation() -> None:
    target = parse_target(_target({"vertical": {"mode": "autonomous"}}))
    assert target.spec.scaleTargetRef is not None
    assert target.spec.scaleTargetRef.apiVersion == "batch/v1"
    assert target_view(target).update_mode == "initial"
    # `recreate`, the API default the API server writes into the stored object, reads as
    # initial: every run is a recreation, a running job is never evicted.
    for mode in ("initial", "recreate"):
        explicit = {"vertical": {"mode": "autonomous", "update_policy": {"update_mode": mode}}}
        assert target_view(parse_target(_target(explicit))).update_mode == "initial"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"vertical": {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}}},
            "vertical.update_policy.update_mode: a CronJob's pods are sized when they are created",
        ),
        ({"horizontal": {"mode": "recommendation"}}, "horizontal: a CronJob has no replicas"),
        (
            {"vertical": {"mode": "autonomous", "startup_boost": {"cpu_factor": 2}}},
            "vertical.startup_boost: a CronJob's pods are not resized",
        ),
    ],
)
def test_what_a_cronjob_cannot_take_is_refused_naming_the_field(spec, field) -> None:
    with pytest.raises(ForesizeError, match=field.replace("(", r"\(")):
        parse_target(_target(spec))


def test_a_manifest_dict_asking_to_resize_a_cronjob_is_read_as_initial_with_an_error() -> None:
    obj = _target(
        {"vertical": {"mode": "autonomous", "update_policy": {"update_mode": "in_place"}}}
    )
    view = target_view(obj)
    assert view.update_mode == "initial"
    (error,) = view.errors
    assert "spec.vertical.update_policy.update_mode: a CronJob's pods are sized" in error


def test_templates_do_not_create_targets_for_cronjobs() -> None:
    from foresize.core.api.types import parse_object

    with pytest.raises(ForesizeError, match="kinds"):
        parse_object(
            {
                "apiVersion": "foresize.io/v1",
                "kind": "ClusterAIScaleTemplate",
                "metadata": {"name": "all"},
                "spec": {"selector": {"matchLabels": {"a": "b"}}, "kinds": ["CronJob"]},
            },
            "template",
        )


_MODES = st.sampled_from(["autonomous", "recommendation", "observe", "auto", "bogus", 3, None])
_UPDATE = st.sampled_from(["initial", "recreate", "in_place", "in_place_or_recreate", "x", 1])
_VERTICAL = st.fixed_dictionaries(
    {},
    optional={
        "mode": _MODES,
        "update_policy": st.fixed_dictionaries({}, optional={"update_mode": _UPDATE}),
        "startup_boost": st.sampled_from([{"cpu_factor": 4}, {"cpu": "1"}, {}, "x"]),
        "containers": st.sampled_from(
            [[], [{"name": "*", "memory": {"upperbound": "4Gi"}}], [{"name": 1}], "x"]
        ),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    vertical=st.one_of(_VERTICAL, st.none(), st.text(max_size=5)),
    horizontal=st.one_of(st.none(), st.just({"mode": "autonomous"}), st.just("x")),
)
def test_fuzz_cronjob_targets_are_refused_naming_a_field_or_sized_at_creation_only(
    vertical: Any, horizontal: Any
) -> None:
    """Whatever a CronJob target says (it crosses the webhook): the models refuse it with
    a ForesizeError or a validation error, never another exception; one they accept reads
    as sized at creation only, with no boost and no horizontal; the read-model of the
    same manifest (a target that got past a webhook that was down) never raises and never
    resizes a run's pods."""
    spec: dict[str, Any] = {}
    if vertical is not None:
        spec["vertical"] = vertical
    if horizontal is not None:
        spec["horizontal"] = horizontal
    manifest = _target(spec)
    view = target_view(manifest)
    assert view.update_mode == "initial"
    try:
        target = parse_target(manifest)
    except (ForesizeError, ValueError):
        return
    accepted = target_view(target)
    assert accepted.update_mode == "initial"
    assert accepted.startup_boost is None and target.spec.horizontal is None
