"""`foresize recommend` rows of CronJobs (issue 25 item 3): sized from their runs' peaks by
the operator's rule (`recommend.runs`), not from a quantile of a mostly empty series."""

from __future__ import annotations

import math

import numpy as np

from foresize.adapters.history.prometheus_series import Resources
from foresize.core.api.quantity import GIB, MIB
from foresize.core.history import SeriesKey, TraceSeries
from foresize.core.recommend.runs import RUN_MARGIN
from foresize.front.report.recommendations import build_rows

STEP = 300.0
T0 = 1_795_000_500.0
QUANTILES = {"cpu": 0.98, "memory": 0.999}
KEY = SeriesKey("batch", "report", "report")


def _nightly(nights: int = 5) -> TraceSeries:
    """A 40-minute run every night: 1 core for 10 minutes then 300m; 1Gi with 2Gi for
    one 5-minute bucket (its peak)."""
    t, cpu, mem = [], [], []
    for k in range(nights):
        for i in range(8):
            t.append(T0 + k * 86400 + i * STEP)
            cpu.append(1.0 if i < 2 else 0.3)
            mem.append(2.0 * GIB if i == 5 else 1.0 * GIB)
    return TraceSeries(KEY, np.array(t), np.array(cpu), np.array(mem))


def _row(series: TraceSeries, kind: str, **kw) -> object:
    (row,) = build_rows(
        [series],
        [],
        quantiles=QUANTILES,
        kinds={("batch", "report"): kind},
        resources={KEY: Resources(2.0, 4 * GIB, None, 4 * GIB)},
        **kw,
    )
    return row


def test_a_cronjob_row_is_sized_from_its_runs_peaks() -> None:
    # The newest run ends with the history: it may still be running, so it is not counted.
    row = _row(_nightly(), "CronJob")
    assert row.memory.request == math.ceil(2 * GIB * (1 + RUN_MARGIN) / MIB) * MIB
    assert row.cpu.request == 1100
    assert row.enough_data is True
    assert any(
        "sized from its runs' peaks (4 run(s), 4 without an OOM kill" in n for n in row.notes
    )
    assert any("the highest peak of the last 4 run(s)" in s for s in row.memory.steps)
    assert row.memory.spans == {}  # no quantile spans: runs, not a quantile
    # The same series as a Deployment's is a quantile of 15-minute peaks (spans shown).
    assert _row(_nightly(), "Deployment").memory.spans


def test_a_cronjob_whose_runs_were_all_killed_keeps_what_it_has_and_raises_memory() -> None:
    series = _nightly(2)
    kills = {KEY: [float(series.timestamps[3]), float(series.timestamps[11])]}
    row = _row(series, "CronJob", oom_kills=kills)
    assert row.enough_data is False
    assert row.cpu.request == 2000  # kept: no run shows its peak
    assert row.memory.request == math.ceil(4 * GIB * 1.2 / MIB) * MIB  # 1.2 x the limit
    assert any("assumed, not measured" in s for s in row.cpu.steps)


def test_a_job_groups_history_is_a_jobgroup_row_sized_from_its_runs() -> None:
    """A group of bare Jobs (`foresize.io/job-group`, `cluster.jobs`) has no object whose
    kind kube-state-metrics gives: its history's name says it is a group's."""
    from foresize.core.cluster.jobs import history_workload

    key = SeriesKey("batch", history_workload("etl"), "report")
    nightly = _nightly()
    series = TraceSeries(key, nightly.timestamps, nightly.cpu, nightly.memory)
    (row,) = build_rows([series], [], quantiles=QUANTILES)
    assert row.kind == "JobGroup" and row.workload == "jobgroup:etl"
    assert row.memory.request == math.ceil(2 * GIB * (1 + RUN_MARGIN) / MIB) * MIB
    assert any("a JobGroup: sized from its runs' peaks" in n for n in row.notes)
    # A name that only looks like one (not a group name after the prefix) is not a group.
    odd = TraceSeries(SeriesKey("batch", "jobgroup:Bad_Name", "r"), *_arrays(nightly))
    (plain,) = build_rows([odd], [], quantiles=QUANTILES)
    assert plain.kind == ""


def _arrays(s: TraceSeries) -> tuple:
    return s.timestamps, s.cpu, s.memory
