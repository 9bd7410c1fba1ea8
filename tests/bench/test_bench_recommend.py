"""`foresize bench recommend` / `bench forecast`: the replay protocol and the JSON keys."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from foresize.bench.replay import (
    ClairvoyantPolicy,
    ForesizePolicy,
    KRRPolicy,
    ManualPolicy,
    VPAPolicy,
    prepare,
    replay,
)
from foresize.core.history import SeriesKey, TraceSeries
from foresize.core.recommend.core import MEMORY_RISK_LEVELS
from foresize.front.cli import app
from support.paths import DATA

TRACES = DATA / "traces"
KEYS = {"slack", "shortfall", "under", "events_per_series_day", "changes_per_series_day"}
T0 = 1_700_006_400.0


def series(cpu, mem=None, cap=None, step=300.0, name="s"):
    t = T0 + np.arange(len(cpu)) * step
    return TraceSeries(
        SeriesKey("t", name, "c"),
        t,
        np.asarray(cpu, float),
        None if mem is None else np.asarray(mem, float),
        None if cap is None else np.full(len(cpu), cap, float),
        None,
    )


def test_replay_scoring_protocol():
    """Warm-up unscored, decisions every 15 minutes from the next sample, gaps unscored,
    clairvoyant has no shortfall, a constant manual capacity never changes."""
    n = 288 * 9
    rng = np.random.default_rng(0)
    cpu = rng.gamma(2.0, 0.2, n)
    cpu[288 * 8 : 288 * 8 + 12] = np.nan  # a gap
    mem = 1e9 * (1 + 0.1 * rng.random(n))
    data = prepare([series(cpu, mem, cap=2.0)])
    assert data.cpu[0, 0] == pytest.approx(cpu[0] * 1000)  # millicores
    clair = replay(data, ClairvoyantPolicy())
    assert clair["cpu"].shortfall == 0.0 and clair["cpu"].events_per_series_day == 0.0
    assert clair["memory"].events_per_series_day == 0.0  # no OOM kills
    manual = replay(data, ManualPolicy())
    assert manual["cpu"].changes_per_series_day == 0.0
    # Slack of a constant 2-core request = 1 - mean usage / 2 over scored samples.
    scored = cpu[288 * 7 :]
    expect = np.nansum(np.maximum(2000 - scored * 1000, 0)) / (2000 * np.isfinite(scored).sum())
    assert manual["cpu"].slack == pytest.approx(expect, rel=1e-6)


def test_oom_kills_are_counted_and_remediated():
    """A memory step up: every policy is short once, OOM remediation reacts at once."""
    n = 288 * 9
    mem = np.full(n, 1e9)
    mem[288 * 8 :] = 3e9  # a jump on day 8
    cpu = np.full(n, 0.5)
    data = prepare([series(cpu, mem)])
    keep: dict = {}
    fs = replay(data, ForesizePolicy(), keep)
    ooms = np.nonzero(keep["ooms"][0])[0]
    assert ooms[0] == 288 * 8
    assert len(ooms) <= 2  # x1.2 compounding covers 3x within a couple of kills
    req = keep["req"]["memory"][0]
    assert req[288 * 8 + 1] >= 3e9 * 1.2 - 1  # remediation applied from the next sample
    assert fs["memory"].events_per_series_day > 0
    vpa = replay(data, VPAPolicy())
    assert vpa["memory"].events_per_series_day > 0
    krr = replay(data, KRRPolicy())  # no OOM reaction: killed until its next decision
    assert krr["memory"].events_per_series_day >= fs["memory"].events_per_series_day


def test_vpa_reference_defaults():
    n = 288 * 8
    data = prepare([series(np.full(n, 0.001), np.full(n, 1e6))])
    vpa = VPAPolicy()
    vpa.start(data)
    d = vpa.decide(n - 1)
    assert d["cpu"][0] == 25.0  # minimum 25 millicores
    assert d["memory"][0] == 250 * 2**20  # minimum 250 MiB
    data = prepare([series(np.full(n, 1.0), np.full(n, 1e9))])
    vpa.start(data)
    d = vpa.decide(n - 1)
    assert 1000 * 1.15 <= d["cpu"][0] <= 1000 * 1.15 * 1.06  # p90 x 1.15, 5% buckets
    assert 1e9 * 1.15 <= d["memory"][0] <= 1e9 * 1.15 * 1.06


@pytest.mark.slow
def test_cli_json_keys_on_real_crane_trace(tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "bench",
            "recommend",
            "--traces",
            str(TRACES / "crane-dsp"),
            "--trace-format",
            "crane",
            "--json",
            "--limit",
            "1",
            "--modes",
            "cost_optimized",
            "--sweep",
            "90",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {"traces", "format", "series", "policies", "sweep", "matched"} <= set(doc)
    assert set(doc["matched"]) == {"cpu"}
    assert set(doc["matched"]["cpu"]) == {"vpa_risk", "foresize_slack", "vpa_slack", "ratio"}
    assert doc["series"] == 1
    assert set(doc["policies"]) == {
        "vpa",
        "krr",
        "clairvoyant",
        "foresize",
        "foresize:cost_optimized",
    }
    for pol in doc["policies"].values():
        assert set(pol) == {"cpu"}  # crane has no memory and no capacities (no manual)
        assert set(pol["cpu"]) == KEYS
        assert all(0.0 <= pol["cpu"][k] <= 1.0 for k in ("slack", "shortfall", "under"))


def test_cli_errors_are_clear(tmp_path):
    from foresize.core.errors import ForesizeError

    # A ForesizeError is what `foresize.front.cli.main` turns into one line and exit status 2;
    # anything else would be a traceback.
    none = str(tmp_path / "none")
    canonical = tmp_path / "t.csv"
    canonical.write_text(
        "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes\n"
        + "".join(f"{300 * i},shop,web,web-1,app,0.5,1000000\n" for i in range(300))
    )
    unusable = tmp_path / "unusable.csv"
    unusable.write_text(
        "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes\n0,a,b,c,d,x,1\n"
    )
    for args, needle in (
        (["--traces", none, "--trace-format", "crane"], f"{none}: no such trace file or folder"),
        (
            ["--traces", str(tmp_path), "--trace-format", "crane", "--modes", "x"],
            "--modes: unknown",
        ),
        (["--traces", str(canonical), "--trace-format", "canonical", "--limit", "0"], "--limit"),
        (["--traces", str(canonical), "--trace-format", "canonical", "--every", "0"], "--every"),
        (
            ["--traces", str(canonical), "--trace-format", "canonical", "--sweep", "50,100"],
            "--sweep: percentile must be in (0, 100), got 100.0",
        ),
        (["--traces", str(unusable), "--trace-format", "canonical"], f"{unusable}: no usable"),
    ):
        res = CliRunner().invoke(app, ["bench", "recommend", *args])
        assert res.exit_code != 0
        assert isinstance(res.exception, ForesizeError), res.exception
        assert needle in str(res.exception)


def test_manual_is_replayed_where_the_trace_records_capacities():
    from foresize.front.cli.bench_recommend import run_bench

    doc = run_bench(str(TRACES / "bitbrains-rnd-2013-07"), "bitbrains", [], limit=1, sweep=None)
    assert list(doc["policies"]) == ["manual", "vpa", "krr", "clairvoyant", "foresize"]
    assert "sweep" not in doc and "matched" not in doc


def test_bench_forecast_json_keys():
    res = CliRunner().invoke(
        app, ["bench", "forecast", "--json", "--series", "40", "--days", "3", "--repeats", "1"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {
        "series",
        "points_per_series",
        "seconds_median",
        "series_per_second",
        "peak_rss_mib",
    } <= set(doc)
    assert doc["series"] == 40 and doc["points_per_series"] == 3 * 288


def test_bench_forecast_streams_shards_and_forecasts_as_all_at_once(monkeypatch):
    """`bench forecast` draws and forecasts a shard of series at a time (issue 26): the
    models it selects are those of one forecast of all the series."""
    import numpy as np

    from foresize.core.forecast import select
    from foresize.core.forecast.models import MODELS, ForecastConfig
    from foresize.core.forecast.synthetic import make_mixed
    from foresize.core.recommend.core import mode_quantile
    from foresize.front.cli.bench_forecast import run_bench

    whole = select.forecast_max(
        make_mixed(30, days=3, seed=42),
        np.array([mode_quantile("balanced", "cpu")]),
        ForecastConfig(),
    )
    expected = np.bincount(whole.model[:, 0], minlength=len(MODELS))
    monkeypatch.setattr(select, "SERIES_SHARD", 7)
    doc = run_bench(30, days=3, repeat=1)
    assert doc["shard_series"] == 7
    assert list(doc["models_selected"].values()) == expected.tolist()


def test_foresize_memory_ratchet_and_allocated_risk():
    """Memory drops from 4 GB to 1 GB for the last 4 hours: the replay's foresize keeps
    the request up through those hours (6-hour ratchet) while its latest forecast has
    followed the drop. Every decision sizes memory at one of the named levels."""
    n = 288 * 2 + 48
    rng = np.random.default_rng(2)
    mem = 4e9 * (1 + 0.02 * rng.random(n))
    mem[288 * 2 :] /= 4
    data = prepare([series(np.full(n, 0.5), mem, name=f"s{k}") for k in range(2)])
    pol = ForesizePolicy()
    keep: dict = {}
    replay(data, pol, keep)
    assert np.nanmin(keep["req"]["memory"][:, 288 * 2 :]) >= 4e9  # held, not released
    # The latest forecast target of each series (before the hold), in its carried state.
    latest = np.array([state["c"].recent[-1][1] for state in pol.oom_state])
    assert (latest < 1.5e9).all()
    assert set(np.concatenate(pol.chosen["memory"]).tolist()) <= set(MEMORY_RISK_LEVELS)
    assert np.allclose(np.concatenate(pol.chosen["cpu"]), 0.98)
    uniform = ForesizePolicy("percentile", percentile_value=99.9)
    replay(data, uniform)
    assert np.allclose(np.concatenate(uniform.chosen["memory"]), 0.999)


# --- comparison at equal risk ------------------------------------------------------------


def test_matched_slack_interpolates_in_log_risk_and_never_extrapolates():
    from foresize.bench.replay import matched_slack, risk_frontier

    curve = [(0.01, 0.5), (0.04, 0.3)]
    # Half-way in log risk between 0.01 and 0.04 is 0.02: half-way in slack.
    assert matched_slack(curve, 0.02) == pytest.approx(0.4)
    assert matched_slack(curve, 0.01) == 0.5 and matched_slack(curve, 0.04) == 0.3
    assert matched_slack(curve, 0.005) is None  # safer than any point: no extrapolation
    assert matched_slack(curve, 0.08) is None
    assert matched_slack([], 0.02) is None
    # A point with more risk and more slack than another is not on the curve.
    dominated = [*curve, (0.02, 0.6), (0.03, 0.5)]
    assert risk_frontier(dominated) == [(0.01, 0.5), (0.04, 0.3)]
    assert matched_slack(dominated, 0.02) == pytest.approx(0.4)
    # Zero risk has no log: the safer point's slack is reported (never flattering).
    assert matched_slack([(0.0, 0.7), (0.01, 0.5)], 0.005) == 0.7
    assert matched_slack([(0.0, 0.7), (0.01, 0.5)], 0.0) == 0.7


@pytest.mark.slow
def test_bench_reports_matched_ratios_and_per_series_kills(tmp_path):
    """A small synthetic fleet with memory: the sweep brackets or misses vpa's risk, the
    matched ratio is the curve's slack at vpa's risk over vpa's slack (or null), and the
    per-series kill figures agree with the replay's own per-series counts."""
    from foresize.bench.replay import matched_slack
    from foresize.front.cli.bench_recommend import run_bench

    rng = np.random.default_rng(3)
    n = 288 * 8 + 96
    lines = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    for k in range(2):
        cpu = rng.gamma(2.0, 0.1 * (k + 1), n)
        mem = 1e9 * (1 + k) * (1 + 0.3 * (rng.random(n) < 0.01) + 0.05 * rng.random(n))
        mem[288 * 7 + 48 :] *= 1.3  # a level shift in the scored period: some kills
        for i in range(n):
            lines.append(f"{T0 + 300 * i},ns,w{k},w{k}-0,app,{cpu[i]:.4f},{mem[i]:.0f}")
    path = tmp_path / "fleet.csv"
    path.write_text("\n".join(lines) + "\n")
    doc = run_bench(str(path), "canonical", [], sweep=(50.0, 99.99))
    assert set(doc["matched"]) == {"cpu", "memory"}
    names = {p["policy"] for r in doc["sweep"].values() for p in r}
    assert "foresize:percentile=50" in names and "foresize:overshoot" in names
    # The percentile=50 point sizes CPU only, 99.99 memory only.
    assert {p["policy"] for p in doc["sweep"]["memory"]} >= {"foresize:percentile=99.99"}
    assert "foresize:percentile=50" not in {p["policy"] for p in doc["sweep"]["memory"]}
    for r, m in doc["matched"].items():
        vpa = doc["policies"]["vpa"][r]
        risk = vpa["shortfall"] if r == "cpu" else vpa["events_per_series_day"]
        assert m["vpa_risk"] == risk and m["vpa_slack"] == vpa["slack"]
        pts = [(p["risk"], p["slack"]) for p in doc["sweep"][r]]
        expect = matched_slack(pts, risk)
        assert m["foresize_slack"] == expect
        assert m["ratio"] == (None if expect is None else pytest.approx(expect / vpa["slack"]))
    for pol in doc["policies"].values():
        mem = pol["memory"]
        assert mem["worst_series_kills"] >= 0
        assert 0.0 <= mem["share_series_more_kills_than_vpa"] <= 1.0
    assert doc["policies"]["vpa"]["memory"]["share_series_more_kills_than_vpa"] == 0.0
    # Cross-check one policy against the replay's per-series kills.
    data = prepare(load_canonical(path))
    kills = replay(data, ForesizePolicy())["memory"].series_events
    assert doc["policies"]["foresize"]["memory"]["worst_series_kills"] == kills.max()
    assert kills.sum() > 0  # the level shift does kill: the figures are not vacuous


def load_canonical(path):
    from foresize.adapters.history.traces import load_traces

    return load_traces(str(path), "canonical")[0]


def test_split_halves_with_offset(tmp_path):
    from foresize.core.errors import ForesizeError
    from foresize.front.cli.bench_recommend import run_bench

    lines = ["timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"]
    for k in range(3):
        lines += [f"{T0 + 300 * i},ns,w{k},w{k}-0,app,0.5,1000000000" for i in range(400)]
    path = tmp_path / "f.csv"
    path.write_text("\n".join(lines) + "\n")
    odd = run_bench(str(path), "canonical", [], every=2, offset=1, sweep=None)
    even = run_bench(str(path), "canonical", [], every=2, offset=0, sweep=None)
    assert (odd["series"], even["series"]) == (1, 2)
    assert "matched" not in odd
    with pytest.raises(ForesizeError, match="--offset"):
        run_bench(str(path), "canonical", [], every=2, offset=2)


def test_changes_count_while_the_series_exists():
    """A series that ends early is not resized after its last sample: its changes count
    over the span its series-days count."""
    from foresize.bench.replay import Policy

    class Flip(Policy):
        name = "flip"
        resources = ("cpu",)

        def decide(self, i):
            return {"cpu": np.full(2, 100.0 if (i // 3) % 2 else 200.0)}

    n = 288 * 10
    short = np.full(n, 0.1)
    short[288 * 8 :] = np.nan  # ends after 8 days: 1 scored day
    data = prepare([series(np.full(n, 0.1), name="a"), series(short, name="b")])
    got = replay(data, Flip())["cpu"]
    # 96 decisions a day, each a change; 3 + 1 scored series-days (minus the last sample).
    assert got.changes_per_series_day == pytest.approx(96.0, rel=0.01)


@pytest.mark.slow
def test_replay_stabilised_cpu_changes_less_and_memory_keeps_its_peak(monkeypatch):
    """The replay runs the operator's rules: a CPU request scheduled in 3 segments a day
    changes far less often than one rescheduled every hour, and memory is never
    sized below the last 3 days' peak plus headroom."""
    from foresize.core.recommend import core
    from foresize.core.recommend import schedule as schedule_module

    n = 288 * 8 + 96
    rng = np.random.default_rng(5)
    t = np.arange(n)
    cpu = 0.5 + 0.3 * np.sin(2 * np.pi * t / 288) ** 2 + 0.1 * rng.random(n)
    mem = np.full(n, 1e9)
    mem[288 * 7 : 288 * 7 + 6] = 2e9  # a half-hour peak on day 8
    data = prepare([series(cpu, mem)])
    keep: dict = {}
    banded = replay(data, ForesizePolicy(), keep)
    req = keep["req"]["memory"][0]
    assert np.nanmin(req[288 * 7 + 6 :]) >= 2e9 * (1 + core.MEMORY_HEADROOM)
    assert banded["cpu"].changes_per_series_day <= 4  # the budget: 3 segments and a raise
    # A segment every hour, in the pipeline's CPU day schedule (`recommend.schedule`).
    monkeypatch.setattr(schedule_module, "SCHEDULE_BLOCKS", 96)
    following = replay(data, ForesizePolicy())
    assert banded["cpu"].changes_per_series_day < 0.5 * following["cpu"].changes_per_series_day


def test_replay_holds_memory_as_long_as_the_modes_posture(monkeypatch):
    """The replay scores the operator's memory rule with the mode's holds: after a drop,
    the default holds memory for 6 hours, undershoot (five times the misses) lets go
    after 1.2 hours. (The recent peak, which would hold both, is off here.)"""
    from foresize.core.recommend import core

    monkeypatch.setattr(core, "MEMORY_PEAK_WINDOW", 0.0)
    n = 288 * 2 + 48
    rng = np.random.default_rng(3)
    mem = 4e9 * (1 + 0.02 * rng.random(n))
    mem[288 * 2 :] /= 4
    data = prepare([series(np.full(n, 0.5), mem, name=f"s{k}") for k in range(2)])
    held = {}
    for mode in ("balanced", "undershoot"):
        keep: dict = {}
        replay(data, ForesizePolicy(mode, resources=("memory",)), keep)
        held[mode] = keep["req"]["memory"][:, -12:]  # the last hour of the drop
    assert np.nanmin(held["balanced"]) >= 4e9
    assert np.nanmax(held["undershoot"]) < 1.5e9


def test_the_foresize_row_is_the_operators_pipeline(monkeypatch):
    """Issue 28 §5: the replay's Foresize row is the operator's pipeline, one
    `recommend_batch` call per decision over every series, and every request it puts in
    force is one that call published (not a reassembly of the recommender's rules)."""
    from foresize.bench import replay as replay_module

    calls = []
    real = replay_module.recommend_batch

    def spy(requests, now, **kw):
        results = real(requests, now, **kw)
        calls.append(results)
        return results

    monkeypatch.setattr(replay_module, "recommend_batch", spy)
    n = 288 * 2
    rng = np.random.default_rng(4)
    data = prepare([series(0.2 + 0.1 * rng.random(n), 5e8 * (1 + 0.1 * rng.random(n)))])
    keep: dict = {}
    replay(data, ForesizePolicy(), keep)
    assert len(calls) >= n // 3  # every 15 minutes, and at once after a kill
    for res in ("cpu", "memory"):
        published = {
            float(r.suggestion.containers["c"].requests[res])
            for results in calls
            for r in results
            if r.changed["c"].get(res)
        }
        in_force = keep["req"][res][0]
        applied = set(np.unique(in_force[np.isfinite(in_force)]).tolist())
        assert applied and applied <= published
