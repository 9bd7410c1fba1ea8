"""`foresize recommend` outputs from one canonical trace: every format carries the same
recommendation; bounds, buffer, prices and --explain change what they should."""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from foresize.core.api.quantity import cpu_millis, to_bytes
from foresize.core.errors import ForesizeError
from foresize.front.cli import app

HEADER = "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes\n"
DAYS = 3


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """Two containers, 3 days at 5 minutes, seeded: a steady web app and a bursty worker."""
    rng = np.random.default_rng(11)
    n = DAYS * 288
    rows = []
    for i in range(n):
        t = 300 * i
        rows.append(
            f"{t},shop,web,web-1,app,{0.4 + 0.1 * rng.random():.4f},{int(3e8 + 1e7 * rng.random())}"
        )
        burst = 2.0 if rng.random() < 0.05 else 0.2
        rows.append(f"{t},batch,etl,etl-1,worker,{burst:.4f},{int(1e9 + 2e8 * rng.random())}")
    path = tmp_path_factory.mktemp("t") / "t.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def run(trace: Path, *args: str):
    result = CliRunner().invoke(app, ["recommend", "--traces", str(trace), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_format_carries_the_same_numbers(trace):
    doc = json.loads(run(trace, "-o", "json"))
    want = {
        (r["workload"], r["container"]): (r["cpu"]["request"], r["memory"]["request"])
        for r in doc["recommendations"]
    }
    assert set(want) == {("web", "app"), ("etl", "worker")}
    assert yaml.safe_load(run(trace, "-o", "yaml"))["recommendations"] == doc["recommendations"]
    rows = list(csv.DictReader(io.StringIO(run(trace, "-o", "csv"))))
    assert {
        (r["workload"], r["container"]): (r["cpu_request"], r["memory_request"]) for r in rows
    } == want
    md = run(trace, "-o", "markdown").splitlines()
    table = [line for line in md if line.startswith("| ")][1:]
    got = {}
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        got[(cells[0].split("/")[1], cells[1])] = cells
    assert set(got) == {("web", "app"), ("etl", "worker")}

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows: list[list[str]] = []
            self.scripts = 0

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th") and self.rows:
                self.rows[-1].append("")
            self.scripts += tag == "script"

        def handle_data(self, data):
            if self.rows and self.rows[-1]:
                self.rows[-1][-1] += data.strip()

    page = Cells()
    page.feed(run(trace, "-o", "html"))
    head, *body = page.rows
    html_rows = {(r[head.index("workload")], r[head.index("container")]): r for r in body}
    for key, (cpu, mem) in want.items():
        assert html_rows[key][head.index("cpu_request")] == cpu
        assert html_rows[key][head.index("memory_request")] == mem
    assert page.scripts == 0


def test_static_request_covers_the_history_at_the_modes_risk(trace):
    doc = json.loads(run(trace, "-o", "json"))
    worker = next(r for r in doc["recommendations"] if r["container"] == "worker")
    # Bursts to 2 cores in ~5% of the samples: a 15-minute window holds one in ~14%, so
    # p98 of the 15-minute peaks is a burst. The short-horizon forecast is shown beside it.
    assert cpu_millis(worker["cpu"]["request"]) == 2000
    assert worker["cpu"]["forecast"] is not None
    assert worker["memory"]["limit"] == worker["memory"]["request"]
    assert to_bytes(worker["memory"]["request"]) >= worker["memory"]["peak"] * 0.99


def test_bounds_buffer_and_prices(trace):
    base = {r["container"]: r for r in json.loads(run(trace, "-o", "json"))["recommendations"]}
    bounded = {
        r["container"]: r
        for r in json.loads(run(trace, "-o", "json", "--cpu-max", "1500m", "--memory-min", "2Gi"))[
            "recommendations"
        ]
    }
    assert bounded["worker"]["cpu"]["request"] == "1500m"
    assert bounded["app"]["memory"]["request"] == "2Gi"
    assert bounded["app"]["cpu"]["request"] == base["app"]["cpu"]["request"]
    buffered = {
        r["container"]: r
        for r in json.loads(run(trace, "-o", "json", "--buffer", "50"))["recommendations"]
    }
    assert (
        cpu_millis(buffered["app"]["cpu"]["request"])
        >= 1.5 * cpu_millis(base["app"]["cpu"]["request"]) - 1
    )
    priced = json.loads(run(trace, "-o", "json", "--cpu-price", "0.04", "--memory-price", "0.01"))
    app_row = next(r for r in priced["recommendations"] if r["container"] == "app")
    cpu = cpu_millis(app_row["cpu"]["request"]) / 1000
    mem = to_bytes(app_row["memory"]["request"]) / 2**30
    assert app_row["monthly_cost"] == pytest.approx(730 * (cpu * 0.04 + mem * 0.01), abs=0.01)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cpu-min", "2", "--cpu-max", "1"], "--cpu-min is above --cpu-max"),
        (["--memory-max", "lots"], "--memory-max: 'lots' is not a quantity"),
        (["--cpu-price", "-1"], "--cpu-price: must be 0 or more, got -1"),
        (["-o", "xml"], "--output: must be one of table, json, yaml, csv, markdown, html, patch"),
        (["--mode", "balance"], "--mode: unknown mode 'balance' (one of undershoot,"),
        (["--mode", "percentile"], "--mode percentile needs --percentile (e.g. 95)"),
        (["-n", "nope"], "--namespace: no series in nope (namespaces in"),
        (["--lookback", "30d"], "--lookback 30d: the recommender reads at most 14d"),
    ],
)
def test_bad_options_name_themselves(trace, args, message):
    result = CliRunner().invoke(app, ["recommend", "--traces", str(trace), *args])
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception).startswith(message)


def test_explain_says_how_each_number_came_about(trace):
    out = run(trace, "--explain")
    assert "batch/etl worker:" in out and "history: 72 h, 864 five-minute samples" in out
    doc = json.loads(run(trace, "-o", "json", "--cpu-max", "1500m", "--buffer", "10"))
    worker = next(r for r in doc["recommendations"] if r["container"] == "worker")
    cpu_line = worker["explanation"][0]
    assert cpu_line.startswith(
        "cpu: 1500m: the highest p98 of 15-minute peaks over all 72h 2000m, 1d 2000m = 2000m; "
        "+10% buffer: 2200m; bounded by --cpu-min/--cpu-max: 1500m; peak 2000m; "
        "15-minute forecast"
    ), cpu_line
