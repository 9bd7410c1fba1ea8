"""The start-up boost at admission (issue 25, `cluster.boost`): the pod webhook raises a
new pod's CPU by the policy's factor or to its absolute request, bounded by `max_cpu`
and the container's upperbound, keeps the QoS class, and writes what it would have set
without the boost into `foresize.io/startup-boost` (the planner's unboost reads it)."""

from __future__ import annotations

import json
from typing import Any

from foresize.core.admission.review import review_pod
from foresize.core.cluster.boost import BOOST_ANNOTATION
from support.admission import SUG, apply_patch, decode_patch, idx, pod_json, review, target_manifest


def boosting(boost: dict[str, Any], *, cpu_upper: str | None = None, **kw: Any) -> dict:
    t = target_manifest(suggestion=kw.pop("suggestion", SUG), **kw)
    t["spec"]["vertical"]["startup_boost"] = boost
    if cpu_upper is not None:
        t["spec"]["vertical"]["containers"][0]["cpu"]["upperbound"] = cpu_upper
    return t


def admitted(target: dict, pod: dict | None = None, now: float = 1000.0) -> tuple[dict, dict]:
    pod = pod or pod_json()
    response = review_pod(review(pod), idx(target), now)
    ops = decode_patch(response)
    assert ops is not None, response
    out = apply_patch(pod, ops)
    return out["spec"]["containers"][0]["resources"], out["metadata"]["annotations"]


def test_a_factor_boosts_the_suggested_cpu_and_records_what_to_return_to() -> None:
    res, ann = admitted(boosting({"cpu_factor": 4}))
    assert res["requests"]["cpu"] == "1"  # 4 x the suggested 250m
    assert res["requests"]["memory"] == "256Mi"  # memory is not boosted
    back = json.loads(ann[BOOST_ANNOTATION])
    assert back == {"containers": {"app": {"request": 250}}}
    assert ann["foresize.io/managed"] == "true"


def test_an_absolute_boost_with_a_duration_says_until_when() -> None:
    res, ann = admitted(boosting({"cpu": "2", "duration": "3m"}), now=1000.0)
    assert res["requests"]["cpu"] == "2"
    assert json.loads(ann[BOOST_ANNOTATION])["until"] == 1000.0 + 180


def test_a_boost_is_bounded_by_max_cpu_and_the_upperbound_and_says_so() -> None:
    t = boosting({"cpu_factor": 10, "max_cpu": "2"}, cpu_upper="1500m")
    response = review_pod(review(pod_json()), idx(t), 0.0)
    res = apply_patch(pod_json(), decode_patch(response))["spec"]["containers"][0]["resources"]
    assert res["requests"]["cpu"] == "1500m"
    assert any("bounded by upperbound" in w for w in response["response"]["warnings"])


def test_the_limit_moves_with_the_request_so_the_qos_class_stays() -> None:
    """Guaranteed (request == limit) stays Guaranteed; a Burstable CPU limit is scaled by
    the same factor, so the request never passes it."""
    guaranteed = pod_json(
        containers=[
            {
                "name": "app",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "256Mi"},
                    "limits": {"cpu": "250m", "memory": "256Mi"},
                },
            }
        ]
    )
    res, _ = admitted(boosting({"cpu_factor": 4}), guaranteed)
    assert res["requests"]["cpu"] == res["limits"]["cpu"] == "1"
    assert res["requests"]["memory"] == res["limits"]["memory"]
    burstable = pod_json(
        containers=[
            {"name": "app", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}}
        ]
    )
    res, _ = admitted(boosting({"cpu_factor": 3}, suggestion={}), burstable)
    assert res["requests"]["cpu"] == "300m" and res["limits"]["cpu"] == "900m"


def test_a_pod_with_no_cpu_request_is_not_boosted() -> None:
    bare = pod_json(containers=[{"name": "app", "resources": {"requests": {"memory": "1Gi"}}}])
    response = review_pod(review(bare), idx(boosting({"cpu_factor": 4}, suggestion={})), 0.0)
    assert decode_patch(response) is None


def test_a_target_with_both_or_neither_boost_form_is_refused_naming_the_field() -> None:
    import pytest

    from foresize.core.api.types import parse_target
    from foresize.core.errors import ForesizeError

    with pytest.raises((ForesizeError, ValueError), match="startup_boost"):
        parse_target(boosting({"cpu_factor": 4, "cpu": "1"}))
    with pytest.raises((ForesizeError, ValueError), match="startup_boost"):
        parse_target(boosting({"cpu_factor": 0.5}))


def test_a_settle_boost_records_when_its_usage_settles() -> None:
    """`settle` goes into the annotation with its defaults filled in (the planner reads
    the pod's record, not a policy that may have changed since)."""
    _, ann = admitted(boosting({"cpu_factor": 4, "settle": {"samples": 5}}))
    value = json.loads(ann[BOOST_ANNOTATION])
    assert value["settle"] == {"samples": 5, "below": 1.0, "timeout": 600.0}
    assert "until" not in value
    _, ann = admitted(boosting({"cpu_factor": 4, "settle": {"timeout": "2m", "below": 0.5}}))
    assert json.loads(ann[BOOST_ANNOTATION])["settle"] == {
        "samples": 3,
        "below": 0.5,
        "timeout": 120.0,
    }


def test_a_bad_settle_is_refused_naming_the_field() -> None:
    import pytest

    from foresize.core.api.types import parse_target
    from foresize.core.cluster.target import target_view
    from foresize.core.errors import ForesizeError

    for settle, field in (
        ({"samples": 0}, "samples"),
        ({"samples": 21}, "samples"),
        ({"below": 0}, "below"),
        ({"below": 5}, "below"),
        ({"timeout": "0s"}, "timeout"),
        ({"timeout": "soon"}, "timeout"),
        ({"after": "1m"}, "after"),
    ):
        manifest = boosting({"cpu_factor": 4, "settle": settle})
        with pytest.raises((ForesizeError, ValueError), match=field):
            parse_target(manifest)
        if field != "after":  # the read-model of a target that got past the webhook
            view = target_view(manifest)
            assert view.startup_boost is None
            assert any(f"startup_boost.settle.{field}" in e for e in view.errors), view.errors
