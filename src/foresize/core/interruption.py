"""A planning pass given up part-way, for a shell that is stopping (issue 26).

A pass over a large cluster is seconds of CPU and, on a loaded machine, a minute or more
of wall time (50k pods, `bench shard`). The kube shell runs it in a worker thread, and a
process cannot end while that thread runs: a shutdown that waited for it hung past its
grace, Leases already released, and ended in the forced exit 1. A pass only plans: none of
its actions has been sent while it runs, so giving it up between two of its steps loses
nothing that the next holder of its shards will not plan again.

So the pass takes a `StopCheck` (the shell's "stop now?", a stop flag read), asks it with
`checkpoint` between its steps and between the targets of its per-target loops, and ends
with `PassInterrupted` when the answer is yes. The state the pass was given may then be
partly updated: a shell that stops does not plan again. The core reads no clock or flag of
its own; the answer is the shell's.
"""

from __future__ import annotations

from collections.abc import Callable

StopCheck = Callable[[], bool]


class PassInterrupted(Exception):
    """The pass was given up at a checkpoint: its shell is stopping."""


def checkpoint(stop: StopCheck | None) -> None:
    """Raise `PassInterrupted` if the shell asks the pass to stop (None: never)."""
    if stop is not None and stop():
        raise PassInterrupted("the pass was given up: its shell is stopping")
