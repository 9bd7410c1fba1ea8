"""`foresize bench deferred` (issue 23 item 5) on a short run of its CPU scenario, peak
moved to the sixth hour: a Deferred grow held without a release keeps far more capacity
than one fitted after 5 minutes, and the JSON has the keys the docs quote."""

from __future__ import annotations

from foresize.bench.deferred import KEYS, run_bench


def test_a_held_grow_keeps_more_capacity_than_a_fitted_one() -> None:
    out = run_bench(
        hours=8.0,
        scenarios=("peak-two-nodes-cpu",),
        modes=("in_place",),
        settings=(("never", "never", None), ("fit@5m", "fit", "5m")),
        peak_hour=6,
    )
    never, fit = out["settings"]["never"], out["settings"]["fit@5m"]
    assert set(never) == set(KEYS) and [r["setting"] for r in out["runs"]] == ["never", "fit@5m"]
    assert never["stalls"] >= 1 and fit["stalls"] >= 1  # the node is full at the peak
    assert never["held_core_seconds"] > 3 * fit["held_core_seconds"] > 0
    # A fitted release frees what it held at 5 minutes: at most 5 min of every stall's gap
    # (each grow here is under 1 core, 4 pods).
    assert fit["held_core_seconds"] <= fit["stalls"] * 300 * 1.0
