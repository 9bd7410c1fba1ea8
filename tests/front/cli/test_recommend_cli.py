"""`foresize recommend`: bad options and unreadable traces are one error naming the option
or the file and line (what `foresize.front.cli.main` prints with exit status 2), never a
traceback and never an empty table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app

HEADER = "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes\n"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(
        HEADER + "".join(f"{300 * i},shop,web,web-1,app,0.5,100000000\n" for i in range(300))
    )
    return path


def recommend(*args: str):
    return CliRunner().invoke(app, ["recommend", *args])


def test_a_good_trace_gives_a_recommendation(trace: Path):
    # The baseline the error cases below differ from by one option.
    result = recommend("--traces", str(trace), "-o", "json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["recommendations"]
    assert row["cpu"]["request"] == "500m"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--trace-format", "nope"],
            "--trace-format: unknown trace format 'nope' "
            "(one of bitbrains, crane, google2011, canonical)",
        ),
        (["--step", "0"], "--step: must be more than 0, got '0'"),
        (["--step", "-5"], "--step: '-5' is not a duration"),
        (["--buffer", "-50"], "--buffer: must be between 0 and 1000 percent, got -50"),
        (["--lookback", "-1h"], "--lookback: '-1h' is not a duration (e.g. 30s, 5m, 1h30m, 14d)"),
        (["--min-lookback", "xx"], "--min-lookback: 'xx' is not a duration"),
        (
            ["--lookback", "15d"],
            "--lookback 15d: the recommender reads at most 14d of history",
        ),
        (
            ["--start", "1970-01-02", "--end", "1970-01-01"],
            "--start 1970-01-02 is not before --end 1970-01-01",
        ),
        (
            ["--start", "1970-01-01", "--end", "1970-01-20"],
            "--start 1970-01-01: more than 14d before --end",
        ),
        (["--end", "yesterday"], "--end: 'yesterday' is not a time"),
        (["--start", "zz"], "--start: 'zz' is not a time"),
        (["--selector", "app=web"], "--selector and --cluster need --prometheus"),
        (["--cluster", "east"], "--selector and --cluster need --prometheus"),
        (["--prometheus", "http://127.0.0.1:9"], "give exactly one of --prometheus URL or"),
    ],
)
def test_bad_options_are_named(trace: Path, args: list[str], message: str):
    result = recommend("--traces", str(trace), *args)
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception).startswith(message)


def test_neither_source_is_named():
    result = recommend()
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception) == "give exactly one of --prometheus URL or --traces PATH"


def test_an_empty_prometheus_url_is_named_not_read_as_a_missing_trace():
    # `--prometheus ""` once fell through to the trace reader with no path (a TypeError).
    result = recommend("--prometheus", "")
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception) == "--prometheus: '' is not an http:// or https:// URL"


def test_a_range_without_samples_says_what_the_traces_cover(trace: Path):
    result = recommend("--traces", str(trace), "--start", "2030-01-01", "--end", "2030-01-02")
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception) == (
        f"{trace}: no samples between 2030-01-01T00:00:00Z and 2030-01-02T00:00:00Z "
        "(--start/--lookback and --end); the traces cover 1970-01-01T00:00:00Z to "
        "1970-01-02T00:55:00Z"
    )


def test_a_trace_of_garbage_lines_is_an_error_naming_the_first_bad_line(tmp_path: Path):
    path = tmp_path / "garbage.csv"
    path.write_text(HEADER + "this is garbage\n1,2\n")
    result = recommend("--traces", str(path))
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception) == (
        f"{path}: no usable series (1 files, 2 rows, 2 skipped); "
        f"first: {path}:2: expected 7 fields, got 1"
    )


def test_a_trace_in_another_format_suggests_trace_format(tmp_path: Path):
    path = tmp_path / "1.csv"
    path.write_text(
        "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\t"
        "CPU usage [%];\tMemory capacity provisioned [KB];\tMemory usage [KB];\t"
        "Disk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
        "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n"
        "1372629804;\t2;\t5851.9989;\t87.78;\t1.5;\t8218624.0;\t1034592.8;\t0;\t0;\t0;\t0\n"
    )
    result = recommend("--traces", str(path))
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception).endswith(
        "(another format? --trace-format bitbrains, crane or google2011)"
    )
