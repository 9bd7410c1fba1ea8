"""Recommendation rounds spread over their cadence (`recommend.rounds`): one round a cadence
for each target, at a place in the cadence a hash of its key fixes, so a fleet is not due
all in one pass (issue 26)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

from foresize.core.recommend.histories import MODEL_STEP
from foresize.core.recommend.rounds import round_due, round_offset

CADENCE = 3600.0  # twelve places on the 5-minute model grid
INTERVAL = 60.0
START = 1_800_000_000.0


def _run(keys: list[str], passes: int) -> tuple[dict[str, list[float]], list[int]]:
    """The rounds a loop of passes every INTERVAL makes: (rounds by key, due per pass)."""
    last: dict[str, float | None] = dict.fromkeys(keys)
    rounds: dict[str, list[float]] = {k: [] for k in keys}
    per_pass = []
    for i in range(passes):
        now = START + i * INTERVAL
        due = [k for k in keys if round_due(k, last[k], now, CADENCE)]
        for k in due:
            last[k] = now
            rounds[k].append(now)
        per_pass.append(len(due))
    return rounds, per_pass


def test_every_target_gets_one_round_a_cadence_after_its_first() -> None:
    keys = [f"ns-{i % 7}/wl-{i}" for i in range(600)]
    cadences = 6
    rounds, _ = _run(keys, int(cadences * CADENCE / INTERVAL))
    for key, times in rounds.items():
        assert times[0] == START  # a target never seen is not kept waiting for its slot
        later = times[1:]
        # One round in each cadence-long slot of its own after the first.
        offset = round_offset(key, CADENCE)
        slots = [math.floor((t - offset) / CADENCE) for t in later]
        assert slots == list(range(slots[0], slots[0] + len(slots))), (key, later)
        assert len(later) in (cadences - 1, cadences)
        # Once in step, exactly one cadence apart (the passes' grid permitting).
        for a, b in itertools.pairwise(later):
            assert abs((b - a) - CADENCE) < INTERVAL + 1e-6


def test_the_rounds_of_a_fleet_spread_over_the_cadence() -> None:
    keys = [f"ns-{i % 20}/wl-{i}" for i in range(2400)]
    _, per_pass = _run(keys, int(3 * CADENCE / INTERVAL))
    assert per_pass[0] == len(keys)  # the first pass: nothing known yet
    steady = per_pass[int(CADENCE / INTERVAL) + 1 :]
    places = int(CADENCE / MODEL_STEP)
    expected = len(keys) / places  # 200 at each of the cadence's 12 places on the grid
    # Each place does about its share; without the offsets every target stays in step
    # with the first pass and all 2,400 come due in one pass each cadence.
    busy = [n for n in steady if n]
    assert max(busy) <= 1.5 * expected and min(busy) >= expected / 2, Counter(steady)
    assert len(busy) >= 2 * places - 1  # two cadences (less an edge), every place in each


def test_the_offset_is_stable_on_the_model_grid_and_within_the_cadence() -> None:
    # blake2b, not Python's salted hash: another process or replica finds the same place.
    assert round_offset("shop/web", CADENCE) == round_offset("shop/web", CADENCE)
    offsets = [round_offset(f"shop/wl-{i}", CADENCE) for i in range(1000)]
    assert all(0.0 <= o < CADENCE and o % MODEL_STEP == 0 for o in offsets)
    assert len(set(offsets)) == 12  # every place of the cadence used
    assert 0 < round_offset("shop/web", 200.0) < 200.0  # a cadence under two steps


def test_a_round_made_off_its_slot_is_followed_by_the_next_slot() -> None:
    key = "shop/web"
    offset = round_offset(key, CADENCE)
    slot = START - (START - offset) % CADENCE + CADENCE  # the first slot after START
    assert not round_due(key, START, slot - 1.0, CADENCE)
    assert round_due(key, START, slot, CADENCE)
    assert not round_due(key, slot, slot + CADENCE - 1.0, CADENCE)
    assert round_due(key, None, START, CADENCE) and round_due(key, START, START, 0.0)
