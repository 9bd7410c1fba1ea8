"""The SQLite history store's schema migration (`adapters.history.sqlite_schema`): a file
written by the version-1 schema (no workload kind; its DDL is copied here as it shipped)
opens as version 2 with every row kept, once, atomically."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from foresize.adapters.history import sqlite_schema
from foresize.adapters.history.sqlite import CHUNK_POINTS, HistoryStore
from foresize.core.errors import ForesizeError
from foresize.core.history import UNKNOWN_KIND, SeriesKey

T0 = 1_700_006_400.0  # a midnight UTC, on every grid
STEP = 60.0

# The schema as version 1 of the store created it (before the workload's kind was kept).
V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL, workload TEXT NOT NULL, container TEXT NOT NULL,
    resource TEXT NOT NULL,
    first_seen REAL,
    UNIQUE (namespace, workload, container, resource)
);
CREATE TABLE IF NOT EXISTS chunks (
    series_id INTEGER NOT NULL,
    step REAL NOT NULL,
    chunk INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (series_id, step, chunk)
);
CREATE TABLE IF NOT EXISTS events (
    namespace TEXT NOT NULL, workload TEXT NOT NULL, container TEXT NOT NULL,
    kind TEXT NOT NULL, ts REAL NOT NULL, value REAL NOT NULL DEFAULT 0, pod TEXT
);
CREATE INDEX IF NOT EXISTS events_key ON events (namespace, workload, container, ts);
"""

OLD = [("shop", "web", "app", 1.5, 2e9), ("batch", "jobgroup:etl", "etl", 0.5, 1e9)]


def _v1_file(path: Path, minutes: int = 30) -> None:
    """A version-1 store: a Deployment's (or CronJob's) series and a job group's, cpu and
    memory, `minutes` of samples from T0, and an OOM kill of each."""
    db = sqlite3.connect(path)
    db.executescript(V1_SCHEMA)
    with db:
        db.execute("INSERT INTO meta VALUES ('step', ?)", (repr(STEP),))
        k0 = int(T0 // STEP)
        sid = 0
        for ns, wl, container, cpu, mem in OLD:
            for resource, value in (("cpu", cpu), ("memory", mem)):
                sid += 1
                db.execute(
                    "INSERT INTO series VALUES (?, ?, ?, ?, ?, ?)",
                    (sid, ns, wl, container, resource, T0),
                )
                block = np.full(CHUNK_POINTS, np.nan, dtype=np.float32)
                off = k0 % CHUNK_POINTS
                block[off : off + minutes] = value
                db.execute(
                    "INSERT INTO chunks VALUES (?, ?, ?, ?)",
                    (sid, STEP, k0 // CHUNK_POINTS, block.tobytes()),
                )
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, 'oom', ?, ?, 'p')",
                (ns, wl, container, T0 + 600, mem),
            )
    db.close()


def _rows(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        return {
            t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in sqlite_schema.COLUMNS
        }
    finally:
        db.close()


def _read(store: HistoryStore, key: SeriesKey) -> tuple[float, float, int, float | None]:
    _, cpu = store.series(key, "cpu", T0, T0 + 3600)
    _, mem = store.series(key, "memory", T0, T0 + 3600)
    kills = store.events(key, "oom", T0, T0 + 3600)
    return float(np.nanmax(cpu)), float(np.nanmax(mem)), len(kills), store.first_seen(key)


def test_a_version_1_file_migrates_with_every_row_kept(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _v1_file(path)
    before = _rows(path)
    with HistoryStore(path, step=STEP) as store:
        assert store.migrated is not None
        assert (store.migrated.series, store.migrated.events) == (4, 2)
        assert store.migrated.unknown_kind == 2  # `web`'s: its kind is not in the file
        # Old rows of a name any kind could have: under the unknown kind.
        web = SeriesKey("shop", "web", "app", UNKNOWN_KIND)
        assert _read(store, web) == (1.5, 2e9, 1, T0)
        # A job group's name proves its kind (`cluster.jobs`): the rows are a JobGroup's.
        etl = SeriesKey("batch", "jobgroup:etl", "etl", "JobGroup")
        assert _read(store, etl) == (0.5, 1e9, 1, T0)
        # A kind's own key reads nothing of the old rows (the reader decides when it may
        # take unknown history: `history.history_kinds`).
        _, cpu = store.series(web.of_kind("Deployment"), "cpu", T0, T0 + 3600)
        assert np.isnan(cpu).all()
        # New writes keep their kind apart from the old rows and from each other.
        t = T0 + 40 * STEP
        store.write_poll(
            t, [web.of_kind("Deployment"), web.of_kind("CronJob")], np.array([3.0, 0.1]), np.ones(2)
        )
        assert set(store.keys()) == {
            web,
            web.of_kind("Deployment"),
            web.of_kind("CronJob"),
            etl,
        }
    after = _rows(path)
    assert after["chunks"] == before["chunks"] + 4 and after["events"] == before["events"]


def test_the_migration_runs_once_and_a_restart_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _v1_file(path)
    with HistoryStore(path, step=STEP) as store:
        assert store.migrated is not None
    rows = _rows(path)
    for _ in range(2):
        with HistoryStore(path, step=STEP) as store:
            assert store.migrated is None
            assert _read(store, SeriesKey("shop", "web", "app")) == (1.5, 2e9, 1, T0)
        assert _rows(path) == rows
    db = sqlite3.connect(path)
    (version,) = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    db.close()
    assert version == str(sqlite_schema.SCHEMA_VERSION)


def test_a_migration_that_fails_leaves_version_1_whole_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.db"
    _v1_file(path)
    counts = sqlite_schema._counts
    calls = []

    def lose_a_row(db: sqlite3.Connection) -> tuple[int, int, int]:
        series, events, chunks = counts(db)
        calls.append(1)
        # After the copy, pretend a chunk lost its series: the check must refuse.
        return (series, events, chunks - (len(calls) == 2))

    monkeypatch.setattr(sqlite_schema, "_counts", lose_a_row)
    with pytest.raises(ForesizeError, match=r"would keep .* left at schema 1"):
        HistoryStore(path, step=STEP)
    db = sqlite3.connect(path)
    columns = {r[1] for r in db.execute("PRAGMA table_info(series)")}
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert db.execute("SELECT COUNT(*) FROM series").fetchone()[0] == 4
    assert db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 4
    assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 2
    db.close()
    assert "workload_kind" not in columns and "series_v2" not in tables  # rolled back
    monkeypatch.setattr(sqlite_schema, "_counts", counts)
    with HistoryStore(path, step=STEP) as store:  # the next start migrates it
        assert store.migrated is not None and store.migrated.series == 4
        assert _read(store, SeriesKey("shop", "web", "app")) == (1.5, 2e9, 1, T0)


def test_a_newer_schema_is_refused_and_a_reader_does_not_migrate(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    _v1_file(old)
    with pytest.raises(ForesizeError, match=r"schema version 1 .*start the operator"):
        HistoryStore(old, step=STEP, readonly=True)
    assert "workload_kind" not in {
        r[1] for r in sqlite3.connect(old).execute("PRAGMA table_info(series)")
    }
    newer = tmp_path / "newer.db"
    HistoryStore(newer, step=STEP).close()
    db = sqlite3.connect(newer)
    with db:
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(ForesizeError, match="schema version 3, newer than"):
        HistoryStore(newer, step=STEP, recover=True)  # never moved aside: it is not damage
    assert newer.exists()
