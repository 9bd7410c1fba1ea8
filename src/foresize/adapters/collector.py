"""Python's cyclic garbage collector around a planning pass (issue 26).

A pass over a large cluster allocates hundreds of thousands of objects that live until it
returns (the new worker state, the per-pod memo, the actions and their Events). Each 700
allocations start a young collection, and every so often one of them is a full collection,
which walks every tracked object of the process: the shell's snapshot and cache of tens of
thousands of pods included. At 10,000 pods that was a third of a pass's CPU time
(`foresize bench plan`, docs/scale.md). Freezing the snapshot (`gc.freeze`) helps less: the
collector then counts almost nothing as long-lived and runs its full collections over the
pass's own objects more often.

So both shells run the pass with the cyclic collector off (`pass_without_cyclic_gc`).
Reference counting still frees every acyclic object at once; the few cycles made during the
pass wait for the next collection after it. The core's pass is pure and short (seconds at
100,000 pods), so memory cannot run away while the collector waits.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def pass_without_cyclic_gc() -> Iterator[None]:
    """The cyclic collector off while the block runs, back on after (also when it raises);
    left off when it was off already (a caller that disabled it keeps it so)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def planned_without_cyclic_gc(plan: Callable[[], T]) -> T:
    """`plan()` with the cyclic collector off (`pass_without_cyclic_gc`): what both shells
    call their planning pass through."""
    with pass_without_cyclic_gc():
        return plan()
