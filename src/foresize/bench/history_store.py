"""`foresize bench history-store`: `foresize recommend --prometheus`'s reader and
recommendations over N containers x D days of cAdvisor-shaped history, against a real
Prometheus and a real VictoriaMetrics started here (`testing.stores`), both loaded with the
same remote-write bodies: seconds, the reader's queries against its budget, each store's
peak resident memory while it answered, and whether the two stores' recommendations are
identical (issue 26)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SCRAPE = 150.0  # a scrape every 150 s: a CPU point needs a sample in its step and the one before
STEP = 300.0
CHUNK = 1800.0
"""One remote-write request holds half an hour of every series: Prometheus' head takes a
sample in order while it is within an hour of the newest it holds, so a backfill sent
oldest first in half hours never goes down the slower out-of-order path."""


def _series_chunks(containers: int, days: float, end: float, seed: int):
    """(label sets, times in ms, values: series x samples) of [end - days, end], half an
    hour at a time: a CPU-seconds counter (a daily shape times gamma noise, counted in
    millicore-seconds: values both stores hold exactly, as VictoriaMetrics keeps about 12
    significant digits) and a working set (whole bytes), per container."""
    from foresize.adapters.history.remote_write import label_bytes

    rng = np.random.default_rng(seed)
    base = rng.uniform(0.05, 2.0, containers)
    mem = rng.uniform(100, 2000, containers) * 2**20
    phase = rng.uniform(0, 2 * np.pi, containers)
    counters = np.zeros(containers)
    labels = []
    for name in ("container_cpu_usage_seconds_total", "container_memory_working_set_bytes"):
        for i in range(containers):
            pod = {"namespace": f"ns-{i % 20}", "pod": f"wl{i}-0", "container": "app"}
            labels.append(label_bytes({"__name__": name, **pod}))
    start = end - days * 86400.0
    t = start
    while t < end:
        times = np.arange(t, min(t + CHUNK, end), SCRAPE)
        day = 1.0 + 0.5 * np.sin(2 * np.pi * (times[:, None] % 86400) / 86400 + phase)
        cores = base * day * rng.gamma(4.0, 0.25, (times.size, containers))
        used = np.round(np.cumsum(cores * SCRAPE, axis=0) + counters, 3)
        counters = used[-1]
        ws = np.round(mem * (0.8 + 0.2 * day + rng.normal(0, 0.02, day.shape)))
        yield labels, (times * 1000).astype(np.int64), np.concatenate([used.T, ws.T])
        t += CHUNK


async def _load(stores: Any, chunks: Any, progress: Callable[[str], None]) -> int:
    """Every chunk remote-written to every store (the same body to each, the stores in
    parallel, the chunks in order); the samples sent to each."""
    import aiohttp

    from foresize.adapters.history.remote_write import (
        RemoteWriter,
        encode_aligned,
        snappy_stored,
    )

    writers = [RemoteWriter(s.write_url, timeout=300.0) for s in stores]
    sessions = [aiohttp.ClientSession() for _ in stores]
    samples = 0
    try:
        for n, (labels, times, values) in enumerate(chunks):
            body = snappy_stored(encode_aligned(labels, times, values))
            await asyncio.gather(
                *(w.send([body], s) for w, s in zip(writers, sessions, strict=True))
            )
            samples += values.size
            if n % 96 == 0:
                progress(f"loaded {samples:,} samples a store")
    finally:
        for session in sessions:
            await session.close()
    return samples


def run_bench(
    containers: int = 1000,
    days: float = 14.0,
    seed: int = 26,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    from foresize.adapters.history.prometheus import PrometheusReader
    from foresize.core.recommend.series import recommend_series
    from foresize.testing.stores import real_store, store_missing

    kinds = ("prometheus", "victoria-metrics")
    missing = {k: why for k in kinds if (why := store_missing(k))}
    if missing:
        return {"error": "; ".join(missing.values())}
    end = math.floor(time.time() / STEP) * STEP - STEP
    out: dict[str, Any] = {"containers": containers, "days": days, "stores": {}}
    with (
        tempfile.TemporaryDirectory() as tmp,
        real_store("prometheus", Path(tmp) / "p") as prom,
        real_store("victoria-metrics", Path(tmp) / "v") as vm,
    ):
        stores = (prom, vm)
        load_start = time.perf_counter()
        load_cpu = time.process_time()
        samples = asyncio.run(_load(stores, _series_chunks(containers, days, end, seed), progress))
        for s in stores:
            s.flush()
            out["stores"][s.kind] = {"store_cpu_seconds_load": round(s.cpu_seconds(), 1)}
        out["samples"] = samples
        out["load_seconds"] = round(time.perf_counter() - load_start, 1)
        out["load_cpu_seconds_encoder"] = round(time.process_time() - load_cpu, 1)
        out["load_samples_per_second"] = round(samples / max(out["load_seconds"], 1e-9))
        rows: dict[str, list[Any]] = {}
        for s in stores:
            load_peak = s.peak_rss_mib()
            s.reset_peak()
            reader = PrometheusReader(s.url, timeout=300.0)
            cpu_before = s.cpu_seconds()
            t0 = time.perf_counter()
            history = asyncio.run(reader.read(end - days * 86400.0 + STEP, end, STEP))
            read_s = time.perf_counter() - t0
            recs = recommend_series(history.series, now=end)
            rows[s.kind] = [dataclasses.asdict(r) for r in recs]
            budget = reader.budget
            out["stores"][s.kind] |= {
                "store_cpu_seconds_query": round(s.cpu_seconds() - cpu_before, 1),
                "seconds": round(time.perf_counter() - t0, 2),
                "read_seconds": round(read_s, 2),
                "queries": reader.stats.queries,
                "retries": reader.stats.retries,
                "peak_in_flight": reader.stats.peak_in_flight,
                "peak_series_per_answer": reader.stats.peak_series,
                "within_budget": reader.stats.peak_in_flight <= budget.concurrency
                and reader.stats.peak_series <= budget.max_series,
                "recommendations": len(recs),
                "store_peak_rss_mib_query": round(s.peak_rss_mib(), 1),
                "store_peak_rss_mib_load": round(load_peak, 1),
            }
            progress(f"{s.kind}: {out['stores'][s.kind]}")
    p, v = rows["prometheus"], rows["victoria-metrics"]
    keys = ("cpu_request", "memory_request")
    out["identical"] = p == v
    out["identical_requests"] = [[r[k] for k in keys] for r in p] == [
        [r[k] for k in keys] for r in v
    ]
    out["identical_memory_requests"] = [r["memory_request"] for r in p] == [
        r["memory_request"] for r in v
    ]
    out["differing_rows"] = sum(a != b for a, b in zip(p, v, strict=False)) + abs(len(p) - len(v))
    diffs = [(a, b) for a, b in zip(p, v, strict=False) if a != b]
    if diffs:  # the first difference, field by field, to say where the stores disagree
        a, b = diffs[0]
        out["first_difference"] = {k: [a[k], b[k]] for k in a if a[k] != b.get(k)}
    return out
