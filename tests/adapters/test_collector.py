"""The planning pass runs with the cyclic collector off, and leaves it as it found it."""

from __future__ import annotations

import gc

import pytest

from foresize.adapters.collector import planned_without_cyclic_gc, without_cyclic_gc


@pytest.fixture(autouse=True)
def _collector_restored():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_pass_runs_without_the_collector_and_turns_it_back_on() -> None:
    gc.enable()
    seen = planned_without_cyclic_gc(gc.isenabled)
    assert seen is False
    assert gc.isenabled()


def test_no_young_collection_runs_during_the_pass() -> None:
    gc.enable()
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    during: list[int] = []

    def allocate() -> list[list[int]]:
        collections.clear()  # from here on: the block's own allocations
        out = [[i] for i in range(20 * gc.get_threshold()[0])]
        during.extend(collections)
        return out

    gc.callbacks.append(count)
    try:
        kept = planned_without_cyclic_gc(allocate)
        assert during == []
        kept += allocate()
    finally:
        gc.callbacks.remove(count)
    assert collections != []  # the same allocations collect once the collector is back


def test_the_collector_is_back_on_when_the_pass_raises() -> None:
    gc.enable()

    def fails() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        planned_without_cyclic_gc(fails)
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    with without_cyclic_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_holds_in_two_threads_turn_it_back_on_once_both_end() -> None:
    """A relist during a pass: the first block to end leaves the collector off for the
    other; the last turns it back on."""
    import threading

    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    states: list[bool] = []

    def pass_thread() -> None:
        with without_cyclic_gc():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    worker = threading.Thread(target=pass_thread)
    worker.start()
    first_in.wait(5)
    with without_cyclic_gc():
        second_in.set()
        first_out.wait(5)
        states.append(gc.isenabled())  # the other block ended: still off for this one
    worker.join(5)
    assert states == [False]
    assert gc.isenabled()
