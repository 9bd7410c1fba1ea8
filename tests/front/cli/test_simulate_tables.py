"""`foresize simulate` tables fit the terminal: narrow by default (requests, then risk),
every column with `--wide`; numbers are never cut (no ellipsis), at 80 and 120 columns."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from foresize.front.cli import app


def run(*args: str, width: int):
    return CliRunner().invoke(
        app,
        ["simulate", "-d", "2h", "--no-progress", *args],
        env={"COLUMNS": str(width)},
    )


@pytest.mark.parametrize("width", [80, 120])
def test_summary_and_comparison_fit_the_width(width: int):
    out = run("--compare", "static,foresize", width=width)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    assert "…" not in out.stdout
    # Risk has its own table, with the restarts the resizes caused and resizes per day.
    assert any(line.startswith("risk") for line in lines)
    assert "restarts" in out.stdout and "/day" in out.stdout
    # Every workload is there (a long name folds onto a second line, never cut).
    for name in ("shop/web", "shop/cache", "batch/nightly-re", "kube-system/log-a"):
        assert sum(name in line for line in lines) == 4, name  # 2 policies x 2 tables


def test_wide_is_one_table_with_every_column():
    out = run("--policy", "static", "--wide", width=80)
    assert out.exit_code == 0, out.output
    assert "risk" not in [line.strip() for line in out.stdout.splitlines()]
    for head in ("breaker", "preemp-", "pending", "resize", "slack"):
        assert head in out.stdout
    assert max(len(line.rstrip()) for line in out.stdout.splitlines()) > 80


def test_output_json_and_the_old_json_flag_agree():
    import json

    a = run("--policy", "static", "-o", "json", width=80)
    b = run("--policy", "static", "--json", width=80)
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert json.loads(a.stdout) == json.loads(b.stdout)
    bad = run("-o", "xml", width=80)
    assert str(bad.exception) == "--output: must be one of table, json, not 'xml'"


def test_a_run_inside_the_learning_period_says_why_it_saved_nothing():
    """ux.md R18: `simulate -d 1d` printed `vs static: CPU requests -0.0%, ...` and nothing
    about min_lookback_to_scale (24 h): Foresize resizes nothing before it."""
    out = run("--policy", "foresize", width=120)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("vs static:"))
    note = " ".join(lines[i + 1 :])
    assert "min_lookback_to_scale, 24 h, of history: this 2 h run is its learning period" in note
    from foresize.front.report.flow import learning_note

    assert "the last 12 h of this 36 h run" in learning_note(
        {"policy": "foresize:cost_optimized", "duration_hours": 36.0}
    )
    assert learning_note({"policy": "foresize", "duration_hours": 72.0}) is None
    assert learning_note({"policy": "vpa", "duration_hours": 2.0}) is None
