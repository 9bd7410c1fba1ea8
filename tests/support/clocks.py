"""A clock the tests set by hand, for code that takes `clock` / `monotonic` callables."""

from __future__ import annotations


class Clock:
    """Returns `now`, which the test moves (`clock.now += 16`)."""

    def __init__(self, now: float = 1_780_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
