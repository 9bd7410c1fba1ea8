"""Simulated time and the event queue every part of the simulated cluster schedules on."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class Clock:
    """The simulated clock and its queue: callbacks due at a time run in time order, and
    in the order they were scheduled within one instant (so a seed gives one history)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at simulated time `t` (not before now)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now), self._seq, fn, args))

    def every(
        self, interval_seconds: float, fn: Callable[[], None], *, start: float | None = None
    ) -> None:
        """Call `fn()` every `interval_seconds` of simulated time, from `start` (now)."""
        if interval_seconds <= 0:
            raise ValueError("interval must be positive")

        def tick() -> None:
            fn()
            self.at(self.now + interval_seconds, tick)

        self.at(self.now if start is None else start, tick)

    def run_until(self, t: float) -> None:
        """Advance to `t`, running every callback due until then."""
        while self._heap and self._heap[0][0] <= t:
            when, _, fn, args = heapq.heappop(self._heap)
            self.now = when
            fn(*args)
        self.now = max(self.now, t)
