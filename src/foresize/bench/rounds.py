"""`bench loop`'s recommendation round, measured in the bench's own process: the core's
pass over a cache of the same synthetic cluster (`ClusterState`, as the operator keeps it)
with the operator's empty in-memory history (the strict server has no metrics-server;
each series still goes on the 14-day model grid), under `tracemalloc`.

The operator process in the run does not get to a round at its start: its targets carry
suggestions made in their last round slot before it (`synthetic.SUGGEST_INTERVAL`), and
a target's next slot falls in the run for a run's length in 15 minutes of them. Two
passes are measured: one with every target due (a fleet in step, as before the rounds
were spread, or a first start on targets with no suggestion) and the pass of the cadence
at the shipped interval that has the most targets due with the rounds spread
(`recommend.rounds`). Each is the pass's peak traced
memory above what was traced before it, per pod: Python's own allocations, not RSS.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

from foresize.bench.synthetic import NAMESPACES, SUGGEST_INTERVAL, synthetic_objects
from foresize.core.recommend.rounds import round_due
from foresize.shells.kube.options import OperatorOptions

SHIPPED_CADENCE = SUGGEST_INTERVAL  # the operator's default --suggest-interval
SHIPPED_INTERVAL = OperatorOptions().interval  # the operator's default --interval


def _cache(pods: int, targets: int, nodes: int) -> Any:
    from foresize.shells.kube.handlers import parse_foresize
    from foresize.shells.kube.state import ClusterState

    state = ClusterState(target_parser=parse_foresize)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in synthetic_objects(pods, targets, nodes):
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, objects in by_kind.items():
        state.replace(kind, objects)
    return state


def _busiest_pass(keys: list[str], now: float) -> tuple[float, dict[str, float]]:
    """The pass of the cadence after `now` with the most rounds due, every target's last
    round one cadence's worth of passes before: (its time, the last rounds)."""
    passes = int(SHIPPED_CADENCE / SHIPPED_INTERVAL)
    best, best_due = now, -1
    for i in range(1, passes + 1):
        at = now + i * SHIPPED_INTERVAL
        due = sum(1 for k in keys if round_due(k, at - SHIPPED_INTERVAL, at, SHIPPED_CADENCE))
        if due > best_due:
            best, best_due = at, due
    return best, {k: best - SHIPPED_INTERVAL for k in keys}


def measure_round(pods: int, targets: int, nodes: int) -> dict[str, Any]:
    """`round_*` keys of `bench loop`'s document (see the module docstring)."""
    from foresize.adapters.collector import without_cyclic_gc
    from foresize.adapters.history.memory import UsageHistory
    from foresize.core.reconcile import ReconcileConfig, ReconcileState, plan_pass

    state = _cache(pods, targets, nodes)
    now = time.time()
    config = ReconcileConfig(suggest_interval=SHIPPED_CADENCE)
    keys = [f"ns-{t % NAMESPACES}/wl-{t}" for t in range(targets)]
    at, last = _busiest_pass(keys, now)
    out: dict[str, Any] = {}
    for name, when, rounds in (("all_due", now, {}), ("spread", at, last)):
        snapshot = state.snapshot(when)
        history = UsageHistory(step=300.0)
        pass_state = ReconcileState(last_suggest=dict(rounds))
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            with without_cyclic_gc():
                plan = plan_pass(snapshot, when, pass_state, history, config)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        made = sum(1 for k in plan.state.last_suggest if plan.state.last_suggest[k] == when)
        out[f"round_{name}_targets"] = made
        out[f"round_{name}_peak_kib_per_pod"] = round(peak / 1024 / pods, 2)
    return out
