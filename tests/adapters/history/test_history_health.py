"""The SQLite history stays healthy: a damaged file is refused (or, for the operator, moved
aside with a log line, a metric and an Event), never silently read; impossible stored
values are dropped and counted; retention and downsampling run on a schedule off the loop."""

from __future__ import annotations

import asyncio
import logging
import sqlite3

import numpy as np
import pytest

from foresize.adapters.history.maintenance import (
    maintain_once,
    open_store,
    recovery_event,
    run_maintenance,
)
from foresize.adapters.history.sqlite import CHUNK_POINTS, HistoryStore
from foresize.adapters.history.traces import SeriesKey
from foresize.adapters.telemetry.metrics import ForesizeMetrics
from foresize.core.errors import ForesizeError
from foresize.shells.kube.components import open_history
from foresize.shells.kube.options import OperatorOptions

T0 = 1_700_006_400.0
KEY = SeriesKey("ns", "web", "app")
TOTAL = SeriesKey("ns", "web", "__total__")


def _filled(path, days: float = 1.0, step: float = 60.0) -> None:
    with HistoryStore(path, step=step) as store:
        n = int(days * 86400 / step)
        store.write_matrix([KEY], "cpu", T0, np.full((1, n), 2.0))
        store.write_matrix([KEY], "memory", T0, np.full((1, n), 1e9))


def _counter(metrics: ForesizeMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


def _damage_pages(path) -> None:
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, 3 * page):
        data[offset : offset + page] = b"\xa5" * page
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
        lambda p: p.write_bytes(b"\x00" * 100),
        _damage_pages,
    ],
    ids=["truncated", "100-bytes", "pages-overwritten"],
)
def test_a_damaged_file_is_refused_not_read(tmp_path, damage):
    path = tmp_path / "h.db"
    _filled(path)
    damage(path)
    with pytest.raises(ForesizeError, match="damaged"):
        HistoryStore(path)
    assert path.exists()  # without recover=True nothing is moved


def test_a_malformed_step_is_damage_not_a_traceback(tmp_path):
    path = tmp_path / "h.db"
    _filled(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 'abc' WHERE key = 'step'")
    with pytest.raises(ForesizeError, match=r"meta\.step"):
        HistoryStore(path)


def test_another_applications_database_is_refused_and_never_moved(tmp_path):
    path = tmp_path / "h.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE chunks (id INTEGER, payload BLOB)")
    for recover in (False, True):
        with pytest.raises(ForesizeError, match="not a Foresize history store"):
            HistoryStore(path, recover=recover)
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))


def test_the_operator_moves_a_damaged_store_aside_with_a_line_a_metric_and_an_event(
    tmp_path, caplog
):
    path = tmp_path / "h.db"
    _filled(path)
    _damage_pages(path)
    metrics = ForesizeMetrics()
    with caplog.at_level(logging.ERROR, logger="foresize.adapters.history"):
        store = open_history(OperatorOptions(history_db=str(path)), metrics)
    assert store.recovered is not None and store.recovered[0].name == "h.db.corrupt-1"
    assert (tmp_path / "h.db.corrupt-1").exists()
    assert store.keys() == []  # a fresh, empty, usable store
    store.append(T0, [KEY], "cpu", np.array([1.0]))
    assert _counter(metrics, "foresize_history_recoveries_total") == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "\n" not in errors[0].getMessage()
    event = recovery_event(store, "foresize", "foresize-0")
    assert event is not None and event.type == "Warning" and event.name == "foresize-0"
    assert event.reason == "HistoryStoreRecovered" and "h.db.corrupt-1" in event.message
    assert recovery_event(store, "foresize", None) is None
    store.close()
    # A second damage goes to the next free name.
    _damage_pages(path)
    assert open_store(path).recovered[0].name == "h.db.corrupt-2"


def test_impossible_stored_values_are_dropped_and_counted(tmp_path):
    # Audit F-9: 200 bit flips read back as up to 2.9e23 cores, silently.
    path = tmp_path / "h.db"
    with HistoryStore(path) as store:
        store.write_matrix([KEY, TOTAL], "cpu", T0, np.full((2, 10), 2.0))
    with sqlite3.connect(path) as db:
        rowid, blob = db.execute(
            "SELECT chunks.rowid, data FROM chunks JOIN series ON series.id = series_id "
            "WHERE container = 'app' AND resource = 'cpu'"
        ).fetchone()
        arr = np.frombuffer(blob, dtype=np.float32).copy()
        start = int(T0 / 60) % CHUNK_POINTS
        arr[start : start + 3] = [2.9e23, np.inf, -5.0]
        db.execute("UPDATE chunks SET data = ? WHERE rowid = ?", (arr.tobytes(), rowid))
    metrics = ForesizeMetrics()
    store = open_store(path, metrics)
    _, values = store.series(KEY, "cpu", T0, T0 + 600)
    assert np.isnan(values[:3]).all() and (values[3:] == 2.0).all()
    assert store.bad_values == 3
    assert _counter(metrics, "foresize_history_bad_values_total") == 3
    # A workload total may exceed one machine (it sums pods): 8,000 cores is kept.
    store.write_matrix([TOTAL], "cpu", T0, np.full((1, 10), 8000.0))
    _, totals = store.series(TOTAL, "cpu", T0, T0 + 600)
    assert (totals == 8000.0).all() and store.bad_values == 3
    store.close()


def test_a_maintenance_pass_prunes_and_downsamples_on_its_own_connection(tmp_path):
    # Audit F-4: prune/downsample had no caller; 60 days of 1-minute samples stayed.
    path = tmp_path / "h.db"
    _filled(path, days=20)
    store = HistoryStore(path)
    now = T0 + 20 * 86400
    result = maintain_once(store, now)
    assert result.pruned_chunks > 0 and result.downsampled_chunks > 0
    oldest = store.db.execute(
        "SELECT MIN(chunk * ? * step) FROM chunks", (CHUNK_POINTS,)
    ).fetchone()[0]
    assert oldest >= now - store.retention - CHUNK_POINTS * 300
    steps = {r[0] for r in store.db.execute("SELECT DISTINCT step FROM chunks")}
    assert steps == {60.0, 300.0}
    store.close()


async def test_maintenance_runs_at_start_and_on_schedule_until_stopped(tmp_path):
    path = tmp_path / "h.db"
    _filled(path, days=16)
    store = HistoryStore(path)
    stop = asyncio.Event()
    passes = []

    def on_pass(result):
        passes.append(result)
        if len(passes) == 2:
            stop.set()

    await asyncio.wait_for(
        run_maintenance(store, stop, interval=0.05, clock=lambda: T0 + 16 * 86400, on_pass=on_pass),
        10,
    )
    assert len(passes) == 2 and passes[0].pruned_chunks > 0 and passes[1].pruned_chunks == 0
    store.close()


async def test_the_operator_task_posts_the_recovery_event_then_maintains(tmp_path):
    from foresize.adapters.history.maintenance import history_upkeep

    path = tmp_path / "h.db"
    _filled(path)
    _damage_pages(path)
    store = open_store(path)
    stop = asyncio.Event()
    posted = []

    async def apply(event):
        posted.append(event)
        stop.set()  # ends the maintenance loop after its first pass

    await asyncio.wait_for(history_upkeep(store, stop, apply, "foresize", "foresize-0"), 10)
    assert [e.reason for e in posted] == ["HistoryStoreRecovered"]
    store.close()


def test_a_polls_cpu_and_memory_land_together_or_not_at_all(tmp_path):
    # Audit F-15: cpu and memory were two transactions; a kill between them tore a sample.
    from foresize.adapters.history.metrics_server import HistorySink, Sample

    store = HistoryStore(tmp_path / "h.db")
    real = store.write_matrix

    def failing(keys, resource, *args, **kwargs):
        if resource == "memory":
            raise RuntimeError("killed between the two writes")
        return real(keys, resource, *args, **kwargs)

    store.write_matrix = failing
    with pytest.raises(RuntimeError):
        HistorySink(store).add_samples([Sample(T0, "ns", "web", "web-1", "app", 0.5, 1e8)])
    store.write_matrix = real
    _, cpu = store.series(KEY, "cpu", T0, T0 + 60)
    assert np.isnan(cpu).all()  # rolled back with the memory write
    HistorySink(store).add_samples([Sample(T0, "ns", "web", "web-1", "app", 0.5, 1e8)])
    _, cpu = store.series(KEY, "cpu", T0, T0 + 60)
    _, mem = store.series(KEY, "memory", T0, T0 + 60)
    assert cpu[0] == 0.5 and mem[0] == 1e8
    store.close()


def _write_blob(path, blob: bytes, where: str = "") -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE chunks SET data = ? {where}", (blob,))


@pytest.mark.parametrize("blob", [b"abc", b"\x00" * 1000, b"\x00" * 2000], ids=len)
def test_a_chunk_of_the_wrong_length_is_refused_and_the_operator_drops_only_it(
    tmp_path, caplog, blob
):
    # np.frombuffer raised "buffer size must be a multiple of element size" on every
    # read of the series (or read a truncated chunk), and recover=True found nothing.
    path = tmp_path / "h.db"
    _filled(path)
    _write_blob(path, blob, "WHERE rowid = (SELECT MIN(rowid) FROM chunks)")
    with pytest.raises(ForesizeError, match=r"damaged \(1 chunk of the wrong length"):
        HistoryStore(path)
    metrics = ForesizeMetrics()
    with caplog.at_level(logging.ERROR, logger="foresize.adapters.history"):
        store = open_history(OperatorOptions(history_db=str(path)), metrics)
    assert store.recovered is None and not list(tmp_path.glob("*.corrupt-*"))
    assert store.repaired is not None and "1 chunk of the wrong length" in store.repaired
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "wrong length" in line and "the rest is kept" in line
    assert _counter(metrics, "foresize_history_recoveries_total") == 1
    assert _counter(metrics, "foresize_history_bad_values_total") == CHUNK_POINTS
    event = recovery_event(store, "foresize", "foresize-0")
    assert event is not None and event.reason == "HistoryStoreRepaired"
    # The dropped chunk is a gap; every other chunk of the day is read back.
    _, cpu = store.series(KEY, "cpu", T0, T0 + 86400)
    _, mem = store.series(KEY, "memory", T0, T0 + 86400)
    assert (np.isnan(cpu) | (cpu == 2.0)).all() and (cpu == 2.0).sum() > 1000
    assert (np.isnan(mem) | (mem == 1e9)).all() and np.isnan(cpu).sum() + np.isnan(mem).sum() > 0
    store.close()
    assert HistoryStore(path).repaired is None  # repaired for good


def test_a_readonly_reader_takes_a_chunk_of_the_wrong_length_as_a_gap(tmp_path, caplog):
    path = tmp_path / "h.db"
    _filled(path)
    _write_blob(path, b"abc")  # every chunk
    reader = HistoryStore(path, readonly=True)
    with caplog.at_level(logging.WARNING, logger="foresize.adapters.history"):
        for _ in range(2):
            _, cpu = reader.series(KEY, "cpu", T0, T0 + 86400)
            assert np.isnan(cpu).all()
    chunks = reader.db.execute(
        "SELECT COUNT(*) FROM chunks JOIN series ON series.id = series_id WHERE resource = 'cpu'"
    ).fetchone()[0]
    warnings = [r.getMessage() for r in caplog.records if "not 1152" in r.getMessage()]
    assert len(warnings) == chunks  # once per chunk, not per read
    assert reader.bad_values == chunks * CHUNK_POINTS
    reader.close()


def test_downsampling_skips_a_chunk_of_the_wrong_length(tmp_path):
    path = tmp_path / "h.db"
    _filled(path, days=4)
    store = HistoryStore(path)
    store.db.execute(
        "UPDATE chunks SET data = x'616263' WHERE rowid = (SELECT MIN(rowid) FROM chunks)"
    )
    store.db.commit()
    assert store.downsample(T0 + 4 * 86400) > 0
    assert store.bad_values == CHUNK_POINTS
    store.close()
