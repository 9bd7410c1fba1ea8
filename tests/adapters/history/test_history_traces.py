"""Trace readers: formats, quirks, gzip, malformed rows reported, unreadable files named."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from foresize.adapters.history.traces import (
    load_traces,
    read_bitbrains,
    read_canonical_csv,
    read_canonical_parquet,
)
from foresize.core.errors import ForesizeError
from foresize.core.history import resample_max
from support.paths import DATA

TRACES = DATA / "traces"
BB_HEADER = (
    "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\t"
    "CPU usage [%];\tMemory capacity provisioned [KB];\tMemory usage [KB];\t"
    "Disk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
    "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]"
)


def bb_row(t, cores=2, cap=5000.0, mhz=1250.0, mem_cap=8_000_000.0, mem=1_000_000.0):
    vals = [t, cores, cap, mhz, 25.0, mem_cap, mem, 0.0, 0.0, 0.0, 0.0]
    return ";\t".join(str(v) for v in vals)


def write(path: Path, lines: list[str], gz: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_bitbrains_quirks_converted_and_counted(tmp_path):
    f = write(
        tmp_path / "7.csv",
        [
            BB_HEADER,
            bb_row(1000),  # 1250 MHz / (5000/2) = 0.5 cores
            bb_row(1300, cap=0.0),  # capacity 0: cpu unknown
            bb_row(1600, mem=0.0),  # memory 0: missing
            bb_row(1600, mhz=2500.0),  # duplicate timestamp: larger kept
            "1900;\t2;\tgarbage",  # malformed
            bb_row(2200, mhz="x"),  # bad number
        ],
    )
    from foresize.adapters.history.traces import ReadReport

    rep = ReadReport()
    s = read_bitbrains(f, rep)
    assert s is not None
    assert s.key.workload == "7"
    assert list(s.timestamps) == [1000.0, 1300.0, 1600.0]  # seconds, not ms
    assert s.cpu[0] == pytest.approx(0.5)
    assert np.isnan(s.cpu[1])
    assert s.cpu[2] == pytest.approx(1.0)  # duplicate merged by max
    assert s.memory[0] == 1_000_000.0 * 1024
    assert s.memory[2] == 1_000_000.0 * 1024  # the duplicate's non-zero memory kept
    assert s.cpu_capacity[0] == 2
    assert s.memory_capacity[0] == 8_000_000.0 * 1024
    assert rep.skipped == 2
    assert any("7.csv:6" in p for p in rep.problems)
    assert any("7.csv:7" in p for p in rep.problems)
    assert rep.counters["bitbrains cpu capacity 0 (cpu missing)"] == 1
    assert rep.counters["bitbrains memory 0 (missing)"] == 1
    assert rep.counters["duplicate timestamps merged"] == 1
    assert rep.rows == 6


def test_gzip_is_transparent(tmp_path):
    write(tmp_path / "a.csv.gz", ["ts,value", "60,1.5", "120,2.5"], gz=True)
    write(tmp_path / "b.data", ["ts,value", "60,3"], gz=True)  # gzip whatever the name
    series, rep = load_traces(tmp_path, "crane")
    by = {s.key.workload: s for s in series}
    assert set(by) == {"a", "b"}
    assert list(by["a"].cpu) == [1.5, 2.5] and list(by["b"].cpu) == [3.0]
    assert rep.skipped == 0


def test_unreadable_file_is_an_error_naming_it(tmp_path):
    bad = tmp_path / "x.csv.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not really gzip")
    with pytest.raises(ForesizeError, match=r"x\.csv\.gz"):
        load_traces(tmp_path, "crane")
    with pytest.raises(ForesizeError, match="no such trace"):
        load_traces(tmp_path / "missing", "crane")
    with pytest.raises(ForesizeError, match="unknown trace format"):
        load_traces(tmp_path, "nope")


def test_crane_malformed_rows_reported(tmp_path):
    write(tmp_path / "input0.csv", ["ts,value", "60,1", "120", "180,-1", "240,abc", "300,2"])
    series, rep = load_traces(tmp_path, "crane")
    assert len(series[0].cpu) == 2
    assert rep.skipped == 3 and rep.rows == 5
    assert [p.split(": ")[0].rsplit(":", 1)[1] for p in rep.problems] == ["3", "4", "5"]


def test_timestamps_in_finer_units_are_read_as_seconds_and_counted(tmp_path):
    # Crane exports (and canonical CSVs) in milliseconds once read as the year 53,000 and
    # gave "no usage in range"; micro- and nanoseconds likewise.
    seconds = [1_628_640_000 + 60 * i for i in range(3)]
    crane = tmp_path / "crane"
    crane.mkdir()
    write(crane / "ms.csv", ["ts,value", *(f"{t * 1000},{i + 1}" for i, t in enumerate(seconds))])
    write(crane / "s.csv", ["ts,value", *(f"{t},{i + 1}" for i, t in enumerate(seconds))])
    series, rep = load_traces(crane, "crane")
    assert [s.key.workload for s in series] == ["s", "ms"]  # shortest name first
    for s in series:
        assert s.timestamps.tolist() == seconds
    assert rep.counters == {"timestamps in milliseconds (converted to seconds)": 3}
    canonical = tmp_path / "u.csv"
    write(
        canonical,
        [
            "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes",
            f"{seconds[0] * 10**6},shop,web,web-1,app,0.5,1e8",
            f"{seconds[1] * 10**9},shop,web,web-1,app,0.5,1e8",
            f"{seconds[2]},shop,web,web-1,app,0.5,1e8",
        ],
    )
    (s,), rep = load_traces(canonical, "canonical")
    assert s.timestamps.tolist() == seconds
    assert rep.counters == {
        "timestamps in microseconds (converted to seconds)": 1,
        "timestamps in nanoseconds (converted to seconds)": 1,
    }


def test_google2011_per_job_files_joined_by_day(tmp_path):
    write(tmp_path / "vm_42_0", [f"{i % 50} {10 + i % 3}" for i in range(288)])
    write(tmp_path / "vm_42_1", ["25,30", "oops", "26 31 5"])
    write(tmp_path / "vm_7_0", ["1 2"])
    series, rep = load_traces(tmp_path, "google2011")
    assert [s.key.workload for s in series] == ["42", "7"]
    s = series[0]
    assert s.timestamps[0] == 0 and s.timestamps[287] == 287 * 300
    assert s.timestamps[288] == 86400.0  # day 1, row 0
    assert s.cpu[288] == pytest.approx(0.25)
    assert s.memory[288] == pytest.approx(0.30 * 2**30)
    assert rep.skipped == 2


def test_canonical_csv_folds_replicas_like_the_collectors_and_keys_by_workload(tmp_path):
    """Replicas at one timestamp fold as the live collectors fold them (history/aggregate):
    CPU the median across pods, memory the maximum."""
    f = write(
        tmp_path / "u.csv",
        [
            "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes",
            "2026-01-01T00:00:00Z,shop,web,web-1,app,0.5,100e6",
            "2026-01-01T00:00:00Z,shop,web,web-2,app,0.7,90e6",
            "2026-01-01T00:00:00Z,shop,web,web-4,app,0.2,95e6",
            "1767225900,shop,web,web-3,app,,80e6",
            "1767225900,shop,db,db-0,pg,1.0,1e9",
            "bad,shop,web,web-1,app,1,1",
            "1767225900,shop,web,web-1,app,1",
        ],
    )
    from foresize.adapters.history.traces import ReadReport

    rep = ReadReport()
    series = read_canonical_csv(f, rep)
    web = next(s for s in series if s.key.workload == "web")
    assert web.cpu[0] == pytest.approx(0.5) and web.memory[0] == 100e6
    assert np.isnan(web.cpu[1]) and web.memory[1] == 80e6
    assert rep.counters["samples of several pods at one timestamp folded"] == 2
    assert rep.skipped == 2
    with pytest.raises(ForesizeError, match="lacks columns"):
        read_canonical_csv(write(tmp_path / "h.csv", ["a,b"]))


def test_parquet_needs_pyarrow_or_reads(tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(ForesizeError, match="pyarrow"):
            read_canonical_parquet(tmp_path / "x.parquet")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "timestamp": [60.0, 120.0],
            "namespace": ["n", "n"],
            "workload": ["w", "w"],
            "pod": ["p", "p"],
            "container": ["c", "c"],
            "cpu_cores": [0.1, 0.2],
            "memory_bytes": [1.0, 2.0],
        }
    )
    pq.write_table(table, tmp_path / "x.parquet")
    (s,) = read_canonical_parquet(tmp_path / "x.parquet")
    assert list(s.cpu) == [0.1, 0.2]


def test_resample_max_keeps_gaps():
    ts = np.array([0.0, 100.0, 299.0, 900.0])
    v = np.array([1.0, 3.0, 2.0, 5.0])
    out = resample_max(ts, v, 300.0, 0.0, 4)
    assert out[0] == 3.0 and np.isnan(out[1]) and np.isnan(out[2]) and out[3] == 5.0


def test_real_bitbrains_file_reads():
    f = TRACES / "bitbrains-rnd-2013-07" / "1.csv.gz"
    s = read_bitbrains(f)
    assert s is not None and len(s.timestamps) == 3000  # the excerpt's rows
    assert 1_372_000_000 < s.timestamps[0] < 1_373_000_000  # seconds in July 2013
    assert np.nanmax(s.cpu) < 2.5  # 2 cores provisioned
