"""The kube shell's passes over a cache of `bench loop`'s synthetic cluster, with a history
behind every target: the recommendation rounds spread over the cadence
(`recommend.rounds`), each target recommended once a cadence, and a pass's peak memory
bounded by its share of the fleet, not the fleet (issue 26: at 10k pods, every target
due in one pass peaked at 21.8 KiB a pod)."""

from __future__ import annotations

import tracemalloc
from collections import Counter

import numpy as np

from foresize.adapters.history.memory import UsageHistory
from foresize.bench.synthetic import synthetic_objects
from foresize.core.api.fields import format_timestamp
from foresize.core.cluster.actions import WriteTargetStatus
from foresize.core.history import SeriesKey
from foresize.core.reconcile import ReconcileConfig, ReconcileState, plan_pass
from foresize.shells.kube.handlers import parse_foresize
from foresize.shells.kube.state import ClusterState

TARGETS = 24
CADENCE = 900.0  # the targets' model cadence, and --suggest-interval
PASSES_A_CADENCE = 6
NOW = 1_800_000_000.0


def _cluster_and_history() -> tuple[ClusterState, UsageHistory]:
    state = ClusterState(target_parser=parse_foresize)
    by_kind: dict[str, list[dict]] = {}
    for obj in synthetic_objects(2 * TARGETS, TARGETS, 2):
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, objects in by_kind.items():
        state.replace(kind, objects)
    history = UsageHistory(step=300.0)
    keys = [SeriesKey(f"ns-{t % 20}", f"wl-{t}", "app") for t in range(TARGETS)]
    rng = np.random.default_rng(26)
    for i in range(2 * 288):  # two days of 5-minute samples
        cpu = rng.uniform(0.05, 0.1, TARGETS)
        history.write_poll(NOW - 2 * 86400 + i * 300.0, keys, cpu, rng.uniform(1e8, 1.2e8, TARGETS))
    return state, history


def test_rounds_cover_every_target_once_a_cadence_and_a_pass_s_memory_its_share() -> None:
    state, history = _cluster_and_history()
    config = ReconcileConfig(suggest_interval=CADENCE)
    assert config.suggest_interval == CADENCE
    pass_state = ReconcileState()
    interval = CADENCE / PASSES_A_CADENCE
    rounds: dict[str, list[float]] = {}
    peaks: list[int] = []
    per_pass: list[int] = []
    for i in range(2 * PASSES_A_CADENCE + 1):
        now = NOW + i * interval
        tracemalloc.start()
        try:
            plan = plan_pass(state.snapshot(now), now, pass_state, history, config)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        pass_state = plan.state
        made = [
            f"{a.namespace}/{a.name}"
            for a in plan.actions
            if isinstance(a, WriteTargetStatus)
            and (a.status.get("vertical_suggestion") or {}).get("created_at")
            == format_timestamp(now)
        ]
        per_pass.append(len(made))
        for key in made:
            rounds.setdefault(key, []).append(now)
    assert len(rounds) == TARGETS and per_pass[0] == TARGETS  # a first round for each at once
    # After the first: one round in each cadence-long window, for every target.
    for key, times in rounds.items():
        for c in range(1, 2):
            window = [t for t in times if NOW + c * CADENCE <= t < NOW + (c + 1) * CADENCE]
            assert len(window) == 1, (key, times)
    # Spread: a pass does at most a place's third of the fleet (15-minute cadence: three
    # places on the model grid); without the offsets all 24 came due again together.
    steady = per_pass[PASSES_A_CADENCE + 1 :]
    assert max(steady) <= TARGETS // 2, Counter(steady)
    # And its peak memory follows: the histories of a few targets on the model grid at
    # once, not of all 24 (the first pass: about 260 KB a target here).
    assert max(peaks[PASSES_A_CADENCE + 1 :]) < 0.6 * peaks[0], peaks
