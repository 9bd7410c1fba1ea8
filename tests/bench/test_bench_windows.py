"""`bench.windows.disruptions`: which of the simulator's events were disruptive actions
of the operator, timed when it sent them."""

from __future__ import annotations

from foresize.bench.windows import disruptions
from foresize.shells.sim.events import SimEvent


def test_evictions_and_restarting_resizes_at_the_time_they_were_sent() -> None:
    events = [
        SimEvent(100.0, "Evicted", "Pod/shop/a", "recreate", details={"cause": "policy"}),
        SimEvent(110.0, "Evicted", "Pod/shop/b", "Evicted", details={"cause": "karpenter"}),
        SimEvent(120.0, "ResizeRequested", "Pod/shop/c", details={"generation": 2}),
        SimEvent(125.0, "ResizeApplied", "Pod/shop/c", details={"generation": 2}),  # in place
        SimEvent(200.0, "ResizeRequested", "Pod/shop/d", details={"generation": 3}),
        SimEvent(260.0, "ContainerRestarted", "Pod/shop/d", "ResizeRestart"),
        SimEvent(260.0, "ResizeApplied", "Pod/shop/d", details={"generation": 3}),
        SimEvent(300.0, "ContainerRestarted", "Pod/shop/e", "OOMKilled"),
    ]
    assert disruptions(events) == [
        (100.0, "Pod/shop/a", "eviction"),
        (200.0, "Pod/shop/d", "restarting resize"),
    ]
