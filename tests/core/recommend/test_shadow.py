"""Issue 24 part 3: shadow policies, scored on the live history by THE scoring.

A target names policies to run in shadow; every suggestion pass runs them through the
recommender on the same history and scores what they would have requested against the
usage that came (`status.shadow`). The score is `bench recommend`'s (one implementation,
`recommend.score`): replaying the shadow's own decisions through the benchmark's replay
gives the same numbers. A shadow never moves the live suggestion.
"""

from __future__ import annotations

import numpy as np
import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, Sample
from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.errors import ForesizeError
from foresize.core.recommend.histories import MODEL_STEP, load_histories
from foresize.core.recommend.suggestions import SuggestionState, plan_suggestions
from support.selectors import _pod

STEP = 300.0
T0 = 1_780_000_000.0 - 1_780_000_000.0 % STEP
WARMUP_COLUMNS = 2016  # the replay's 7 days of 5-minute columns
PASSES = 40  # every 15 minutes after the warm-up


def _history() -> UsageHistory:
    """7.5 days of one bare pod's usage every 5 minutes: a daily CPU cycle, memory with
    bursts (seeded)."""
    rng = np.random.default_rng(24)
    n = WARMUP_COLUMNS + 3 * PASSES + 3
    t = T0 + STEP * np.arange(n)
    hour = (t % 86400) / 3600
    cpu = 0.2 + 0.15 * np.sin(2 * np.pi * (hour - 7) / 24) + 0.03 * rng.standard_normal(n)
    mem = (300 + 40 * (rng.random(n) < 0.05) + 5 * rng.standard_normal(n)) * MIB
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(
        [
            Sample(
                float(t[i]),
                "batch",
                "light",
                "light",
                "work",
                float(max(cpu[i], 0.01)),
                float(mem[i]),
            )
            for i in range(n)
        ]
    )
    return history


def _target(shadow: list[dict] | None):
    spec = {
        "selector": {"matchLabels": {"size": "small"}},
        "vertical": {"mode": "recommendation"},
    }
    if shadow is not None:
        spec["shadow"] = shadow
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "batch", "namespace": "batch", "uid": "t-batch", "generation": 1},
            "spec": spec,
        }
    )


def _snapshot(target, now: float) -> ClusterSnapshot:
    from foresize.core.cluster.model import Node

    return ClusterSnapshot(
        now=now,
        nodes={"n1": Node("n1", allocatable={"cpu": 16000, "memory": 64 * 1024 * MIB})},
        pods=[_pod("light", None, {"size": "small"})],
        targets=[target],
    )


SHADOWS = [
    {"name": "cheap", "model": {"mode": "undershoot"}},
    {"name": "safe", "model": {"mode": "percentile", "percentile_value": 99.9}},
]


@pytest.fixture(scope="module")
def run():
    """PASSES suggestion passes, the first one in the last bucket of the replay's warm-up
    (so both score from the same column), then every 3 buckets (the replay's decisions)."""
    history = _history()
    state = SuggestionState()
    target = _target(SHADOWS)
    first = int(T0 // STEP) + WARMUP_COLUMNS - 1
    statuses = []
    for k in range(PASSES):
        now = (first + 3 * k) * STEP + 1.0
        (write,) = plan_suggestions(_snapshot(target, now), history, now, state=state)
        statuses.append((now, write.status))
    return history, state, statuses


def test_shadow_scores_equal_bench_recommends_on_the_same_history(run):
    from foresize.bench.replay import Policy, ReplayData, replay

    history, state, statuses = run
    now, status = statuses[-1]
    entries = {e["name"]: e for e in status["shadow"]}
    assert list(entries) == ["active", "cheap", "safe"]
    (hist,) = load_histories(history, "batch", "light", ["work"], now).values()
    grid = {CPU: np.asarray(hist.cpu) * 1000.0, MEMORY: np.asarray(hist.memory)}
    first = int(np.argmax(np.isfinite(grid[CPU])))
    base = int(now // MODEL_STEP) - (len(grid[CPU]) - 1) + first  # bucket of column 0

    class Recorded(Policy):
        """Replays a run's decisions: the one it made in the bucket of sample i."""

        def __init__(self, decisions):
            self.by_bucket = {int(t // STEP): r["work"] for t, r in decisions}

        def decide(self, i):
            mine = self.by_bucket.get(base + i)
            return {
                r: np.array([np.nan if mine is None else float(mine[r])]) for r in (CPU, MEMORY)
            }

    data = ReplayData(
        start=base * STEP,
        cpu=grid[CPU][None, first:],
        memory=grid[MEMORY][None, first:],
        cpu_capacity=None,
        memory_capacity=None,
        first=np.array([0]),
    )
    for name, run_ in state.shadow["batch/batch"].items():
        bench = replay(data, Recorded(run_.decisions))
        for resource in (CPU, MEMORY):
            got = entries[name]["score"][resource]
            assert got == pytest.approx(bench[resource].as_dict(), rel=1e-9, abs=1e-12), (
                name,
                resource,
            )
    # The policies differ: the cheaper one reserves less and is short more often.
    cheap, safe = entries["cheap"]["score"][CPU], entries["safe"]["score"][CPU]
    assert cheap["slack"] < safe["slack"] and cheap["shortfall"] > safe["shortfall"]
    assert entries["cheap"]["decisions"] == PASSES


def test_a_shadow_never_moves_the_live_suggestion(run):
    history, _, statuses = run
    state = SuggestionState()
    target = _target(None)
    for now, with_shadows in statuses[:3]:
        (write,) = plan_suggestions(_snapshot(target, now), history, now, state=state)
        assert write.status["vertical_suggestion"] == with_shadows["vertical_suggestion"]
        assert "shadow" not in write.status


@pytest.mark.parametrize(
    ("shadow", "message"),
    [
        (
            [{"name": "Cheap", "model": {"mode": "undershoot"}}],
            "spec.shadow[0].name: a lowercase RFC 1123 label",
        ),
        ([{"name": "active", "model": {"mode": "undershoot"}}], "the target's own policy"),
        (
            [{"name": "a", "model": {"mode": "sometimes"}}],
            "spec.shadow[0].model.mode: must be one of",
        ),
        (
            [{"name": "a", "model": {"mode": "percentile"}}],
            "shadow[0].model (merged with model): percentile_value is required",
        ),
        (
            [{"name": "a", "model": {"mode": "undershoot"}}, {"name": "a", "model": {}}],
            "the names a are given more than once",
        ),
        (
            [{"name": f"p{i}", "model": {}} for i in range(5)],
            "spec.shadow: List should have at most 4",
        ),
        ([{"name": "a"}], "spec.shadow[0].model: required field is missing"),
    ],
)
def test_bad_shadow_policies_name_the_field(shadow, message):
    with pytest.raises(ForesizeError) as err:
        _target(shadow)
    assert message in str(err.value)
