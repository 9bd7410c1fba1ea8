"""`foresize bench cpu-bound`: the clairvoyant bound on a CPU request with few changes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from typer.testing import CliRunner

from foresize.bench.bound import Blocks, Cells, cpu_bound, quantile_of, slack_of, solve
from foresize.bench.replay import Policy, prepare, replay
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey, TraceSeries
from foresize.front.cli import app

T0 = 1_700_006_400.0


def blocks_of(levels: list) -> Blocks:
    """A fleet of decision intervals with the given samples each (every one scored), each
    series one day long (a budget per series-day is then one per series)."""
    u = np.asarray(levels, float)
    u = u[None] if u.ndim == 2 else u
    return Blocks(
        usage=u,
        first=np.zeros(u.shape[0], np.int64),
        last=np.full(u.shape[0], u.shape[1] - 1),
        series_days=float(u.shape[0]),
        total_usage=float(np.nansum(u)),
    )


# Low, a peak, low again: 4 intervals at 1, 4 at 5, 4 at 1 (3 samples each).
PEAK = [[1.0] * 3] * 4 + [[5.0] * 3] * 4 + [[1.0] * 3] * 4


def test_quantile_is_the_pinball_minimiser():
    u = np.array([[3.0, 1.0, 2.0], [4.0, np.nan, np.nan], [np.nan] * 3])
    assert quantile_of(u, 0.9).tolist() == [3.0, 4.0, 0.0]
    assert quantile_of(u, 0.5).tolist() == [2.0, 4.0, 0.0]
    assert quantile_of(u, 0.2).tolist() == [1.0, 4.0, 0.0]


def test_the_peak_by_hand():
    """No deficit allowed (lam large): holding 5 all day costs 96 of excess, one change
    48 (cut after the peak or raise at it), two changes none. The Lagrangian picks by
    the price of a change, and the bound at each budget is the hand optimum."""
    b = blocks_of(PEAK)
    two = solve(b, 1e4, 30.0)
    assert (two.changes, two.excess, two.deficit) == (2, 0.0, 0.0)
    assert two.relaxed == pytest.approx(60.0)
    assert two.levels[0].tolist() == [1.0] * 4 + [5.0] * 4 + [1.0] * 4
    none = solve(b, 1e4, 60.0)  # a change costs more than the 48 it saves
    assert (none.changes, none.excess) == (0, 96.0)
    # The bound at each budget brackets the hand optimum (slack = excess / request):
    # lower <= optimum <= achieved. Two changes fit the peak exactly.
    usage = 84.0
    optimum = {2: 0.0, 1: 48 / (usage + 48), 0.5: 96 / (usage + 96), None: 0.0}
    rows = cpu_bound(b, 0.0, [None, 2, 1, 0.5])
    for r in rows:
        assert r.lower <= optimum[r.budget] + 1e-12 <= r.achieved + 2e-12
        assert r.achieved_shortfall == 0.0
        assert r.budget is None or r.achieved_changes <= r.budget
    by = {r.budget: r for r in rows}
    assert by[2].achieved == 0.0 and by[None].achieved == 0.0
    # One series cannot split a change: a half change a day is no change, and one
    # change lies between two Lagrangian vertices (the dual is close, not exact).
    assert by[0.5].achieved == pytest.approx(optimum[0.5])
    assert by[1].lower > 0.9 * optimum[1]


def brute_force(u: np.ndarray, lam: float, mu: float) -> float:
    """min over every segmentation of excess + lam deficit + mu changes, each segment at
    the quantile that minimises its pinball loss."""
    tau = lam / (1 + lam)
    nb = u.shape[0]
    best = np.inf
    for cuts in itertools.product([0, 1], repeat=nb - 1):
        starts = [0] + [i + 1 for i, c in enumerate(cuts) if c]
        bounds = [*starts, nb]
        cost, prev = 0.0, None
        for a, z in itertools.pairwise(bounds):
            seg = u[a:z].ravel()
            level = float(quantile_of(seg[None], tau)[0])
            d = level - seg
            cost += float(np.where(d > 0, d, -lam * d).sum())
            if prev is not None and level != prev:
                cost += mu
            prev = level
        best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_relaxation_brackets_the_exact_optimum(seed):
    """On random small series the relaxed minimum is at most the true optimum (found by
    trying every segmentation) and the schedule found at least it; with fine cells the
    three agree."""
    rng = np.random.default_rng(seed)
    u = rng.gamma(2.0, 1.0, (7, 3)) * (1 + 3 * (rng.random((7, 1)) < 0.4))
    lam, mu = float(rng.choice([0.5, 3.0, 20.0])), float(rng.choice([0.5, 2.0, 6.0]))
    exact = brute_force(u, lam, mu)
    b = blocks_of(u.tolist())
    for resolution, tol in ((0.2, None), (0.0005, 0.01)):
        sol = solve(b, lam, mu, Cells.build(b, resolution))
        found = sol.excess + lam * sol.deficit + mu * sol.changes
        assert sol.relaxed <= exact + 1e-9
        assert exact <= found + 1e-9
        if tol is not None:
            assert found == pytest.approx(exact, rel=tol)
            assert sol.relaxed == pytest.approx(exact, rel=tol)


def test_a_series_that_starts_late_sets_its_first_level_for_free():
    """A fleet's series start at different intervals: each one's first scored level costs
    no change (it is set before scoring starts), so the fleet's optimum is the sum of
    each series' own (brute force from its first interval)."""
    rng = np.random.default_rng(7)
    u = rng.gamma(2.0, 1.0, (2, 7, 3))
    u[1, :3] = np.nan  # the second series is scored from interval 3 on
    b = Blocks(
        usage=u,
        first=np.array([0, 3]),
        last=np.array([6, 6]),
        series_days=2.0,
        total_usage=float(np.nansum(u)),
    )
    lam, mu = 3.0, 2.0
    exact = brute_force(u[0], lam, mu) + brute_force(u[1, 3:], lam, mu)
    sol = solve(b, lam, mu, Cells.build(b, 0.0005))
    assert sol.relaxed == pytest.approx(exact, rel=0.01)
    assert sol.relaxed <= exact + 1e-9
    assert exact <= sol.excess + lam * sol.deficit + mu * sol.changes + 1e-9


def test_the_fleet_spends_its_changes_where_they_free_most():
    """Two series share the budget (a fleet average): the peak frees 48 per change, the
    narrow one 30; two changes for the fleet go to the peak (excess 0 + 60), not one each
    (48 + 30) nor both to the narrow one (96 + 0)."""
    narrow = [[1.0] * 3] * 5 + [[3.0] * 3] * 2 + [[1.0] * 3] * 5
    b = blocks_of([PEAK, narrow])
    usage = 84.0 + 48.0
    row = cpu_bound(b, 0.0, [1])[0]
    assert row.achieved == pytest.approx(slack_of(60.0, 0.0, usage))
    # The dual meets it at lam -> infinity (no deficit at all); the search stops at the
    # first lam without deficit, a few percent short.
    assert 0.95 * row.achieved <= row.lower <= row.achieved
    assert row.achieved_changes == 1.0
    # A flat series needs no change: the peak's two are the whole budget.
    flat = [[2.0] * 3] * 12
    assert cpu_bound(blocks_of([PEAK, flat]), 0.0, [1])[0].achieved == 0.0


class Schedule(Policy):
    """A fixed request per decision interval (the bound's schedule) under the replay."""

    name = "schedule"
    resources = ("cpu",)

    def __init__(self, levels: np.ndarray) -> None:
        self.levels = levels

    def decide(self, i: int) -> dict[str, np.ndarray]:
        b = (i + 1) // 3
        if b >= self.levels.shape[1]:
            return {"cpu": np.full(self.levels.shape[0], np.nan)}
        return {"cpu": self.levels[:, b]}


def test_the_bound_scores_as_the_replay_does():
    """On the replay's own grid (7-day warm-up, 15-minute decisions, gaps, a series that
    starts late and one that ends early) a schedule found by the bound scores the same
    slack, shortfall and changes under the replay as the bound measures."""
    rng = np.random.default_rng(1)
    n = 288 * 9
    fleet = []
    for k, (lead, tail) in enumerate(((0, 0), (7, 0), (0, 100))):
        cpu = 0.2 + rng.gamma(2.0, 0.1, n) + 0.5 * (np.arange(n) % 288 > 200)
        cpu[1000:1010] = np.nan
        t = T0 + (np.arange(n) + lead) * 300.0
        keep = slice(0, n - tail)
        fleet.append(TraceSeries(SeriesKey("t", f"w{k}", "c"), t[keep], cpu[keep], None))
    data = prepare(fleet)
    blocks = Blocks.from_grid(data.cpu, data.first)
    sol = solve(blocks, 4.0, 300.0)
    assert sol.changes > 0 and sol.deficit > 0
    score = replay(data, Schedule(np.ceil(sol.levels)))["cpu"]
    usage = blocks.total_usage
    # The replay rounds requests up to 1m; the schedule given to it is rounded already.
    rounded = solve_measure(blocks, np.ceil(sol.levels))
    assert score.slack == pytest.approx(slack_of(rounded[0], rounded[1], usage), rel=1e-9)
    assert score.shortfall == pytest.approx(rounded[1] / usage, rel=1e-9)
    assert score.changes_per_series_day == pytest.approx(rounded[2] / blocks.series_days)


def solve_measure(blocks: Blocks, levels: np.ndarray) -> tuple[float, float, int]:
    from foresize.bench.bound import _measure

    m = _measure(blocks, 0.0, 0.0, 0.0, levels)
    return m.excess, m.deficit, m.changes


def test_cpu_bound_command(tmp_path):
    rng = np.random.default_rng(2)
    n = 288 * 8 + 96
    lines = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    for k in range(2):
        cpu = rng.gamma(2.0, 0.1 * (k + 1), n) + 0.3 * (np.arange(n) % 288 > 150)
        lines += [f"{T0 + 300 * i},ns,w{k},w{k}-0,app,{cpu[i]:.4f},1000000" for i in range(n)]
    path = tmp_path / "fleet.csv"
    path.write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    args = ["bench", "cpu-bound", "--traces", str(path), "--trace-format", "canonical"]
    res = runner.invoke(app, [*args, "--json", "--changes", "1,4,unlimited"])
    assert res.exit_code == 0, res.output
    import json

    doc = json.loads(res.output)
    rows = {r["budget"]: r for r in doc["bound"]}
    assert set(rows) == {1.0, 4.0, None}
    vpa = doc["vpa"]
    for r in rows.values():
        # (the achieved schedule's slack is at its own shortfall, a hair under vpa's)
        assert r["lower_slack"] <= r["achieved_slack"] * (1 + 1e-6)
        assert r["achieved_shortfall"] <= vpa["shortfall"] + 1e-12
        assert r["lower_ratio"] == pytest.approx(r["lower_slack"] / vpa["slack"])
    # More changes never need more slack.
    assert rows[None]["lower_slack"] <= rows[4.0]["lower_slack"] <= rows[1.0]["lower_slack"]
    assert rows[4.0]["achieved_changes_per_series_day"] <= 4.0
    table = runner.invoke(app, [*args, "--changes", "2"])
    assert table.exit_code == 0 and "lower bound" in table.output
    bad = runner.invoke(app, [*args, "--changes", "two"])
    assert isinstance(bad.exception, ForesizeError)
    assert str(bad.exception) == "--changes: not a number or 'unlimited': 'two'"
