"""Python's cyclic garbage collector around a planning pass (issue 26).

A pass over a large cluster allocates hundreds of thousands of objects that live until it
returns (the new worker state, the per-pod memo, the actions and their Events). Each 700
allocations start a young collection, and every so often one of them is a full collection,
which walks every tracked object of the process: the shell's snapshot and cache of tens of
thousands of pods included. At 10,000 pods that was a third of a pass's CPU time
(`foresize bench plan`, docs/scale.md). Freezing the snapshot (`gc.freeze`) helps less: the
collector then counts almost nothing as long-lived and runs its full collections over the
pass's own objects more often.

So both shells run the pass with the cyclic collector off (`without_cyclic_gc`).
Reference counting still frees every acyclic object at once; the few cycles made during the
pass wait for the next collection after it. The core's pass is pure and short (seconds at
100,000 pods), so memory cannot run away while the collector waits.

The kube shell's listings hold it off too (`kube.informer`): a LIST of 10,000 pods builds
about a million objects, and with the collector on it made four full collections of 28
to 95 ms each, every thread stopped (the webhook and the Lease renewals with them), and
took 0.93 s of CPU instead of 0.49 s. A listing and a pass may overlap (a relist during a
pass), in different threads, so the hold is counted: the first holder turns the collector
off, the last one turns it back on if it was on before the first.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


_lock = threading.Lock()
_holds = 0  # holders of the collector off, in every thread
_enable_after = False  # whether it was on when the first holder took it


@contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """The cyclic collector off while the block runs (in any thread, blocks overlapping),
    back on when the last block ends (also when it raises), if it was on before the
    first; left off when it was off already (a caller that disabled it keeps it so)."""
    global _holds, _enable_after
    with _lock:
        if _holds == 0:
            _enable_after = gc.isenabled()
            gc.disable()
        _holds += 1
    try:
        yield
    finally:
        with _lock:
            _holds -= 1
            if _holds == 0 and _enable_after:
                gc.enable()


def planned_without_cyclic_gc(plan: Callable[[], T]) -> T:
    """`plan()` with the cyclic collector off (`without_cyclic_gc`): what both shells call
    their planning pass through."""
    with without_cyclic_gc():
        return plan()
