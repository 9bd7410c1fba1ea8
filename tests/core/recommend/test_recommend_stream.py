"""Issue 26 item 3: recommending a fleet by shards of series, in bounded memory.

`recommend_stream` gives, number for number, what one `recommend_batch` of the whole fleet
gives (the memory risk priced against the whole fleet, the calibration pooled over the
whole fleet), while it holds one shard's histories at a time.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from foresize.core.api.quantity import GIB
from foresize.core.cluster.model import ResourceRequirements
from foresize.core.forecast.synthetic import make_mixed_rows
from foresize.core.recommend.histories import ContainerHistory
from foresize.core.recommend.params import RecommendParams, ResourceModel
from foresize.core.recommend.request import TargetRequest
from foresize.core.recommend.stream import recommend_stream, shards
from foresize.core.recommend.target import recommend_batch

STEP = 300.0
NOW = 1_700_006_400.0 + 20 * 86400.0  # a midnight UTC, then 20 days
DAY = 288
MODES = ("balanced", "undershoot", "overshoot", "cost_optimized")
TARGETS = 14


def _containers(i: int) -> list[str]:
    return ["app", "sidecar"] if i % 5 == 0 else ["app"]


def _params(i: int) -> RecommendParams:
    mode = MODES[i % len(MODES)]
    return RecommendParams(
        uid=f"t{i}",
        forecast_blocks=1800.0 if i % 7 == 3 else 900.0,
        cpu=ResourceModel(mode),
        memory=ResourceModel(mode),
        min_lookback_to_scale=0.0,
    )


def _histories(i: int, round_: int, days: int) -> dict[str, ContainerHistory]:
    """Target i's histories at a round: seeded, of 2 to 4 days (rows of one forecast group
    differ in length), ending at the round's bucket (3 buckets a round)."""
    own = 2 + i % 3
    width = own * DAY
    out = {}
    for k, name in enumerate(_containers(i)):
        series = make_mixed_rows(2, 0, 2, days=days, seed=1000 * i + k)
        end = days * DAY - 3 * (4 - round_)
        out[name] = ContainerHistory(
            cpu=series[0, end - width : end],
            memory=series[1, end - width : end] * GIB,
            first_seen=NOW - own * 86400.0,
        )
    return out


def _request(i: int, round_: int, state: dict, days: int = 5) -> TargetRequest:
    current = {c: ResourceRequirements({"cpu": 500, "memory": GIB}) for c in _containers(i)}
    return TargetRequest(
        _params(i),
        _histories(i, round_, days),
        current,
        state.get(("oom", i)),
        state.get(("forecast", i), {}),
        state.get(("schedule", i), {}),
    )


def _carry(state: dict, i: int, result) -> None:
    state[("oom", i)] = result.oom_state
    state[("forecast", i)] = result.forecast_state
    state[("schedule", i)] = result.schedule_state


def _digest(result) -> tuple:
    """Everything a result hands on, as exact numbers."""
    states = {
        key: (st.loss.tobytes(), st.weight.tobytes(), st.log_factor.tobytes(), st.last_origin)
        for key, st in sorted((result.forecast_state or {}).items())
    }
    containers = {
        name: (dict(cs.requests), dict(cs.limits))
        for name, cs in sorted(result.suggestion.containers.items())
    }
    return (
        containers,
        sorted(result.at_mode.items()),
        sorted((c, sorted(q.items())) for c, q in result.quantiles.items()),
        sorted((c, sorted(m.items())) for c, m in result.models.items()),
        states,
    )


def _rounds(recommend, rounds: int = 3) -> list[list[tuple]]:
    """`rounds` rounds 15 minutes apart, the states carried; each round's digests."""
    state: dict = {}
    out = []
    for r in range(rounds):
        now = NOW - 900.0 * (rounds - 1 - r)
        results = recommend(list(range(TARGETS)), lambda i, r=r: _request(i, r, state), now)
        for i, result in enumerate(results):
            _carry(state, i, result)
        out.append([_digest(x) for x in results])
    return out


def _whole(items, load, now, reference=None):
    return recommend_batch([load(i) for i in items], now, memory_reference=reference)


def _streamed(limit, reference=None):
    def recommend(items, load, now):
        stream = recommend_stream(
            items,
            lambda i: (None, ([load(i)],)),
            lambda i: len(_containers(i)),
            now,
            memory_reference=reference,
            limit=limit,
        )
        return [results[0][0] for _i, _meta, _reqs, results in stream]

    return recommend


def _naive(limit):
    """Each shard alone: what sharding without the fleet's totals would give."""

    def recommend(items, load, now):
        out = []
        for cut in shards(items, lambda i: len(_containers(i)), limit):
            out += recommend_batch([load(items[j]) for j in cut], now)
        return out

    return recommend


@pytest.mark.parametrize("reference", [None, 1.5 * GIB, float("nan")])
def test_a_streamed_fleet_is_recommended_as_one_batch(reference):
    whole = _rounds(lambda items, load, now: _whole(items, load, now, reference))
    for limit in (1, 6):
        assert _rounds(_streamed(limit, reference)) == whole, limit


def test_shards_alone_would_not_be_the_batch():
    """What the streamed test guards: each shard alone prices memory and calibrates
    against itself, and the fleet's results change."""
    assert _rounds(_naive(5)) != _rounds(lambda items, load, now: _whole(items, load, now))


def test_shards_hold_at_most_the_limit_and_keep_the_order():
    sizes = [1, 2, 1, 3, 1, 1, 5, 1]
    cuts = shards(list(range(len(sizes))), lambda i: sizes[i], 4)
    assert [list(c) for c in cuts] == [[0, 1, 2], [3, 4], [5], [6], [7]]
    assert [j for c in cuts for j in c] == list(range(len(sizes)))


def _peak(targets: int, limit: int) -> int:
    """Peak traced memory (bytes) of recommending `targets` one-container targets, each
    history drawn when the stream loads it."""

    def load(i: int):
        series = make_mixed_rows(2, 0, 2, days=2, seed=i)
        history = ContainerHistory(series[0], series[1] * GIB, first_seen=NOW - 2 * 86400.0)
        current = {"app": ResourceRequirements({"cpu": 500, "memory": GIB})}
        return None, ([TargetRequest(_params(i), {"app": history}, current, None, {}, {})],)

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for _item, _meta, _reqs, _results in recommend_stream(
            list(range(targets)), load, lambda i: 1, NOW, limit=limit
        ):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_number_of_shards():
    limit = 16
    _peak(limit, limit)  # first use: caches and lazy imports, which are not the stream's
    two, eight = _peak(2 * limit, limit), _peak(8 * limit, limit)
    # All histories at once would hold 4x more at eight shards than at two.
    assert eight < 1.3 * two, (two, eight)
    assert _peak(8 * limit, 8 * limit) > 2 * eight  # one shard of them all: it grows


def _cluster_history(pods: int, now: float):
    """Three days of seeded usage every 5 minutes of `pods` bare pods (their own workloads)."""
    from foresize.adapters.history.memory import UsageHistory
    from foresize.adapters.history.metrics_server import HistorySink, Sample

    history = UsageHistory(step=60.0)
    usage = make_mixed_rows(2 * pods, 0, 2 * pods, days=3, seed=26)
    width = usage.shape[1]
    HistorySink(history).add_samples(
        [
            Sample(
                now - (width - 1 - j) * STEP,
                "batch",
                f"p{i}",
                f"p{i}",
                "work",
                float(max(usage[2 * i, j], 0.01)),
                float(usage[2 * i + 1, j] * 256 * 2**20),
            )
            for i in range(pods)
            for j in range(width)
        ]
    )
    return history


def _suggestion_rounds(pods: int, rounds: int) -> list[list[tuple]]:
    from foresize.core.api.types import parse_target
    from foresize.core.cluster.model import Node
    from foresize.core.cluster.snapshot import ClusterSnapshot
    from foresize.core.recommend.suggestions import SuggestionState, plan_suggestions
    from support.selectors import _pod

    history = _cluster_history(pods, NOW)
    targets = []
    for i in range(pods):
        spec = {
            "selector": {"matchLabels": {"app": f"a{i}"}},
            "vertical": {"mode": "recommendation"},
            "model": {"mode": MODES[i % len(MODES)]},
        }
        if i % 3 == 0:
            spec["shadow"] = [{"name": "cheap", "model": {"mode": "undershoot"}}]
        meta = {"name": f"t{i}", "namespace": "batch", "uid": f"t{i}", "generation": 1}
        targets.append(
            parse_target(
                {"apiVersion": "foresize.io/v1", "kind": "AIScaleTarget", "metadata": meta}
                | {"spec": spec}
            )
        )
    state = SuggestionState()
    out = []
    for r in range(rounds):
        now = NOW - 900.0 * (rounds - 1 - r)
        snapshot = ClusterSnapshot(
            now=now,
            nodes={"n1": Node("n1", allocatable={"cpu": 16000, "memory": 64 * GIB})},
            pods=[_pod(f"p{i}", None, {"app": f"a{i}"}) for i in range(pods)],
            targets=targets,
        )
        writes = plan_suggestions(snapshot, history, now, state=state)
        out.append([(w.namespace, w.name, w.status) for w in writes])
    return out


def test_the_shells_pass_streams_its_targets_by_shards(monkeypatch):
    """`plan_suggestions` (the operator's and the simulator's pass) recommends through
    the stream: with a shard a target, the status writes are those of one batch."""
    from foresize.core.recommend import stream

    whole = _suggestion_rounds(6, 3)
    assert all(len(w) == 6 for w in whole)
    assert all("shadow" in s for _ns, name, s in whole[-1] if name in ("t0", "t3"))
    monkeypatch.setattr(stream, "SERIES_SHARD", 1)
    cuts: list = []
    real = stream.shards
    monkeypatch.setattr(stream, "shards", lambda *a: cuts.append(real(*a)) or cuts[-1])
    assert _suggestion_rounds(6, 3) == whole
    assert [len(c) for c in cuts] == [6, 6, 6]  # every round: a shard a target


@pytest.mark.parametrize("reference", [None, float("nan"), 0.0])
def test_every_shard_prices_memory_against_the_whole_fleets_mean(monkeypatch, reference):
    """Without a usable reference, one batch prices memory risk against its own mean
    forecast at the modes' level; each shard is priced against that same mean."""
    from foresize.core.recommend import core, forecasts

    seen: list[float] = []

    def recording(values, levels, mode_q, price=core.RISK_PRICE, reference=None):
        if reference is None or not np.isfinite(reference) or reference <= 0:
            own = np.argmin(np.abs(levels[None, :] - mode_q[:, None]), axis=1)
            seen.append(float(np.nanmean(values[np.arange(len(own)), own])))
        else:
            seen.append(reference)
        return core.allocate_risk(values, levels, mode_q, price, reference)

    monkeypatch.setattr(forecasts, "allocate_risk", recording)
    state: dict = {}
    load = lambda i: _request(i, 0, state)  # noqa: E731
    _whole(list(range(TARGETS)), load, NOW, reference)
    (fleet_mean,) = seen
    seen.clear()
    list(_streamed(3, reference)(list(range(TARGETS)), load, NOW))
    cuts = shards(list(range(TARGETS)), lambda i: len(_containers(i)), 3)
    # The last pass recommends each shard (the one before forecasts their memory alone).
    assert len(cuts) > 1 and set(seen[-len(cuts) :]) == {fleet_mean}
