"""The SQLite history store's file: its schema, its version and the migrations between
versions, and the checks made when it is opened (is it ours, is it sound). The store
itself (`adapters.history.sqlite`) reads and writes samples in a file this module has
vouched for.

Versions (the `meta` row `schema_version`; a file with a `series` table and no such row
is version 1, which predates the row):

1. series keyed by (namespace, workload, container, resource): a CronJob and a
   Deployment of one name shared one history.
2. the workload's kind is part of the key (`workload_kind` on `series` and `events`).
   Version 1's rows get the kind their name proves (a `jobgroup:<group>` workload is a
   JobGroup's, `cluster.jobs`) or `UNKNOWN_KIND`, which a workload reads only while no
   workload of another kind has its name (`history.history_kinds`): rows a CronJob and a
   Deployment wrote under one name are a mixture neither may take for its own. Nothing is
   attributed by guessing, nothing is dropped; the unknown rows age out with retention.

A migration runs in one transaction when a writer opens the file: it either completes
(row counts checked before the commit: a migration that would lose a row raises and
rolls back) or leaves the old version whole, so a crash or a kill during it is retried
at the next start, and a migrated file is never migrated twice. A file of a newer
version than this code knows is refused, never rewritten; a reader (`readonly`) refuses
an old version (it may not write the migration).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from foresize.core.cluster.jobs import JOB_GROUP, history_workload
from foresize.core.errors import ForesizeError
from foresize.core.history import UNKNOWN_KIND

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL, workload_kind TEXT NOT NULL DEFAULT '',
    workload TEXT NOT NULL, container TEXT NOT NULL,
    resource TEXT NOT NULL,
    first_seen REAL,
    UNIQUE (namespace, workload_kind, workload, container, resource)
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
    kind TEXT NOT NULL, ts REAL NOT NULL, value REAL NOT NULL DEFAULT 0, pod TEXT,
    workload_kind TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS events_by_kind
    ON events (namespace, workload_kind, workload, container, ts);
"""

COLUMNS = {
    "meta": {"key", "value"},
    "series": {
        *("id", "namespace", "workload_kind", "workload", "container", "resource", "first_seen")
    },
    "chunks": {"series_id", "step", "chunk", "data"},
    "events": {"namespace", "workload_kind", "workload", "container", "kind", "ts", "value"},
}

_GROUP_PREFIX = history_workload("")
"""How a job group's history workload starts (`jobgroup:`): the one kind a version-1 row
proves by its name alone."""


class Damaged(Exception):
    """The file is not a healthy SQLite database of ours."""


class BadChunks(Damaged):
    """Chunks whose blob is not the store's chunk length: the rest of the file is sound,
    so the store's `recover` drops those chunks instead of moving the file aside."""

    def __init__(self, count: int, first: str) -> None:
        super().__init__(f"{count} chunk{'s' * (count != 1)} of the wrong length, first: {first}")
        self.count = count


@dataclass(frozen=True, slots=True)
class Migration:
    """What opening the file migrated (the store's `migrated`; the operator logs it)."""

    from_version: int
    to_version: int
    series: int  # series rows carried over
    events: int
    unknown_kind: int  # of the series, kept under UNKNOWN_KIND

    def __str__(self) -> str:
        return (
            f"schema {self.from_version} -> {self.to_version}: {self.series} series and "
            f"{self.events} events kept, {self.unknown_kind} series under an unknown kind "
            "(read by a workload while its name is its kind's alone)"
        )


def move_aside(path: Path) -> Path:
    """Rename a damaged store (and its -wal/-shm) to the first free `<path>.corrupt-<n>`."""
    n = 1
    while path.with_name(f"{path.name}.corrupt-{n}").exists():
        n += 1
    aside = path.with_name(f"{path.name}.corrupt-{n}")
    path.rename(aside)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(aside.with_name(aside.name + suffix))
    return aside


def check_integrity(db: sqlite3.Connection) -> None:
    # quick_check reads every page once (O(N), no index cross-check): seconds for a
    # large file, paid once per start, and it catches torn or overwritten pages.
    rows = db.execute("PRAGMA quick_check(5)").fetchall()
    if [r[0] for r in rows] != ["ok"]:
        found = " ".join(" ".join(str(r[0]) for r in rows).split())  # one line
        raise Damaged(f"quick_check: {found}"[:160])


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def stored_version(db: sqlite3.Connection, path: Path) -> int | None:
    """The file's schema version (None: a new file, no table of ours yet)."""
    if not _columns(db, "series"):
        return None
    row = None
    if _columns(db, "meta") >= {"key", "value"}:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is None:
        return 1  # version 1 wrote no version row
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise Damaged(f"meta.schema_version is {str(row[0])[:40]!r}, not a number") from None


def prepare(db: sqlite3.Connection, path: Path, *, readonly: bool) -> Migration | None:
    """Bring the file to `SCHEMA_VERSION` (creating it, or migrating it in one
    transaction) and check it is ours; returns what was migrated (None: nothing)."""
    version = stored_version(db, path)
    if version is not None and version > SCHEMA_VERSION:
        raise ForesizeError(
            f"{path}: history store has schema version {version}, newer than this Foresize "
            f"knows ({SCHEMA_VERSION}); refusing to touch it"
        )
    if readonly:
        if version is not None and version < SCHEMA_VERSION:
            raise ForesizeError(
                f"{path}: history store has schema version {version} (this Foresize reads "
                f"{SCHEMA_VERSION}); open it once for writing (start the operator) to migrate it"
            )
        return None
    migration = None
    if version == 1:
        _check_columns(db, path, _V1_COLUMNS)
        migration = _migrate_1_to_2(db, path)
    db.executescript(SCHEMA)
    _check_columns(db, path, COLUMNS)
    if version is None:
        with db:
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
    return migration


_V1_COLUMNS = {
    "series": {"id", "namespace", "workload", "container", "resource", "first_seen"},
    "chunks": {"series_id", "step", "chunk", "data"},
    "events": {"namespace", "workload", "container", "kind", "ts", "value"},
}


def _check_columns(db: sqlite3.Connection, path: Path, tables: dict[str, set[str]]) -> None:
    for table, needed in tables.items():
        have = _columns(db, table)
        if not needed <= have:
            raise ForesizeError(
                f"{path}: not a Foresize history store (table {table} lacks "
                f"{', '.join(sorted(needed - have))}); refusing to touch it"
            )


def _counts(db: sqlite3.Connection) -> tuple[int, int, int]:
    """(series rows, event rows, chunks whose series row exists): what a migration must
    carry over whole."""
    series = db.execute("SELECT COUNT(*) FROM series").fetchone()[0]
    events = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    owned = db.execute(
        "SELECT COUNT(*) FROM chunks WHERE series_id IN (SELECT id FROM series)"
    ).fetchone()[0]
    return int(series), int(events), int(owned)


def _migrate_1_to_2(db: sqlite3.Connection, path: Path) -> Migration:
    """Version 1 to 2 (module notes): `series` rebuilt with the kind in its key (ids kept,
    so every chunk stays its series'), `events` given the column; one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        before = _counts(db)
        grouped = "substr(workload, 1, ?) = ?"
        prefix = (len(_GROUP_PREFIX), _GROUP_PREFIX)
        db.execute(
            """CREATE TABLE series_v2 (
                id INTEGER PRIMARY KEY,
                namespace TEXT NOT NULL, workload_kind TEXT NOT NULL DEFAULT '',
                workload TEXT NOT NULL, container TEXT NOT NULL,
                resource TEXT NOT NULL,
                first_seen REAL,
                UNIQUE (namespace, workload_kind, workload, container, resource)
            )"""
        )
        db.execute(
            "INSERT INTO series_v2 (id, namespace, workload_kind, workload, container, "
            f"resource, first_seen) SELECT id, namespace, CASE WHEN {grouped} THEN ? ELSE ? "
            "END, workload, container, resource, first_seen FROM series",
            (*prefix, JOB_GROUP, UNKNOWN_KIND),
        )
        db.execute("DROP TABLE series")
        db.execute("ALTER TABLE series_v2 RENAME TO series")
        db.execute("ALTER TABLE events ADD COLUMN workload_kind TEXT NOT NULL DEFAULT ''")
        db.execute(f"UPDATE events SET workload_kind = ? WHERE {grouped}", (JOB_GROUP, *prefix))
        db.execute("DROP INDEX IF EXISTS events_key")
        after = _counts(db)
        if after != before:
            raise ForesizeError(
                f"{path}: migrating the history store to schema 2 would keep "
                f"{after[0]} series, {after[1]} events and {after[2]} chunks of "
                f"{before[0]}, {before[1]} and {before[2]}; left at schema 1"
            )
        unknown = db.execute(
            "SELECT COUNT(*) FROM series WHERE workload_kind = ?", (UNKNOWN_KIND,)
        ).fetchone()[0]
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '2')")
        db.commit()
    except BaseException:
        db.rollback()
        raise
    return Migration(1, 2, before[0], before[1], int(unknown))
