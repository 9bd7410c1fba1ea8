"""The embedded history store: one SQLite file (architecture §3.6).

Layout (compact, blob per chunk): a `series` table names each (namespace, workload kind,
workload, container, resource); a `chunks` table holds, per series and step, fixed-length chunks of
float32 samples (NaN = no sample) as one BLOB each. Writing 10,000 series x 14 days at
5 minutes is then ~140,000 rows of ~1 KB instead of 40 million tiny rows, which is what
makes bulk loads take seconds (`foresize bench forecast` measures it). An `events` table
holds OOM kills and throttling.

Safety: WAL journal (readers never block the writer and see only committed data; a crash
loses at most the transaction in flight, and the file reopens cleanly), synchronous=NORMAL
(durable across process crashes; WAL's documented trade-off against power loss), one
writer (this object) and any number of readers (`HistoryStore(path, readonly=True)`).

Retention (default 14 days) is applied by `prune(now)`; `downsample(now)` folds samples
older than `downsample_after` into `coarse_step` chunks by their maximum (the max is what
the forecasts need). History is keyed by workload and container, not pod: it survives
pods, scale-to-zero and a target being deleted and re-created within retention. The
file's schema, its version and its migrations: `adapters.history.sqlite_schema`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from foresize.adapters.history.sqlite_schema import (
    BadChunks,
    Damaged,
    Migration,
    check_integrity,
    move_aside,
    prepare,
)
from foresize.core.api.quantity import CPU, MAX_PLAUSIBLE_CORES, MAX_PLAUSIBLE_MEMORY_BYTES
from foresize.core.errors import ForesizeError
from foresize.core.history import (
    EVENT_KINDS,
    TOTAL_CONTAINER,
    SeriesKey,
    check_resource,
    window_start,
)

CHUNK_POINTS = 288
"""Samples per chunk: one day at 5 minutes, 4.8 hours at 1 minute. ~1 KB blobs: large
enough that per-row overhead is small, small enough that a live append rewrites little."""
CHUNK_BYTES = CHUNK_POINTS * np.dtype(np.float32).itemsize
"""Every blob this store writes has exactly this length; any other is damage that
`quick_check` cannot see (the page is sound, its content is not ours)."""
DEFAULT_RETENTION = 14 * 86400.0
DEFAULT_STEP = 60.0
DEFAULT_COARSE_STEP = 300.0
DEFAULT_DOWNSAMPLE_AFTER = 2 * 86400.0
"""Keep 1-minute detail for 2 days (enough to see short spikes recently); older data is
only used by models on the 5-minute grid anyway."""

# A workload's total (the `__total__` container) sums its pods, so it may exceed one
# machine; 100,000 machines' worth is beyond any cluster and still catches the bit flips
# that turned 1.6e4 cores into 2.9e23.
WORKLOAD_TOTAL_FACTOR = 100_000.0

log = logging.getLogger("foresize.adapters.history")


class HistoryStore:
    """SQLite-backed usage history (see module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        step: float = DEFAULT_STEP,
        retention: float = DEFAULT_RETENTION,
        coarse_step: float = DEFAULT_COARSE_STEP,
        downsample_after: float = DEFAULT_DOWNSAMPLE_AFTER,
        readonly: bool = False,
        recover: bool = False,
    ) -> None:
        """Open (creating) the store at `path`. A damaged file (`PRAGMA quick_check` fails,
        SQLite says it is not a database, our metadata is unreadable) is a `ForesizeError`;
        with `recover=True` it is moved aside to `<path>.corrupt-<n>` instead and an empty
        store started, and `recovered` says from what (the operator's choice: a damaged
        file on a volume must not keep it in CrashLoopBackOff). Chunks of the wrong length
        are damage too; `recover=True` drops just those (`repaired` says what) and keeps
        the rest. A file that holds some other application's tables is never moved: always
        an error."""
        self.path = Path(path)
        self.step = float(step)
        self.retention = float(retention)
        self.coarse_step = float(coarse_step)
        self.downsample_after = float(downsample_after)
        self.readonly = readonly
        self.recovered: tuple[Path, str] | None = None
        """(where the damaged file went, what was wrong) when `recover` moved one aside."""
        self.repaired: str | None = None
        """What `recover` dropped from a file otherwise kept (chunks of the wrong length)."""
        self.bad_values = 0
        """Stored samples dropped on read as impossible (non-finite, negative, or above any
        machine; every sample of a chunk of the wrong length): damage that quick_check
        cannot see, such as bit flips inside a blob."""
        self._bad_chunks_seen: set[tuple[int, float, int]] = set()
        self.on_bad_values: Callable[[int], None] | None = None
        """Called with each new count of dropped samples (the operator's metric)."""
        self.migrated: Migration | None = None
        """What opening the file migrated (`sqlite_schema`; None: nothing)."""
        self._ids: dict[tuple[SeriesKey, str], int] = {}
        self._in_transaction = False
        try:
            self._open()
        except BadChunks as exc:
            if not recover:
                raise ForesizeError(
                    f"{self.path}: history store is damaged ({exc}); start the operator, "
                    "which drops them itself"
                ) from None
            with self.db:
                dropped = self.db.execute(
                    "DELETE FROM chunks WHERE length(data) != ?", (CHUNK_BYTES,)
                ).rowcount
            self.repaired = f"dropped {exc}"
            self.bad_values += dropped * CHUNK_POINTS
        except Damaged as exc:
            if not recover or readonly:
                raise ForesizeError(
                    f"{self.path}: history store is damaged ({exc}); move it aside or start "
                    "the operator, which does that itself"
                ) from None
            with contextlib.suppress(Exception):
                self.db.close()
            aside = move_aside(self.path)
            self.recovered = (aside, str(exc))
            try:
                self._open()
            except Damaged as again:  # pragma: no cover - a fresh file cannot be damaged
                raise ForesizeError(f"{self.path}: cannot start an empty store ({again})") from None

    def _open(self) -> None:
        try:
            if self.readonly:
                uri = f"file:{self.path}?mode=ro"
                self.db = sqlite3.connect(uri, uri=True, timeout=30.0, check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            self.db.execute("PRAGMA busy_timeout=30000")
            check_integrity(self.db)
            if not self.readonly:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
            self.migrated = prepare(self.db, self.path, readonly=self.readonly)
            if not self.readonly:
                self._check_step()
                self._check_chunks()
        except sqlite3.DatabaseError as exc:
            # "file is not a database", "database disk image is malformed", ...
            raise Damaged(str(exc)) from None
        except (sqlite3.Error, OSError) as exc:
            raise ForesizeError(f"{self.path}: cannot open history store: {exc}") from None

    def _check_step(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='step'").fetchone()
        if row is None:
            with self.db:
                self.db.execute("INSERT INTO meta VALUES ('step', ?)", (repr(self.step),))
            return
        try:
            stored = float(row[0])
        except (TypeError, ValueError):
            raise Damaged(f"meta.step is {str(row[0])[:40]!r}, not a number") from None
        if stored != self.step:
            raise ForesizeError(
                f"{self.path}: history store was created with step {row[0]} s, not {self.step} s"
            )

    def _check_chunks(self) -> None:
        # length() of a blob reads its record header, not the blob: a scan of the
        # chunks table's pages, which quick_check has just read anyway.
        count, first = self.db.execute(
            "SELECT COUNT(*), MIN(series_id || '/' || step || '/' || chunk || ': ' || "
            "length(data) || ' bytes') FROM chunks WHERE length(data) != ?",
            (CHUNK_BYTES,),
        ).fetchone()
        if count:
            raise BadChunks(int(count), f"series/step/chunk {first}, not {CHUNK_BYTES}")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- series ids --------------------------------------------------------------------

    def _ids_for(self, keys: Sequence[SeriesKey], resource: str, create: bool) -> list[int]:
        missing = [k for k in keys if (k, resource) not in self._ids]
        if missing:
            if create:
                self.db.executemany(
                    "INSERT OR IGNORE INTO series (namespace, workload_kind, workload, "
                    "container, resource) VALUES (?, ?, ?, ?, ?)",
                    [(k.namespace, k.kind, k.workload, k.container, resource) for k in missing],
                )
            for k in missing:
                row = self.db.execute(
                    "SELECT id FROM series WHERE namespace=? AND workload_kind=? AND workload=?"
                    " AND container=? AND resource=?",
                    (k.namespace, k.kind, k.workload, k.container, resource),
                ).fetchone()
                if row is not None:
                    self._ids[(k, resource)] = row[0]
        return [self._ids.get((k, resource), -1) for k in keys]

    # -- writing -----------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several writes (a poll's cpu and memory land together or
        not at all: a crash between them tore samples). Writes inside join it."""
        if self._in_transaction:
            yield
            return
        self._in_transaction = True
        try:
            with self.db:
                yield
        except BaseException:
            self._ids.clear()  # series rows created in it were rolled back with it
            raise
        finally:
            self._in_transaction = False

    def write_matrix(
        self,
        keys: Sequence[SeriesKey],
        resource: str,
        start: float,
        values: np.ndarray,
        step: float | None = None,
    ) -> None:
        """Bulk write: values (len(keys), T) at `start + i*step` (NaN = no sample).

        Existing samples are merged by their maximum. One transaction.
        """
        check_resource(resource)
        step = self.step if step is None else float(step)
        values = np.asarray(values, dtype=np.float32)
        if values.ndim != 2 or values.shape[0] != len(keys):
            raise ValueError("values must be (len(keys), T)")
        k0 = int(round(start / step))
        if abs(k0 * step - start) > 1e-6 * max(step, 1.0):
            raise ValueError(f"start {start} is not on the {step}-second grid")
        c0 = k0 // CHUNK_POINTS
        c1 = (k0 + values.shape[1] - 1) // CHUNK_POINTS + 1
        n = (c1 - c0) * CHUNK_POINTS
        pad = np.full((len(keys), n), np.nan, dtype=np.float32)
        off = k0 - c0 * CHUNK_POINTS
        pad[:, off : off + values.shape[1]] = values
        blocks = pad.reshape(len(keys), c1 - c0, CHUNK_POINTS)
        with self.transaction():
            ids = self._ids_for(keys, resource, create=True)
            existing = self._read_chunks(ids, step, c0, c1)
            empty = np.all(np.isnan(blocks), axis=2)
            rows = []
            for i, sid in enumerate(ids):
                for c in range(c1 - c0):
                    old = existing.get((sid, c0 + c)) if existing else None
                    if old is not None:
                        blk = np.fmax(blocks[i, c], old)
                    elif empty[i, c]:
                        continue
                    else:
                        blk = blocks[i, c]
                    rows.append((sid, step, c0 + c, blk.tobytes()))
            self.db.executemany("INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?)", rows)
            self._update_first_seen(ids, values, start, step)

    def _update_first_seen(
        self, ids: list[int], values: np.ndarray, start: float, step: float
    ) -> None:
        fin = np.isfinite(values)
        have = fin.any(axis=1)
        first = start + np.argmax(fin, axis=1) * step
        self.db.executemany(
            "UPDATE series SET first_seen = MIN(COALESCE(first_seen, ?), ?) WHERE id = ?",
            [(float(f), float(f), sid) for sid, f, h in zip(ids, first, have, strict=True) if h],
        )

    def append(
        self, t: float, keys: Sequence[SeriesKey], resource: str, values: np.ndarray
    ) -> None:
        """One sample at time `t` for each key (NaN = no sample)."""
        self.write_matrix(
            keys,
            resource,
            np.floor(t / self.step + 1e-9) * self.step,
            np.asarray(values, dtype=np.float64).reshape(-1, 1),
        )

    def write_poll(
        self, t: float, keys: Sequence[SeriesKey], cpu: np.ndarray, memory: np.ndarray
    ) -> None:
        """One poll of `keys` (`HistoryWriter`): cpu and memory in one transaction (a crash
        between two transactions tore samples: cpu without memory)."""
        with self.transaction():
            self.append(t, keys, "cpu", cpu)
            self.append(t, keys, "memory", memory)

    def record_event(
        self, key: SeriesKey, kind: str, t: float, value: float = 0.0, pod: str | None = None
    ) -> None:
        """An OOM kill or throttling; never mixed into usage samples."""
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        with self.db:
            self.db.execute(
                "INSERT INTO events (namespace, workload_kind, workload, container, kind, ts,"
                " value, pod) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.namespace,
                    key.kind,
                    key.workload,
                    key.container,
                    kind,
                    float(t),
                    float(value),
                    pod,
                ),
            )

    # -- maintenance -------------------------------------------------------------------

    def prune(self, now: float) -> int:
        """Drop chunks and events older than the retention; returns chunks deleted."""
        cutoff = now - self.retention
        with self.db:
            deleted = 0
            for (step,) in self.db.execute("SELECT DISTINCT step FROM chunks").fetchall():
                # A chunk is dropped once its last sample is older than the cutoff.
                last_chunk = int(np.floor(cutoff / step)) // CHUNK_POINTS - 1
                cur = self.db.execute(
                    "DELETE FROM chunks WHERE step = ? AND chunk <= ?", (step, last_chunk)
                )
                deleted += cur.rowcount
            self.db.execute("DELETE FROM events WHERE ts < ?", (cutoff,))
            self.db.execute(
                "UPDATE series SET first_seen = ? WHERE first_seen < ?", (cutoff, cutoff)
            )
        return deleted

    def downsample(self, now: float) -> int:
        """Fold base-step chunks entirely older than now - downsample_after into
        coarse-step chunks (max per coarse bucket). Returns base chunks folded."""
        factor = self.coarse_step / self.step
        if factor <= 1 or abs(factor - round(factor)) > 1e-9:
            return 0
        f = int(round(factor))
        cutoff_chunk = int(np.floor((now - self.downsample_after) / self.step)) // CHUNK_POINTS
        rows = self.db.execute(
            "SELECT series_id, chunk, data FROM chunks WHERE step = ? AND chunk < ?",
            (self.step, cutoff_chunk),
        ).fetchall()
        if not rows:
            return 0
        by_series: dict[int, list[tuple[int, np.ndarray]]] = {}
        for sid, chunk, data in rows:
            arr = self._decode(sid, self.step, chunk, data)
            if arr is not None:
                by_series.setdefault(sid, []).append((chunk, arr))
        with self.db:
            for sid, chunks in by_series.items():
                k_first = min(c for c, _ in chunks) * CHUNK_POINTS
                k_last = (max(c for c, _ in chunks) + 1) * CHUNK_POINTS
                # Express on the coarse grid: coarse index = floor(k / f).
                q0, q1 = k_first // f, (k_last - 1) // f + 1
                full = np.full((q1 - q0) * f, np.nan, dtype=np.float32)
                for c, arr in chunks:
                    s = c * CHUNK_POINTS - q0 * f
                    full[s : s + CHUNK_POINTS] = arr
                coarse = full.reshape(-1, f)
                filled = np.where(np.isnan(coarse), -np.inf, coarse).max(axis=1)
                filled[np.isneginf(filled)] = np.nan
                self._merge_into(sid, self.coarse_step, q0, filled)
            self.db.execute(
                "DELETE FROM chunks WHERE step = ? AND chunk < ?", (self.step, cutoff_chunk)
            )
        return len(rows)

    def _merge_into(self, sid: int, step: float, k0: int, values: np.ndarray) -> None:
        c0 = k0 // CHUNK_POINTS
        c1 = (k0 + len(values) - 1) // CHUNK_POINTS + 1
        pad = np.full((c1 - c0) * CHUNK_POINTS, np.nan, dtype=np.float32)
        off = k0 - c0 * CHUNK_POINTS
        pad[off : off + len(values)] = values
        existing = self._read_chunks([sid], step, c0, c1)
        out = []
        for c in range(c1 - c0):
            blk = pad[c * CHUNK_POINTS : (c + 1) * CHUNK_POINTS]
            old = existing.get((sid, c0 + c))
            if old is not None:
                blk = np.fmax(blk, old)
            if not np.isnan(blk).all():
                out.append((sid, step, c0 + c, blk.tobytes()))
        self.db.executemany("INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?)", out)

    # -- reading -----------------------------------------------------------------------

    def _read_chunks(
        self, ids: list[int], step: float, c0: int, c1: int
    ) -> dict[tuple[int, int], np.ndarray]:
        out: dict[tuple[int, int], np.ndarray] = {}
        valid = [i for i in ids if i >= 0]
        for b in range(0, len(valid), 500):
            part = valid[b : b + 500]
            marks = ",".join("?" * len(part))
            for sid, chunk, data in self.db.execute(
                f"SELECT series_id, chunk, data FROM chunks WHERE step = ? AND chunk >= ?"
                f" AND chunk < ? AND series_id IN ({marks})",
                (step, c0, c1, *part),
            ):
                arr = self._decode(sid, step, chunk, data)
                if arr is not None:
                    out[(sid, chunk)] = arr
        return out

    def _decode(self, sid: int, step: float, chunk: int, data: bytes) -> np.ndarray | None:
        """The samples of one blob; None (a gap, logged once and counted as CHUNK_POINTS
        bad values) for one of the wrong length, which a reader that may not repair the
        file (readonly, or written after the check at open) can still meet."""
        if len(data) == CHUNK_BYTES:
            return np.frombuffer(data, dtype=np.float32)
        if (sid, step, chunk) not in self._bad_chunks_seen:
            self._bad_chunks_seen.add((sid, step, chunk))
            log.warning(
                "history store %s: chunk %s/%s/%s is %d bytes, not %d: read as a gap",
                self.path,
                sid,
                step,
                chunk,
                len(data),
                CHUNK_BYTES,
            )
            self.bad_values += CHUNK_POINTS
            if self.on_bad_values is not None:
                self.on_bad_values(CHUNK_POINTS)
        return None

    def _plausible(self, resource: str, stored: np.ndarray, container: str) -> np.ndarray:
        """`stored` with impossible samples (inf, negative, above any machine) turned into
        gaps and counted in `bad_values`; NaN is an honest gap and stays one."""
        limit = MAX_PLAUSIBLE_CORES if resource == CPU else MAX_PLAUSIBLE_MEMORY_BYTES
        if container == TOTAL_CONTAINER:
            limit *= WORKLOAD_TOTAL_FACTOR
        with np.errstate(invalid="ignore"):
            bad = np.isinf(stored) | (stored < 0) | (stored > limit)
        if not bad.any():
            return stored
        self.bad_values += int(bad.sum())
        if self.on_bad_values is not None:
            self.on_bad_values(int(bad.sum()))
        clean = stored.copy()
        clean[bad] = np.nan
        return clean

    def _steps(self) -> list[float]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT step FROM chunks")]

    def window(
        self, keys: Sequence[SeriesKey], resource: str, end: float, length: int, step: float
    ) -> np.ndarray:
        check_resource(resource)
        ids = self._ids_for(keys, resource, create=False)
        start = window_start(end, length, step)
        out = np.full((len(keys), length), -np.inf)
        pos = {sid: i for i, sid in enumerate(ids) if sid >= 0}
        for st in self._steps():
            # Stored samples of step `st` fall in output bucket floor((k*st - start)/step).
            k0 = int(np.floor(start / st))
            k1 = int(np.floor((start + length * step) / st)) + 1
            chunks = self._read_chunks(ids, st, k0 // CHUNK_POINTS, k1 // CHUNK_POINTS + 1)
            for (sid, chunk), stored in chunks.items():
                arr = self._plausible(resource, stored, keys[pos[sid]].container)
                ks = chunk * CHUNK_POINTS + np.arange(CHUNK_POINTS)
                b = np.floor((ks * st - start) / step + 1e-9).astype(np.int64)
                ok = (b >= 0) & (b < length) & np.isfinite(arr)
                if st > step:
                    # A coarse sample is the max of its whole interval: it applies to
                    # every finer bucket that interval covers.
                    for sub in range(1, int(round(st / step))):
                        bb = b + sub
                        ok2 = (bb >= 0) & (bb < length) & np.isfinite(arr)
                        np.maximum.at(out[pos[sid]], bb[ok2], arr[ok2])
                np.maximum.at(out[pos[sid]], b[ok], arr[ok])
        out[np.isneginf(out)] = np.nan
        return out

    def series(
        self, key: SeriesKey, resource: str, start: float, end: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Samples at the base step in [start, end) (downsampled parts repeat their max)."""
        k0 = int(np.ceil(start / self.step - 1e-9))
        k1 = int(np.ceil(end / self.step - 1e-9))
        if k1 <= k0:
            return np.empty(0), np.empty(0)
        vals = self.window([key], resource, (k1 - 1) * self.step, k1 - k0, self.step)[0]
        return np.arange(k0, k1) * self.step, vals

    def events(
        self, key: SeriesKey, kind: str | None, start: float, end: float
    ) -> list[tuple[float, str, float]]:
        q = (
            "SELECT ts, kind, value FROM events WHERE namespace=? AND workload_kind=?"
            " AND workload=? AND container=? AND ts >= ? AND ts < ?"
        )
        args: list[str | float] = [key.namespace, key.kind, key.workload, key.container, start, end]
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        rows = self.db.execute(q + " ORDER BY ts", args)
        return [(float(ts), str(name), float(value)) for ts, name, value in rows]

    def first_seen(self, key: SeriesKey) -> float | None:
        rows = self.db.execute(
            "SELECT MIN(first_seen) FROM series WHERE namespace=? AND workload_kind=?"
            " AND workload=? AND container=?",
            (key.namespace, key.kind, key.workload, key.container),
        ).fetchone()
        return None if rows is None or rows[0] is None else float(rows[0])

    def keys(self) -> list[SeriesKey]:
        return [
            SeriesKey(*r)
            for r in self.db.execute(
                "SELECT DISTINCT namespace, workload, container, workload_kind FROM series"
                " ORDER BY 1, 2, 3, 4"
            )
        ]
