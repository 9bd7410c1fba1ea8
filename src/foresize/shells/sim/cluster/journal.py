"""What happened in a simulated run: the event log and the per-workload counters the
summary reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.events import EventLog, SimEvent


class Journal:
    """The event log (each event stamped with the clock's time) and the counters by
    top-level workload key (`""`: bare pods)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.events = EventLog()
        self.counters: dict[str, dict[str, int]] = {}
        # Kind -> what watches it (`SimCluster.on_event`): a shell's watch of pod status.
        self.watchers: dict[str, list[Callable[[SimEvent], None]]] = {}

    def log(
        self, kind: str, obj: str, reason: str = "", message: str = "", **details: Any
    ) -> SimEvent:
        ev = SimEvent(self.clock.now, kind, obj, reason, message, details)
        self.events.append(ev)
        for fn in self.watchers.get(kind, ()):
            fn(ev)
        return ev

    def count(self, wl_key: str | None, name: str, n: int = 1) -> None:
        row = self.counters.setdefault(wl_key or "", {})
        row[name] = row.get(name, 0) + n
