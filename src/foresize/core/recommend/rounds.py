"""When a target's recommendation round is due: once in each of its slots.

A target's slots are `offset + k * cadence` (k = ..., -1, 0, 1, ...), its offset a stable
hash of its key. A round is due once the pass is past the first slot after the target's
last round. Without the offset every target of one cadence stays in step from the pass
that first saw them all, and every one is due in the same pass: a round of the whole fleet
at once, its histories on the model grid in memory together (at 10k pods, 21.8 KiB a pod
over the cache, issue 26). With it, the rounds of N targets spread evenly over the cadence
and a pass at interval i recommends about N * i / cadence of them, while each target still
gets one round a cadence.
"""

from __future__ import annotations

import hashlib
import math

from foresize.core.recommend.histories import MODEL_STEP

_HASH_SPAN = float(2**64)


def round_offset(key: str, cadence: float) -> float:
    """Where in each cadence the target's rounds fall, in [0, cadence): the same in every
    process, replica and run (a hash of the key, not Python's salted `hash`), so a restart
    or a handover keeps the target's place. On the model grid (`MODEL_STEP`) when the
    cadence spans more than one step: the forecast's decisions are on that grid, and with
    rounds between two of its steps the simulator's 15-minute 2,000m daily spike was met
    at 1,614m (tests/shells/sim/test_daily_spike_sim.py). The price: a 15-minute cadence
    has three places, so a pass recommends up to a third of the fleet, not a thirtieth."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    offset = int.from_bytes(digest, "big") / _HASH_SPAN * cadence
    if cadence >= 2 * MODEL_STEP:
        offset = math.floor(offset / MODEL_STEP) * MODEL_STEP
    return offset


def round_due(key: str, last: float | None, now: float, cadence: float) -> bool:
    """Whether `key`'s round is due at `now`: it has had none (`last` None), or a slot of
    its own lies in (last, now]. A first round comes at once (a new target is not kept
    waiting for its slot); the next at its first slot after it, then one a cadence."""
    if last is None or cadence <= 0:
        return True
    offset = round_offset(key, cadence)
    return math.floor((now - offset) / cadence) > math.floor((last - offset) / cadence)


def last_slot(key: str, now: float, cadence: float) -> float:
    """The latest of `key`'s slots at or before `now` (`now` itself for no cadence): when
    a process that kept the cadence last recommended the target."""
    if cadence <= 0:
        return now
    offset = round_offset(key, cadence)
    return offset + math.floor((now - offset) / cadence) * cadence
