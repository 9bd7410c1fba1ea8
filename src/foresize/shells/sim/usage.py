"""Vectorised container usage: generator parameters and per-container state in numpy arrays.

Every running container of the simulated cluster owns a *slot*: one index into a set of
parallel arrays (generator parameters, requests and limits in force, last usage, counters).
One usage step for all containers is a handful of numpy operations, never a Python loop
per pod.

A generator is a set of parameters of one formula, so that all kinds evaluate together:

    level  = trace[t] * trace_scale                       if the slot replays a trace
           = base * (1 + amplitude * cos(2π (t - peak) / 1 day)) * weekend factor   otherwise
    value  = (level * replica jitter * load share + growth * (t - container start))
             * (1 + noise * N(0, 1)) * (spike_factor if U < spike_probability else 1)

`constant`, `diurnal`, `weekly`, `spiky`, `leak` (slow growth, reset when the container
restarts) and `trace` are parameter presets of that formula. CPU is in cores, memory in
bytes (floats inside the simulator; canonical ints at the ClusterPort boundary).
"""

from __future__ import annotations

import csv
import gzip
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from foresize.core.errors import ForesizeError

DAY = 86400.0
WEEK = 7 * DAY
GENERATOR_KINDS = ("constant", "diurnal", "weekly", "spiky", "leak", "trace")


@dataclass(slots=True)
class GeneratorSpec:
    """Parameters of one resource's usage generator (cpu: cores, memory: bytes)."""

    kind: str = "constant"
    base: float = 0.0
    amplitude: float = 0.0  # daily swing as a fraction of base
    peak_hour: float = 14.0  # hour of day of the daily peak
    weekend_factor: float = 1.0  # multiplier on Saturday and Sunday (day 5 and 6)
    noise: float = 0.0  # relative standard deviation per step
    spike_probability: float = 0.0
    spike_factor: float = 1.0
    growth_per_second: float = 0.0  # slow growth since the container started (leak)
    cap: float = math.inf  # growth never takes the value above this
    trace: np.ndarray | None = None  # replayed values (already in cores / bytes)
    trace_step: float = 60.0
    trace_scale: float = 1.0
    trace_offset: float = 0.0  # seconds into the trace at simulated time 0


# A year at one-second resolution is 31.5 million rows; 10 million (four months at 1 s,
# 19 years at 1 min) is more than any scenario replays, and keeps a wrong file (a huge log,
# a device) from filling memory before it is refused.
MAX_TRACE_ROWS = 10_000_000


def load_trace(path: Path, resource: str, *, select: dict[str, str] | None = None) -> np.ndarray:
    """Read a usage trace: `ts,value` CSV, or the canonical CSV
    (`timestamp, namespace, workload, pod, container, cpu_cores, memory_bytes`; rows matching
    `select` are averaged per timestamp). `.gz` files are read transparently. Returns the
    values in time order; the caller knows the step."""
    header, rows = _read_csv(path)
    ts_col, val_col, filters = _trace_columns(path, header, resource, select)
    sums: dict[float, list[float]] = {}
    for lineno, row in enumerate(rows, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if any(row[i] != want for i, want in filters):
            continue
        try:
            ts = float(row[ts_col])
            val = float(row[val_col])
        except (ValueError, IndexError) as exc:
            raise ForesizeError(f"{path}:{lineno}: not a number: {row!r}") from exc
        sums.setdefault(ts, []).append(val)
    if not sums:
        raise ForesizeError(f"{path}: no usable rows")
    return np.array([sum(v) / len(v) for _, v in sorted(sums.items())], dtype=np.float64)


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    """A trace file's header (stripped) and rows, at most MAX_TRACE_ROWS of them."""
    opener = gzip.open if path.suffix == ".gz" else open
    if path.exists() and not path.is_file():  # a directory, /dev/zero, a FIFO: never read
        raise ForesizeError(f"{path}: cannot read trace: not a regular file")
    try:
        with opener(path, "rt", newline="") as fh:
            reader = csv.reader(fh)
            header = [h.strip() for h in next(reader, [])]
            rows = []
            for row in reader:
                rows.append(row)
                if len(rows) > MAX_TRACE_ROWS:
                    raise ForesizeError(f"{path}: more than {MAX_TRACE_ROWS} rows; refused")
    except (OSError, UnicodeDecodeError, csv.Error, EOFError, gzip.BadGzipFile) as exc:
        raise ForesizeError(f"{path}: cannot read trace: {exc}") from exc
    if not header:
        raise ForesizeError(f"{path}: empty trace file")
    return header, rows


def _trace_columns(
    path: Path, header: list[str], resource: str, select: dict[str, str] | None
) -> tuple[int, int, list[tuple[int, str]]]:
    """The timestamp and value columns of the trace's format, and the (column, wanted
    value) filters of `select` (canonical format only)."""
    cols = {h: i for i, h in enumerate(header)}
    if "value" in cols and "ts" in cols:
        return cols["ts"], cols["value"], []
    if "timestamp" in cols:
        name = "cpu_cores" if resource == "cpu" else "memory_bytes"
        if name not in cols:
            raise ForesizeError(f"{path}: canonical trace has no {name} column")
        filters = []
        for key, want in (select or {}).items():
            if key not in cols:
                raise ForesizeError(f"{path}: select on unknown column {key!r}")
            filters.append((cols[key], str(want)))
        return cols["timestamp"], cols[name], filters
    raise ForesizeError(
        f"{path}: unknown trace format (expected a `ts,value` header or the canonical "
        "`timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes`)"
    )


class UsageState:
    """The parallel per-container arrays and the vectorised step."""

    # Float parameter arrays per resource (suffix _c: cpu, _m: memory, _h: the heap a
    # managed runtime's program would use, scenario `usage.heap`).
    _PARAMS = (
        "base",
        "amp",
        "peak",
        "weekend",
        "noise",
        "spike_p",
        "spike_f",
        "growth",
        "cap",
        "tr_scale",
        "tr_offset",
        "tr_step",
    )

    # The arrays `_grow` creates (one slot per container), declared for the type checker.
    base_c: np.ndarray
    base_m: np.ndarray
    amp_c: np.ndarray
    amp_m: np.ndarray
    peak_c: np.ndarray
    peak_m: np.ndarray
    weekend_c: np.ndarray
    weekend_m: np.ndarray
    noise_c: np.ndarray
    noise_m: np.ndarray
    spike_p_c: np.ndarray
    spike_p_m: np.ndarray
    spike_f_c: np.ndarray
    spike_f_m: np.ndarray
    growth_c: np.ndarray
    growth_m: np.ndarray
    cap_c: np.ndarray
    cap_m: np.ndarray
    tr_scale_c: np.ndarray
    tr_scale_m: np.ndarray
    tr_offset_c: np.ndarray
    tr_offset_m: np.ndarray
    tr_step_c: np.ndarray
    tr_step_m: np.ndarray
    tr_start_c: np.ndarray
    tr_start_m: np.ndarray
    tr_len_c: np.ndarray
    tr_len_m: np.ndarray
    cpu_req: np.ndarray
    cpu_lim: np.ndarray
    mem_req: np.ndarray
    mem_lim: np.ndarray
    started: np.ndarray
    jitter: np.ndarray
    share_ref: np.ndarray
    cpu_demand: np.ndarray
    cpu_used: np.ndarray
    mem: np.ndarray
    throttled_s: np.ndarray
    down_until: np.ndarray
    startup_left: np.ndarray
    startup_cpu: np.ndarray
    active: np.ndarray
    heap_on: np.ndarray
    heap_cap: np.ndarray
    ready: np.ndarray
    wl: np.ndarray
    node: np.ndarray

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = 0
        self.size = 0  # slots ever handed out (high-water mark)
        self.free: list[int] = []
        self.version = 0  # bumped whenever generator parameters or slots change
        self._cache: dict[str, tuple[np.ndarray, int, dict[str, Any]]] = {}
        self.trace_flat = np.zeros(0)
        self._trace_chunks: list[np.ndarray] = []
        self._trace_ids: dict[int, tuple[int, int]] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._grow(capacity)

    def _new(self, name: str, dtype: type, fill: float | int | bool) -> None:
        self._arrays[name] = np.full(self.capacity, fill, dtype=dtype)

    def _grow(self, new_capacity: int) -> None:
        old = self._arrays
        old_cap = self.capacity
        self.capacity = new_capacity
        self._arrays = {}
        for p in self._PARAMS:
            for r in ("c", "m", "h"):
                fill = math.inf if p == "cap" else (1.0 if p in ("weekend", "spike_f") else 0.0)
                self._new(f"{p}_{r}", np.float64, fill)
                self._new(f"tr_start_{r}", np.int64, 0)
                self._new(f"tr_len_{r}", np.int64, 0)
        for name, fill in (
            ("cpu_req", 0.0),
            ("cpu_lim", math.inf),
            ("mem_req", 0.0),
            ("mem_lim", math.inf),
            ("started", 0.0),
            ("jitter", 1.0),
            ("share_ref", 0.0),
            ("cpu_demand", 0.0),
            ("cpu_used", 0.0),
            ("mem", 0.0),
            ("throttled_s", 0.0),
            ("down_until", -math.inf),  # crash back-off: the container is not running
            # Start-up work (scenario `startup`): core-seconds left before the container
            # is ready, and the CPU rate it demands until then.
            ("startup_left", 0.0),
            ("startup_cpu", 0.0),
            # The heap ceiling (bytes) the runtime took from its spec as admitted, at the
            # memory limit it started with (inf: none known); `heap_on`: the slot has a
            # heap generator, its memory is the non-heap plus the heap under that ceiling.
            ("heap_cap", math.inf),
        ):
            self._new(name, np.float64, fill)
        self._new("active", np.bool_, False)
        self._new("heap_on", np.bool_, False)
        self._new("ready", np.bool_, False)  # the pod is Ready (HPA metrics count it)
        self._new("wl", np.int64, 0)
        self._new("node", np.int64, 0)
        for name, arr in old.items():
            self._arrays[name][:old_cap] = arr
        for name, arr in self._arrays.items():
            setattr(self, name, arr)

    def _trace_ref(self, trace: np.ndarray) -> tuple[int, int]:
        ref = self._trace_ids.get(id(trace))
        if ref is None:
            start = int(self.trace_flat.size)
            self.trace_flat = np.concatenate([self.trace_flat, trace.astype(np.float64)])
            self._trace_chunks.append(trace)  # keep alive so id() stays unique
            ref = (start, int(trace.size))
            self._trace_ids[id(trace)] = ref
        return ref

    def allocate(self) -> int:
        self.version += 1
        if self.free:
            slot = self.free.pop()
        else:
            if self.size >= self.capacity:
                self._grow(max(64, self.capacity * 2))
            slot = self.size
            self.size += 1
        return slot

    def release(self, slot: int) -> None:
        self.version += 1
        self.active[slot] = False
        self.ready[slot] = False
        self.heap_on[slot] = False
        self.heap_cap[slot] = math.inf
        self.cpu_demand[slot] = self.cpu_used[slot] = self.mem[slot] = 0.0
        self.free.append(slot)
        # Keep the free list ordered so slot reuse is deterministic and compact.
        self.free.sort(reverse=True)

    def set_generator(self, slot: int, resource: str, g: GeneratorSpec) -> None:
        self.version += 1
        r = {"cpu": "c", "heap": "h"}.get(resource, "m")
        a = self._arrays
        a[f"base_{r}"][slot] = g.base
        a[f"amp_{r}"][slot] = g.amplitude
        a[f"peak_{r}"][slot] = g.peak_hour * 3600.0
        a[f"weekend_{r}"][slot] = g.weekend_factor
        a[f"noise_{r}"][slot] = g.noise
        a[f"spike_p_{r}"][slot] = g.spike_probability
        a[f"spike_f_{r}"][slot] = g.spike_factor
        a[f"growth_{r}"][slot] = g.growth_per_second
        a[f"cap_{r}"][slot] = g.cap
        if g.trace is not None and g.trace.size:
            start, length = self._trace_ref(g.trace)
            a[f"tr_start_{r}"][slot] = start
            a[f"tr_len_{r}"][slot] = length
            a[f"tr_scale_{r}"][slot] = g.trace_scale
            a[f"tr_offset_{r}"][slot] = g.trace_offset
            a[f"tr_step_{r}"][slot] = g.trace_step
        else:
            a[f"tr_len_{r}"][slot] = 0

    def _params(self, r: str, idx: np.ndarray) -> dict[str, Any]:
        """Generator parameters of slots `idx`, gathered once per active set and version."""
        cached = self._cache.get(r)
        if cached is not None and cached[0] is idx and cached[1] == self.version:
            return cached[2]
        a = self._arrays
        p: dict[str, Any] = {
            name: a[f"{name}_{r}"][idx]
            for name in ("base", "amp", "peak", "weekend", "growth", "cap", "noise")
        }
        p["spike_p"], p["spike_f"] = a[f"spike_p_{r}"][idx], a[f"spike_f_{r}"][idx]
        p["peak_rad"] = p["peak"] * (2.0 * math.pi / DAY)
        tr_len = a[f"tr_len_{r}"][idx]
        ti = np.nonzero(tr_len > 0)[0]
        p["ti"] = ti
        if ti.size:
            p["tr_len"] = tr_len[ti]
            p["tr_offset"] = a[f"tr_offset_{r}"][idx[ti]]
            p["tr_step"] = a[f"tr_step_{r}"][idx[ti]]
            p["tr_start"] = a[f"tr_start_{r}"][idx[ti]]
            p["tr_scale"] = a[f"tr_scale_{r}"][idx[ti]]
        p["growth_any"] = bool(p["growth"].any())
        p["growing"] = p["growth"] > 0
        p["noise_any"] = bool(p["noise"].any())
        p["spike_any"] = bool(p["spike_p"].any())
        self._cache[r] = (idx, self.version, p)
        return p

    def _eval(
        self,
        r: str,
        t: float,
        idx: np.ndarray,
        share: np.ndarray | None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        p = self._params(r, idx)
        level = p["base"] * (1.0 + p["amp"] * np.cos(t * (2.0 * math.pi / DAY) - p["peak_rad"]))
        if ((t // DAY) % 7) >= 5:
            level = level * p["weekend"]
        ti = p["ti"]
        if ti.size:
            pos = (t + p["tr_offset"]) // p["tr_step"]
            flat = p["tr_start"] + (pos.astype(np.int64) % p["tr_len"])
            level[ti] = self.trace_flat[flat] * p["tr_scale"]
        value = level * self.jitter[idx]
        if share is not None:  # None: a share of 1 (x * 1.0 is x, so it is left out)
            value = value * share
        if p["growth_any"]:
            grown = value + p["growth"] * (t - self.started[idx])
            value = np.where(p["growing"], np.minimum(grown, np.maximum(p["cap"], value)), value)
        if p["noise_any"]:
            value = value * np.maximum(0.0, 1.0 + p["noise"] * rng.standard_normal(idx.size))
        if p["spike_any"]:
            hit = rng.random(idx.size) < p["spike_p"]
            value = np.where(hit, value * p["spike_f"], value)
        return np.maximum(value, 0.0)

    def step(
        self, t: float, idx: np.ndarray, share: np.ndarray | None, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate CPU demand (cores) and memory (bytes) of slots `idx` at time `t`; `share`
        scales CPU demand by each slot's load share (None: no slot shares load)."""
        cpu = self._eval("c", t, idx, share, rng)
        mem = self._eval("m", t, idx, None, rng)
        return cpu, mem

    def heap_wanted(self, t: float, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The heap (bytes) slots `idx` would use with no ceiling (0 for slots without a
        heap generator)."""
        on = self.heap_on[idx]
        wanted = np.zeros(idx.size)
        if on.any():
            wanted[on] = self._eval("h", t, idx[on], None, rng)
        return wanted
