"""The Prometheus reader and `foresize recommend --prometheus` against a real Prometheus.

Real Bitbrains samples (the excerpts in tests/data/traces) are backfilled with `promtool tsdb
create-blocks-from openmetrics` into a temp dir, then Debian's `prometheus` serves them on
a loopback port. The backfill writes what a kube-prometheus-stack would have scraped,
with cAdvisor every 60 s and kube-state-metrics every 120 s:

- namespace `bitbrains`: one pod per VM, a CPU-seconds counter whose increase over each
  5-minute step is the trace's usage and the working set as a gauge;
- namespace `shop` (the acceptance cluster): a 2-replica Deployment `web` (containers
  `app` from VM 1 and 5 and an `istio-proxy` OOM-killed 4 times at its 1Gi limit, each
  kill reported by cAdvisor and by kube-state-metrics, plus one restart that was not an
  OOM kill) and a StatefulSet `postgres` (VM 9) whose series are duplicated twice: the
  cgroup-v1 copy with `image=""` and the same pod name in a second cluster (`cluster="b"`,
  twice the usage); current requests and limits, owners and pod labels from
  kube-state-metrics. The sidecar's CFS counters show two short throttled spells; a
  `log-shipper` container has requests but no cAdvisor series.

Skipped only when the binaries are missing (`.ci/system-deps` installs them).
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import subprocess
import time
import urllib.request

import numpy as np
import pytest
from typer.testing import CliRunner

from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.prometheus_series import (
    Scope,
    align,
    counter_increases,
    kind_of_owner,
    merge_kills,
    pod_selector,
)
from foresize.adapters.history.traces import read_bitbrains
from foresize.core.errors import ForesizeError
from foresize.core.history import UNKNOWN_KIND, resample_max, workload_of_pod
from foresize.testing.ports import free_port
from support.paths import DATA

pytestmark = pytest.mark.prometheus

TRACES = DATA / "traces" / "bitbrains-rnd-2013-07"
VMS = ("1", "5", "9")
STEP = 300.0
SCRAPE = 60.0  # cAdvisor
KSM_SCRAPE = 120.0  # kube-state-metrics
DAYS = 4
SHOP_DAYS = 2
NEW_POD_DELAY = 2 * 86400.0
GIB = 2**30
MIB = 2**20
KILL_OFFSETS = (6 * 3600 + 37, 15 * 3600 + 211, 27 * 3600 + 95, 40 * 3600 + 263)
ERROR_RESTART = 44 * 3600 + 50  # a restart that was not an OOM kill (liveness probe)
THROTTLED_SPELLS = ((10 * 3600, 10 * 3600 + 300), (20 * 3600, 20 * 3600 + 600))
"""The sidecar's throttled spells (seconds after t0): half its CFS periods throttled in 15
minutes of two days, 0.26% of all its periods."""

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


class Families:
    """OpenMetrics text: samples grouped by metric family, series in time order."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}
        self.lines: dict[str, list[str]] = {}

    def add(self, family: str, kind: str, name: str, labels: str, value: float, t: float):
        self.types[family] = kind
        self.lines.setdefault(family, []).append(f"{name}{{{labels}}} {float(value)!r} {t:.0f}")

    def text(self) -> str:
        out = []
        for family, kind in self.types.items():
            out.append(f"# TYPE {family} {kind}")
            out += self.lines[family]
        return "\n".join(out) + "\n# EOF\n"


def cadvisor(om: Families, labels: str, start: float, cpu: np.ndarray, mem: np.ndarray) -> None:
    """A 60-s cAdvisor scrape of per-5-minute usage: the CPU counter rises by the step's
    usage over the five scrapes of the step that ends at its grid point + 300 s, so the
    point at g + 300... no: the point at g holds bucket [g, g + 300) as files do."""
    counter, previous = 1000.0, False
    per = int(STEP / SCRAPE)
    for k in range(cpu.size):
        g = start + k * STEP
        if np.isfinite(cpu[k]):
            if not previous:
                # After a gap the step needs a sample one step back for its rate.
                om.add(
                    "container_cpu_usage_seconds",
                    "counter",
                    "container_cpu_usage_seconds_total",
                    labels,
                    counter,
                    g - STEP,
                )
            for j in range(per - 1, -1, -1):
                counter += float(cpu[k]) * SCRAPE
                om.add(
                    "container_cpu_usage_seconds",
                    "counter",
                    "container_cpu_usage_seconds_total",
                    labels,
                    counter,
                    g - j * SCRAPE,
                )
        previous = bool(np.isfinite(cpu[k]))
    for k in range(mem.size):
        g = start + k * STEP
        if np.isfinite(mem[k]):
            for j in range(per - 1, -1, -1):
                om.add(
                    "container_memory_working_set_bytes",
                    "gauge",
                    "container_memory_working_set_bytes",
                    labels,
                    mem[k],
                    g - j * SCRAPE,
                )


def istio_memory(t0: float) -> tuple[np.ndarray, np.ndarray]:
    """The sidecar's working set on the 60-s scrape grid: 300Mi, rising to 99% of its 1Gi
    limit in the hour before each kill, back to 300Mi after."""
    ts = t0 + np.arange(int(SHOP_DAYS * 86400 / SCRAPE)) * SCRAPE
    mem = np.full(ts.size, 300.0 * MIB)
    for off in KILL_OFFSETS:
        k = t0 + off
        rising = (ts > k - 3600) & (ts <= k)
        mem[rising] = 300 * MIB + (0.99 * GIB - 300 * MIB) * (1 - (k - ts[rising]) / 3600)
    return ts, mem


def cluster_objects(om: Families, t: float) -> None:
    """The node's capacity and the web tier's HPA at `t` (kube-state-metrics), for
    `foresize simulate --prometheus`."""
    for resource, value, unit in (("cpu", 8, "core"), ("memory", 32 * GIB, "byte")):
        om.add(
            "kube_node_status_allocatable",
            "gauge",
            "kube_node_status_allocatable",
            f'cluster="a",node="n1",resource="{resource}",unit="{unit}"',
            value,
            t,
        )
    hpa = 'cluster="a",namespace="shop",horizontalpodautoscaler="web"'
    for family, labels, value in (
        (
            "kube_horizontalpodautoscaler_info",
            f'{hpa},scaletargetref_kind="Deployment",scaletargetref_name="web"',
            1,
        ),
        ("kube_horizontalpodautoscaler_spec_min_replicas", hpa, 2),
        ("kube_horizontalpodautoscaler_spec_max_replicas", hpa, 6),
        (
            "kube_horizontalpodautoscaler_spec_target_metric",
            f'{hpa},metric_name="cpu",metric_target_type="utilization"',
            70,
        ),
    ):
        om.add(family, "gauge", family, labels, value, t)


def openmetrics(series: dict[str, tuple[float, np.ndarray, np.ndarray]], t0: float) -> str:
    om = Families()
    for vm, (start, c, m) in series.items():
        cadvisor(
            om,
            f'cluster="a",namespace="bitbrains",pod="{vm}-5d8f7c9b4-x2x9z",'
            'container="vm",image="vm:1"',
            start,
            c,
            m,
        )
    # A pod born inside the range, with a start-up spike in its first sample, and an OOM kill.
    born = t0 + NEW_POD_DELAY
    lab = 'cluster="a",namespace="startup",pod="cache-0",container="redis"'
    for k in range(48):
        value = 50 * 2**30 if k == 0 else 2**30 + k * 2**20
        om.add(
            "container_memory_working_set_bytes",
            "gauge",
            "container_memory_working_set_bytes",
            lab,
            value,
            born + k * STEP,
        )
        om.add(
            "container_oom_events",
            "counter",
            "container_oom_events_total",
            lab,
            1.0 if k >= 20 else 0.0,
            born + k * STEP,
        )
    # The shop: two days of the VMs' first days on the 60-s scrape.
    n = int(SHOP_DAYS * 86400 / STEP)
    web = {"web-5d8f7c9b4-aaaaa": "1", "web-5d8f7c9b4-bbbbb": "5"}
    for pod, vm in web.items():
        _, c, m = series[vm]
        cadvisor(
            om,
            f'cluster="a",namespace="shop",pod="{pod}",container="app",image="app:2"',
            t0,
            c[:n],
            m[:n],
        )
    _, c9, m9 = series["9"]
    pg = 'namespace="shop",pod="postgres-0",container="postgres"'
    cadvisor(om, f'cluster="a",{pg},image="postgres:16"', t0, c9[:n], m9[:n])
    cadvisor(om, f'cluster="a",{pg},image=""', t0, c9[:n], m9[:n])  # cgroup-v1 duplicate
    cadvisor(om, f'cluster="b",{pg},image="postgres:16"', t0, 2 * c9[:n], 2 * m9[:n])
    # The sidecar: memory, a little CPU, the OOM counter.
    sidecar = 'cluster="a",namespace="shop",pod="web-5d8f7c9b4-aaaaa",container="istio-proxy"'
    ts, mem = istio_memory(t0)
    kills = [t0 + off for off in KILL_OFFSETS]
    for t, v in zip(ts, mem, strict=True):
        om.add(
            "container_memory_working_set_bytes",
            "gauge",
            "container_memory_working_set_bytes",
            sidecar + ',image="proxy:1"',
            v,
            t,
        )
        om.add(
            "container_cpu_usage_seconds",
            "counter",
            "container_cpu_usage_seconds_total",
            sidecar + ',image="proxy:1"',
            100.0 + 0.05 * (t - t0),
            t,
        )
        om.add(
            "container_oom_events",
            "counter",
            "container_oom_events_total",
            sidecar + ',image="proxy:1"',
            sum(k <= t for k in kills),
            t,
        )
        # CFS: ten 100-ms periods a second, half of them throttled in THROTTLED_SPELLS.
        om.add(
            "container_cpu_cfs_periods",
            "counter",
            "container_cpu_cfs_periods_total",
            sidecar + ',image="proxy:1"',
            10.0 * (t - t0),
            t,
        )
        om.add(
            "container_cpu_cfs_throttled_periods",
            "counter",
            "container_cpu_cfs_throttled_periods_total",
            sidecar + ',image="proxy:1"',
            5.0 * sum(min(max(t - t0 - a, 0.0), b - a) for a, b in THROTTLED_SPELLS),
            t,
        )
    # kube-state-metrics, every 120 s.
    ksm_ts = t0 + np.arange(int(SHOP_DAYS * 86400 / KSM_SCRAPE)) * KSM_SCRAPE
    pods = {
        "web-5d8f7c9b4-aaaaa": ("ReplicaSet", "web-5d8f7c9b4", "web"),
        "web-5d8f7c9b4-bbbbb": ("ReplicaSet", "web-5d8f7c9b4", "web"),
        "postgres-0": ("StatefulSet", "postgres", "postgres"),
    }
    resources = {
        ("web", "app"): {
            "requests": {"cpu": 4, "memory": 16 * GIB},
            "limits": {"memory": 16 * GIB},
        },
        ("web", "istio-proxy"): {
            "requests": {"cpu": 0.1, "memory": 128 * MIB},
            "limits": {"cpu": 2, "memory": GIB},
        },
        ("postgres", "postgres"): {"requests": {"cpu": 2, "memory": 8 * GIB}, "limits": {}},
        # Requests, but cAdvisor never reported the container (ux.md N4).
        ("web", "log-shipper"): {"requests": {"cpu": 0.05, "memory": 64 * MIB}, "limits": {}},
    }
    for t in ksm_ts:
        for pod, (kind, owner, app) in pods.items():
            base = f'cluster="a",namespace="shop",pod="{pod}"'
            om.add(
                "kube_pod_owner",
                "gauge",
                "kube_pod_owner",
                f'{base},owner_kind="{kind}",owner_name="{owner}",owner_is_controller="true"',
                1,
                t,
            )
            om.add(
                "kube_pod_labels",
                "gauge",
                "kube_pod_labels",
                f'{base},label_app="{app}",label_app_kubernetes_io_part_of="shop"',
                1,
                t,
            )
            for (wl, container), res in resources.items():
                if wl != app:
                    continue
                for what, values in res.items():
                    for resource, value in values.items():
                        unit = "core" if resource == "cpu" else "byte"
                        family = f"kube_pod_container_resource_{what}"
                        om.add(
                            family,
                            "gauge",
                            family,
                            f'{base},container="{container}",node="n1",resource="{resource}",'
                            f'unit="{unit}"',
                            value,
                            t,
                        )
        cluster_objects(om, t)
        # The sidecar's restarts and the reason of its last termination (the restart
        # follows the kill by a few seconds).
        base = 'cluster="a",namespace="shop",pod="web-5d8f7c9b4-aaaaa",container="istio-proxy"'
        restarts = sum(k + 5 <= t for k in kills) + (t0 + ERROR_RESTART <= t)
        om.add(
            "kube_pod_container_status_restarts",
            "counter",
            "kube_pod_container_status_restarts_total",
            base,
            restarts,
            t,
        )
        if t >= t0 + ERROR_RESTART:
            reason = "Error"
        elif any(k + 5 <= t for k in kills):
            reason = "OOMKilled"
        else:
            reason = None
        if reason:
            om.add(
                "kube_pod_container_status_last_terminated_reason",
                "gauge",
                "kube_pod_container_status_last_terminated_reason",
                f'{base},reason="{reason}"',
                1,
                t,
            )
    return om.text()


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
        timeout=120,
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
        # Replaying the TSDB's blocks and WAL takes seconds at idle and far longer with
        # the suite's other worker beside it: 30 s was short on a loaded machine.
        deadline = time.time() + 120
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


def recommend(*args: str):
    return CliRunner().invoke(app(), ["recommend", *args])


def app():
    from foresize.front.cli import app as foresize_app

    return foresize_app


def shop_end(t0: float) -> float:
    return t0 + SHOP_DAYS * 86400 - SCRAPE  # the last scrape of the shop


# --- The reader ---------------------------------------------------------------------------


def test_reader_returns_the_backfilled_trace_samples(prom):
    url, series, t0 = prom
    n = int(DAYS * 86400 / STEP)
    end = t0 + (n - 1) * STEP
    scope = Scope(("bitbrains", "startup"), cluster="a")
    history = asyncio.run(PrometheusReader(url).read(t0, end, STEP, scope=scope))
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
    # The OOM kill (counter step between sample 19 and 20) is reported once, at its time.
    assert history.oom_kills[cache.key] == [born + 20 * STEP]


def test_duplicate_series_are_folded_by_max_and_the_cluster_filter_keeps_one(prom):
    url, series, t0 = prom
    _, c9, m9 = series["9"]
    n = int(SHOP_DAYS * 86400 / STEP)
    end = t0 + (n - 1) * STEP
    history = asyncio.run(
        PrometheusReader(url).read(t0, end, STEP, scope=Scope(("shop",), cluster="a"))
    )
    pg = next(s for s in history.series if s.key.workload == "postgres")
    grid = t0 + np.arange(n) * STEP
    idx = np.searchsorted(grid, pg.timestamps)
    # The image="" copy is not added: the values are the raw readings, not twice them.
    np.testing.assert_allclose(pg.cpu, c9[:n][idx], rtol=1e-9, equal_nan=True)
    np.testing.assert_array_equal(pg.memory, m9[:n][idx])
    # Cluster b alone holds twice the usage.
    other = asyncio.run(
        PrometheusReader(url).read(t0, end, STEP, scope=Scope(("shop",), cluster="b"))
    )
    (pg_b,) = other.series
    np.testing.assert_allclose(pg_b.cpu, 2 * c9[:n][idx], rtol=1e-9, equal_nan=True)


def test_each_kill_is_counted_once_across_sources_and_windows(prom):
    url, _, t0 = prom
    kills = [t0 + off for off in KILL_OFFSETS]
    for shift in (0.0, 17.0, 45.0, 120.0, 299.0):  # the second of the run does not matter
        history = asyncio.run(
            PrometheusReader(url).read(
                t0, shop_end(t0) + shift, STEP, scope=Scope(("shop",), cluster="a")
            )
        )
        got = next(v for k, v in history.oom_kills.items() if k.container == "istio-proxy")
        assert len(got) == len(kills), (shift, got)
        for real, seen in zip(kills, got, strict=True):
            # At the end of the step whose scrape first saw it.
            assert real < seen <= real + STEP + SCRAPE, (shift, real, seen)
        assert set(history.oom_kills) == {
            k for k in history.oom_kills if k.container == "istio-proxy"
        }


def test_kill_arithmetic():
    ts = np.arange(6) * 300.0
    assert counter_increases(ts, np.array([0, 0, 2, 2, 0, 1.0])) == [(600.0, 2), (1500.0, 1)]
    # Seen by both sources a minute apart: one kill; seen by one only: kept.
    assert merge_kills([600.0], [660.0, 5000.0], 300.0) == [600.0, 5000.0]
    assert merge_kills([600.0, 700.0], [660.0], 300.0) == [600.0, 700.0]


def test_current_resources_kinds_and_replicas(prom):
    url, _, t0 = prom
    history = asyncio.run(
        PrometheusReader(url).read(t0, shop_end(t0), STEP, scope=Scope(("shop",), cluster="a"))
    )
    res = {str(k): v for k, v in history.resources.items()}
    assert res["shop/web/app"].cpu_request == 4 and res["shop/web/app"].memory_limit == 16 * GIB
    assert res["shop/web/istio-proxy"].memory_limit == GIB
    assert res["shop/web/istio-proxy"].cpu_limit == 2
    assert res["shop/postgres/postgres"].cpu_limit is None
    assert history.kinds == {("shop", "web"): "Deployment", ("shop", "postgres"): "StatefulSet"}
    assert history.replicas == {("shop", "web"): 2, ("shop", "postgres"): 1}


def test_resources_with_no_scope_at_all_are_read(prom):
    # An empty scope has no matchers: the query was `{,resource=~...}`, a parse error.
    url, _, t0 = prom
    res = asyncio.run(PrometheusReader(url).resources(shop_end(t0), 86400.0, Scope()))
    assert res[("shop", next(p for _, p, c in res if c == "app"), "app")].cpu_request == 4


def test_selector_is_matched_on_kube_pod_labels(prom):
    url, _, t0 = prom
    scope = Scope(("shop",), cluster="a", selector=pod_selector("app=web"))
    history = asyncio.run(PrometheusReader(url).read(t0, shop_end(t0), STEP, scope=scope))
    assert {s.key.workload for s in history.series} == {"web"}
    scope = Scope(
        ("shop",),
        cluster="a",
        selector=pod_selector("app.kubernetes.io/part-of=shop,app notin (web)"),
    )
    history = asyncio.run(PrometheusReader(url).read(t0, shop_end(t0), STEP, scope=scope))
    assert {s.key.workload for s in history.series} == {"postgres"}


# --- foresize recommend -------------------------------------------------------------------


def test_recommend_from_prometheus_matches_the_same_samples_read_from_files(prom, tmp_path):
    url, _, t0 = prom
    n = int(DAYS * 86400 / STEP)
    end = t0 + (n - 1) * STEP
    common = ["--start", repr(t0), "--end", repr(end), "-o", "json", "--namespace", "bitbrains"]
    live = recommend("--prometheus", url, "--cluster", "a", *common)
    assert live.exit_code == 0, live.output
    files = recommend("--traces", str(TRACES), "--trace-format", "bitbrains", *common)
    assert files.exit_code == 0, files.output
    a = json.loads(live.stdout)["recommendations"]
    b = json.loads(files.stdout[files.stdout.index("{") :])["recommendations"]
    assert [r["workload"] for r in a] == ["1", "5", "9"]
    for x, y in zip(a, b, strict=True):
        assert x["cpu"]["peak"] == pytest.approx(y["cpu"]["peak"], rel=1e-9)
        for res in ("cpu", "memory"):
            for k in ("request", "limit", "forecast", "quantile"):
                assert x[res][k] == y[res][k], (res, k)
        assert x["cpu"]["request"] and x["memory"]["request"] and x["enough_data"]


def shop_run(url: str, t0: float, end_shift: float, *extra: str):
    return recommend(
        "--prometheus",
        url,
        "--cluster",
        "a",
        "-n",
        "shop",
        "--lookback",
        "7d",
        "--end",
        repr(shop_end(t0) + end_shift),
        *extra,
    )


def test_acceptance_stable_counts_and_values_match_the_raw_data(prom):
    url, series, t0 = prom
    outs = [shop_run(url, t0, shift, "-o", "json") for shift in (60.0, 197.0, 17 * 60 + 5.0)]
    for out in outs:
        assert out.exit_code == 0, out.output
    # Runs at different minutes over the same data print the same thing.
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout
    table = [shop_run(url, t0, shift, "--wide") for shift in (60.0, 197.0)]
    assert table[0].stdout == table[1].stdout and table[0].exit_code == 0
    doc = json.loads(outs[0].stdout)
    rows = {(r["workload"], r["container"]): r for r in doc["recommendations"]}
    assert set(rows) == {
        ("web", "app"),
        ("web", "istio-proxy"),
        ("web", "log-shipper"),
        ("postgres", "postgres"),
    }
    proxy = rows[("web", "istio-proxy")]
    assert len(proxy["oom_kills"]) == 4
    assert proxy["memory"]["current_limit"] == "1Gi"
    # Killed at its limit: a warning, and a limit above it (the OOM floor, compounding per kill).
    assert any("OOM-killed 4x at its 1Gi memory limit" in n for n in proxy["notes"])
    assert proxy["severity"] == "critical"
    from foresize.core.api.quantity import to_bytes

    ts, mem = istio_memory(t0)
    peak = max(mem[(ts > t0 + off - 3600) & (ts <= t0 + off)].max() for off in KILL_OFFSETS)
    assert peak > 0.98 * GIB
    assert to_bytes(proxy["memory"]["limit"]) >= 1.2 * peak
    memory_line = proxy["explanation"][1]
    assert "; raised to the OOM floor, 1.2 x the larger of the request hit and the working-set" in (
        memory_line
    )
    # postgres: the raw readings (not the duplicates' sum, not cluster b), and a static
    # request never below the p99.9 of the raw 15-minute peaks over the history.
    pg = rows[("postgres", "postgres")]
    n = int(SHOP_DAYS * 86400 / STEP)
    _, c9, m9 = series["9"]
    assert pg["memory"]["peak"] == pytest.approx(float(np.nanmax(m9[1:n])))
    assert pg["cpu"]["peak"] == pytest.approx(float(np.nanmax(c9[1:n])), rel=1e-9)
    peaks = np.nanmax(m9[1 : 1 + (n - 1) // 3 * 3].reshape(-1, 3), axis=1)
    assert to_bytes(pg["memory"]["request"]) >= np.quantile(peaks, 0.999, method="higher")
    assert pg["cpu"]["current_request"] == "2" and pg["kind"] == "StatefulSet"
    assert rows[("web", "app")]["replicas"] == 2
    # The horizon is said.
    assert "coming weeks" in doc["horizon"] and "15-minute" in doc["horizon"]


def test_a_container_with_requests_and_no_usage_is_listed_not_dropped(prom):
    """ux.md N4: kube-state-metrics has the log-shipper's requests, cAdvisor never saw it;
    it was missing from every output (86 rows for 87 containers, no note)."""
    url, _, t0 = prom
    out = shop_run(url, t0, 60.0, "-o", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    (row,) = [r for r in doc["recommendations"] if r["container"] == "log-shipper"]
    assert row["no_usage"] is True and row["kind"] == "Deployment"
    assert row["cpu"]["current_request"] == "50m" and row["memory"]["current_request"] == "64Mi"
    assert row["cpu"]["request"] is None and row["severity"] == "unset"
    assert row["notes"][0].startswith("no usage in the history")
    table = shop_run(url, t0, 60.0).stdout
    assert "shop/web log-shipper: no usage in the history" in " ".join(table.split())
    # Outside a label selector it stays out, as its pod's usage does.
    out = shop_run(url, t0, 60.0, "-o", "json", "-l", "app=postgres")
    assert {r["container"] for r in json.loads(out.stdout)["recommendations"]} == {"postgres"}


def test_throttled_share_is_over_every_step_with_cfs_data(prom):
    """ux.md N2: half the sidecar's CFS periods were throttled in 15 minutes of two days.
    Averaged over the throttled steps alone the note said "throttled in 50% of periods";
    over every step it is a quarter of a percent, below the note's 10%."""
    url, _, t0 = prom
    history = asyncio.run(
        PrometheusReader(url).read(t0, shop_end(t0), STEP, scope=Scope(("shop",), cluster="a"))
    )
    ((key, (ts, share)),) = history.throttling.items()
    assert key.container == "istio-proxy"
    assert ts.size > 500  # every step of the sidecar with CFS data, not the throttled ones
    throttled = sum(b - a for a, b in THROTTLED_SPELLS) * 5.0  # throttled periods
    periods = 10.0 * (shop_end(t0) - t0)
    assert float(np.mean(share)) == pytest.approx(throttled / periods, rel=0.1)
    doc = json.loads(shop_run(url, t0, 60.0, "-o", "json").stdout)
    proxy = next(r for r in doc["recommendations"] if r["container"] == "istio-proxy")
    assert 0 < proxy["throttled_share"] < 0.01
    assert not any("throttled" in n for n in proxy["notes"])


def test_patch_output_is_a_strategic_merge_patch_per_workload(prom):
    import yaml

    url, _, t0 = prom
    out = shop_run(url, t0, 60.0, "-o", "patch")
    assert out.exit_code == 0, out.output
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(out.stdout)}
    assert docs["web"]["kind"] == "Deployment" and docs["postgres"]["kind"] == "StatefulSet"
    containers = {c["name"]: c for c in docs["web"]["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"app", "istio-proxy"}
    assert set(containers["istio-proxy"]["resources"]["limits"]) == {"cpu", "memory"}
    # The same patches as a kustomization, each with its target.
    kust = yaml.safe_load(shop_run(url, t0, 60.0, "-o", "kustomize").stdout)
    assert kust["kind"] == "Kustomization"
    by_name = {e["target"]["name"]: e for e in kust["patches"]}
    assert set(by_name) == set(docs)
    for name, entry in by_name.items():
        assert entry["target"]["kind"] == docs[name]["kind"]
        assert yaml.safe_load(entry["patch"]) == docs[name]


def test_step_at_the_scrape_interval_is_refused(prom):
    url, _, t0 = prom
    out = shop_run(url, t0, 60.0, "--step", "60s")
    assert isinstance(out.exception, ForesizeError), out.output
    assert str(out.exception).startswith("--step 1m is too fine for cAdvisor's 60s scrape interval")
    assert shop_run(url, t0, 60.0, "--step", "2m").exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--end", "1000000000"], "holds no cAdvisor container series"),
        (["-n", "shpo"], "--namespace: no containers in shpo"),
        (["-n", "shop,nope"], "--namespace: no containers in nope"),
        (["--lookback", "30d"], "--lookback 30d: the recommender reads at most 14d"),
        (["--cluster", "c"], "--cluster: no series with cluster='c'"),
        (["-l", "app=nope"], "--selector 'app=nope': no pod with data"),
        (["--prometheus", "127.0.0.1:9090"], "--prometheus: '127.0.0.1:9090' is not an http"),
    ],
)
def test_nothing_matched_is_an_error_naming_the_cause(prom, args, message):
    url, _, t0 = prom
    out = recommend(
        "--prometheus", url, "--end", repr(shop_end(t0)), "--cluster", "a", "-n", "shop", *args
    )
    assert isinstance(out.exception, ForesizeError), out.output
    assert message in str(out.exception)


def test_comma_namespaces_and_several_clusters(prom):
    url, _, t0 = prom
    out = recommend(
        "--prometheus",
        url,
        "--end",
        repr(shop_end(t0)),
        "-n",
        "shop,bitbrains",
        "--cluster",
        "a",
        "-o",
        "json",
    )
    assert out.exit_code == 0, out.output
    assert {r["namespace"] for r in json.loads(out.stdout)["recommendations"]} == {
        "shop",
        "bitbrains",
    }
    # Two clusters and no --cluster: refused, naming them (never summed or mixed).
    out = recommend("--prometheus", url, "--end", repr(shop_end(t0)), "-n", "shop")
    assert isinstance(out.exception, ForesizeError)
    assert "2 clusters (cluster: a, b)" in str(out.exception)


@pytest.mark.parametrize("width", [80, 120])
def test_recommend_table_fits_the_terminal(prom, monkeypatch, width):
    url, _, t0 = prom
    monkeypatch.setenv("COLUMNS", str(width))
    out = shop_run(url, t0, 60.0, "--explain", "--cpu-price", "0.03", "--memory-price", "0.004")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in out.stdout
    assert any("shop/web" in line and "istio-proxy" in line for line in lines)
    assert any(line.startswith("Cost per month:") for line in lines)


def test_workload_names_from_pods():
    # By the pod's name alone the kind is unknown (a Rollout names pods as a Deployment).
    assert workload_of_pod("web-5d8f7c9b4-x2x9z") == (UNKNOWN_KIND, "web")
    assert workload_of_pod("db-2") == (UNKNOWN_KIND, "db")
    assert workload_of_pod("agent-7xk2p") == (UNKNOWN_KIND, "agent")
    assert workload_of_pod("x", ("ReplicaSet", "api-6b7f9c8d5")) == ("Deployment", "api")
    assert workload_of_pod("x", ("StatefulSet", "kafka")) == ("StatefulSet", "kafka")
    # The runs of a CronJob (Jobs named <cronjob>-<scheduled minute>) are one workload.
    assert workload_of_pod("x", ("Job", "nightly-etl-29412345")) == ("CronJob", "nightly-etl")
    assert kind_of_owner(("Job", "nightly-etl-29412345")) == "CronJob"
    assert workload_of_pod("x", ("Job", "migrate-v2")) == ("Job", "migrate-v2")
    assert kind_of_owner(("Job", "migrate-v2")) == "Job"


# --- What-if on this cluster: `foresize simulate --prometheus` ------------------------------


def test_the_scenario_holds_the_clusters_workloads_nodes_and_hpas(prom):
    """The shop as kube-state-metrics and cAdvisor saw it: web (a Deployment of 2 pods,
    its app and istio-proxy with their requests and limits; the log-shipper has no usage
    sample) and postgres (a StatefulSet), node n1's allocatable, the HPA on CPU at 70%;
    each container's usage replayed from its own trace, read by the recommend reader."""
    import tempfile

    from foresize.front.cli.simulate import prometheus_scenario

    url, series, t0 = prom
    with tempfile.TemporaryDirectory() as folder:
        sc, span = prometheus_scenario(
            url,
            lookback="2d",
            end=repr(shop_end(t0)),
            step=STEP,
            namespaces=["shop"],
            cluster="a",
            token=None,
            folder=folder,
        )
    assert span == pytest.approx(2 * 86400, abs=STEP)
    workloads = {(w.kind, w.namespace, w.name): w for w in sc.workloads}
    assert set(workloads) == {("Deployment", "shop", "web"), ("StatefulSet", "shop", "postgres")}
    web = workloads[("Deployment", "shop", "web")]
    assert web.replicas == 2
    app_, proxy = (c for c in web.containers if c.name in ("app", "istio-proxy"))
    assert {c.name for c in web.containers} == {"app", "istio-proxy"}
    assert app_.requests == {"cpu": 4000, "memory": 16 * GIB}
    assert proxy.limits == {"cpu": 2000, "memory": GIB}
    # The app's CPU trace is the two pods' VMs folded as the recommend reader folds them
    # (CPU: the median of the replicas), sample by sample, on the grid of the range read
    # (simulated time 0 = its first step).
    _, c1, _ = series["1"]
    _, c5, _ = series["5"]
    trace = app_.cpu.trace
    assert trace.size == pytest.approx(2 * 86400 / STEP, abs=2)
    start = align(shop_end(t0) - 2 * 86400, shop_end(t0), STEP)[0]
    at = np.round((start + STEP * np.arange(trace.size) - t0) / STEP).astype(int)
    inside = (at >= 0) & (at < int(SHOP_DAYS * 86400 / STEP))
    folded = np.nanmedian(np.stack([c1[at[inside]], c5[at[inside]]]), axis=0)
    known = np.isfinite(folded)
    assert known.sum() > 400
    np.testing.assert_allclose(trace[inside][known], folded[known], rtol=1e-6)
    ((node),) = sc.nodes
    assert (node.cpu, node.memory) == (8000, 32 * GIB)
    ((hpa),) = sc.hpas
    assert (hpa.target_kind, hpa.target_name, hpa.min_replicas, hpa.max_replicas) == (
        "Deployment",
        "web",
        2,
        6,
    )
    assert [(m.resource, m.target_utilization) for m in hpa.metrics] == [("cpu", 70)]


def test_simulate_prometheus_compares_static_vpa_foresize(prom):
    url, _, t0 = prom
    out = CliRunner().invoke(
        app(),
        [
            "simulate",
            "--prometheus",
            url,
            "--cluster",
            "a",
            "-n",
            "shop",
            "--lookback",
            "2d",
            "--end",
            repr(shop_end(t0)),
            "--duration",
            "2h",
            "--compare",
            "static,vpa,foresize",
            "-o",
            "json",
            "--no-progress",
        ],
    )
    assert out.exit_code == 0, (out.output, out.exception)
    doc = json.loads(out.stdout)
    assert doc["policies"] == ["static", "vpa", "foresize"]
    names = {w["name"] for w in doc["runs"][0]["workloads"]}
    assert {"Deployment/shop/web", "StatefulSet/shop/postgres"} <= names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prometheus", "ftp://x"], "--prometheus: 'ftp://x' is not an http"),
        (["--prometheus", "URL", "--lookback", "30d"], "--lookback 30d"),
        (["--prometheus", "URL", "-n", "nowhere"], "--namespace: no containers in nowhere"),
        (["--prometheus", "URL", "--scenario", "sidecars"], "drop --scenario"),
    ],
)
def test_simulate_prometheus_bad_input_names_the_option(prom, args, message):
    url, _, t0 = prom
    args = [url if a == "URL" else a for a in args]
    out = CliRunner().invoke(
        app(), ["simulate", *args, "--cluster", "a", "--end", repr(shop_end(t0))]
    )
    assert isinstance(out.exception, ForesizeError), (out.output, out.exception)
    assert message in str(out.exception)
