"""`foresize bench forecast`: forecast throughput with model selection (architecture §3.7).

10,000 synthetic series (seasonal, flat, spiky, growing in equal shares, seeded) of 14
days at 5 minutes: a cold-start rolling backtest of every model and the per-series
selection, then the forecast of the max over the next 15 minutes. The series are drawn
and forecast a shard at a time (`SERIES_SHARD`), so 100,000 of them fit in bounded memory
(issue 26). Reports the median wall and CPU time of `--repeat` runs (the forecasts, not
the drawing) and the process's peak RSS. `--store` also times the bulk insert of the
same series into a fresh SQLite history store.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer


def run_bench(
    series: int = 10_000, days: float = 14.0, repeat: int = 3, store: bool = False
) -> dict:
    import resource
    import statistics
    import time

    import numpy as np

    from foresize.core.forecast.models import MODELS, ForecastConfig
    from foresize.core.forecast.select import SERIES_SHARD, forecast_max
    from foresize.core.forecast.synthetic import make_mixed_rows
    from foresize.core.recommend.core import mode_quantile

    cfg = ForecastConfig()
    qs = np.array([mode_quantile("balanced", "cpu")])
    times = []
    cpu_times = []
    generate = []
    picked = np.zeros(len(MODELS), dtype=np.int64)
    for _ in range(max(1, repeat)):
        # Streamed by shards of series (`SERIES_SHARD`): one shard's history is drawn,
        # forecast and dropped before the next, so memory does not grow with `series`.
        wall = cpu = drawn = 0.0
        picked = np.zeros(len(MODELS), dtype=np.int64)
        for start in range(0, series, SERIES_SHARD):
            t0 = time.perf_counter()
            y = make_mixed_rows(series, start, min(series, start + SERIES_SHARD), days, seed=42)
            drawn += time.perf_counter() - t0
            t0, c0 = time.perf_counter(), time.process_time()
            f = forecast_max(y, qs, cfg)
            wall += time.perf_counter() - t0
            cpu += time.process_time() - c0
            picked += np.bincount(f.model[:, 0], minlength=len(MODELS))
            del y, f
        times.append(wall)
        cpu_times.append(cpu)
        generate.append(drawn)
    med = statistics.median(times)
    out = {
        "series": series,
        "points_per_series": int(days * 86400.0 / cfg.step),
        "shard_series": SERIES_SHARD,
        "seconds_median": med,
        "seconds_all": times,
        # CPU time of this process: on a shared machine the wall time also counts the
        # time other processes held the cores.
        "cpu_seconds_median": statistics.median(cpu_times),
        # Drawing the synthetic histories, not timed above (a store's read in real use).
        "generate_seconds_median": statistics.median(generate),
        "series_per_second": series / med if med > 0 else None,
        "models_selected": {m: int(c) for m, c in zip(MODELS, picked, strict=True)},
    }
    if store:
        import tempfile
        from pathlib import Path

        from foresize.adapters.history.sqlite import HistoryStore
        from foresize.core.history import SeriesKey

        keys = [SeriesKey("bench", f"w{i}", "main") for i in range(series)]
        width = int(days * 86400.0 / cfg.step)
        with (
            tempfile.TemporaryDirectory() as d,
            HistoryStore(Path(d) / "h.db", step=cfg.step) as st,
        ):
            insert = 0.0
            for start in range(0, series, SERIES_SHARD):
                stop = min(series, start + SERIES_SHARD)
                y = make_mixed_rows(series, start, stop, days, seed=42)
                t0 = time.perf_counter()
                st.write_matrix(keys[start:stop], "cpu", 1_700_006_400.0, y)
                insert += time.perf_counter() - t0
            out["sqlite_bulk_insert_seconds"] = insert
            t0 = time.perf_counter()
            st.window(keys[:1000], "cpu", 1_700_006_400.0 + (width - 1) * cfg.step, width, cfg.step)
            out["sqlite_read_1000_series_seconds"] = time.perf_counter() - t0
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("forecast")
    def bench_forecast(
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        series: Annotated[int, typer.Option("--series", help="Number of series.")] = 10_000,
        days: Annotated[float, typer.Option("--days", help="Days of history each.")] = 14.0,
        repeat: Annotated[int, typer.Option("--repeats", help="Runs (median reported).")] = 3,
        repeat_alias: Annotated[int | None, typer.Option("--repeat", hidden=True)] = None,
        store: Annotated[
            bool, typer.Option("--store", help="Also time a SQLite bulk insert.")
        ] = False,
    ) -> None:
        """Forecast throughput: 10,000 series x 14 days at 5 minutes, with model selection."""
        from foresize.core.errors import ForesizeError

        repeat = repeat_alias if repeat_alias is not None else repeat
        if series < 1 or days < 1 or repeat < 1:
            raise ForesizeError("--series, --days and --repeats must be positive (days >= 1)")
        doc = run_bench(series, days, repeat, store)
        if json_out:
            typer.echo(json.dumps(doc, indent=2))
            return
        typer.echo(
            f"{doc['series']} series x {doc['points_per_series']} points: "
            f"median {doc['seconds_median']:.2f} s ({doc['series_per_second']:.0f} series/s; "
            f"CPU {doc['cpu_seconds_median']:.2f} s), "
            f"peak RSS {doc['peak_rss_mib']:.0f} MiB"
        )
        typer.echo(
            "models selected: " + ", ".join(f"{k} {v}" for k, v in doc["models_selected"].items())
        )
        if "sqlite_bulk_insert_seconds" in doc:
            typer.echo(
                f"SQLite bulk insert: {doc['sqlite_bulk_insert_seconds']:.2f} s; "
                f"read 1,000 series: {doc['sqlite_read_1000_series_seconds']:.2f} s"
            )
