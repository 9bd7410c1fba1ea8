"""One home per concept (issue 28 step 2, review B5 / N-06 / N-07 / seed N6): where two
readers used to hold their own copy of a rule and disagreed, each test here asks both
of today's readers the question that split them and requires one answer; where two
readers must differ, the difference is named in the test."""

from __future__ import annotations

import pytest

from foresize.core.api.types import parse_target
from foresize.core.api.vocabulary import UPDATE_MODES
from foresize.core.cluster.target import target_view
from foresize.core.errors import ForesizeError


def _target(update_mode: object) -> dict[str, object]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "vertical": {"mode": "autonomous", "update_policy": {"update_mode": update_mode}},
        },
    }


@pytest.mark.parametrize(
    "spelling",
    [
        *UPDATE_MODES,
        " Recreate ",
        "IN_PLACE",
        "inplace",
        "InPlace",
        "in-place",
        "inplaceorrecreate",
        "in-place-or-recreate",
        "evict",
    ],
)
def test_the_read_model_accepts_exactly_the_update_modes_the_api_accepts(spelling: str) -> None:
    """The read-model used to keep its own aliases (`inplace`, `-` for `_`) that the API
    (and the CRD's enum) refuse, so a plain dict read by the vertical worker could resize
    in place a target `kubectl apply` would have refused."""
    try:
        api: str | None = target_view(parse_target(_target(spelling))).update_mode
    except ForesizeError:
        api = None
    view = target_view(_target(spelling))
    read = None if view.errors else view.update_mode
    assert read == api


def _deployment(**meta: object) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", **meta},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}},
    }


def test_a_state_file_workload_is_read_by_the_kube_shells_converter(tmp_path) -> None:
    """The state file had its own converter that read `replicas: 0` (a workload scaled to
    zero) as 1. The one named difference left: a state file without a namespace means
    `default`, as `kubectl apply` reads it."""
    import yaml

    from foresize.core.cluster.kubejson import workload_from
    from foresize.shells.webhook.state_file import load_state_file

    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([_deployment(), _deployment(namespace="shop")]))
    loaded = load_state_file(path).workloads
    assert set(loaded) == {"Deployment/default/web", "Deployment/shop/web"}
    for key, wl in loaded.items():
        assert wl == workload_from("Deployment", _deployment(namespace=wl.namespace)), key
        assert wl.replicas == 0


def _pod_with_bad_fields() -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "s", "creationTimestamp": "yesterday"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "lots"}}}]},
        "status": {"startTime": "2026-01-01T00:00:00.25Z"},
    }


def test_kubernetes_json_is_read_with_the_apis_one_rfc3339_parser_and_the_core_does_not_log(
    caplog,
) -> None:
    """kubejson had its own RFC 3339 pair (logging and returning None where the API's
    raises; formatting to the second where the API keeps the fraction), and logged from
    the core. Now the one parser is `api.fields.parse_timestamp`; what a converter drops
    is handed back in `dropped`, and the kube shell's watch state logs it."""
    import logging

    from foresize.core.api.fields import parse_timestamp
    from foresize.core.cluster.kubejson import pod_from
    from foresize.shells.kube.state import ClusterState

    dropped: list[str] = []
    with caplog.at_level(logging.DEBUG):
        pod = pod_from(_pod_with_bad_fields(), dropped=dropped)
    assert caplog.records == []
    assert pod.start_time == parse_timestamp("2026-01-01T00:00:00.25Z")
    assert pod.creation_time == 0.0 and pod.containers[0].resources.requests == {}
    assert dropped == [
        "pod s/p containers[app].resources.requests: cpu quantity 'lots' is not a Kubernetes"
        " quantity; ignored",
        "pod s/p metadata.creationTimestamp: unparseable timestamp 'yesterday' ignored",
    ]
    with caplog.at_level(logging.WARNING, logger="foresize.shells.kube.state"):
        ClusterState().apply_event("Pod", "ADDED", _pod_with_bad_fields())
    assert [r.getMessage() for r in caplog.records] == dropped


def test_status_times_are_written_by_the_apis_one_formatter() -> None:
    """Foresize's own status times (the suggestion's window and created_at, the vertical
    state, the lifecycle's) are one format: `api.fields.format_timestamp`, the fraction
    kept. The named difference: Kubernetes' own times (an Event's, kubectl's restartedAt)
    are whole seconds, as a metav1.Time is."""
    from foresize.core.api.fields import format_timestamp

    assert format_timestamp(1.5) == "1970-01-01T00:00:01.500000Z"
    assert format_timestamp(1.5, whole_seconds=True) == "1970-01-01T00:00:01Z"
    assert format_timestamp(2.0) == format_timestamp(2.0, whole_seconds=True)


def _vertical_target(**vertical: object) -> dict[str, object]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "vertical": {"mode": "autonomous", **vertical},
        },
    }


@pytest.mark.parametrize("hpa_policy", [None, "override", " Override ", "LEAVE", "maybe"])
def test_the_seed_defaults_and_the_hpa_resource_policy_have_one_home(hpa_policy) -> None:
    """seed.md N6: `stall_timeout` (2 min) and `hpa_resource_policy` (leave) were written in
    the models and again in the read-model, which also spelled the policy its own way
    (`" Override "` refused by it, accepted by the API). Both now read `api.vocabulary`."""
    from foresize.core.api import vocabulary
    from foresize.core.api.policy import DisruptionPolicy, VerticalSpec

    extra = {} if hpa_policy is None else {"hpa_resource_policy": hpa_policy}
    raw = target_view(_vertical_target(**extra))
    try:
        api = target_view(parse_target(_vertical_target(**extra)))
    except ForesizeError:
        api = None
    assert (None if raw.errors else raw.hpa_resource_policy) == (api and api.hpa_resource_policy)
    defaults = DisruptionPolicy.model_fields
    assert defaults["stall_timeout"].default is vocabulary.DEFAULT_STALL_TIMEOUT
    assert defaults["interval"].default is vocabulary.DEFAULT_INTERVAL
    assert defaults["max_disrupted"].default is vocabulary.DEFAULT_MAX_DISRUPTED
    hpa_default = VerticalSpec.model_fields["hpa_resource_policy"].default
    assert hpa_default is vocabulary.DEFAULT_HPA_RESOURCE_POLICY
    assert (raw.stall_timeout, raw.disruption_interval, raw.max_disrupted) == (
        vocabulary.DEFAULT_STALL_TIMEOUT,
        vocabulary.DEFAULT_INTERVAL,
        vocabulary.DEFAULT_MAX_DISRUPTED,
    )


def test_the_recommend_tables_round_and_floor_by_the_operators_rules() -> None:
    """review N-06 / N-07: the `foresize recommend` tables rounded 0.3 cores (float32, as
    the stores keep it) to 301m where the operator writes 300m, and computed their own OOM
    floor (1.2 x the peak before each kill: no request, no compounding). They now call the
    operator's rounding and `apply_ooms`; the one named difference is the hold (every kill
    in the report's window counts)."""
    from types import SimpleNamespace

    import numpy as np

    from foresize.core.api.quantity import MIB
    from foresize.core.history import SeriesKey, TraceSeries
    from foresize.core.recommend.oom import OOMState, apply_ooms
    from foresize.front.report.recommendations import build_rows

    key = SeriesKey("shop", "web", "app")
    t = 1_700_000_000.0 + 300.0 * np.arange(288)
    cpu = np.full(t.size, float(np.float32(0.3)))
    memory = np.full(t.size, 100.0 * MIB)
    kills = [float(t[200]), float(t[202])]
    current = SimpleNamespace(
        cpu_request=0.5, cpu_limit=None, memory_request=200.0 * MIB, memory_limit=None
    )
    (row,) = build_rows(
        [TraceSeries(key, t, cpu, memory)],
        [],
        quantiles={"cpu": 0.95, "memory": 0.99},
        lookback=86400.0,
        resources={key: current},
        oom_kills={key: kills},
    )
    assert row.cpu.request == 300
    hit = apply_ooms(OOMState(), kills, [100.0 * MIB] * 2, 200 * MIB, kills[-1], 86400.0)
    assert hit.floor > 1.2 * 200 * MIB  # the second kill compounds on the first
    assert row.memory.request == hit.floor


@pytest.mark.parametrize(
    ("suggested_limits", "expected"),
    [
        ({"cpu": 300}, (500, 500)),  # the suggestion's own limit below its request: raised
        ({}, (200, 200)),  # the pod's limit, left by the suggestion: caps the request
        ({"cpu": 800}, (500, 800)),
    ],
)
def test_admission_and_the_in_place_resize_settle_a_request_over_the_limit_alike(
    suggested_limits: dict[str, int], expected: tuple[int, int]
) -> None:
    """review B5: the webhook's sizer (`cluster.sizing.size_container`) raised a limit
    below the request, the in-place planner (`vertical.desired.desired_containers`)
    lowered the request to it, so one suggestion gave a new pod and a resized pod
    different resources. Both now call `cluster.sizing.settle_request_over_limit`."""
    from foresize.core.cluster.model import (
        Container,
        ContainerSuggestion,
        Pod,
        ResourceRequirements,
        Suggestion,
    )
    from foresize.core.cluster.sizing import size_container
    from foresize.core.cluster.target_fields import ContainerPolicy
    from foresize.core.vertical.desired import desired_containers

    container = Container("app", ResourceRequirements({"cpu": 100}, {"cpu": 200}))
    cs = ContainerSuggestion("app", {"cpu": 500}, dict(suggested_limits))
    admitted = size_container(container, ContainerPolicy("app"), cs, None, "Burstable")
    pod = Pod(namespace="s", name="p", containers=[container])
    (resized,), problem = desired_containers(pod, Suggestion("u", 0.0, {"app": cs}), frozenset())
    assert problem is None
    assert (admitted.requests["cpu"], admitted.limits["cpu"]) == expected
    assert (resized.resources.requests["cpu"], resized.resources.limits["cpu"]) == expected


def test_the_recommender_decides_hysteresis_with_the_apis_one_threshold() -> None:
    """review B5: `recommend.core` had a second `Threshold` (one float per resource) whose
    scalar check said a no-change under an absolute 0 threshold was significant where the
    API's said not. The recommender now holds the target's own `api.hysteresis.Threshold`
    per resource and asks its `significant`."""
    from foresize.core.api import hysteresis
    from foresize.core.recommend import core
    from foresize.core.recommend.params import RecommendParams

    assert core.Threshold is hysteresis.Threshold
    view = target_view(
        parse_target(
            _vertical_target(
                scaling_behavior={"scale_up": {"type": "absolute", "absolute": {"cpu": "50m"}}}
            )
        )
    )
    params = RecommendParams.from_view(view)
    assert params.scale_up["cpu"] is view.scale_up
    assert not params.scale_up["memory"].significant("memory", 100, 100)
