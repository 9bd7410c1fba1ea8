"""Builders shared by the tests (moved out of test_metrics_server.py)."""

from __future__ import annotations

import gzip

from foresize.adapters.history.metrics_server import (
    Sample,
)
from support.paths import DATA

CRANE = DATA / "traces" / "crane-dsp" / "input0.csv.gz"


NOW = 1_780_000_000.0


def crane_samples(days: float) -> list[Sample]:
    rows = []
    with gzip.open(CRANE, "rt") as f:
        next(f)
        for line in f:
            t, v = line.split(",")
            rows.append((float(t), float(v)))
    rows = rows[: int(days * 1440)]
    shift = NOW - rows[-1][0]  # the trace's last minute is "now"
    out = []
    for i, (t, v) in enumerate(rows):
        for pod in ("web-7d9f8-aaaaa", "web-7d9f8-bbbbb"):
            # Two replicas: the second runs 10% lower (history: the median of the two for
            # CPU, the max for memory).
            scale = 1.0 if pod.endswith("a") else 0.9
            out.append(
                Sample(
                    t + shift,
                    "shop",
                    "web",
                    pod,
                    "app",
                    v / 100.0 * scale,
                    300 * 2**20 + (i % 60) * 2**20,
                )
            )
    return out
