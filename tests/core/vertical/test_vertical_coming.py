"""The worker notes each pod whose coming size node autoscalers cannot see
(`vertical.coming`): one it will recreate (sent or held), an upsize the capacity guard
holds, an upsize the kubelet holds Deferred; and the pass publishes them
(`reconcile.plan_pass`: the annotation and `PassPlan.pending`)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EvictPod, PatchPodMetadata, ResizePod
from foresize.core.cluster.model import Node
from foresize.core.cluster.pending import COMING_ANNOTATION, DEFERRED, RECREATE, WAITING_FOR_ROOM
from foresize.core.reconcile import ReconcileState, plan_pass
from foresize.core.vertical import WorkerState, plan
from support.vertical import deferred, names, of, pod, snap, sugg, target

ONE_AT_A_TIME = {"max_disrupted": 1, "interval": "1h"}


def coming(state: WorkerState) -> dict[str, tuple[str, dict[str, int]]]:
    return {c.pod.split("/")[1]: (c.cause, c.upsize) for c in state.coming.values()}


def test_pods_to_recreate_are_coming_whether_their_eviction_is_sent_or_held() -> None:
    pods = [pod("p0", cpu=100), pod("p1", cpu=100)]
    t = target("recreate", min_replicas=1, disruption=ONE_AT_A_TIME)
    actions, state = plan(snap(pods, [t]), 0.0, WorkerState(), suggestions=sugg(cpu=300))
    assert names(actions, EvictPod) == ["p0"]  # the batch holds p1
    assert coming(state) == {
        "p0": (RECREATE, {"cpu": 200, "memory": 100 * MIB}),
        "p1": (RECREATE, {"cpu": 200, "memory": 100 * MIB}),
    }


def test_a_downsize_is_not_coming() -> None:
    t = target("recreate", min_replicas=1)
    _, state = plan(
        snap([pod("p0", cpu=500, mem=400 * MIB)], [t]), 0.0, WorkerState(), suggestions=sugg()
    )
    assert state.coming == {}


def test_an_upsize_the_guard_holds_is_waiting_for_room_and_opt_outs_never_recreate() -> None:
    p = pod("big", cpu=900)
    p.annotations = {"karpenter.sh/do-not-disrupt": "true"}
    t = target("in_place_or_recreate", min_replicas=1)
    s = snap([p], [t], nodes={"n1": 1000})
    actions, state = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=1500))
    assert not of(actions, ResizePod) and not of(actions, EvictPod)
    assert coming(state) == {"big": (WAITING_FOR_ROOM, {"cpu": 600, "memory": 100 * MIB})}
    # Without the opt-out the guard's fallback recreates it: coming as a recreate.
    p.annotations = {}
    _, state = plan(
        snap([p], [t], nodes={"n1": 1000}), 0.0, WorkerState(), suggestions=sugg(cpu=1500)
    )
    assert coming(state)["big"][0] == RECREATE


def test_a_deferred_upsize_is_coming_until_it_is_released() -> None:
    held = pod("held", cpu=600, alloc={"cpu": 100, "memory": 100 * MIB}, conditions=[deferred()])
    t = target(
        "in_place", disruption={"release_deferred_after": "5m", "release_deferred": "allocated"}
    )
    s = snap([held], [t], nodes={"n1": 700})
    _, state = plan(s, 0.0, WorkerState(), suggestions=sugg(cpu=600, mem=100 * MIB))
    assert coming(state) == {"held": (DEFERRED, {"cpu": 500})}
    actions, state = plan(s, 300.0, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    assert [a.reason for a in of(actions, ResizePod)] == ["release-deferred"]
    assert state.coming == {}  # released: nothing is coming any more


def test_a_recreated_pod_of_a_boosted_target_comes_back_boosted() -> None:
    t = target("recreate", min_replicas=1, startup_boost={"cpu_factor": 3})
    _, state = plan(snap([pod("p0", cpu=100)], [t]), 0.0, WorkerState(), suggestions=sugg(cpu=200))
    (c,) = state.coming.values()
    assert c.boosted and c.containers["app"]["cpu"] == 600 and c.upsize["cpu"] == 500


def test_the_pass_annotates_held_pods_and_sums_the_demand_per_node_pool() -> None:
    pods = [pod("p0", cpu=100), pod("p1", cpu=100), pod("p2", cpu=100)]
    t = target("recreate", min_replicas=1, disruption=ONE_AT_A_TIME)
    s = snap(pods, [t])
    s.nodes["n1"] = Node(
        "n1", allocatable=dict(s.nodes["n1"].allocatable), labels={"karpenter.sh/nodepool": "gp"}
    )
    decided = plan_pass(s, 0.0, ReconcileState(), None, suggestions=sugg(cpu=300))
    assert names(decided.actions, EvictPod) == ["p0"]
    patched = of(decided.actions, PatchPodMetadata)
    assert sorted(a.name for a in patched) == ["p1", "p2"]  # p0 is evicted: not annotated
    assert all(COMING_ANNOTATION in a.annotations for a in patched)
    # Every pod of the pool counts, the evicted one included (its room is still needed).
    assert decided.pending.by_pool[("gp", "cpu")] == 3 * 200
    assert decided.pending.pods_by_pool == {("gp", RECREATE): 3}
    # Once p1 and p2 are at their size, their annotations go.
    for p in pods[1:]:
        p.annotations[COMING_ANNOTATION] = "x"
    done = [pod("p1", cpu=300, mem=200 * MIB), pod("p2", cpu=300, mem=200 * MIB)]
    for p in done:
        p.annotations[COMING_ANNOTATION] = "x"
    state: Any = decided.state
    later = plan_pass(snap(done, [t]), 7200.0, state, None, suggestions=sugg(cpu=300))
    removed = of(later.actions, PatchPodMetadata)
    assert sorted((a.name, a.annotations[COMING_ANNOTATION]) for a in removed) == [
        ("p1", None),
        ("p2", None),
    ]
    assert later.pending.by_pool == {}


ODD_VALUES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "", "x", "{}", "[]", "null", "true", '{"version": 99}', '{"version": 1}',
            '{"version":1,"cause":"recreate","containers":{"app":{"requests":{"cpu":"-1"}}}}',
            "{" * 200, "9" * 400, "\u0000", "\ud7ff\ufffd",
        ]
    ),
)  # fmt: skip


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(ODD_VALUES, min_size=3, max_size=3), st.sampled_from(["true", "yes", "", "0"]))
def test_odd_coming_annotations_on_pods_are_replaced_never_a_crash(
    values: list[str], opt_out: str
) -> None:
    """Anyone may write `foresize.io/coming-resources` (a user, a template copying it, a
    tool): whatever it holds, the pass plans as usual and leaves every pod with either no
    annotation or Foresize's own value."""
    pods = [pod("p0", cpu=100), pod("p1", cpu=100), pod("p2", cpu=300, mem=200 * MIB)]
    for p, v in zip(pods, values, strict=True):
        p.annotations = {COMING_ANNOTATION: v, "karpenter.sh/do-not-disrupt": opt_out}
    t = target("recreate", min_replicas=1, disruption=ONE_AT_A_TIME)
    decided = plan_pass(snap(pods, [t]), 0.0, ReconcileState(), None, suggestions=sugg(cpu=300))
    patched = of(decided.actions, PatchPodMetadata)
    patches = {a.name: a.annotations[COMING_ANNOTATION] for a in patched}
    evicted = set(names(decided.actions, EvictPod))
    for p in pods:
        if p.name in evicted:
            continue
        after = patches.get(p.name, p.annotations[COMING_ANNOTATION])
        if p.key not in decided.pending.pods:
            assert after is None, (p.name, after)  # nothing coming: the odd value is removed
        else:
            doc = json.loads(after)  # Foresize's own value, whatever was there
            assert doc["version"] == 1 and doc["cause"] == RECREATE
