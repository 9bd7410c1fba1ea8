"""History stores: in-memory numpy history and the SQLite store share one read interface."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading

import numpy as np
import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.sqlite import HistoryStore
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey

T0 = 1_700_006_400.0  # a midnight UTC, on every grid
K = [SeriesKey("ns", "web", "app"), SeriesKey("ns", "web", "sidecar"), SeriesKey("ns", "db", "pg")]


# --- in-memory ---------------------------------------------------------------------------


def test_memory_append_is_vectorised_and_windows_take_the_max():
    h = UsageHistory(step=60.0)
    idx = h.indices(K)
    assert list(idx) == [0, 1, 2]
    for k in range(10):
        h.append(T0 + 60 * k, idx, cpu=np.array([k, 10 + k, np.nan]), memory=np.full(3, 5.0))
    w = h.window(K, "cpu", T0 + 540, 2, 300.0)  # buckets [0,300) and [300,600)
    assert w[0].tolist() == [4.0, 9.0]
    assert w[1].tolist() == [14.0, 19.0]
    assert np.isnan(w[2]).all()  # never sampled: gaps stay gaps
    t, v = h.series(K[0], "memory", T0, T0 + 600)
    assert len(t) == 10 and (v == 5.0).all()
    assert h.first_seen(K[0]) == T0 and h.first_seen(K[2]) == T0  # memory was sampled


def test_memory_skipped_steps_are_gaps_and_same_step_keeps_max():
    h = UsageHistory(step=60.0)
    idx = h.indices(K[:1])
    h.append(T0, idx, cpu=np.array([1.0]))
    h.append(T0 + 10, idx, cpu=np.array([3.0]))  # same step
    h.append(T0 + 240, idx, cpu=np.array([2.0]))
    _, v = h.series(K[0], "cpu", T0, T0 + 300)
    assert v[0] == 3.0 and np.isnan(v[1:4]).all() and v[4] == 2.0


def test_memory_ring_retention_and_growth():
    h = UsageHistory(step=60.0, retention=600.0, initial_rows=2, initial_columns=1)
    idx = h.indices(K)  # grows columns
    for k in range(25):
        h.append(T0 + 60 * k, idx, cpu=np.full(3, float(k)))
    _, v = h.series(K[1], "cpu", T0, T0 + 25 * 60)
    assert np.isnan(v[:15]).all()  # older than the 10-minute retention
    assert v[15:].tolist() == [float(k) for k in range(15, 25)]
    with pytest.raises(ValueError):
        h.append(T0, idx, cpu=np.ones(3))
    # New containers later: earlier steps read as gaps for them.
    j = h.indices([SeriesKey("ns", "new", "c")])
    h.append(T0 + 25 * 60, j, cpu=np.array([7.0]))
    w = h.window([SeriesKey("ns", "new", "c")], "cpu", T0 + 25 * 60, 2, 60.0)
    assert np.isnan(w[0, 0]) and w[0, 1] == 7.0


def test_memory_events_are_separate_from_usage():
    h = UsageHistory()
    h.indices(K[:1])
    h.record_event(K[0], "oom", T0 + 5, 123.0)
    assert h.events(K[0], "oom", T0, T0 + 10) == [(T0 + 5, "oom", 123.0)]
    assert h.events(K[0], "throttle", T0, T0 + 10) == []
    assert h.first_seen(K[0]) is None  # an event is not a usage sample


# --- SQLite ------------------------------------------------------------------------------


def test_sqlite_roundtrip_window_and_events(tmp_path):
    with HistoryStore(tmp_path / "h.db", step=60.0) as st:
        vals = np.arange(2 * 600, dtype=float).reshape(2, 600)
        vals[1, 100:200] = np.nan
        st.write_matrix(K[:2], "cpu", T0, vals)
        t, v = st.series(K[0], "cpu", T0, T0 + 600 * 60)
        assert np.array_equal(v, vals[0]) and t[0] == T0
        w = st.window(K[:2], "cpu", T0 + 599 * 60, 120, 300.0)
        assert w.shape == (2, 120)
        assert w[0, 0] == 4.0 and w[0, -1] == 599.0  # max of each 5-minute bucket
        assert np.isnan(w[1, 20:40]).all()
        st.record_event(K[0], "oom", T0 + 30, 1e9, pod="web-1")
        assert st.events(K[0], "oom", T0, T0 + 60) == [(T0 + 30, "oom", 1e9)]
        assert st.first_seen(K[0]) == T0
        st.append(T0 + 600 * 60, K[:1], "cpu", np.array([5.0]))
        assert st.series(K[0], "cpu", T0 + 600 * 60, T0 + 601 * 60)[1][0] == 5.0
        with pytest.raises(ValueError):
            st.record_event(K[0], "bogus", T0)


def test_sqlite_history_outlives_pods_and_targets(tmp_path):
    """Keyed by workload/container: a new pod (or a re-created target) continues it."""
    path = tmp_path / "h.db"
    with HistoryStore(path, step=60.0) as st:
        st.append(T0, K[:1], "memory", np.array([100.0]))  # pod web-abc
    with HistoryStore(path, step=60.0) as st:  # operator restart, workload re-created
        st.append(T0 + 3600, K[:1], "memory", np.array([200.0]))  # pod web-xyz
        _, v = st.series(K[0], "memory", T0, T0 + 3660)
        assert v[0] == 100.0 and v[-1] == 200.0 and np.isnan(v[1:-1]).all()
        assert st.keys() == [K[0]]


def test_sqlite_retention_and_downsampling(tmp_path):
    with HistoryStore(tmp_path / "h.db", step=60.0, retention=3 * 86400.0) as st:
        n = 5 * 1440
        vals = np.tile(np.arange(5, dtype=float), n // 5)[None, :]
        st.write_matrix(K[:1], "cpu", T0, vals)
        st.record_event(K[0], "oom", T0 + 10)
        now = T0 + n * 60
        folded = st.downsample(now)
        assert folded > 0
        # Old data now at 5 minutes: the max (4) of each bucket survives.
        w = st.window(K[:1], "cpu", T0 + 299, 1, 300.0)
        assert w[0, 0] == 4.0
        steps = {r[0] for r in st.db.execute("SELECT DISTINCT step FROM chunks")}
        assert steps == {60.0, 300.0}
        # Recent data is still at 1 minute.
        _, v = st.series(K[0], "cpu", now - 300, now)
        assert v.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        st.prune(now)
        assert st.events(K[0], None, 0, now) == []
        _, old = st.series(K[0], "cpu", T0, T0 + 86400)
        assert np.isnan(old).all()
        assert st.first_seen(K[0]) >= now - 3 * 86400.0 - 1


def test_sqlite_reader_while_writer_writes(tmp_path):
    path = tmp_path / "h.db"
    writer = HistoryStore(path, step=60.0)
    writer.append(T0, K[:1], "cpu", np.array([1.0]))
    reader = HistoryStore(path, step=60.0, readonly=True)
    errors: list[Exception] = []

    def write_more():
        try:
            for k in range(1, 200):
                writer.append(T0 + 60 * k, K[:1], "cpu", np.array([float(k)]))
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    th = threading.Thread(target=write_more)
    th.start()
    seen = []
    while th.is_alive():
        _, v = reader.series(K[0], "cpu", T0, T0 + 200 * 60)
        seen.append(int(np.isfinite(v).sum()))
    th.join()
    assert not errors
    assert seen == sorted(seen)  # readers see committed prefixes, never a torn state
    _, v = reader.series(K[0], "cpu", T0, T0 + 200 * 60)
    assert np.isfinite(v).all()
    with pytest.raises(sqlite3.OperationalError):
        reader.db.execute("INSERT INTO meta VALUES ('x', 'y')")
    reader.close()
    writer.close()


def test_sqlite_survives_a_crash(tmp_path):
    path = tmp_path / "h.db"
    code = (
        "import os, numpy as np\n"
        "from foresize.adapters.history.sqlite import HistoryStore\n"
        "from foresize.core.history import SeriesKey\n"
        f"st = HistoryStore({str(path)!r}, step=60.0)\n"
        "k = [SeriesKey('ns', 'web', 'app')]\n"
        f"st.write_matrix(k, 'memory', {T0}, np.ones((1, 300)))\n"
        "st.db.execute('BEGIN')\n"
        "st.db.execute('DELETE FROM chunks')\n"  # uncommitted when the process dies
        "os._exit(9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), timeout=60)
    assert proc.returncode == 9
    with HistoryStore(path, step=60.0) as st:
        _, v = st.series(K[0], "memory", T0, T0 + 300 * 60)
        assert (v == 1.0).all()
        assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_errors_name_the_file(tmp_path):
    path = tmp_path / "h.db"
    HistoryStore(path, step=60.0).close()
    with pytest.raises(ForesizeError, match=r"h\.db.*step"):
        HistoryStore(path, step=300.0)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ForesizeError, match=r"bad\.db"):
        HistoryStore(bad)


def test_both_stores_answer_the_same_window(tmp_path):
    rng = np.random.default_rng(3)
    vals = rng.random((3, 720))
    vals[rng.random((3, 720)) < 0.1] = np.nan
    mem = UsageHistory(step=60.0)
    idx = mem.indices(K)
    for k in range(720):
        mem.append(T0 + 60 * k, idx, cpu=vals[:, k])
    with HistoryStore(tmp_path / "h.db", step=60.0) as st:
        st.write_matrix(K, "cpu", T0, vals)
        a = st.window(K, "cpu", T0 + 719 * 60, 144, 300.0)
    b = mem.window(K, "cpu", T0 + 719 * 60, 144, 300.0)
    assert np.allclose(a, b, equal_nan=True, atol=1e-6)


def test_a_poll_lands_whole_or_not_at_all(tmp_path, monkeypatch):
    """`write_poll` is one transaction in SQLite: a failure between the cpu and the memory
    write leaves neither (it used to leave cpu without memory, a torn sample)."""
    store = HistoryStore(tmp_path / "h.db", step=60.0)
    plain_append = store.append

    def crash_before_memory(t, keys, resource, values):
        if resource == "memory":
            raise RuntimeError("killed between the two writes")
        plain_append(t, keys, resource, values)

    monkeypatch.setattr(store, "append", crash_before_memory)
    with pytest.raises(RuntimeError):
        store.write_poll(T0, K[:1], np.array([0.5]), np.array([1e8]))
    monkeypatch.undo()
    _, cpu = store.series(K[0], "cpu", T0 - 60, T0 + 60)
    assert not np.isfinite(cpu).any()
    store.write_poll(T0, K[:1], np.array([0.5]), np.array([1e8]))
    for resource, value in (("cpu", 0.5), ("memory", 1e8)):
        _, got = store.series(K[0], resource, T0 - 60, T0 + 60)
        assert np.nanmax(got) == pytest.approx(value)
    store.close()


async def test_prometheus_history_fills_either_store_alike(tmp_path):
    """The operator's `--prometheus` loader writes through `HistoryWriter` into the SQLite
    store and the in-memory one alike (it once bridged their two append signatures)."""
    from foresize.adapters.history.prometheus_series import ContainerHistory
    from foresize.core.history import TraceSeries
    from foresize.shells.kube.tasks import PrometheusHistory

    times = T0 + 300.0 * np.arange(12)
    cpu = np.linspace(0.1, 1.2, 12)
    memory = np.full(12, 2e8)

    class Reader:
        async def read(self, start, end, step):
            return ContainerHistory(
                series=[TraceSeries(K[0], times, cpu, memory)], oom_kills={K[0]: [T0 + 600]}
            )

    windows = []
    for store in (HistoryStore(tmp_path / "h.db", step=300.0), UsageHistory(step=300.0)):
        loader = PrometheusHistory("http://prometheus.invalid", store, step=300.0)
        loader.reader = Reader()
        assert await loader.refresh(T0 + 3600) == 12
        windows.append(
            [store.window(K[:1], r, float(times[-1]), 12, 300.0)[0] for r in ("cpu", "memory")]
        )
        assert [e[:2] for e in store.events(K[0], "oom", T0, T0 + 3600)] == [(T0 + 600, "oom")]
    for got in windows:
        assert np.allclose(got[0], cpu, atol=1e-6) and np.allclose(got[1], memory)
