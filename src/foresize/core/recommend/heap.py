"""THE heap rule: no memory request or limit below a managed runtime's heap ceiling plus
its non-heap memory (issue 25). Pure; `recommend.target` applies it to every container
whose spec fixes a heap ceiling (`cluster.runtime.heap_ceiling`), in both shells.

A JVM's heap grows to its ceiling before a full collection gives memory back, so usage
seen below the ceiling says nothing about what the heap will take: a request sized on
such usage is OOM-killed the day the heap fills. The floor is the ceiling plus the
non-heap memory (metaspace, code cache, thread stacks, direct buffers; Go's and .NET's
runtime overheads): usage above the ceiling is non-heap, so where usage has gone above
it the non-heap allowance is learned (the recent peak minus the ceiling); otherwise it is
NON_HEAP_DEFAULT_SHARE of the ceiling, at least NON_HEAP_DEFAULT_MIN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from foresize.core.cluster.runtime import HeapCeiling

MIB = 2**20

NON_HEAP_DEFAULT_SHARE = 0.25
"""Without usage above the heap ceiling, non-heap memory is taken as a quarter of the
heap ceiling. Why: HotSpot's own default heap is 25% of the limit, i.e. it leaves three
quarters to everything else; services with an explicit -Xmx commonly run 20-40% over it
(metaspace, code cache, one thread stack per thread, direct buffers). A quarter is the
lower end of that range: usage above the ceiling replaces it with what was measured."""
NON_HEAP_DEFAULT_MIN = 64 * MIB
"""And never less than 64 MiB: a JVM's metaspace and code cache alone take tens of MiB
whatever the heap (a 128 MiB heap does not come with a 32 MiB JVM)."""


@dataclass(frozen=True, slots=True)
class HeapFloor:
    """The memory a heap-bound container cannot go below (bytes) and why."""

    heap: int
    non_heap: int
    learned: bool  # the non-heap allowance was measured (usage above the heap)

    @property
    def floor(self) -> int:
        return self.heap + self.non_heap

    def describe(self, ceiling: HeapCeiling) -> str:
        how = "learned from usage above the heap" if self.learned else "default allowance"
        text = (
            f"{ceiling.runtime} heap ceiling {self.heap // MIB}Mi ({ceiling.source}) + "
            f"non-heap {self.non_heap // MIB}Mi ({how})"
        )
        if ceiling.assumed:
            text += "; assumed: " + "; ".join(ceiling.assumed)
        return text


def heap_floor(ceiling: HeapCeiling, limit_at_start: int | None, peak: float) -> HeapFloor | None:
    """The floor for a container whose heap ceiling is `ceiling`, started with memory
    limit `limit_at_start` (a percentage ceiling is of that limit), whose recent peak
    usage is `peak` bytes (NaN: unknown). None where no ceiling is known."""
    heap = ceiling.bytes_at(limit_at_start)
    if heap is None:
        return None
    if math.isfinite(peak) and peak > heap:
        return HeapFloor(heap, int(math.ceil(peak - heap)), learned=True)
    default = max(int(heap * NON_HEAP_DEFAULT_SHARE), NON_HEAP_DEFAULT_MIN)
    return HeapFloor(heap, default, learned=False)


def heap_bound_note(ceiling: HeapCeiling, floor: HeapFloor, target: float) -> str | None:
    """Where memory wants more than heap ceiling + non-heap, a bigger limit gives the
    running heap nothing (it was fixed at start): say so. None otherwise."""
    if target <= floor.floor:
        return None
    if ceiling.fraction is not None:
        return (
            "needs more memory than heap + non-heap: the heap follows the limit only at the"
            " container's start, so the raise is changed at next restart"
        )
    return (
        "needs more memory than heap + non-heap: the heap is fixed by "
        f"{ceiling.source}; a raise is changed at next restart and gives the heap nothing"
        " until that flag changes"
    )
