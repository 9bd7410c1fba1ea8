"""The coordinated mode (issue 27 parts 1 and 4, `hpa_resource_policy: coordinate`): the
per-pod request and the replica floor chosen together from the forecast total, so the
HPA's utilisation sits at its target and its arithmetic (the simulator's upstream replica
calculator) settles instead of chasing the request; bad HPAs are reported and left alone;
the HPA is never written."""

from __future__ import annotations

import math
from typing import Any

import pytest

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import decide_pod
from foresize.core.admission.scale import decide_scale
from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import EmitEvent, PatchScale, WriteTargetStatus
from foresize.core.cluster.coordination import (
    Pair,
    coordinate,
    coordination_problem,
    scale_up_allowance,
)
from foresize.core.cluster.model import (
    Container,
    HorizontalPodAutoscaler,
    HPAMetric,
    HPAScalingPolicy,
    HPAScalingRules,
    OwnerRef,
    Pod,
    PodTemplate,
    ResourceRequirements,
    VerticalClaim,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.errors import ForesizeError
from foresize.core.horizontal.coordinate import coordinated_replicas_at, plan_coordination
from foresize.shells.sim.cluster.hpa import PodMetric, PodSample, resource_replicas

CPU_60 = [HPAMetric("Resource", "cpu", target_utilization=60)]


def hpa(
    metrics: list[HPAMetric] | None = None,
    lo: int = 3,
    hi: int = 6,
    name: str = "web",
    scale_up: HPAScalingRules | None = None,
) -> HorizontalPodAutoscaler:
    return HorizontalPodAutoscaler(
        "pay",
        name,
        "Deployment",
        "web",
        lo,
        hi,
        list(CPU_60 if metrics is None else metrics),
        scale_up=scale_up,
    )


def hpa_proposes(replicas: int, request: int, total: float) -> int:
    """What the upstream replica calculator (simulator, tests/test_sim_hpa.py) proposes for
    `replicas` Ready pods of `request` millicores sharing `total` millicores, at 60%."""
    pods = [PodSample(f"p{i}", request * 1000) for i in range(replicas)]
    metrics = {f"p{i}": PodMetric(int(total / replicas * 1000)) for i in range(replicas)}
    proposed, _, _ = resource_replicas(replicas, 60, pods, metrics, "cpu", 0.0)
    return proposed


# ----------------------------------------------------------------------- the equilibrium


def test_the_pair_puts_the_hpas_utilisation_inside_its_band_and_the_hpa_settles():
    """1350m forecast, 500m template at 60%, aimed half way into the 10% band (63%): the
    HPA's own count at 63% (ceil(1350/315) = 5) and 429m a pod, so 1350 / (5 x 429) = 63%:
    the calculator (ratio 1.05, inside its tolerance) proposes 5 again."""
    pair = coordinate(hpa(), 1350, 500)
    assert pair is not None and (pair.replicas, pair.request) == (5, 429)
    assert hpa_proposes(5, 429, 1350) == 5
    assert "forecast utilisation 63% (target 60%, no HPA change up to 66%)" in pair.reason


@pytest.mark.parametrize("total", [400, 900, 1350, 1700, 2500, 3300])
def test_no_loop_where_a_per_pod_vertical_sizer_runs_to_max_replicas(total):
    """The fight (VPA's docs, kubernetes/autoscaler #6060): a request sized from per-pod
    usage (x1.15) under an HPA at 60% drives the replicas up to maxReplicas, as the
    calculator runs; the coordinated pair reads only the forecast total, so re-deciding it
    after the HPA acts gives the same pair and the HPA proposes no change."""
    n, request = 3, 500
    for _ in range(10):  # VPA-style: HPA acts, the request follows per-pod usage
        n = max(3, min(6, hpa_proposes(n, request, total)))
        request = math.ceil(total / n * 1.15)
    assert n == 6
    pair = coordinate(hpa(), total, 500)
    assert pair is not None
    for _ in range(3):
        assert coordinate(hpa(), total, 500, previous=pair) == pair
        assert max(3, min(6, hpa_proposes(pair.replicas, pair.request, total))) == pair.replicas


def test_the_count_is_kept_while_the_request_stays_near_the_templates():
    """Damping: with 5 x 429m published, a forecast of 1600m would have the HPA's count at
    6, but 5 pods of 508m (within 25% of the 500m template) serve it: the replicas stay,
    the request moves; at 2100m (667m a pod) the count moves to 7. A small move of the
    request at the same count (1300m: 413m) keeps the published request."""
    prev = Pair(5, 429, "")
    kept = coordinate(hpa(hi=10), 1600, 500, previous=prev)
    assert kept is not None and (kept.replicas, kept.request) == (5, 508)
    assert "5 replicas kept" in kept.reason
    assert hpa_proposes(5, 508, 1600) == 5
    moved = coordinate(hpa(hi=10), 2100, 500, previous=prev)
    assert moved is not None and (moved.replicas, moved.request) == (7, 477)
    write = recommender_write()
    plan = plan_coordination(
        snapshot(hpa()), [write], {"pay/web": {"cpu": 1300.0}}, 0.0, {"pay/web": prev}
    )
    got = plan.pairs["pay/web"]
    assert (got.replicas, got.request) == (5, 429)
    assert write.status["vertical_suggestion"]["containers"][0]["requests"]["cpu"] == "429m"
    assert not [a for a in plan.actions if isinstance(a, EmitEvent)]  # unchanged: no Event


def test_savings_come_where_the_hpa_cannot_act_at_min_replicas():
    """300m at minReplicas 3: the HPA sits at 3 x 500m (20%); coordinated, 3 x 159m."""
    pair = coordinate(hpa(), 300, 500)
    assert pair is not None and (pair.replicas, pair.request) == (3, 159)
    assert "at minReplicas 3" in pair.reason
    # the count is kept at minReplicas however low the request goes
    again = coordinate(hpa(), 150, 500, previous=pair)
    assert again is not None and (again.replicas, again.request) == (3, 80)


def test_the_request_never_drops_below_what_carries_the_days_peak_within_max_replicas():
    """A quiet forecast (300m) after a day that peaked at 1500m: 3 x 159m would let the
    peak drive the HPA to maxReplicas 6 at 159m (6 x 159m x 60% = 572m < 1500m), so the
    request stays at ceil(1500 / (6 x 60%)) = 417m; never above the template's 500m (a peak
    of 3000m does not fit at 500m either: the HPA alone would sit at maxReplicas too)."""
    pair = coordinate(hpa(), 300, 500, peak=1500)
    assert pair is not None and (pair.replicas, pair.request) == (3, 417)
    assert "the day's peak fits within maxReplicas 6" in pair.reason
    assert hpa_proposes(6, 417, 1500) <= 6
    capped = coordinate(hpa(), 300, 500, peak=3000)
    assert capped is not None and capped.request == 500
    busy = coordinate(hpa(), 1350, 500, peak=1500)  # the forecast's own request is higher
    assert busy is not None and (busy.replicas, busy.request) == (5, 429)


def test_at_max_replicas_the_request_carries_what_more_replicas_cannot():
    pair = coordinate(hpa(), 5000, 500)
    assert pair is not None and (pair.replicas, pair.request) == (6, 1323)
    assert "at maxReplicas 6" in pair.reason


def test_bounds_hold_the_request_and_the_replicas_follow():
    """An upper bound of 400m: 400m a pod, and the HPA's count at it: ceil(1350/252) = 6."""
    pair = coordinate(hpa(), 1350, 500, upper=400)
    assert pair is not None and (pair.replicas, pair.request) == (6, 400)
    assert "upper bound" in pair.reason
    # the target's own min/max narrow the HPA's
    narrowed = coordinate(hpa(), 300, 500, min_replicas=4)
    assert narrowed is not None and narrowed.replicas == 4


def test_average_value_target_each_pod_carries_its_share():
    pair = coordinate(hpa([HPAMetric("Resource", "cpu", target_average_value=300)]), 1350, 500)
    assert pair is not None and (pair.replicas, pair.request) == (5, 270)


# ----------------------------------------------------------------------- behavior


def test_the_floor_rises_no_faster_than_the_hpas_scale_up_behaviour():
    assert scale_up_allowance(3, None) == 7  # defaults: max(100%, 4 pods)
    one = HPAScalingRules(policies=(HPAScalingPolicy("Pods", 1, 60),))
    assert scale_up_allowance(3, one) == 4
    both_min = HPAScalingRules(
        select_policy="Min",
        policies=(HPAScalingPolicy("Pods", 4, 60), HPAScalingPolicy("Percent", 50, 60)),
    )
    assert scale_up_allowance(4, both_min) == 6
    assert scale_up_allowance(3, HPAScalingRules(select_policy="Disabled")) == 3


# ----------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (hpa(lo=7, hi=6), "minReplicas 7 > maxReplicas 6"),
        (hpa([*CPU_60, HPAMetric("External")]), "has 2 metrics"),
        (
            hpa([*CPU_60, HPAMetric("External")], name="keda-hpa-web"),
            "ScaledObject pay/web has 2 triggers",
        ),
        (hpa([HPAMetric("External")]), "External metric, which Foresize cannot read"),
        (hpa([HPAMetric("Pods")]), "Pods metric"),
        (hpa([HPAMetric("ContainerResource", "cpu", 60)]), "one container's cpu"),
        (hpa([HPAMetric("Resource", "cpu")]), "no averageUtilization or averageValue"),
        (hpa([HPAMetric("Resource", "ephemeral-storage", 60)]), "does not size"),
    ],
)
def test_hpas_that_cannot_be_coordinated_say_why(bad, says):
    problem = coordination_problem(bad)
    assert problem is not None and says in problem
    assert coordinate(bad, 1350, 500) is None


# ----------------------------------------------------------------------- the pass


def coordinating_target(**spec: Any) -> Any:
    vertical = {
        "mode": "autonomous",
        "update_policy": {"update_mode": "in_place"},
        "hpa_resource_policy": "coordinate",
        "containers": [{"name": "*", "cpu": {"lowerbound": "50m"}}],
    }
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "pay", "uid": "t-web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "vertical": vertical},
        }
    )


def snapshot(h: HorizontalPodAutoscaler, replicas: int = 3) -> ClusterSnapshot:
    tmpl = PodTemplate(
        containers=[Container("app", ResourceRequirements({"cpu": 500, "memory": 1 << 30}, {}))]
    )
    web = Workload("Deployment", "pay", "web", replicas=replicas, template=tmpl)
    return ClusterSnapshot(
        now=0.0, workloads={web.key: web}, hpas=[h], targets=[coordinating_target()]
    )


def recommender_write() -> WriteTargetStatus:
    """What the recommender publishes: its per-pod CPU (300m) and memory."""
    return WriteTargetStatus(
        "pay",
        "web",
        {
            "hasEnoughDataToScale": True,
            "vertical_suggestion": {
                "uid": "raw",
                "containers": [{"name": "app", "requests": {"cpu": "300m", "memory": "900Mi"}}],
            },
        },
    )


def test_a_fresh_suggestion_is_rewritten_to_the_pair_with_status_event_and_floor():
    s = snapshot(hpa())
    write = recommender_write()
    plan = plan_coordination(s, [write], {"pay/web": {"cpu": 1350.0}}, 0.0, {})
    (entry,) = write.status["vertical_suggestion"]["containers"]
    assert entry["requests"] == {"cpu": "429m", "memory": "900Mi"}
    assert write.status["vertical_suggestion"]["uid"] != "raw"
    assert write.status["horizontal_suggestion"]["replicas"] == 5
    record = write.status["coordination"]
    assert (record["state"], record["replicas"], record["request"]) == ("Coordinated", 5, "429m")
    assert record["hpa"] == "HorizontalPodAutoscaler pay/web" and "60%" in record["reason"]
    # part 4: the floor is the count the coordinated request needs, ceil(1350 / (429 x 63%))
    assert [a for a in plan.actions if isinstance(a, PatchScale)] == [
        PatchScale("pay", "Deployment", "web", 5, target="pay/web")
    ]
    (event,) = [a for a in plan.actions if isinstance(a, EmitEvent)]
    assert event.reason == "Coordinated" and event.message.startswith("5 replicas x cpu 429m")
    # the same pair again: no new Event
    again = plan_coordination(
        s, [recommender_write()], {"pay/web": {"cpu": 1350.0}}, 0.0, plan.pairs
    )
    assert not [a for a in again.actions if isinstance(a, EmitEvent)]


def test_the_floor_respects_the_hpas_scale_up_policies():
    slow = hpa(scale_up=HPAScalingRules(policies=(HPAScalingPolicy("Pods", 1, 60),)))
    plan = plan_coordination(
        snapshot(slow), [recommender_write()], {"pay/web": {"cpu": 1350.0}}, 0.0, {}
    )
    assert [a.replicas for a in plan.actions if isinstance(a, PatchScale)] == [4]
    off = hpa(scale_up=HPAScalingRules(select_policy="Disabled"))
    plan = plan_coordination(
        snapshot(off), [recommender_write()], {"pay/web": {"cpu": 1350.0}}, 0.0, {}
    )
    assert not [a for a in plan.actions if isinstance(a, PatchScale)]


def test_without_a_forecast_of_the_total_nothing_uncoordinated_is_published():
    write = recommender_write()
    plan_coordination(snapshot(hpa()), [write], {}, 0.0, {})
    (entry,) = write.status["vertical_suggestion"]["containers"]
    assert entry["requests"] == {"memory": "900Mi"}  # cpu taken out, memory kept
    assert write.status["coordination"]["state"] == "Waiting"


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (
            hpa([*CPU_60, HPAMetric("External")], name="keda-hpa-web"),
            "ScaledObject pay/web has 2 triggers",
        ),
        (hpa([HPAMetric("External")]), "External metric, which Foresize cannot read"),
        (hpa(lo=7, hi=6), "minReplicas 7 > maxReplicas 6"),
    ],
    ids=["scaledobject-with-several-triggers", "unreadable-metric", "min-above-max"],
)
def test_bad_hpa_status_says_what_was_ignored_and_the_hpa_is_never_written(bad, says):
    """The issue's bad input through the pass: the target's status names the HPA (or the
    ScaledObject) and why it was ignored; no pair, no floor, no scale, no write to the HPA,
    and the recommender's CPU is left as under `leave` (the vertical guard's business).
    The fourth case, an HPA naming a missing target, is the last test of this file."""
    write = recommender_write()
    plan = plan_coordination(snapshot(bad), [write], {"pay/web": {"cpu": 1350.0}}, 0.0, {})
    record = write.status["coordination"]
    assert record["state"] == "Ignored"
    assert says in record["reason"]
    assert "left alone" in record["reason"]
    assert plan.actions == []  # no scale, and nothing addressed to the HPA
    assert plan.pairs == {}
    assert "horizontal_suggestion" not in write.status
    (entry,) = write.status["vertical_suggestion"]["containers"]
    assert entry["requests"]["cpu"] == "300m"  # not rewritten to a pair


# ----------------------------------------------------------------------- admission


def new_pod() -> Pod:
    return Pod(
        "pay",
        "web-x",
        owner=OwnerRef("ReplicaSet", "web-rs"),
        containers=[Container("app", ResourceRequirements({"cpu": 500, "memory": 1 << 30}, {}))],
    )


def published(h: HorizontalPodAutoscaler) -> tuple[ClusterSnapshot, AdmissionIndex]:
    s = snapshot(h)
    write = recommender_write()
    plan_coordination(s, [write], {"pay/web": {"cpu": 1350.0}}, 0.0, {})
    target = coordinating_target()
    target.status = target.status.model_validate(write.status)
    s.targets = [target]
    return s, AdmissionIndex.from_snapshot(s)


def test_new_replicas_are_admitted_at_the_coordinated_request_and_floored_at_its_count():
    s, index = published(hpa())
    web = s.workload("Deployment", "pay", "web")
    decision = decide_pod(new_pod(), web, index, 0.0)
    assert decision.containers["app"].requests["cpu"] == 429
    # the */scale webhook keeps an HPA write of 3 at the coordinated floor 5
    assert decide_scale("Deployment", "pay", "web", 3, index, 0.0).replicas == 5


def test_under_a_bad_hpa_admission_leaves_the_hpas_resource_at_the_template():
    _, index = published(hpa([*CPU_60, HPAMetric("External")]))
    web = snapshot(hpa()).workload("Deployment", "pay", "web")
    decision = decide_pod(new_pod(), web, index, 0.0)
    assert decision.containers["app"].requests["cpu"] == 500
    assert decision.containers["app"].requests["memory"] == 900 << 20


def test_the_policy_is_part_of_the_api_and_a_wrong_word_names_the_field():
    assert coordinating_target().spec.vertical.hpa_resource_policy == "coordinate"
    with pytest.raises(ForesizeError) as err:
        parse_target(
            {
                "apiVersion": "foresize.io/v1",
                "kind": "AIScaleTarget",
                "metadata": {"name": "web", "namespace": "pay"},
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                    "vertical": {"hpa_resource_policy": "coordinated"},
                },
            }
        )
    assert "spec.vertical.hpa_resource_policy" in str(err.value)
    assert "coordinate" in str(err.value)


# ----------------------------------------------------------------------- part 5


def test_a_workload_another_vertical_autoscaler_claims_gets_no_pair_and_no_floor():
    """Part 5: under a VPA in Auto the coordinated mode sets neither a request nor a
    replica floor; status names the VPA (the vertical guard adds the condition and the
    Event, tests/core/vertical/test_double_control.py). A VPA in Off does not claim."""
    claimed = snapshot(hpa())
    claimed.vertical_claims = [
        VerticalClaim("VerticalPodAutoscaler", "pay", "web-vpa", "Deployment", "web", "Auto")
    ]
    write = recommender_write()
    plan = plan_coordination(claimed, [write], {"pay/web": {"cpu": 1350.0}}, 0.0, {})
    record = write.status["coordination"]
    assert record["state"] == "Ignored"
    assert "VerticalPodAutoscaler pay/web-vpa (updateMode Auto)" in record["reason"]
    assert plan.actions == [] and plan.pairs == {}
    assert "horizontal_suggestion" not in write.status
    off = snapshot(hpa())
    off.vertical_claims = [
        VerticalClaim("VerticalPodAutoscaler", "pay", "web-vpa", "Deployment", "web", "Off")
    ]
    write = recommender_write()
    plan = plan_coordination(off, [write], {"pay/web": {"cpu": 1350.0}}, 0.0, {})
    assert write.status["coordination"]["state"] == "Coordinated"


def test_an_hpa_naming_a_missing_workload_is_reported_and_nothing_is_coordinated():
    """Bad input: the HPA (and the target) name Deployment pay/web, which does not exist:
    status says what was ignored and why; no scale, no Event, the HPA is not written."""
    s = snapshot(hpa())
    s.workloads = {}
    write = recommender_write()
    plan = plan_coordination(s, [write], {"pay/web": {"cpu": 1350.0}}, 0.0, {})
    record = write.status["coordination"]
    assert record["state"] == "Ignored" and record["hpa"] == "HorizontalPodAutoscaler pay/web"
    assert "names Deployment pay/web, which does not exist" in record["reason"]
    assert plan.actions == [] and plan.pairs == {}


def test_the_coordinated_count_at_a_load_is_the_pairs_and_only_for_a_coordinated_hpa():
    """What the capacity guard keeps room for (tests/core/cluster/test_guard_coming.py):
    the pair's count at the day's peak; none for an HPA that is not coordinated with (a
    bad one, or a workload another vertical autoscaler claims)."""
    s = snapshot(hpa())
    web = s.workload("Deployment", "pay", "web")
    assert web is not None
    pair = coordinate(hpa(), 1350.0, 500, lower=50, peak=1350.0)
    assert pair is not None
    assert coordinated_replicas_at(s, web, hpa(), {"cpu": 1350.0}) == pair.replicas == 5
    assert coordinated_replicas_at(s, web, hpa(lo=7, hi=6), {"cpu": 1350.0}) is None
    assert coordinated_replicas_at(s, web, hpa(), {"memory": 1.0}) is None  # no cpu load
    s.vertical_claims = [
        VerticalClaim("VerticalPodAutoscaler", "pay", "web-vpa", "Deployment", "web", "Auto")
    ]
    assert coordinated_replicas_at(s, web, hpa(), {"cpu": 1350.0}) is None
