"""A pass given up at a checkpoint (`core.interruption`): a stop check that turns true
mid-pass ends it with `PassInterrupted` between two targets, and one that stays false
changes nothing of what the pass plans."""

from __future__ import annotations

import pytest

from foresize.core.interruption import PassInterrupted
from foresize.core.reconcile import ReconcileState, plan_pass
from foresize.front.cli.bench_plan import build_snapshot

NOW = 1_700_000_000.0


def test_a_stop_check_that_stays_false_changes_nothing() -> None:
    snap, suggestions = build_snapshot(400, 40, 20, seed=5)
    plain = plan_pass(snap, NOW, ReconcileState(), None, suggestions=suggestions)
    asked = []
    checked = plan_pass(
        snap,
        NOW,
        ReconcileState(),
        None,
        suggestions=suggestions,
        stop=lambda: asked.append(1) is not None,  # always False, counted
    )
    assert plain.actions and checked.actions == plain.actions
    assert len(asked) > 40  # between the steps and between each of the 40 targets


def test_a_stop_mid_pass_ends_it_at_the_next_checkpoint() -> None:
    snap, suggestions = build_snapshot(400, 40, 20, seed=5)
    asked = []

    def stop_after_ten() -> bool:
        asked.append(1)
        return len(asked) > 10

    with pytest.raises(PassInterrupted):
        plan_pass(snap, NOW, ReconcileState(), None, suggestions=suggestions, stop=stop_after_ten)
    assert len(asked) == 11  # it ended at the first check that said stop
