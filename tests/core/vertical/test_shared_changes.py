"""A target's pods that share a spec share one computed change (`desired.spec_key`):
the pass plans exactly what it plans for each pod alone, and a pod whose spec differs in
anything the change reads (a limit, a resizePolicy) gets its own."""

from __future__ import annotations

from typing import Any

from foresize.core.api.quantity import MIB
from foresize.core.cluster.actions import EmitEvent, ResizePod
from foresize.core.cluster.model import Pod
from foresize.core.vertical import WorkerState, plan
from foresize.core.vertical.desired import spec_key
from support.vertical import of, pod, snap, sugg, target


def _pods() -> list[Pod]:
    return [
        pod("p0"),
        pod("p1", node="n2"),
        pod("p2", resize_policy={"memory": "RestartContainer"}),
        pod("p3", limits={"memory": 400 * MIB}),
        pod("p4", limits={"memory": 150 * MIB}),
    ]


def _planned(pods: list[Pod]) -> tuple[dict[str, Any], dict[str, str]]:
    t = target("in_place", disruption={"max_disrupted": 10})
    actions, _ = plan(snap(pods, [t]), 0.0, WorkerState(), suggestions=sugg())
    resizes = {a.name: a.containers for a in of(actions, ResizePod)}
    events = {a.name: a.message for a in of(actions, EmitEvent) if a.kind == "Pod"}
    return resizes, events


def test_pods_sharing_a_spec_get_what_each_gets_alone() -> None:
    together = _planned(_pods())
    alone: tuple[dict[str, Any], dict[str, str]] = ({}, {})
    for p in _pods():
        resizes, events = _planned([p])
        alone[0].update(resizes)
        alone[1].update(events)
    assert together == alone
    resizes, events = together
    assert set(resizes) == {"p0", "p1", "p2", "p3", "p4"}
    assert events["p0"].startswith("in-place resize") and events["p1"] == events["p0"]
    assert events["p2"].startswith("restarting resize")
    assert resizes["p3"][0].limits == {"memory": 400 * MIB}
    assert resizes["p4"] != resizes["p3"]  # another limit, another settlement


def test_the_spec_key_tells_apart_what_the_change_reads() -> None:
    p0, p1, p2, p3, p4 = _pods()
    assert spec_key(p0) == spec_key(p1)  # another node, another name: the same spec
    assert len({spec_key(p) for p in (p0, p2, p3, p4)}) == 4
