"""`foresize recommend` never writes a value a careful engineer would not apply (ux.md N3),
lists containers with requests but no usage (N4), totals the selection (N5) and says why
a memory forecast is far above the peak (N9).

The rows are built from seeded synthetic series on the 5-minute grid (what the Prometheus
reader returns, one point per step), with today's requests and limits as
kube-state-metrics gives them."""

from __future__ import annotations

import json

import numpy as np
import yaml

from foresize.adapters.history.prometheus_series import Resources
from foresize.core.api.quantity import MIB
from foresize.core.history import SeriesKey, TraceSeries
from foresize.front.report.recommendation_renderings import render
from foresize.front.report.recommendations import (
    MIN_CPU_LIMIT,
    MIN_CPU_REQUEST,
    MIN_MEMORY_REQUEST,
    TOTAL,
    Bounds,
    build_rows,
)

STEP = 300.0
T0 = 1795000500.0  # a multiple of 900 s
DAYS = 3
QUANTILES = {"cpu": 0.98, "memory": 0.999}


def series(ns: str, wl: str, container: str, cpu: np.ndarray, memory: np.ndarray) -> TraceSeries:
    t = T0 + STEP * np.arange(cpu.size)
    return TraceSeries(SeriesKey(ns, wl, container), t, cpu, memory)


def steady(cores: float, mib: float, seed: int, days: int = DAYS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = days * 288
    return cores * rng.uniform(0.8, 1.0, n), mib * MIB * rng.uniform(0.9, 1.0, n)


def rows_for(specs, **kw):
    """specs: (namespace, workload, container, cpu, memory, Resources today)."""
    live = [series(ns, wl, c, cpu, mem) for ns, wl, c, cpu, mem, _ in specs]
    resources = {SeriesKey(ns, wl, c): res for ns, wl, c, _, _, res in specs if res}
    resources.update(kw.pop("extra_resources", {}))
    return build_rows(live, [], quantiles=QUANTILES, resources=resources, **kw)


def test_an_idle_container_gets_the_floors_never_zero():
    """The audit's batch/worker-15: 0 CPU in every step gave `requests.cpu: '0'` beside a
    500m limit the strategic-merge patch left in place; worker-21: `2m` / `2m`."""
    cpu, mem = np.zeros(DAYS * 288), np.full(DAYS * 288, 3.0 * MIB)
    tiny = np.full(DAYS * 288, 0.002)
    (idle, small) = rows_for(
        [
            ("batch", "worker-15", "worker", cpu, mem, Resources(0.5, 2**30, 0.5, None)),
            ("batch", "worker-21", "worker", tiny, mem, Resources(0.5, 2**30, 0.5, None)),
        ]
    )
    for row in (idle, small):
        assert row.cpu.request == MIN_CPU_REQUEST == 10
        assert row.memory.request == MIN_MEMORY_REQUEST
        assert row.cpu.limit == 500  # today's limit, never lowered
    docs = list(yaml.safe_load_all(render([idle, small], "patch", **RENDER)))
    for doc in docs:
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["requests"] == {"cpu": "10m", "memory": "64Mi"}
        assert container["resources"]["limits"]["cpu"] == "500m"
    # The user's own bound still wins over the default floor.
    (lowered,) = rows_for(
        [("batch", "w", "worker", tiny, mem, None)],
        bounds=Bounds(cpu_min=1, memory_min=4 * MIB),
    )
    assert lowered.cpu.request == 2 and lowered.memory.request == 4 * MIB


RENDER = {"source": "test", "mode": "balanced", "quantiles": QUANTILES}


def test_a_cpu_limit_is_never_lowered_from_averages_and_rises_with_the_request():
    """worker-11: request = limit = 500m, 5-minute averages near 70m: the patch wrote a
    73m limit (a 7 ms quota per 100 ms period) for a container the note called throttled."""
    quiet, mem = steady(0.07, 500, 1)
    busy, _ = steady(0.8, 500, 2)
    small_limit, _ = steady(0.005, 500, 3)
    rows = rows_for(
        [
            ("batch", "worker-11", "worker", quiet, mem, Resources(0.5, 2**30, 0.5, 2**30)),
            ("shop", "api", "app", busy, mem, Resources(0.2, 2**30, 0.4, None)),
            ("shop", "tiny", "app", small_limit, mem, Resources(0.02, 2**30, 0.03, None)),
        ],
        throttling={
            SeriesKey("batch", "worker-11", "worker"): (np.zeros(3), np.array([0.6, 0.2, 0.1]))
        },
    )
    worker = next(r for r in rows if r.workload == "worker-11")
    api = next(r for r in rows if r.workload == "api")
    tiny = next(r for r in rows if r.workload == "tiny")
    assert worker.cpu.request < 100 and worker.cpu.limit == 500
    assert any("never lowered" in step for step in worker.cpu.steps)
    assert any("throttled" in note for note in worker.notes)
    # A request above today's limit takes the limit with it, at today's 1:2 ratio.
    assert api.cpu.request > 400 and api.cpu.limit == 2 * api.cpu.request
    # A limit below the lowest quota worth writing is raised to it.
    assert tiny.cpu.limit == MIN_CPU_LIMIT
    for row in rows:
        assert row.cpu.limit >= row.cpu.request


def test_the_memory_limit_is_never_below_a_working_set_the_history_reached():
    """The request is the p99.9 of 15-minute peaks, which can sit below the single highest
    peak; a limit there is a kill when that level comes back."""
    cpu, mem = steady(0.1, 400, 4, days=14)
    mem[500] = 900 * MIB  # one step far above the rest: above the p99.9 of 1344 blocks
    (row,) = rows_for([("shop", "web", "app", cpu, mem, Resources(0.1, 2**30, None, 2**30))])
    assert row.memory.request < 900 * MIB
    assert row.memory.limit == 900 * MIB


def test_containers_with_requests_and_no_usage_are_listed_with_a_note():
    cpu, mem = steady(0.1, 400, 5)
    silent = SeriesKey("mesh", "svc-4", "istio-proxy")
    rows = rows_for(
        [("mesh", "svc-4", "app", cpu, mem, Resources(0.5, 2**30, None, None))],
        extra_resources={silent: Resources(0.1, 128 * MIB, 2.0, 2**30)},
        kinds={("mesh", "svc-4"): "Deployment"},
    )
    assert [(r.container, r.no_usage) for r in rows] == [("app", False), ("istio-proxy", True)]
    proxy = rows[1]
    assert proxy.cpu.current_request == 100 and proxy.memory.current_limit == 2**30
    assert proxy.cpu.request is None and proxy.severity == "unset"
    assert any(note.startswith("no usage in the history") for note in proxy.notes)
    table = render(rows, "table", **RENDER)
    assert "! mesh/svc-4 istio-proxy: no usage in the history" in table
    # Nothing is patched for it, and its requests count as unchanged in the totals.
    (doc,) = yaml.safe_load_all(render(rows, "patch", **RENDER))
    assert [c["name"] for c in doc["spec"]["template"]["spec"]["containers"]] == ["app"]
    totals = json.loads(render(rows, "json", **RENDER))["totals"]["all"]
    assert totals["cpu_current"] - totals["cpu_recommended"] == 500 - rows[0].cpu.request


def test_recommend_totals_per_namespace_and_overall():
    specs = []
    for i, (ns, wl) in enumerate([("shop", "web"), ("shop", "api"), ("batch", "etl")]):
        cpu, mem = steady(0.1 * (i + 1), 300 * (i + 1), 10 + i)
        specs.append((ns, wl, "app", cpu, mem, Resources(1.0, 2**30, None, None)))
    rows = rows_for(specs, replicas={("shop", "web"): 3})
    doc = json.loads(render(rows, "json", **RENDER))
    work = doc["workloads"]  # the existing key, unchanged
    totals = doc["totals"]
    shop = next(t for t in totals["namespaces"] if t["namespace"] == "shop")
    assert shop["workload"] == "*" and shop["replicas"] == 4
    for field in ("cpu_current", "cpu_recommended", "memory_current", "memory_recommended"):
        assert totals["all"][field] == sum(w[field] for w in work)
        assert shop[field] == sum(w[field] for w in work if w["namespace"] == "shop")
    assert totals["all"]["workload"] == TOTAL
    assert totals["all"]["cpu_current"] == 5000  # 3 x 1 core + 1 + 1
    table = render(rows, "table", **RENDER, prices=None)
    lines = table.splitlines()
    total_line = next(line for line in lines if line.startswith(f"│ {TOTAL} "))
    assert "5" in total_line.split("│")[2]  # pods
    assert any(line.startswith("│ shop/* ") for line in lines)
    assert any(line.startswith("│ batch/* ") for line in lines)


def test_a_memory_forecast_far_above_the_peak_after_oom_kills_is_explained():
    """The audit's data/redis: 9 kills, peak 823Mi, `--wide` forecast 4251Mi (5.2x) with no
    word why. It is the operator's OOM floor compounding 1.2x per kill while it holds,
    replayed over kills that all came at the old limit."""
    from foresize.core.recommend.series import recommend_series

    rng = np.random.default_rng(3)
    n = 4 * 288
    cpu, mem = rng.uniform(0.04, 0.05, n), rng.uniform(700, 800, n) * MIB
    s = series("data", "redis", "main", cpu, mem)
    kills = {s.key: [float(s.timestamps[-1]) - 4 * 3600 * k - 100 for k in range(9)]}
    forecasts = recommend_series([s], oom_kills=kills)
    (row,) = build_rows([s], forecasts, quantiles=QUANTILES, oom_kills=kills)
    assert row.memory.forecast > 5 * row.memory.peak
    (note,) = [n for n in row.notes if n.startswith("15-minute memory forecast")]
    assert f"is {row.memory.forecast / row.memory.peak:.1f}x the 800Mi peak" in note
    assert "rises 1.2x with each kill while it holds (3 days)" in note
    assert "over the 9 kills of the history" in note
    assert note in render([row], "table", **RENDER, explain_rows=True, width=1000)


def test_one_unit_per_resource_in_every_cell():
    """ux.md R26: `16 → 3992m`, a Δ of `-12.0` beside `-400m`, `cpu peak 0.228` (cores)
    beside millicore requests, `21.3Gi` beside `2608Mi`. Every CPU cell is in millicores
    and every memory cell in Mi now, in the table and in --explain."""
    big, mem = steady(3.5, 20 * 1024, 20)
    small, mem2 = steady(0.2, 300, 21)
    rows = rows_for(
        [
            ("shop", "auth", "app", big, mem, Resources(16.0, 32 * 2**30, None, None)),
            ("shop", "web", "app", small, mem2, Resources(0.6, 2**30, None, None)),
        ]
    )
    table = render(rows, "table", **RENDER, wide=True, width=1000, explain_rows=True)
    lines = table.splitlines()
    head = next(line for line in lines if "cpu request" in line)
    names = [c.strip() for c in head.strip("┃").split("┃")]
    cpu_cols = [names.index(c) for c in ("cpu request", "cpu limit", "Δ cpu", "cpu peak")]
    mem_cols = [names.index(c) for c in ("memory request", "memory limit", "Δ memory", "mem peak")]
    body = [line for line in lines if line.startswith("│ shop ")]
    assert len(body) == 2
    for line in body:
        cells = [c.strip() for c in line.strip("│").split("│")]
        for i in cpu_cols:
            for part in cells[i].replace("→", " ").split():
                assert part == "-" or part.lstrip("+-±").endswith("m"), (names[i], cells[i])
                assert not part.endswith("Mi"), (names[i], cells[i])
        for i in mem_cols:
            for part in cells[i].replace("→", " ").split():
                assert part == "-" or part.lstrip("+-±").endswith("Mi"), (names[i], cells[i])
    auth = next(line for line in body if " auth " in line)
    assert "16000m → " in auth and "32768Mi → " in auth
    assert "cores" not in table and "Gi " not in table


def test_explain_says_how_replicas_were_folded():
    """ux.md R20: CPU is the median across replicas, and recommend.md did not say so."""
    cpu, mem = steady(0.3, 300, 30)
    (row,) = rows_for(
        [("frontend", "fe-3", "app", cpu, mem, None)], replicas={("frontend", "fe-3"): 2}
    )
    doc = json.loads(render([row], "json", **RENDER))
    (line,) = [x for x in doc["recommendations"][0]["explanation"] if "replicas" in x]
    assert line.startswith("2 replicas, one history: CPU the median across them at each step")
    assert "memory the max" in line
    (single,) = rows_for([("frontend", "fe-1", "app", cpu, mem, None)])
    assert not any(
        "replicas" in x
        for x in json.loads(render([single], "json", **RENDER))["recommendations"][0]["explanation"]
    )


def test_wide_splits_into_tables_that_fit_the_terminal():
    """ux.md N8: --wide needed ~210 columns and wrapped every row at 120. Now its columns
    come in as many tables as fit the width, each led by namespace, workload and
    container; one table when the terminal is wide enough."""
    from foresize.front.report.recommendation_renderings import _headers
    from foresize.front.report.recommendations import Prices

    specs = []
    for i, wl in enumerate(["checkout-frontend", "payments-ledger-writer"]):
        cpu, mem = steady(0.2 * (i + 1), 500, 40 + i)
        specs.append(("payments", wl, "istio-proxy", cpu, mem, Resources(1.0, 2**30, 2.0, 2**30)))
    rows = rows_for(specs, kinds={("payments", wl): "Deployment" for _, wl, *_ in specs})
    prices = Prices(0.04, 0.005)
    narrow = render(rows, "table", **RENDER, wide=True, width=120, prices=prices)
    lines = narrow.splitlines()
    assert max(len(line) for line in lines) <= 120
    parts = [line for line in lines if line.startswith("Foresize recommendations")]
    assert len(parts) >= 2 and parts[0].endswith(f"columns 1 of {len(parts)}")
    heads = set()
    for line in lines:
        if line.startswith("┃"):
            heads |= {c.strip() for c in line.strip("┃").split("┃")}
    assert set(_headers(True, prices)) <= heads
    for _, wl, *_ in specs:  # every part names every row
        assert sum(f"│ payments  │ {wl}" in line for line in lines) == len(parts)
    roomy = render(rows, "table", **RENDER, wide=True, width=400, prices=prices)
    assert sum(line.startswith("Foresize recommendations") for line in roomy.splitlines()) == 1
