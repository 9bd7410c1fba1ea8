"""A Deferred in-place grow never holds node capacity without bound (issue 23 item 5):
after `disruption.release_deferred_after` (1m by default, from `foresize bench deferred`)
it is released, by default shrunk to what the node has room for (`release_deferred:
fit`); `allocated` gives it up, `never` keeps the old hold. Under `in_place_or_recreate`
a pod that can be recreated is evicted at `stall_timeout` first."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod
from foresize.core.vertical import WorkerState, plan
from support.vertical import deferred, names, of, pod, snap, sugg, target


def full_node(t: Any, roomy: bool = False) -> Any:
    """`held` asks 600m with 100m allocated on a 700m node where `other` takes 300m: the
    node has room for 300m more, not 500m. `roomy`: a second node with room for it."""
    held = pod("held", cpu=600, alloc={"cpu": 100, "memory": 100 * MIB}, conditions=[deferred()])
    other = pod("other", cpu=300, owner="batch")
    return snap([held, other], [t], nodes={"n1": 700, **({"n2": 4000} if roomy else {})})


def releases(t: Any, times: tuple[float, ...]) -> list[tuple[float, ResizePod]]:
    s = full_node(t)
    state = WorkerState()
    out = []
    for now in times:
        actions, state = plan(s, now, state, suggestions=sugg(cpu=600, mem=100 * MIB))
        out += [(now, a) for a in of(actions, ResizePod) if a.reason == "release-deferred"]
    return out


def test_by_default_the_ask_shrinks_to_what_fits_after_a_minute() -> None:
    ((at, rz),) = releases(target("in_place"), (0.0, 59.0, 60.0))
    assert at == 60.0
    assert rz.containers[0].requests == {"cpu": 400, "memory": 100 * MIB}  # 100 + the 300m room


def test_allocated_gives_the_grow_up_and_never_keeps_it() -> None:
    t = target(
        "in_place", disruption={"release_deferred": "allocated", "release_deferred_after": "1m"}
    )
    ((at, rz),) = releases(t, (0.0, 60.0))
    assert at == 60.0 and rz.containers[0].requests["cpu"] == 100
    assert (
        releases(target("in_place", disruption={"release_deferred": "never"}), (0.0, 7200.0)) == []
    )


def test_a_guaranteed_container_keeps_its_limit_equal_to_the_fitted_request() -> None:
    held = pod(
        "held",
        cpu=600,
        mem=100 * MIB,
        limits={"cpu": 600, "memory": 100 * MIB},
        alloc={"cpu": 100, "memory": 100 * MIB},
        conditions=[deferred()],
    )
    s = snap([held, pod("other", cpu=300, owner="batch")], [target("in_place")], nodes={"n1": 700})
    state = WorkerState()
    for now in (0.0, 60.0):
        actions, state = plan(
            s,
            now,
            state,
            suggestions=sugg(cpu=600, mem=100 * MIB, limits={"cpu": 600, "memory": 100 * MIB}),
        )
    (rz,) = of(actions, ResizePod)
    assert rz.containers[0].requests["cpu"] == rz.containers[0].limits["cpu"] == 400


def test_no_room_at_all_releases_to_the_allocation_and_room_back_releases_nothing() -> None:
    held = pod("held", cpu=600, alloc={"cpu": 100, "memory": 100 * MIB}, conditions=[deferred()])
    s = snap([held, pod("other", cpu=600, owner="batch")], [target("in_place")], nodes={"n1": 700})
    state = WorkerState()
    for now in (0.0, 60.0):
        actions, state = plan(s, now, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    (rz,) = of(actions, ResizePod)
    assert rz.containers[0].requests["cpu"] == 100
    assert any("patched back to the allocated" in e.message for e in of(actions, EmitEvent))
    # The node has room for the whole ask (the kubelet admits it on its next try).
    s = snap([held], [target("in_place")], nodes={"n1": 700})
    state = WorkerState()
    for now in (0.0, 60.0):
        actions, state = plan(s, now, state, suggestions=sugg(cpu=600, mem=100 * MIB))
    assert not of(actions, ResizePod)


def test_in_place_or_recreate_evicts_first_and_releases_only_what_it_cannot_recreate() -> None:
    t = target("in_place_or_recreate", min_replicas=1, disruption={"max_disrupted": 5})
    s = full_node(t, roomy=True)
    state = WorkerState()
    seen: list[Any] = []
    for now in (0.0, 120.0):
        actions, state = plan(s, now, state, suggestions=sugg(cpu=600, mem=100 * MIB))
        seen += actions
    assert names(seen, EvictPod) == ["held"] and not of(seen, ResizePod)  # stall_timeout: 2m
    # A pod that opted out of voluntary disruption is not evicted: released at 1m.
    s = full_node(t, roomy=True)
    s.pods[0].annotations = {"karpenter.sh/do-not-disrupt": "true"}
    state = WorkerState()
    seen = []
    for now in (0.0, 60.0):
        actions, state = plan(s, now, state, suggestions=sugg(cpu=600, mem=100 * MIB))
        seen += actions
    assert not of(seen, EvictPod)
    assert [a.containers[0].requests["cpu"] for a in of(seen, ResizePod)] == [400]


def test_a_bad_release_setting_names_the_field() -> None:
    from foresize.core.cluster.target import target_view
    from foresize.core.errors import ForesizeError

    raw = {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "vertical": {"disruption": {"release_deferred": "sometimes"}},
        },
    }
    view = target_view(raw)
    assert any(
        "spec.vertical.disruption.release_deferred" in e and "fit, allocated, never" in e
        for e in view.errors
    )
    try:
        target("in_place", disruption={"release_deferred": "sometimes"})
    except ForesizeError as exc:
        assert "disruption.release_deferred" in str(exc)
    else:
        raise AssertionError("the API type accepted release_deferred: sometimes")
