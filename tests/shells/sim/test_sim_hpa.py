"""The simulated HPA against upstream's own tables (kubernetes
`pkg/controller/podautoscaler`: `replica_calculator_test.go`, `horizontal_test.go`).

Each case id is the upstream test (or table row) it translates. Upstream's harness, in
the simulator's terms: every pod has two containers, each requesting the case's request
and reporting the case's level (so a pod's request and usage are twice them); pods start
long ago unless "cool" (3 minutes ago, past the tests' 2-minute CPU initialization
period) or "hot" (just started, its sample older than one metric window since it became
Ready); the tests' initial-readiness delay is 10 s.
"""

from __future__ import annotations

import itertools
import math

import pytest

from foresize.shells.sim.cluster.hpa import (
    Recommendation,
    ScaleEvent,
    change_in_period,
    complete_behavior,
    convert_with_behavior_rate,
    convert_with_rules,
    scale_down_limit,
    scale_up_limit,
    scale_up_limit_without_behavior,
    stabilize,
    stabilize_with_behaviors,
    store_scale_event,
)
from foresize.shells.sim.cluster.hpa_calculator import (
    HPAError,
    PodMetric,
    PodSample,
    average_value_replicas,
    group_pods,
    resource_replicas,
)
from foresize.shells.sim.scenario import (
    HPABehavior,
    HPAScalingPolicy,
    HPAScalingRules,
    parse_scenario,
)
from support.sim import container, make_sim, pods_of, workload

NOW = 10_000.0
TEST_PERIODS = (120.0, 10.0)  # upstream's testing CPU initialization period and delay
CONTAINERS = 2  # numContainersPerPod
LONG_AGO = -1e9


def pods_and_metrics(
    current: int,
    requests: list[int],
    levels: list[int],
    readiness: list[bool] | None = None,
    phases: list[str] | None = None,
    deleting: list[bool] | None = None,
    start: list[str] | None = None,
    names: list[str] | None = None,
) -> tuple[list[PodSample], dict[str, PodMetric]]:
    """Upstream's prepareTestClientSet / prepareTestMetricsClient: pod i is
    test-pod-i; metric i belongs to test-pod-i (or names[i])."""
    n = max(current, len(readiness or []), len(phases or []), len(deleting or []))
    pods = []
    for i in range(n):
        when = (start or [])[i] if start else "old"
        started = {"old": LONG_AGO, "cool": NOW - 180.0, "hot": NOW}[when]
        pods.append(
            PodSample(
                f"test-pod-{i}",
                CONTAINERS * requests[i] if i < len(requests) else None,
                phase=(phases or [])[i] if phases else "Running",
                ready=(readiness or [])[i] if readiness else True,
                ready_changed=started,
                start_time=started,
                deleting=bool(deleting and deleting[i]),
            )
        )
    sample_at = NOW - 30.0  # hot pods: less than a window (60 s) since they became Ready
    metrics = {
        (names[i] if names and i < len(names) else f"test-pod-{i}"): PodMetric(
            CONTAINERS * level, sample_at, 60.0
        )
        for i, level in enumerate(levels)
    }
    return pods, metrics


def calc(current: int, target: int, pods_metrics, resource: str = "cpu"):
    pods, metrics = pods_metrics
    return resource_replicas(current, target, pods, metrics, resource, NOW, periods=TEST_PERIODS)


T, F = True, False
M = 1000  # "1.0" of cpu in millicores

RESOURCE_CASES = [
    # id, current, target %, requests, levels, options, (replicas, utilization, raw)
    ("TestReplicaCalcScaleUp", 3, 30, [M] * 3, [300, 500, 700], {}, (5, 50, 2 * 500)),
    (
        "TestReplicaCalcScaleUpUnreadyLessScale",
        3,
        30,
        [M] * 3,
        [300, 500, 700],
        {"readiness": [F, T, T]},
        (4, 60, 2 * 600),
    ),
    (
        "TestReplicaCalcScaleUpHotCpuLessScale",
        3,
        30,
        [M] * 3,
        [300, 500, 700],
        {"start": ["hot", "cool", "cool"]},
        (4, 60, 2 * 600),
    ),
    (
        "TestReplicaCalcScaleUpUnreadyNoScale",
        3,
        30,
        [M] * 3,
        [400, 500, 700],
        {"readiness": [T, F, F]},
        (3, 40, 2 * 400),
    ),
    (
        "TestReplicaCalcScaleHotCpuNoScale",
        3,
        30,
        [M] * 3,
        [400, 500, 700],
        {"readiness": [T, F, F], "start": ["cool", "hot", "hot"]},
        (3, 40, 2 * 400),
    ),
    (
        "TestReplicaCalcScaleUpIgnoresFailedPods",
        2,
        30,
        [M] * 4,
        [500, 700],
        {"readiness": [T, T, F, F], "phases": ["Running", "Running", "Failed", "Failed"]},
        (4, 60, 2 * 600),
    ),
    (
        "TestReplicaCalcScaleUpIgnoresDeletionPods",
        2,
        30,
        [M] * 4,
        [500, 700],
        {"readiness": [T, T, F, F], "deleting": [F, F, T, T]},
        (4, 60, 2 * 600),
    ),
    ("TestReplicaCalcScaleDown", 5, 50, [M] * 5, [100, 300, 500, 250, 250], {}, (3, 28, 560)),
    (
        "TestReplicaCalcScaleDownIncludeUnreadyPods",
        5,
        50,
        [M] * 5,
        [100, 300, 500, 250, 250],
        {"readiness": [T, T, T, F, F]},
        (2, 30, 2 * 300),
    ),
    (
        "TestReplicaCalcScaleDownExcludeUnscheduledPods",
        5,
        50,
        [M] * 5,
        [100],
        {"readiness": [T, F, F, F, F], "phases": ["Running"] + ["Pending"] * 4},
        (1, 10, 2 * 100),
    ),
    (
        "TestReplicaCalcScaleDownIgnoreHotCpuPods",
        5,
        50,
        [M] * 5,
        [100, 300, 500, 250, 250],
        {"start": ["cool", "cool", "cool", "hot", "hot"]},
        (2, 30, 2 * 300),
    ),
    (
        "TestReplicaCalcScaleDownIgnoresFailedPods",
        5,
        50,
        [M] * 7,
        [100, 300, 500, 250, 250],
        {"readiness": [T] * 5 + [F, F], "phases": ["Running"] * 5 + ["Failed"] * 2},
        (3, 28, 2 * 280),
    ),
    (
        "TestReplicaCalcScaleDownIgnoresDeletionPods",
        5,
        50,
        [M] * 7,
        [100, 300, 500, 250, 250],
        {"readiness": [T] * 5 + [F, F], "deleting": [F] * 5 + [T, T]},
        (3, 28, 2 * 280),
    ),
    (
        "TestReplicaCalcTolerance",
        3,
        100,
        [900, 1000, 1100],
        [1010, 1030, 1020],
        {},
        (3, 102, 2 * 1020),
    ),
    (
        "TestReplicaCalcSuperfluousMetrics",
        4,
        100,
        [M] * 4,
        [4000, 9500, 3000, 7000, 3200, 2000],
        {},
        (24, 587, 2 * 5875),
    ),
    ("TestReplicaCalcMissingMetrics", 4, 100, [M] * 4, [400, 95], {}, (3, 24, 495)),
    ("TestReplicaCalcMissingMetricsNoChangeEq", 2, 100, [M] * 2, [1000], {}, (2, 100, 2000)),
    ("TestReplicaCalcMissingMetricsNoChangeGt", 2, 100, [M] * 2, [1900], {}, (2, 190, 3800)),
    ("TestReplicaCalcMissingMetricsNoChangeLt", 2, 100, [M] * 2, [600], {}, (2, 60, 1200)),
    (
        "TestReplicaCalcMissingMetricsUnreadyChange",
        3,
        50,
        [M] * 3,
        [100, 450],
        {"readiness": [F, T, T]},
        (3, 45, 2 * 450),
    ),
    (
        "TestReplicaCalcMissingMetricsHotCpuNoChange",
        3,
        50,
        [M] * 3,
        [100, 450],
        {"start": ["hot", "cool", "cool"]},
        (3, 45, 2 * 450),
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleUp",
        3,
        50,
        [M] * 3,
        [100, 2000],
        {"readiness": [F, T, T]},
        (4, 200, 2 * 2000),
    ),
    (
        "TestReplicaCalcMissingMetricsHotCpuScaleUp",
        3,
        50,
        [M] * 3,
        [100, 2000],
        {"readiness": [F, T, T], "start": ["hot", "cool", "cool"]},
        (4, 200, 2 * 2000),
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleDown",
        4,
        50,
        [M] * 4,
        [100, 100, 100],
        {"readiness": [F, T, T, T]},
        (3, 10, 2 * 100),
    ),
]


# Not a row of the stored upstream table: replica_calculator.go's later rule that a
# missing pod counts at max(100%, target) on a scale down (fallbackUtilization).
RESOURCE_CASES.append(
    (
        "GetResourceReplicas/fallbackUtilization over 100%",
        4,
        300,
        [M] * 4,
        [400, 400],
        {},
        (3, 40, 800),
    )
)


@pytest.mark.parametrize(
    "current,target,requests,levels,options,expected",
    [pytest.param(*case[1:], id=case[0]) for case in RESOURCE_CASES],
)
def test_resource_replicas_follow_upstream_table(
    current, target, requests, levels, options, expected
):
    got = calc(current, target, pods_and_metrics(current, requests, levels, **options))
    assert got == expected


@pytest.mark.parametrize(
    "current,requests,levels,names,message",
    [
        pytest.param(
            1,
            [M],
            [100],
            ["an-older-pod-name"],
            "no metrics returned matched known pods",
            id="TestReplicaCalcDisjointResourcesMetrics",
        ),
        pytest.param(
            4,
            [M] * 3,
            [],
            None,
            "unable to get metrics for resource cpu: no metrics returned from resource metrics",
            id="TestReplicaCalcEmptyMetrics",
        ),
        pytest.param(
            1, [], [200], None, "missing request for", id="TestReplicaCalcEmptyCPURequest"
        ),
    ],
)
def test_resource_replicas_errors_follow_upstream(current, requests, levels, names, message):
    with pytest.raises(HPAError, match=message):
        calc(current, 100, pods_and_metrics(current, requests, levels, names=names))


def test_replica_calc_computed_tolerance_alg_implementation():
    """TestReplicaCalcComputedToleranceAlgImplementation: 10 pods using 150m of ~300m
    requests; a target just past the tolerance scales down, one inside it does not."""
    start_pods, used = 10, 1500
    requested = 2 * used
    per_pod = requested // start_pods
    jitter = [100, -100, 10, -10, 2, -2, 1, -1, 0, 0]
    requests = [per_pod + j for j in jitter]
    levels = [used // 10] * 10
    target = abs(1 / (2.0 * (1 - 0.1))) + 0.01
    final = math.ceil(used / (requested * target) * start_pods)
    got = calc(start_pods, int(target * 100), pods_and_metrics(start_pods, requests, levels))
    assert got == (final, used * 100 // requested, 2 * used // 10)
    inside = abs(1 / (2.0 * (1 - 0.1))) + 0.004
    assert (
        calc(start_pods, int(inside * 100), pods_and_metrics(start_pods, requests, levels))[0] == 10
    )


PLAIN_CASES = [
    ("TestReplicaCalcScaleUpCM", 3, 15000, [20000, 10000, 30000], {}, (4, 20000)),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale",
        3,
        15000,
        [50000, 10000, 30000],
        {"readiness": [T, T, F], "start": ["cool", "cool", "hot"]},
        (6, 30000),
    ),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown",
        3,
        15000,
        [50000, 15000, 30000],
        {"readiness": [F, T, F], "start": ["hot", "cool", "hot"]},
        (7, 31666),
    ),
    ("TestReplicaCalcScaleDownCM", 5, 20000, [12000] * 5, {}, (3, 12000)),
    ("TestReplicaCalcToleranceCM", 3, 20000, [20000, 21000, 21000], {}, (3, 20666)),
]


@pytest.mark.parametrize(
    "current,target,levels,options,expected",
    [pytest.param(*case[1:], id=case[0]) for case in PLAIN_CASES],
)
def test_average_value_replicas_follow_upstream_pod_metric_table(
    current, target, levels, options, expected
):
    """calcPlainMetricReplicas, which serves a resource's averageValue target too; the
    custom-metric cases pass no resource (no CPU readiness rule). Upstream's pod metric
    fake reports one value per pod, so the levels are not doubled here."""
    pods, metrics = pods_and_metrics(current, [M] * len(levels), [], **options)
    metrics = {f"test-pod-{i}": PodMetric(v, NOW - 30.0) for i, v in enumerate(levels)}
    got = average_value_replicas(current, target, pods, metrics, "qps", NOW, periods=TEST_PERIODS)
    assert got == expected


GROUP_CASES = [
    # id, pod (phase, start, ready, ready_changed), metric (at, window) or None, resource,
    # (ready count, unready, missing)
    (
        "count in a ready pod - memory",
        ("Succeeded", None, None, None),
        (0.0, 60.0),
        "memory",
        1,
        set(),
        set(),
    ),
    (
        "ignore a pod without ready condition - CPU",
        ("Succeeded", 0.0, None, None),
        (NOW, 60.0),
        "cpu",
        0,
        {"p"},
        set(),
    ),
    (
        "count in a ready pod with fresh metrics during initialization period - CPU",
        ("Succeeded", NOW - 60, True, NOW - 30),
        (NOW, 30.0),
        "cpu",
        1,
        set(),
        set(),
    ),
    (
        "ignore a ready pod without fresh metrics during initialization period - CPU",
        ("Succeeded", NOW - 60, True, NOW - 30),
        (NOW, 60.0),
        "cpu",
        0,
        {"p"},
        set(),
    ),
    (
        "ignore an unready pod during initialization period - CPU",
        ("Succeeded", NOW - 600, False, NOW - 594),
        (NOW, 60.0),
        "cpu",
        0,
        {"p"},
        set(),
    ),
    (
        "count in a ready pod without fresh metrics after initialization period - CPU",
        ("Succeeded", NOW - 180, True, NOW - 180),
        (NOW - 120, 60.0),
        "cpu",
        1,
        set(),
        set(),
    ),
    (
        "count in an unready pod that was ready after initialization period - CPU",
        ("Succeeded", NOW - 600, False, NOW - 540),
        (NOW, 60.0),
        "cpu",
        1,
        set(),
        set(),
    ),
    (
        "ignore pod that has never been ready after initialization period - CPU",
        ("Succeeded", NOW - 600, False, NOW - 590),
        (NOW, 60.0),
        "cpu",
        1,
        set(),
        set(),
    ),
    ("a missing pod", ("Succeeded", NOW - 180, None, None), None, "cpu", 0, set(), {"p"}),
    ("pending pods are ignored", ("Pending", None, None, None), None, "cpu", 0, {"p"}, set()),
]


@pytest.mark.parametrize(
    "pod,metric,resource,ready,unready,missing",
    [pytest.param(*case[1:], id=f"TestGroupPods/{case[0]}") for case in GROUP_CASES],
)
def test_group_pods_follow_upstream_table(pod, metric, resource, ready, unready, missing):
    """Upstream's `ignore a pod without ready condition` pod has no condition, the
    unready cases' "several minutes ago" are seconds before NOW."""
    phase, start, is_ready, changed = pod
    sample = PodSample(
        "p",
        1,
        phase=phase,
        ready=is_ready,
        ready_changed=LONG_AGO if changed is None else changed,
        start_time=start,
    )
    metrics = {} if metric is None else {"p": PodMetric(1, *metric)}
    if phase == "Succeeded" and is_ready is None and start is None:
        sample = PodSample("p", 1, phase=phase, ready=None, start_time=None)
    g = group_pods(
        [sample],
        metrics,
        resource,
        NOW,
        cpu_initialization_period=TEST_PERIODS[0],
        initial_readiness_delay=TEST_PERIODS[1],
    )
    assert (g.ready, set(g.unready), set(g.missing)) == (ready, unready, missing)


def test_group_pods_several_pods():
    """TestGroupPods/several pods: a fresh pod without a Ready condition is unready, a
    Ready one counts, one without metrics is missing."""
    pods = [
        PodSample("lucretius", 1, phase="Succeeded", ready=None, start_time=NOW),
        PodSample(
            "niccolo",
            1,
            phase="Succeeded",
            ready=True,
            ready_changed=NOW - 180,
            start_time=NOW - 180,
        ),
        PodSample("epicurus", 1, phase="Succeeded", ready=None, start_time=NOW - 180),
    ]
    metrics = {"lucretius": PodMetric(1), "niccolo": PodMetric(1)}
    g = group_pods(pods, metrics, "cpu", NOW, cpu_initialization_period=120.0)
    assert (g.ready, set(g.unready), set(g.missing)) == (1, {"lucretius"}, {"epicurus"})


# --------------------------------------------------------------------------- behavior


def rules(pods: int, pods_period: int, percent: int, percent_period: int, window: int):
    """Upstream's generateScalingRules (selectPolicy Max)."""
    policies = []
    if pods:
        policies.append(HPAScalingPolicy("Pods", pods, float(pods_period)))
    if percent:
        policies.append(HPAScalingPolicy("Percent", percent, float(percent_period)))
    return HPAScalingRules(float(window), "Max", tuple(policies))


def uniform_events(changes: list[int], period: int) -> list[ScaleEvent]:
    """Upstream's generateEventsUniformDistribution: each event at the centre of its
    segment of the last `period` seconds."""
    seg = period / len(changes)
    return [ScaleEvent(c, NOW - (period - seg * (i + 1) + seg / 2)) for i, c in enumerate(changes)]


SCALING_CASES = [
    # name, current, desired, min, max, up rules, down rules, up events, down events, (out, cond)
    (
        "prenormalized desired replicas within range",
        5,
        7,
        3,
        8,
        None,
        None,
        [],
        [],
        (7, "DesiredWithinRange"),
    ),
    (
        "prenormalized desired replicas < minReplicas",
        3,
        1,
        2,
        8,
        None,
        None,
        [],
        [],
        (2, "TooFewReplicas"),
    ),
    (
        "prenormalized desired replicas within range when minReplicas is 0",
        1,
        0,
        0,
        10,
        None,
        None,
        [],
        [],
        (0, "DesiredWithinRange"),
    ),
    (
        "maxReplicas is the limit because maxReplicas < scaleUpLimit",
        20,
        1000,
        1,
        10,
        None,
        None,
        [],
        [],
        (10, "TooManyReplicas"),
    ),
    (
        "desired replica count is more than the maximum replica count",
        100,
        1000,
        100,
        150,
        None,
        None,
        [],
        [],
        (150, "TooManyReplicas"),
    ),
    (
        "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
        3,
        1000,
        1,
        2000,
        rules(0, 0, 1, 60, 0),
        None,
        [],
        [],
        (4, "ScaleUpLimit"),
    ),
    ("scaleUp with default behavior", 10, 50, 1, 1000, None, None, [], [], (20, "ScaleUpLimit")),
    (
        "scaleUp with pods policy larger than percent policy",
        10,
        500,
        1,
        1000,
        rules(100, 60, 100, 60, 0),
        None,
        [],
        [],
        (110, "ScaleUpLimit"),
    ),
    (
        "scaleUp with percent policy larger than pods policy",
        10,
        500,
        1,
        1000,
        rules(2, 60, 100, 60, 0),
        None,
        [],
        [],
        (20, "ScaleUpLimit"),
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy",
        10,
        50,
        1,
        1000,
        rules(100, 60, 0, 0, 0),
        None,
        [],
        [],
        (50, "DesiredWithinRange"),
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large percent policy",
        10,
        50,
        1,
        1000,
        rules(10000, 60, 0, 0, 0),
        None,
        [],
        [],
        (50, "DesiredWithinRange"),
    ),
    (
        "scaleUp with pod policy limitation",
        10,
        50,
        1,
        1000,
        rules(30, 60, 0, 0, 0),
        None,
        [],
        [],
        (40, "ScaleUpLimit"),
    ),
    (
        "scaleUp with percent policy limitation",
        10,
        50,
        1,
        1000,
        rules(0, 0, 200, 60, 0),
        None,
        [],
        [],
        (30, "ScaleUpLimit"),
    ),
    (
        "scaleDown with percent policy larger than pod policy",
        100,
        2,
        1,
        1000,
        None,
        rules(20, 60, 1, 60, 300),
        [],
        [],
        (80, "ScaleDownLimit"),
    ),
    (
        "scaleDown with pod policy larger than percent policy",
        100,
        2,
        1,
        1000,
        None,
        rules(2, 60, 1, 60, 300),
        [],
        [],
        (98, "ScaleDownLimit"),
    ),
    (
        "scaleDown with spec MinReplicas=nil limitation with large pod policy",
        10,
        0,
        1,
        1000,
        None,
        rules(100, 60, 0, 0, 300),
        [],
        [],
        (1, "TooFewReplicas"),
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy",
        10,
        2,
        5,
        1000,
        None,
        rules(0, 0, 100, 60, 300),
        [],
        [],
        (5, "TooFewReplicas"),
    ),
    (
        "scaleDown with pod policy limitation",
        10,
        2,
        1,
        1000,
        None,
        rules(5, 60, 0, 0, 300),
        [],
        [],
        (5, "ScaleDownLimit"),
    ),
    (
        "scaleDown with percent policy limitation",
        10,
        5,
        1,
        1000,
        None,
        rules(0, 0, 50, 60, 300),
        [],
        [],
        (5, "DesiredWithinRange"),
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        100,
        500,
        1,
        200,
        rules(300, 60, 0, 0, 0),
        None,
        uniform_events([1, 5, 9], 120),
        [],
        (200, "TooManyReplicas"),
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large percent policy and events",
        100,
        500,
        1,
        200,
        rules(0, 0, 10000, 60, 0),
        None,
        uniform_events([1, 5, 9], 120),
        [],
        (200, "TooManyReplicas"),
    ),
    (
        "scaleUp with currentReplicas limitation with "
        "rate.PeriodSeconds with a lot of recent scale up events",
        100,
        500,
        1,
        1000,
        rules(5, 120, 0, 0, 0),
        None,
        uniform_events([1, 5, 9], 120),
        [],
        (100, "ScaleUpLimit"),
    ),
    (
        "scaleUp with pod policy and previous scale up events",
        100,
        500,
        1,
        1000,
        rules(150, 120, 0, 0, 0),
        None,
        uniform_events([1, 5, 9], 120),
        [],
        (235, "ScaleUpLimit"),
    ),
    (
        "scaleUp with percent policy and previous scale up events",
        100,
        500,
        1,
        1000,
        rules(0, 0, 200, 120, 0),
        None,
        uniform_events([1, 5, 9], 120),
        [],
        (255, "ScaleUpLimit"),
    ),
    (
        "scaleUp with percent policy and previous scale up and down events",
        6,
        24,
        1,
        1000,
        rules(0, 0, 300, 300, 0),
        None,
        uniform_events([4], 120),
        uniform_events([2], 120),
        (16, "ScaleUpLimit"),
    ),
    (
        "scaleDown with default policy and previous events",
        10,
        5,
        1,
        1000,
        None,
        None,
        [],
        uniform_events([1, 5, 9], 120),
        (5, "DesiredWithinRange"),
    ),
    (
        "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
        100,
        0,
        1,
        1000,
        None,
        rules(115, 120, 0, 0, 300),
        [],
        uniform_events([1, 5, 9], 120),
        (1, "TooFewReplicas"),
    ),
    (
        "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
        100,
        0,
        5,
        1000,
        None,
        rules(130, 120, 0, 0, 300),
        [],
        uniform_events([1, 5, 9], 120),
        (5, "TooFewReplicas"),
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
        100,
        2,
        5,
        1000,
        None,
        rules(0, 0, 100, 120, 300),
        [],
        uniform_events([1, 5, 9], 120),
        (5, "TooFewReplicas"),
    ),
    (
        "scaleDown with pod policy limitation and previous events",
        100,
        2,
        1,
        1000,
        None,
        rules(5, 120, 0, 0, 300),
        [],
        uniform_events([1, 5, 9], 120),
        (100, "ScaleDownLimit"),
    ),
    (
        "scaleDown with percent policy limitation and previous events",
        100,
        0,
        1,
        1000,
        None,
        rules(0, 0, 50, 120, 300),
        [],
        uniform_events([2, 4, 6], 120),
        (56, "ScaleDownLimit"),
    ),
    (
        "scaleDown with percent policy and previous scale up and down events",
        10,
        1,
        1,
        1000,
        None,
        rules(0, 0, 50, 180, 0),
        uniform_events([2], 120),
        uniform_events([4], 120),
        (6, "ScaleDownLimit"),
    ),
    (
        "scaleDown with previous events preventing further scale down",
        100,
        0,
        1,
        1000,
        None,
        rules(0, 0, 10, 120, 300),
        [],
        uniform_events([10, 10, 10], 120),
        (100, "ScaleDownLimit"),
    ),
    (
        "scaleDown with with previous events still allowing more scale down",
        10,
        5,
        1,
        1000,
        None,
        rules(0, 0, 1000, 120, 300),
        [],
        uniform_events([10, 10, 10], 120),
        (5, "DesiredWithinRange"),
    ),
    (
        "check 'outdated' flag for events for one behavior for up",
        100,
        200,
        1,
        1000,
        rules(1000, 60, 0, 0, 0),
        None,
        uniform_events([8, 12, 9, 11], 120),
        [],
        (200, "DesiredWithinRange"),
    ),
    (
        "check that events were not marked 'outdated' for two "
        "different policies in the behavior for up",
        100,
        200,
        1,
        1000,
        rules(1000, 120, 100, 60, 0),
        None,
        uniform_events([8, 12, 9, 11], 120),
        [],
        (200, "DesiredWithinRange"),
    ),
    (
        "check that events were marked 'outdated' for two different "
        "policies in the behavior for up",
        100,
        200,
        1,
        1000,
        rules(1000, 30, 100, 60, 0),
        None,
        uniform_events([8, 12, 9, 11], 120),
        [],
        (200, "DesiredWithinRange"),
    ),
    (
        "check 'outdated' flag for events for one behavior for down",
        100,
        5,
        1,
        1000,
        None,
        rules(1000, 60, 0, 0, 300),
        [],
        uniform_events([8, 12, 9, 11], 120),
        (5, "DesiredWithinRange"),
    ),
    (
        "check that events were not marked 'outdated' for two "
        "different policies in the behavior for down",
        100,
        5,
        1,
        1000,
        None,
        rules(1000, 120, 100, 60, 300),
        [],
        uniform_events([8, 12, 9, 11], 120),
        (5, "DesiredWithinRange"),
    ),
    (
        "check that events were marked 'outdated' for two different "
        "policies in the behavior for down",
        100,
        5,
        1,
        1000,
        None,
        rules(1000, 30, 100, 60, 300),
        [],
        uniform_events([8, 12, 9, 11], 120),
        (5, "DesiredWithinRange"),
    ),
]


@pytest.mark.parametrize(
    "current,desired,lo,hi,up,down,up_events,down_events,expected",
    [pytest.param(*case[1:], id=f"TestScalingWithRules/{case[0]}") for case in SCALING_CASES],
)
def test_scaling_with_rules_follows_upstream_table(
    current, desired, lo, hi, up, down, up_events, down_events, expected
):
    behavior = complete_behavior(HPABehavior(up, down))
    assert behavior is not None
    got = convert_with_behavior_rate(
        current, desired, lo, hi, up_events, down_events, behavior, NOW
    )
    assert got == expected


@pytest.mark.parametrize(
    "current,desired,lo,hi,expected",
    [
        pytest.param(5, 7, 3, 8, (7, "DesiredWithinRange"), id="within range"),
        pytest.param(3, 1, 2, 8, (2, "TooFewReplicas"), id="below minReplicas"),
        pytest.param(1, 0, 0, 10, (0, "DesiredWithinRange"), id="zeroed within range"),
        pytest.param(20, 1000, 1, 10, (10, "TooManyReplicas"), id="maxReplicas < scaleUpLimit"),
        pytest.param(3, 1000, 1, 2000, (6, "ScaleUpLimit"), id="scaleUpLimit < maxReplicas"),
    ],
)
def test_convert_desired_replicas_with_rules_follows_upstream(current, desired, lo, hi, expected):
    """TestConvertDesiredReplicasWithRules (no behavior: max(2 x current, 4))."""
    assert convert_with_rules(current, desired, lo, hi) == expected
    assert scale_up_limit_without_behavior(1) == 4 and scale_up_limit_without_behavior(3) == 6


def test_min_select_policy_limits_follow_upstream():
    """TestCalculateScaleUpLimitWithScalingRules / TestCalculateScaleDownLimitWithBehaviors:
    selectPolicy Min takes the smaller change of Pods 2 and Percent 50 per minute."""
    min_rules = HPAScalingRules(
        300.0, "Min", (HPAScalingPolicy("Pods", 2, 60.0), HPAScalingPolicy("Percent", 50, 60.0))
    )
    assert scale_up_limit(1, [], [], min_rules, NOW) == 2
    assert scale_down_limit(5, [], [], min_rules, NOW) == 3
    disabled = HPAScalingRules(0.0, "Disabled", min_rules.policies)
    assert scale_up_limit(5, [], [], disabled, NOW) == 5
    assert scale_down_limit(5, [], [], disabled, NOW) == 5


STORE_CASES = [
    # name, previous events (change, seconds ago), rules, expected stored (change, outdated),
    # replicas changed in the last 60 s before storing
    ("empty entries with default behavior", [], None, [], 0),
    ("empty entries with two-policy-behavior", [], rules(10, 60, 100, 60, 0), [(5, F)], 0),
    ("one outdated entry to be kept untouched without behavior", [(7, 61)], None, [(7, F)], 0),
    (
        "one outdated entry to be replaced with behavior",
        [(7, 61)],
        rules(10, 60, 100, 60, 0),
        [(5, F)],
        0,
    ),
    (
        "one actual entry to be not touched with behavior",
        [(7, 58)],
        rules(10, 60, 100, 60, 0),
        [(7, F), (5, F)],
        7,
    ),
    (
        "two entries, one of them to be replaced",
        [(7, 61), (6, 59)],
        rules(10, 60, 0, 0, 0),
        [(5, F), (6, F)],
        6,
    ),
    (
        "replace one entry, use policies with different periods",
        [(8, 29), (6, 59), (7, 61), (9, 61)],
        rules(10, 60, 100, 30, 0),
        [(8, F), (6, F), (7, T), (5, F)],
        14,
    ),
    (
        "two entries, both actual",
        [(7, 58), (6, 59)],
        rules(10, 120, 100, 30, 0),
        [(7, F), (6, F), (5, F)],
        13,
    ),
]


@pytest.mark.parametrize(
    "previous,scaling,stored,changed",
    [pytest.param(*case[1:], id=f"TestStoreScaleEvents/{case[0]}") for case in STORE_CASES],
)
@pytest.mark.parametrize("direction", ["up", "down"])
def test_store_scale_events_follows_upstream_table(previous, scaling, stored, changed, direction):
    events = [ScaleEvent(c, NOW - ago) for c, ago in previous]
    assert change_in_period(60.0, events, NOW) == changed
    up: list[ScaleEvent] = events if direction == "up" else []
    down: list[ScaleEvent] = events if direction == "down" else []
    if direction == "up":
        behavior = None if scaling is None else HPABehavior(scale_up=scaling)
        store_scale_event(behavior, up, down, 10, 15, NOW)
    else:
        behavior = None if scaling is None else HPABehavior(scale_down=scaling)
        store_scale_event(behavior, up, down, 10, 5, NOW)
    assert [(e.change, e.outdated) for e in events] == stored


@pytest.mark.parametrize(
    "recs,desired,expected,length",
    [
        pytest.param([], 5, 5, 1, id="empty log"),
        pytest.param([(4, 120), (5, 60)], 3, 5, 3, id="stabilize"),
        pytest.param([(1, 120), (2, 60)], 3, 3, 3, id="no stabilize"),
        pytest.param([(10, 600), (9, 540)], 3, 3, 2, id="no stabilize - old recommendations"),
        pytest.param(
            [(10, 600), (4, 60), (5, 120), (9, 540)], 3, 5, 4, id="stabilize - old recommendations"
        ),
    ],
)
def test_normalize_desired_replicas_follows_upstream(recs, desired, expected, length):
    """TestNormalizeDesiredReplicas (no behavior: the 5-minute downscale window)."""
    log = [Recommendation(r, NOW - ago) for r, ago in recs]
    assert stabilize(log, desired, NOW, 300.0) == expected
    assert len(log) == length


BEHAVIOR_STABILIZE_CASES = [
    # name, recs (replicas, seconds ago), current, desired, expected, stored, up, down window
    ("empty recommendations for scaling down", [], 100, 5, 5, [5], 0, 0),
    ("simple scale down stabilization", [(4, 120), (5, 60)], 100, 3, 5, [4, 5, 3], 0, 180),
    ("simple scale up stabilization", [(4, 120), (5, 60)], 1, 7, 4, [4, 5, 7], 300, 0),
    ("no scale down stabilization", [(1, 120), (2, 60)], 100, 3, 3, [1, 2, 3], 300, 0),
    ("no scale up stabilization", [(4, 120), (5, 60)], 1, 3, 3, [4, 5, 3], 0, 300),
    (
        "no scale down stabilization, reuse recommendation element",
        [(10, 600), (9, 540)],
        100,
        3,
        3,
        [10, 3],
        0,
        0,
    ),
    (
        "no scale up stabilization, reuse recommendation element",
        [(10, 600), (9, 540)],
        1,
        100,
        100,
        [10, 100],
        0,
        0,
    ),
    (
        "scale down stabilization, reuse one of obsolete recommendation element",
        [(10, 600), (4, 60), (5, 120), (9, 540)],
        100,
        3,
        5,
        [10, 4, 5, 3],
        0,
        180,
    ),
    (
        "scale up stabilization, reuse one of obsolete recommendation element",
        [(10, 6000), (6, 60), (5, 120), (9, 180)],
        1,
        100,
        5,
        [100, 6, 5, 9],
        300,
        0,
    ),
    (
        "scale up and down stabilization, do not scale up when prenormalized rec goes down",
        [(2, 6000), (3, 180)],
        2,
        1,
        2,
        None,
        300,
        300,
    ),
    (
        "scale up and down stabilization, do not scale down when prenormalized rec goes up",
        [(2, 6000), (1, 180)],
        2,
        3,
        2,
        None,
        300,
        300,
    ),
]


@pytest.mark.parametrize(
    "recs,current,desired,expected,stored,up_window,down_window",
    [
        pytest.param(*case[1:], id=f"TestNormalizeDesiredReplicasWithBehavior/{case[0]}")
        for case in BEHAVIOR_STABILIZE_CASES
    ],
)
def test_stabilize_with_behaviors_follows_upstream_table(
    recs, current, desired, expected, stored, up_window, down_window
):
    log = [Recommendation(r, NOW - ago) for r, ago in recs]
    got, _ = stabilize_with_behaviors(log, current, desired, NOW, up_window, down_window)
    assert got == expected
    if stored is not None:
        assert [r.replicas for r in log] == stored


# --------------------------------------------------------------------------- in the simulator


def busy_sim(behavior=None, step: int = 60, cpu_level: str = "900m"):
    hpa = {
        "name": "web",
        "target": {"name": "web"},
        "min_replicas": 2,
        "max_replicas": 20,
        "metrics": [{"resource": "cpu", "target_utilization": 50}],
    }
    if behavior is not None:
        hpa["behavior"] = behavior
    return make_sim(
        [workload("web", 2, containers=[container(cpu=cpu_level, memory="100Mi")])],
        nodes=4,
        cpu="16",
        step=step,
        hpas=[hpa],
        hpa_sync_period="15s",
    )


def hpa_sizes(sim):
    return [(e.time, e.details["replicas"]) for e in sim.events.query("HPAScaled")]


def test_sim_hpa_scale_up_follows_a_pods_policy_per_period():
    """behavior.scaleUp Pods 1 per 60 s: the HPA adds one replica a minute although
    every pod is at 180% of its request (ceil(2 x 3.6) = 8 at once without it)."""
    sim = busy_sim({"scale_up": {"policies": [{"type": "Pods", "value": 1, "period": "60s"}]}})
    sim.run(300)
    sizes = [r for _, r in hpa_sizes(sim)]
    assert sizes[:3] == [3, 4, 5]
    times = [t for t, _ in hpa_sizes(sim)]
    assert all(b - a >= 60 for a, b in itertools.pairwise(times))


def test_sim_hpa_without_behavior_doubles_at_most():
    """No behavior: one sync reaches at most max(2 x 2, 4) = 4, then 8."""
    sim = busy_sim()
    sim.run(600)
    assert [r for _, r in hpa_sizes(sim)][:2] == [4, 8]


def idle_after_a_scale_up(behavior=None):
    """Shared load of 900m on 2 pods of 500m at a 50% target: the HPA goes to 4 (45%,
    inside the band); then every pod drops to 50m. Returns the sim and the drop time."""
    hpa = {
        "name": "web",
        "target": {"name": "web"},
        "min_replicas": 2,
        "max_replicas": 20,
        "metrics": [{"resource": "cpu", "target_utilization": 50}],
    }
    if behavior is not None:
        hpa["behavior"] = behavior
    sim = make_sim(
        [workload("web", 2, load_shared=True, containers=[container(cpu="450m")])],
        nodes=2,
        cpu="8",
        hpas=[hpa],
        hpa_sync_period="15s",
    )
    sim.run(600)
    assert sim.workloads["Deployment/default/web"].replicas == 4
    dropped = sim.now
    for p in pods_of(sim, "web"):
        sim.set_usage("default", p.name, "app", cpu=0.05)
    sim.run(900)
    return sim, dropped


def test_sim_hpa_scale_down_waits_for_the_default_stabilization_window():
    """Without behavior the highest recommendation of the last 300 s holds: the scale
    down comes five minutes after the last high one (which is at most one usage step,
    60 s, before the drop is sampled)."""
    sim, dropped = idle_after_a_scale_up()
    down = [(t, r) for t, r in hpa_sizes(sim) if t > dropped]
    assert down and down[0][1] == 2
    assert 300 - 60 <= down[0][0] - dropped <= 300 + 30


def test_sim_hpa_scale_down_window_of_behavior():
    """behavior.scaleDown.stabilizationWindowSeconds 60 shortens the hold to a minute."""
    sim, dropped = idle_after_a_scale_up({"scale_down": {"stabilization_window": "60s"}})
    down = [(t, r) for t, r in hpa_sizes(sim) if t > dropped]
    assert down and down[0][1] == 2
    assert down[0][0] - dropped <= 60 + 60 + 30


def test_scenario_behavior_is_read_and_checked():
    base = {
        "name": "b",
        "nodes": [{"name": "n", "cpu": "4", "memory": "8Gi"}],
        "workloads": [{"kind": "Deployment", "name": "web", "containers": [{"name": "app"}]}],
    }

    def with_behavior(b):
        return parse_scenario(
            {
                **base,
                "hpas": [
                    {
                        "name": "web",
                        "target": {"name": "web"},
                        "max_replicas": 5,
                        "metrics": [{"resource": "cpu", "target_utilization": 60}],
                        "behavior": b,
                    }
                ],
            },
            "t.yaml",
        )

    sc = with_behavior(
        {
            "scale_down": {
                "stabilization_window": "60s",
                "select_policy": "Min",
                "policies": [{"type": "Percent", "value": 10, "period": "60s"}],
            }
        }
    )
    rules_down = sc.hpas[0].behavior.scale_down
    assert rules_down.stabilization_window == 60.0 and rules_down.select_policy == "Min"
    with pytest.raises(Exception, match=r"behavior\.scale_up\.select_policy"):
        with_behavior({"scale_up": {"select_policy": "Most"}})
    with pytest.raises(Exception, match=r"policies\[0\]\.period.*between 1s and 30m"):
        with_behavior({"scale_up": {"policies": [{"type": "Pods", "value": 1, "period": "2h"}]}})
    with pytest.raises(Exception, match=r"policies\[0\]\.type"):
        with_behavior({"scale_up": {"policies": [{"type": "Cores", "value": 1, "period": "1m"}]}})
