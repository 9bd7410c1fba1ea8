"""The Prometheus reader and `foresize recommend --prometheus` against a real Prometheus.

Real Bitbrains samples (tests/data/traces) are backfilled with `promtool tsdb
create-blocks-from openmetrics` into a temp dir, then Debian's `prometheus` serves them on a
loopback port. The backfill writes what cAdvisor would have scraped: a CPU-seconds counter
whose increase over each 5-minute step is the trace's usage, and the working set as a gauge,
on the 5-minute grid the recommender uses (max per bucket, as for files). Skipped only when
the binaries are missing (`.ci/system-deps` installs them).
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from foresize.history.base import resample_max
from foresize.history.prometheus import PrometheusReader, workload_of_pod
from foresize.history.traces import read_bitbrains
from foresize.recommend.core import MEMORY_RISK_LEVELS

pytestmark = pytest.mark.prometheus

TRACES = Path(__file__).resolve().parent / "data" / "traces" / "bitbrains-rnd-2013-07"
VMS = ("1", "5", "9")
STEP = 300.0
DAYS = 4
NEW_POD_DELAY = 2 * 86400.0

if shutil.which("prometheus") is None or shutil.which("promtool") is None:
    pytest.skip(
        "Debian's prometheus package is not installed (run `bash .ci/system-deps`)",
        allow_module_level=True,
    )


def grid_series(vm: str) -> tuple[float, np.ndarray, np.ndarray]:
    s = read_bitbrains(TRACES / f"{vm}.csv.gz")
    start = math.floor(s.timestamps[0] / STEP) * STEP
    n = int(DAYS * 86400 / STEP)
    return (
        start,
        resample_max(s.timestamps, s.cpu, STEP, start, n),
        resample_max(s.timestamps, s.memory, STEP, start, n),
    )


def openmetrics(series: dict[str, tuple[float, np.ndarray, np.ndarray]], t0: float) -> str:
    cpu, mem, oom = [], [], []
    for vm, (start, c, m) in series.items():
        lab = f'namespace="bitbrains",pod="{vm}-5d8f7c9b4-x2x9z",container="vm"'
        counter, previous = 1000.0, False
        for k in range(c.size):
            g = start + k * STEP
            if np.isfinite(c[k]):
                if not previous:
                    # After a gap the step needs a sample inside its own window; one second
                    # into the step keeps the missing step before it without a (fake) rate.
                    early = counter + float(c[k])
                    cpu.append(
                        f"container_cpu_usage_seconds_total{{{lab}}} {early!r} {g - STEP + 1:.0f}"
                    )
                counter += float(c[k]) * STEP
                cpu.append(f"container_cpu_usage_seconds_total{{{lab}}} {counter!r} {g:.0f}")
            previous = bool(np.isfinite(c[k]))
            if np.isfinite(m[k]):
                mem.append(f"container_memory_working_set_bytes{{{lab}}} {float(m[k])!r} {g:.0f}")
    # A pod born inside the range, with a start-up spike in its first sample, and an OOM kill.
    born = t0 + NEW_POD_DELAY
    lab = 'namespace="startup",pod="cache-0",container="redis"'
    for k in range(48):
        value = 50 * 2**30 if k == 0 else 2**30 + k * 2**20
        mem.append(
            f"container_memory_working_set_bytes{{{lab}}} {float(value)!r} {born + k * STEP:.0f}"
        )
        oom.append(
            f"container_oom_events_total{{{lab}}} {1.0 if k >= 20 else 0.0!r} {born + k * STEP:.0f}"
        )
    return (
        "# TYPE container_cpu_usage_seconds counter\n"
        + "\n".join(cpu)
        + "\n# TYPE container_memory_working_set_bytes gauge\n"
        + "\n".join(mem)
        + "\n# TYPE container_oom_events counter\n"
        + "\n".join(oom)
        + "\n# EOF\n"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prometheus")
    series = {vm: grid_series(vm) for vm in VMS}
    t0 = min(v[0] for v in series.values())
    (tmp / "samples.om").write_text(openmetrics(series, t0))
    data = tmp / "data"
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "-q",
            str(tmp / "samples.om"),
            str(data),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    port = free_port()
    log = open(tmp / "prometheus.log", "w")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"prometheus did not start: {(tmp / 'prometheus.log').read_text()[-2000:]}"
                )
            time.sleep(0.1)
        yield url, series, t0
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def test_reader_returns_the_backfilled_trace_samples(prom):
    url, series, t0 = prom
    n = int(DAYS * 86400 / STEP)
    end = t0 + (n - 1) * STEP
    history = asyncio.run(PrometheusReader(url).read(t0, end, STEP))
    by_key = {str(s.key): s for s in history.series}
    assert set(by_key) == {
        "bitbrains/1/vm",
        "bitbrains/5/vm",
        "bitbrains/9/vm",
        "startup/cache/redis",
    }
    for vm, (start, c, m) in series.items():
        got = by_key[f"bitbrains/{vm}/vm"]
        grid = start + np.arange(n) * STEP
        want_t = grid[np.isfinite(c) | np.isfinite(m)]
        np.testing.assert_array_equal(got.timestamps, want_t)
        idx = np.searchsorted(grid, got.timestamps)
        np.testing.assert_allclose(got.cpu, c[idx], rtol=1e-9, equal_nan=True)
        np.testing.assert_array_equal(got.memory, m[idx])
        assert np.isfinite(got.cpu).sum() == np.isfinite(c).sum() > 1000
    # The new pod's first 2 minutes (its 50 GiB start-up sample) are not history.
    cache = by_key["startup/cache/redis"]
    born = t0 + NEW_POD_DELAY
    assert cache.timestamps[0] == born + STEP
    assert np.nanmax(cache.memory) < 2 * 2**30
    # The OOM kill (counter step between sample 19 and 20) is reported at its time.
    assert any(born + 20 * STEP <= t <= born + 21 * STEP for t in history.oom_kills[cache.key])


def test_recommend_from_prometheus_matches_the_same_samples_read_from_files(prom, tmp_path):
    from foresize.cli import app

    url, _, t0 = prom
    n = int(DAYS * 86400 / STEP)
    end = t0 + (n - 1) * STEP
    folder = tmp_path / "traces"
    folder.mkdir()
    for vm in VMS:  # the same three excerpts, linked
        (folder / f"{vm}.csv.gz").symlink_to(TRACES / f"{vm}.csv.gz")
    runner = CliRunner()
    common = [
        "--start",
        repr(t0),
        "--end",
        repr(end),
        "--format",
        "json",
        "--namespace",
        "bitbrains",
    ]
    live = runner.invoke(app, ["recommend", "--prometheus", url, *common])
    assert live.exit_code == 0, live.output
    files = runner.invoke(
        app, ["recommend", "--traces", str(folder), "--trace-format", "bitbrains", *common]
    )
    assert files.exit_code == 0, files.output
    a = json.loads(live.stdout)["recommendations"]
    b = json.loads(files.stdout[files.stdout.index("{") :])["recommendations"]
    assert [r["workload"] for r in a] == ["1", "5", "9"]
    strip = ("cpu_peak_cores",)
    for x, y in zip(a, b, strict=True):
        assert x["cpu_peak_cores"] == pytest.approx(y["cpu_peak_cores"], rel=1e-9)
        assert {k: v for k, v in x.items() if k not in strip} == {
            k: v for k, v in y.items() if k not in strip
        }
        assert x["cpu_millicores"] > 0 and x["memory_bytes"] > 0 and x["enough_data"]
        assert x["memory_level"] in MEMORY_RISK_LEVELS  # the risk allocation's level


def test_table_output_and_bad_input(prom):
    from foresize.cli import app

    url, _, t0 = prom
    runner = CliRunner()
    out = runner.invoke(
        app, ["recommend", "--prometheus", url, "--start", repr(t0), "--end", repr(t0 + 3 * 86400)]
    )
    assert out.exit_code == 0, out.output
    assert "cpu request" in out.stdout and "bitbrains" in out.stdout
    assert "memory level" in out.stdout and "p99." in out.stdout
    bad = runner.invoke(app, ["recommend", "--prometheus", url, "--format", "xml"])
    assert bad.exit_code != 0 and "--format" in str(bad.exception)


def test_workload_names_from_pods():
    assert workload_of_pod("web-5d8f7c9b4-x2x9z") == "web"
    assert workload_of_pod("db-2") == "db"
    assert workload_of_pod("agent-7xk2p") == "agent"
    assert workload_of_pod("x", ("ReplicaSet", "api-6b7f9c8d5")) == "api"
    assert workload_of_pod("x", ("StatefulSet", "kafka")) == "kafka"
