"""Real Prometheus-compatible stores on loopback, started by the tests and `foresize bench
history-store` that need them: Debian's `prometheus` (remote-write receiver on, an
out-of-order window wide enough to take two weeks of backfill) and `victoria-metrics`
(single node), each in its own temporary data directory, stopped on exit.

`RealStore.peak_rss_mib()` is the store process' peak resident memory (VmHWM);
`reset_peak()` starts a new peak (writing 5 to /proc/PID/clear_refs, allowed for a
process we started), so a bench can tell the load's peak from the queries'.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from foresize.testing.ports import free_port

PROMETHEUS_CONFIG = """global:
  scrape_interval: 1h
scrape_configs: []
storage:
  tsdb:
    out_of_order_time_window: 30d
"""
"""No scraping (the tests write what they need), and samples up to 30 days old accepted
by remote write: Prometheus otherwise refuses samples older than the head's last hour."""


@dataclass(slots=True)
class RealStore:
    kind: str  # "prometheus" or "victoria-metrics"
    url: str  # query API base
    write_url: str  # remote write endpoint
    process: subprocess.Popen[bytes]
    log_path: Path

    def _status(self, field: str) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024.0  # kB -> MiB
        return float("nan")

    def peak_rss_mib(self) -> float:
        return self._status("VmHWM")

    def rss_mib(self) -> float:
        return self._status("VmRSS")

    def cpu_seconds(self) -> float:
        """CPU time the store process has used (user + system), its share of a loaded
        machine's cores whatever the wall time."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset_peak(self) -> None:
        with contextlib.suppress(OSError):
            Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def flush(self) -> None:
        """Make what was written visible to queries now (VictoriaMetrics buffers a second
        or so; Prometheus' head is readable at once)."""
        if self.kind == "victoria-metrics":
            with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=30):
                pass


def store_missing(kind: str) -> str | None:
    """Why the store cannot be started here (None if it can)."""
    binary = "prometheus" if kind == "prometheus" else "victoria-metrics"
    if shutil.which(binary) is None:
        return f"Debian's {binary} package is not installed (run `bash .ci/system-deps`)"
    return None


def _command(kind: str, data: Path, port: int) -> list[str]:
    if kind == "prometheus":
        config = data / "prometheus.yml"
        config.write_text(PROMETHEUS_CONFIG)
        return [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
            "--web.enable-remote-write-receiver",
        ]
    return [
        "victoria-metrics",
        f"-storageDataPath={data / 'vm'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        "-search.disableCache",  # backfilled data must show in the next query
        "-search.latencyOffset=0s",
        "-loggerLevel=ERROR",
    ]


@contextlib.contextmanager
def real_store(kind: str, data: Path, *, ready_timeout: float = 60.0) -> Iterator[RealStore]:
    """Start `kind` ("prometheus" or "victoria-metrics") with its data under `data`."""
    if kind not in ("prometheus", "victoria-metrics"):
        raise ValueError(f"unknown store {kind!r}")
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ready = f"{url}/-/ready" if kind == "prometheus" else f"{url}/health"
    log_path = data / f"{kind}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        _command(kind, data, port), stdout=log, stderr=subprocess.STDOUT, cwd=data
    )
    store = RealStore(kind, url, f"{url}/api/v1/write", proc, log_path)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            try:
                with urllib.request.urlopen(ready, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.1)
        yield store
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
