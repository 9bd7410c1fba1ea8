"""Heap-bound pods in the disruption worker (issue 25): an in-place memory raise never
grows a heap sized at start. A container whose heap is a share of the limit it started
with (`-XX:MaxRAMPercentage`, HotSpot's 25% default, .NET's percent) gets its memory raise
by a recreation where the update mode permits it (`in_place_or_recreate`) and at its next
restart otherwise (`in_place`), and the target's status says so; a fixed heap (`-Xmx`,
`GOMEMLIMIT`) may take an in-place raise (non-heap room), as may an OOM-urgent raise."""

from __future__ import annotations

from dataclasses import replace

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod, WriteTargetStatus
from foresize.core.cluster.model import Pod
from foresize.core.vertical import WorkerState, plan
from support.vertical import of, pod, snap, sugg, target

PERCENT = ("java", "-XX:MaxRAMPercentage=75", "-jar", "/app.jar")


def runs(p: Pod, command: tuple[str, ...]) -> Pod:
    p.containers = [replace(c, command=command) for c in p.containers]
    return p


def status_of(actions: list) -> dict:
    (write,) = of(actions, WriteTargetStatus)
    return write.status


def test_in_place_holds_a_percentage_heaps_memory_raise_for_its_next_restart() -> None:
    """in_place: the CPU part of the change goes in place, memory stays; the status lists
    the pod as waiting for its restart and one Event says why. Without the rule the raise
    goes in place and the heap (75% of the limit at start) gets none of it."""
    p = runs(pod("p0", cpu=100, mem=100 * MIB, limits={"memory": 100 * MIB}), PERCENT)
    s = snap([p], [target("in_place")])
    actions, _ = plan(
        s, 100.0, WorkerState(), suggestions=sugg(200, 200 * MIB, limits={"memory": 200 * MIB})
    )
    (resize,) = of(actions, ResizePod)
    assert resize.containers[0].requests == {"cpu": 200, "memory": 100 * MIB}
    assert resize.containers[0].limits.get("memory", 100 * MIB) == 100 * MIB
    (waiting,) = status_of(actions)["pods_waiting_for_restart"]
    assert waiting["pod"] == "p0" and "next restart" in waiting["reason"]
    assert "-XX:MaxRAMPercentage=75" in waiting["reason"]
    assert [e for e in of(actions, EmitEvent) if e.reason == "HeapBoundResize"]


def test_in_place_or_recreate_recreates_a_percentage_heap_for_a_memory_raise() -> None:
    p = runs(pod("p0", mem=100 * MIB, limits={"memory": 100 * MIB}), PERCENT)
    s = snap([p], [target("in_place_or_recreate", min_replicas=1)])
    actions, _ = plan(
        s, 100.0, WorkerState(), suggestions=sugg(200, 200 * MIB, limits={"memory": 200 * MIB})
    )
    assert not of(actions, ResizePod)
    (evict,) = of(actions, EvictPod)
    assert evict.name == "p0" and evict.reason == "heap-bound"
    (waiting,) = status_of(actions)["pods_waiting_for_restart"]
    assert "recreates the pod" in waiting["reason"]


def test_a_fixed_heap_and_a_plain_container_take_a_memory_raise_in_place() -> None:
    """-Xmx: the heap is fixed whatever the limit; a raise gives non-heap room at once
    (the recommender's floor keeps memory above heap + non-heap)."""
    for command in (("java", "-Xmx1g", "-jar", "/a.jar"), ("/bin/server",)):
        p = runs(pod("p0", mem=100 * MIB), command)
        s = snap([p], [target("in_place_or_recreate", min_replicas=1)])
        actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg(200, 200 * MIB))
        assert len(of(actions, ResizePod)) == 1 and not of(actions, EvictPod), command
        assert status_of(actions)["pods_waiting_for_restart"] == []


def test_a_downsize_and_an_oom_urgent_raise_of_a_percentage_heap_go_in_place() -> None:
    down = runs(pod("p0", mem=400 * MIB), PERCENT)
    s = snap([down], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg(100, 300 * MIB))
    assert of(actions, ResizePod)[0].containers[0].requests["memory"] == 300 * MIB
    killed = runs(pod("p1", owner="web", mem=100 * MIB, oom_at=90.0), PERCENT)
    s = snap([killed], [target("in_place")])
    actions, _ = plan(s, 100.0, WorkerState(), suggestions=sugg(100, 200 * MIB))
    assert of(actions, ResizePod)[0].containers[0].requests["memory"] == 200 * MIB
