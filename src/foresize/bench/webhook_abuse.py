"""`foresize bench webhook` under abuse: slow-loris clients, idle TLS connections, a pod
with a 10 KB malicious quantity, and the server's resident memory meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from foresize.bench.webhook_load import client_timeout


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB (Linux /proc), NaN elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return float("nan")


class SlowLoris:
    """`count` TLS connections that send a request head one byte a second and never
    finish it; each one the server cuts off is replaced at once, so `count` stay open."""

    def __init__(self, port: int, ssl_context: Any, count: int) -> None:
        self.port = port
        self.ssl = ssl_context
        self.count = count
        self.cut = 0  # connections the server closed
        self.open = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def _one(self) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.ssl)
            except OSError:
                await asyncio.sleep(0.5)
                continue
            self.open += 1
            try:
                writer.write(b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                while True:
                    try:
                        data = await asyncio.wait_for(reader.read(1024), 1.0)
                    except TimeoutError:
                        writer.write(b"a")  # one more byte of a header that never ends
                        continue
                    if not data:
                        break  # the server closed it
            except (OSError, ConnectionError):
                pass
            finally:
                self.open -= 1
                self.cut += 1
                writer.close()

    async def __aenter__(self) -> SlowLoris:
        self._tasks = [asyncio.create_task(self._one()) for _ in range(self.count)]
        for _ in range(200):  # until all are connected (or 10 s)
            if self.open >= self.count:
                break
            await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def hold_idle_connections(
    port: int, ssl_context: Any, count: int, pid: int
) -> dict[str, Any]:
    """Open `count` TLS connections that send nothing; RSS before, while open, and once
    the server has closed them all (its request-head timeout)."""
    gc.collect()
    before = rss_mib(pid)
    conns = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            conns.append(await asyncio.open_connection("127.0.0.1", port, ssl=ssl_context))
    held = rss_mib(pid)
    opened = time.monotonic()

    async def closed(reader: asyncio.StreamReader) -> bool:
        try:
            return await asyncio.wait_for(reader.read(1), 60.0) == b""
        except TimeoutError:
            return False
        except (OSError, ConnectionError):
            return True

    results = await asyncio.gather(*(closed(r) for r, _ in conns))
    took = time.monotonic() - opened
    for _, writer in conns:
        writer.close()
    await asyncio.sleep(1.0)
    return {
        "connections": len(conns),
        "closed_by_server": sum(results),
        "seconds_until_all_closed": round(took, 1),
        "rss_mib_before": before,
        "rss_mib_while_open": held,
        "rss_mib_after": rss_mib(pid),
    }


async def malicious_quantity_ms(session: Any, url: str, repeats: int = 5) -> float:
    """Median answer time of a pod whose cpu request is 10 KB of digits (the old ReDoS)."""
    pod = {
        "metadata": {"namespace": "shop"},
        "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1" * 10_000 + "x"}}}]
        },
    }
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "namespace": "shop",
                "object": pod,
            },
        }
    ).encode()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        async with session.post(url, data=body, timeout=client_timeout()) as resp:
            await resp.read()
        times.append((time.perf_counter() - start) * 1000.0)
    return round(statistics.median(times), 3)
