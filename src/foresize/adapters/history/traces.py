"""Readers for public usage traces and the canonical CSV/Parquet format.

Every reader returns `TraceSeries` (one per container or VM: timestamps in float Unix
seconds, CPU in cores, memory in bytes, NaN where a reading is missing) together with a
`ReadReport` that counts every row read and every row skipped, with the file and line of
each problem. Nothing is dropped silently: a malformed row is skipped *and reported*; a file
that cannot be opened or decoded at all raises `ForesizeError` naming it. Gzip-compressed
files are recognised by their magic bytes, whatever their name. Numeric timestamps in
milliseconds, microseconds or nanoseconds are recognised by their size and converted to
seconds (counted in the report).

Formats (`load_traces(path, fmt)`):
- `bitbrains`: GWA-T-12 Bitbrains (one VM per file, `;` + tab separated, one header row).
  Quirks handled (see tests/data/README.md): "Timestamp [ms]" holds seconds; CPU
  capacity 0 makes CPU cores unknown for that row (missing, counted); memory usage exactly
  0 is a missing reading (counted); duplicate timestamps keep the larger reading (counted).
  cores = CPU usage [MHZ] / (CPU capacity provisioned [MHZ] / CPU cores).
- `crane`: gocrane `ts,value` CSV; value read as CPU in cores (units unstated upstream).
- `google2011`: per-job files `vm_<job>_<day>`, two columns (CPU %, memory %), 288 rows a
  day at 5 minutes; files of one job are joined by day. Percentages are of one machine:
  CPU cores = % / 100 x `machine_cores`, memory = % / 100 x `machine_memory_bytes`.
- `canonical`: CSV (or Parquet) with columns `timestamp, namespace, workload, pod,
  container, cpu_cores, memory_bytes`; timestamp in Unix seconds or ISO 8601. Samples of
  several pods of one container at one timestamp are folded as the live collectors fold
  replicas (`history/aggregate.py`: CPU the median, memory the maximum).
"""

from __future__ import annotations

import gzip
import io
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, usage_problem
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey, TraceSeries

FORMATS = ("bitbrains", "crane", "google2011", "canonical")
MAX_PROBLEMS_KEPT = 50  # problems beyond this are counted, not listed, to bound memory


@dataclass(slots=True)
class ReadReport:
    """What a read did: files, rows, skipped rows with file:line, and quirk counters."""

    files: int = 0
    rows: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    def skip(self, path: Path | str, line: int, reason: str) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(f"{path}:{line}: {reason}")

    def count(self, name: str, n: int = 1) -> None:
        if n:
            self.counters[name] = self.counters.get(name, 0) + n

    def merge(self, other: ReadReport) -> None:
        self.files += other.files
        self.rows += other.rows
        self.skipped += other.skipped
        room = MAX_PROBLEMS_KEPT - len(self.problems)
        self.problems.extend(other.problems[: max(room, 0)])
        for k, v in other.counters.items():
            self.count(k, v)

    def summary(self) -> str:
        parts = [f"{self.files} files", f"{self.rows} rows", f"{self.skipped} skipped"]
        parts += [f"{k}: {v}" for k, v in sorted(self.counters.items())]
        return ", ".join(parts)


def open_text(path: Path | str) -> io.TextIOBase:
    """Open a text file, gunzipping transparently (by magic bytes); errors name the file."""
    p = Path(path)
    if p.exists() and not p.is_file():  # a device such as /dev/zero would never end
        raise ForesizeError(f"{p}: cannot read trace file: not a regular file")
    try:
        with open(p, "rb") as fh:
            magic = fh.read(2)
        if magic == b"\x1f\x8b":
            return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8", newline="")
        return open(p, encoding="utf-8", newline="")
    except OSError as exc:
        raise ForesizeError(f"{p}: cannot read trace file: {exc.strerror or exc}") from exc


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    fh = open_text(path)
    try:
        with fh:
            for n, line in enumerate(fh, start=1):
                yield n, line.rstrip("\r\n")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise ForesizeError(f"{path}: cannot read trace file: {exc}") from exc


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"not a finite number: {text!r}")
    return v


# Unix time in seconds reaches 1e11 only in the year 5138, so a larger timestamp is in a
# finer unit: milliseconds (Prometheus, Java and JavaScript exporters) up to 1e14, then
# microseconds up to 1e17, then nanoseconds. Each such row is converted and counted.
_FINER_UNITS = (
    (1e17, 1e9, "nanoseconds"),
    (1e14, 1e6, "microseconds"),
    (1e11, 1e3, "milliseconds"),
)


def _unix_seconds(value: float, rep: ReadReport) -> float:
    """A numeric timestamp in Unix seconds, whatever unit its size shows (see above)."""
    for threshold, per_second, unit in _FINER_UNITS:
        if abs(value) >= threshold:
            rep.count(f"timestamps in {unit} (converted to seconds)")
            return value / per_second
    return value


def _plausible(cpu_cores: float, memory_bytes: float) -> None:
    """ValueError (the row is skipped and reported) for a reading no container can show."""
    for resource, value in ((CPU, cpu_cores), (MEMORY, memory_bytes)):
        problem = usage_problem(resource, value)
        if problem:
            raise ValueError(problem)


def _dedupe(ts: np.ndarray, *cols: np.ndarray, report: ReadReport) -> tuple[np.ndarray, ...]:
    """Sort by time; for duplicate timestamps keep the maximum of each column (NaN-aware)."""
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    cols = tuple(c[order] for c in cols)
    uniq, first = np.unique(ts, return_index=True)
    dups = len(ts) - len(uniq)
    if dups == 0:
        return (ts, *cols)
    report.count("duplicate timestamps merged", dups)
    out = []
    for c in cols:
        filled = np.where(np.isnan(c), -np.inf, c)
        m = np.maximum.reduceat(filled, first)
        out.append(np.where(np.isneginf(m), np.nan, m))
    return (uniq, *out)


# --- Bitbrains ---------------------------------------------------------------------------

_BB_COLUMNS = 11


def read_bitbrains(path: Path | str, report: ReadReport | None = None) -> TraceSeries | None:
    """One Bitbrains GWA VM file. Returns None (reported) if it holds no usable row."""
    p = Path(path)
    rep = report if report is not None else ReadReport()
    rep.files += 1
    ts, cores, cpu, mem, cap_cores, cap_mem = [], [], [], [], [], []
    for n, line in _lines(p):
        if n == 1 and line.lower().startswith("timestamp"):
            continue
        if not line.strip():
            continue
        rep.rows += 1
        fields = [f.strip() for f in line.split(";")]
        if len(fields) != _BB_COLUMNS:
            rep.skip(p, n, f"expected {_BB_COLUMNS} ';'-separated fields, got {len(fields)}")
            continue
        try:
            t = _unix_seconds(_finite(fields[0]), rep)
            ncores = _finite(fields[1])
            cap_mhz = _finite(fields[2])
            use_mhz = _finite(fields[3])
            mem_cap_kb = _finite(fields[5])
            mem_kb = _finite(fields[6])
        except ValueError as exc:
            rep.skip(p, n, f"bad number: {exc}")
            continue
        if use_mhz < 0 or mem_kb < 0 or ncores < 0 or cap_mhz < 0:
            rep.skip(p, n, "negative usage or capacity")
            continue
        # Capacity 0: MHz cannot be converted to cores; the reading is unknown, not 0.
        cpu_cores = use_mhz / (cap_mhz / ncores) if cap_mhz > 0 and ncores > 0 else math.nan
        # Exactly 0 KB is a missing reading in this trace, not a VM using no memory.
        mem_bytes = mem_kb * 1024.0 if mem_kb != 0 else math.nan
        try:
            _plausible(cpu_cores, mem_bytes)
        except ValueError as exc:
            rep.skip(p, n, str(exc))
            continue
        ts.append(t)
        cpu.append(cpu_cores)
        if math.isnan(cpu_cores):
            rep.count("bitbrains cpu capacity 0 (cpu missing)")
        cores.append(ncores if ncores > 0 else math.nan)
        mem.append(mem_bytes)
        if math.isnan(mem_bytes):
            rep.count("bitbrains memory 0 (missing)")
        cap_mem.append(mem_cap_kb * 1024.0 if mem_cap_kb > 0 else math.nan)
        cap_cores.append(ncores if ncores > 0 else math.nan)
    if not ts:
        rep.count("files without usable rows")
        rep.skip(p, 0, "no usable rows in file")
        return None
    times, cpu_a, mem_a, cap_cores_a, cap_mem_a = _dedupe(
        np.asarray(ts, dtype=np.float64),
        np.asarray(cpu),
        np.asarray(mem),
        np.asarray(cap_cores),
        np.asarray(cap_mem),
        report=rep,
    )
    vm = p.name.split(".")[0]
    key = SeriesKey("bitbrains", vm, "vm")
    return TraceSeries(key, times, cpu_a, mem_a, cap_cores_a, cap_mem_a, source=str(p))


# --- Crane -------------------------------------------------------------------------------


def read_crane(path: Path | str, report: ReadReport | None = None) -> TraceSeries | None:
    """A gocrane `ts,value` file: one CPU series (value taken as cores)."""
    p = Path(path)
    rep = report if report is not None else ReadReport()
    rep.files += 1
    ts, vals = [], []
    for n, line in _lines(p):
        if not line.strip():
            continue
        if n == 1 and not line[:1].isdigit():
            continue  # header
        rep.rows += 1
        parts = line.split(",")
        if len(parts) != 2:
            rep.skip(p, n, f"expected 'ts,value', got {len(parts)} fields")
            continue
        try:
            t, v = _unix_seconds(_finite(parts[0]), rep), _finite(parts[1])
        except ValueError as exc:
            rep.skip(p, n, f"bad number: {exc}")
            continue
        if v < 0:
            rep.skip(p, n, "negative value")
            continue
        problem = usage_problem(CPU, v)
        if problem:
            rep.skip(p, n, problem)
            continue
        ts.append(t)
        vals.append(v)
    if not ts:
        rep.skip(p, 0, "no usable rows in file")
        return None
    times, cpu_a = _dedupe(np.asarray(ts, dtype=np.float64), np.asarray(vals), report=rep)
    name = p.name.split(".")[0]
    return TraceSeries(SeriesKey("crane", name, "main"), times, cpu_a, None, source=str(p))


# --- Google 2011 per-job files -----------------------------------------------------------

_GOOGLE_NAME = re.compile(r"^vm_(?P<job>.+)_(?P<day>\d+)(?:\.[A-Za-z0-9.]+)?$")
GOOGLE_ROWS_PER_DAY = 288
GOOGLE_STEP = 300.0


def read_google2011(
    paths: list[Path],
    report: ReadReport | None = None,
    *,
    machine_cores: float = 1.0,
    machine_memory_bytes: float = float(2**30),
) -> list[TraceSeries]:
    """Per-job `vm_<job>_<day>` files; row i of day d is at d*86400 + i*300 seconds."""
    rep = report if report is not None else ReadReport()
    by_job: dict[str, list[tuple[int, Path]]] = {}
    for p in paths:
        m = _GOOGLE_NAME.match(p.name)
        if not m:
            rep.skip(p, 0, "file name is not vm_<job>_<day>")
            continue
        by_job.setdefault(m["job"], []).append((int(m["day"]), p))
    out = []
    for job, files in sorted(by_job.items()):
        ts, cpu, mem = [], [], []
        for day, p in sorted(files):
            rep.files += 1
            row = 0
            for n, line in _lines(p):
                if not line.strip():
                    continue
                parts = line.replace(",", " ").replace(";", " ").split()
                if row == 0 and parts and not _is_number(parts[0]):
                    continue  # header
                rep.rows += 1
                idx = row
                row += 1
                if len(parts) != 2:
                    rep.skip(p, n, f"expected 2 columns (CPU %, memory %), got {len(parts)}")
                    continue
                try:
                    c, mm = _finite(parts[0]), _finite(parts[1])
                except ValueError as exc:
                    rep.skip(p, n, f"bad number: {exc}")
                    continue
                if c < 0 or mm < 0:
                    rep.skip(p, n, "negative percentage")
                    continue
                if idx >= GOOGLE_ROWS_PER_DAY:
                    rep.skip(p, n, f"more than {GOOGLE_ROWS_PER_DAY} rows in a day file")
                    continue
                try:
                    _plausible(c / 100.0 * machine_cores, mm / 100.0 * machine_memory_bytes)
                except ValueError as exc:
                    rep.skip(p, n, str(exc))
                    continue
                ts.append(day * 86400.0 + idx * GOOGLE_STEP)
                cpu.append(c / 100.0 * machine_cores)
                mem.append(mm / 100.0 * machine_memory_bytes)
        if not ts:
            continue
        times, cpu_a, mem_a = _dedupe(
            np.asarray(ts, dtype=np.float64), np.asarray(cpu), np.asarray(mem), report=rep
        )
        key = SeriesKey("google2011", job, "task")
        out.append(TraceSeries(key, times, cpu_a, mem_a, source=str(files[0][1])))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- Canonical CSV / Parquet -------------------------------------------------------------

CANONICAL_COLUMNS = (
    "timestamp",
    "namespace",
    "workload",
    "pod",
    "container",
    "cpu_cores",
    "memory_bytes",
)


def _parse_time(text: str, rep: ReadReport) -> float:
    text = text.strip()
    try:
        return _unix_seconds(_finite(text), rep)
    except ValueError:
        pass
    iso = text.replace("Z", "+00:00")
    dt = datetime.fromisoformat(iso)
    if dt.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return dt.timestamp()


def _opt_float(text: str) -> float:
    text = text.strip()
    if text == "" or text.lower() in ("nan", "null", "none"):
        return math.nan
    v = _finite(text)
    if v < 0:
        raise ValueError(f"negative amount: {text!r}")
    return v


def read_canonical_csv(path: Path | str, report: ReadReport | None = None) -> list[TraceSeries]:
    p = Path(path)
    rep = report if report is not None else ReadReport()
    rep.files += 1
    cols: dict[str, int] | None = None
    rows: dict[SeriesKey, list[tuple[float, float, float]]] = {}
    for n, line in _lines(p):
        if not line.strip():
            continue
        parts = [x.strip() for x in line.split(",")]
        if cols is None:
            names = [x.lower() for x in parts]
            missing = [c for c in CANONICAL_COLUMNS if c not in names]
            if missing:
                raise ForesizeError(f"{p}:{n}: canonical CSV header lacks columns {missing}")
            cols = {c: names.index(c) for c in CANONICAL_COLUMNS}
            width = len(names)
            continue
        rep.rows += 1
        if len(parts) != width:
            rep.skip(p, n, f"expected {width} fields, got {len(parts)}")
            continue
        try:
            t = _parse_time(parts[cols["timestamp"]], rep)
            c = _opt_float(parts[cols["cpu_cores"]])
            m = _opt_float(parts[cols["memory_bytes"]])
            _plausible(c, m)
        except ValueError as exc:
            rep.skip(p, n, str(exc))
            continue
        ns, wl, ct = (parts[cols[k]] for k in ("namespace", "workload", "container"))
        if not (ns and wl and ct):
            rep.skip(p, n, "empty namespace, workload or container")
            continue
        rows.setdefault(SeriesKey(ns, wl, ct), []).append((t, c, m))
    return _canonical_series(rows, str(p), rep)


def _canonical_series(
    rows: dict[SeriesKey, list[tuple[float, float, float]]], source: str, rep: ReadReport
) -> list[TraceSeries]:
    from foresize.adapters.history.aggregate import per_container

    out = []
    for key in sorted(rows):
        arr = np.asarray(rows[key], dtype=np.float64)
        # Rows of one container at one timestamp are its replicas (or repeats): fold them
        # exactly as the live collectors do (CPU median, memory max), so a replayed export
        # is sized the same way as the cluster it came from.
        t, step_of_row = np.unique(arr[:, 0], return_inverse=True)
        if t.size < len(arr):
            rep.count("samples of several pods at one timestamp folded", len(arr) - t.size)
        ids, c, m = per_container(step_of_row, arr[:, 1], arr[:, 2])
        if ids.size < t.size:  # timestamps where every reading was missing stay gaps
            full_c, full_m = np.full(t.size, np.nan), np.full(t.size, np.nan)
            full_c[ids], full_m[ids] = c, m
            c, m = full_c, full_m
        mem = None if np.isnan(m).all() else m
        out.append(TraceSeries(key, t, c, mem, source=source))
    return out


def read_canonical_parquet(path: Path | str, report: ReadReport | None = None) -> list[TraceSeries]:
    """Canonical Parquet; needs the optional `pyarrow` (pip install 'foresize[parquet]')."""
    p = Path(path)
    rep = report if report is not None else ReadReport()
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ForesizeError(
            f"{p}: reading Parquet needs pyarrow (pip install 'foresize[parquet]')"
        ) from exc
    try:
        table = pq.read_table(p)
    except Exception as exc:  # pyarrow raises many types for a bad file
        raise ForesizeError(f"{p}: cannot read Parquet file: {exc}") from exc
    rep.files += 1
    names = [n.lower() for n in table.column_names]
    missing = [c for c in CANONICAL_COLUMNS if c not in names]
    if missing:
        raise ForesizeError(f"{p}: Parquet file lacks columns {missing}")
    data = {c: table.column(names.index(c)).to_pylist() for c in CANONICAL_COLUMNS}
    rows: dict[SeriesKey, list[tuple[float, float, float]]] = {}
    for i in range(table.num_rows):
        rep.rows += 1
        try:
            raw_t = data["timestamp"][i]
            t = raw_t.timestamp() if hasattr(raw_t, "timestamp") else _parse_time(str(raw_t), rep)
            c = _opt_float("" if data["cpu_cores"][i] is None else str(data["cpu_cores"][i]))
            m = _opt_float("" if data["memory_bytes"][i] is None else str(data["memory_bytes"][i]))
            _plausible(c, m)
        except ValueError as exc:
            rep.skip(p, i + 1, str(exc))
            continue
        key = SeriesKey(
            str(data["namespace"][i]), str(data["workload"][i]), str(data["container"][i])
        )
        rows.setdefault(key, []).append((t, c, m))
    return _canonical_series(rows, str(p), rep)


# --- Folder loading ----------------------------------------------------------------------


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ForesizeError(f"{path}: no such trace file or folder")
    files = sorted(
        (f for f in path.iterdir() if f.is_file() and not f.name.startswith(".")),
        key=lambda f: (len(f.name), f.name),
    )
    return [f for f in files if f.name.lower() not in ("readme.md", "readme", "readme.txt")]


def load_traces(path: Path | str, fmt: str) -> tuple[list[TraceSeries], ReadReport]:
    """Read every trace file of a folder (or one file) in format `fmt`."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ForesizeError(f"--format: unknown trace format {fmt!r} (one of {FORMATS})")
    p = Path(path)
    files = _files(p)
    if not files:
        raise ForesizeError(f"{p}: no trace files found")
    rep = ReadReport()
    out: list[TraceSeries] = []
    if fmt == "bitbrains":
        for f in files:
            s = read_bitbrains(f, rep)
            if s is not None:
                out.append(s)
    elif fmt == "crane":
        for f in files:
            s = read_crane(f, rep)
            if s is not None:
                out.append(s)
    elif fmt == "google2011":
        out = read_google2011(files, rep)
    else:
        for f in files:
            if f.name.lower().endswith(".parquet"):
                out.extend(read_canonical_parquet(f, rep))
            else:
                out.extend(read_canonical_csv(f, rep))
    return out, rep
