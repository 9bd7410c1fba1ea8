"""`foresize bench windows`: the maintenance-window scenario of issue 24 ("0 disruptive
actions outside it, and the week's savings within 10% of the same policy without a
window"), on the demo scenario, in one run:

- `static`: requests as written (the baseline the savings are measured against);
- `foresize`: the default policy (update mode `in_place_or_recreate`), no window;
- `foresize-window`: the same with a nightly window, 01:00-05:00 UTC
  (`shells.sim.policy_foresize.NIGHTLY_WINDOW`): in-place resizes go on all day, the
  disruptive actions (evictions, resizes that restart a container) wait for the night.

Disruptive actions are counted from the simulator's event log, at the moment the
operator sent them: an eviction when the Eviction API took it, a restarting resize when
its `pods/resize` patch was made (the kubelet restarts the container when it applies it).
Both Foresize runs are judged against the same window, so the first shows how many of its
disruptions fell outside it without the window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from foresize.adapters.timezones import SYSTEM_ZONES
from foresize.core.cluster.windows import Window, read_maintenance, window_state
from foresize.shells.sim.events import SimEvent
from foresize.shells.sim.policies import savings_vs
from foresize.shells.sim.policy_foresize import NIGHTLY_WINDOW
from foresize.shells.sim.runner import simulate
from foresize.shells.sim.scenario import load_scenario

DAYS = 7.0
POLICIES = ("foresize", "foresize-window")
WITHIN = 0.10
"""The issue's bar: the window's savings within 10% (relative) of the same policy's."""


def _windows() -> tuple[Window, ...]:
    policy = read_maintenance({"maintenance": NIGHTLY_WINDOW}, "foresize-window")
    assert policy is not None
    return policy.windows


def disruptions(events: list[SimEvent]) -> list[tuple[float, str, str]]:
    """(time sent, pod, what) of every disruptive action the operator sent: evictions
    through the Eviction API, and the resizes whose application restarted a container
    (timed at their `pods/resize` request)."""
    out: list[tuple[float, str, str]] = []
    requested: dict[str, dict[int, float]] = {}  # pod -> generation -> time requested
    restarting: set[str] = set()  # pods whose resize being applied restarted a container
    for ev in events:
        if ev.kind == "Evicted" and ev.details.get("cause") == "policy":
            out.append((ev.time, ev.object, "eviction"))
        elif ev.kind == "ResizeRequested":
            requested.setdefault(ev.object, {})[int(ev.details.get("generation", 0))] = ev.time
        elif ev.kind == "ContainerRestarted" and ev.reason == "ResizeRestart":
            restarting.add(ev.object)
        elif ev.kind == "ResizeApplied" and ev.object in restarting:
            restarting.discard(ev.object)
            gen = int(ev.details.get("generation", 0))
            asked = requested.get(ev.object, {})
            at = max((t for g, t in asked.items() if g <= gen), default=ev.time)
            out.append((at, ev.object, "restarting resize"))
    return sorted(out)


def run_bench(days: float = DAYS, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    say = progress or (lambda _msg: None)
    scenario = load_scenario("demo")
    windows = _windows()
    duration = days * 86400.0
    say("static")
    _, baseline = simulate(scenario, duration=duration, policy="static")
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "days": days,
        "window": NIGHTLY_WINDOW["windows"],
        "update_mode": "in_place_or_recreate",
        "policies": {},
    }
    for policy in POLICIES:
        say(policy)
        sim, summary = simulate(scenario, duration=duration, policy=policy)
        saved = savings_vs(summary, baseline)
        sent = disruptions(list(sim.journal.events))
        outside = [d for d in sent if not window_state(windows, SYSTEM_ZONES, d[0]).open]
        totals = summary["totals"]
        result["policies"][policy] = {
            "cpu_requested_saved": saved["cpu_requested_saved"],
            "memory_requested_saved": saved["memory_requested_saved"],
            "disruptive_actions": len(sent),
            "disruptive_outside_window": len(outside),
            "first_outside_window": (
                {"time": outside[0][0], "pod": outside[0][1], "what": outside[0][2]}
                if outside
                else None
            ),
            "oom_kills": totals.get("oom_kills", 0),
            "resizes": totals.get("resizes", 0),
            "evictions": totals.get("evictions", 0),
        }
    plain, windowed = (result["policies"][p] for p in POLICIES)
    for resource in ("cpu", "memory"):
        base = plain[f"{resource}_requested_saved"]
        got = windowed[f"{resource}_requested_saved"]
        change = (got - base) / base if base else 0.0
        result[f"{resource}_savings_change"] = round(change, 4)
    result["savings_within_10_percent"] = all(
        abs(result[f"{r}_savings_change"]) <= WITHIN for r in ("cpu", "memory")
    )
    result["disruptive_outside_window"] = windowed["disruptive_outside_window"]
    return result
