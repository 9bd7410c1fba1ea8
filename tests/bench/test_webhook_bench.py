"""A smoke run of `foresize bench webhook` (tiny rates and durations): the real server in
its own process answers every request, patches the autonomous share, and the JSON keeps
its stable keys. Timing is not asserted (benchmarks are not timed tests)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from foresize.front.cli import app


def test_bench_webhook_smoke_json():
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "webhook",
            "--json",
            "--rate",
            "40",
            "--duration",
            "500ms",
            "--repeats",
            "1",
            "--max-rate",
            "80",
            "--ramp-duration",
            "0.5",
            "--targets",
            "50",
            "--budget",
            "10",
            "--slow-connections",
            "5",
            "--idle-connections",
            "0",  # the idle mode waits out the server's 10 s head timeout: see test_webhook_abuse
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("rate", "requests", "errors", "p50_ms", "p99_ms", "max_rate_p99_under_10ms"):
        assert key in data
    assert set(data["noop"]) == {"p50_ms", "p99_ms"}
    assert data["rate"] == 40 and data["requests"] == 20 and data["errors"] == 0
    assert 0.5 < data["patched_share"] < 1.0  # 80% of the reviews are for autonomous targets
    assert data["handler_us"]["pod"] > 0
    abuse = data["abuse"]
    assert abuse["malicious_quantity_ms"] > 0 and abuse["rss_mib_baseline"] > 0
    slow = abuse["slow_loris"]
    assert slow["connections"] == 5 and slow["held_at_start"] == 5
    assert slow["requests"] == 20 and slow["errors"] == 0 and slow["p99_ratio_to_quiet"] > 0
    assert "idle" not in abuse
