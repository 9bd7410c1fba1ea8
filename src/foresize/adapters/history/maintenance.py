"""Keeping the SQLite history healthy while the operator runs: retention and downsampling
on a schedule, off the event loop.

Without this the file grows ~14 KB per container per day forever (a 10,000-container
cluster: ~140 MB a day). Each pass opens its own connection in a worker thread (SQLite
serialises the two writers; the collector's appends wait at most the pass's transaction),
runs `prune` then `downsample`, and reports what it did; the loop, Lease renewal and the
webhook never wait on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foresize.adapters.history.sqlite import HistoryStore
from foresize.core.cluster.actions import EmitEvent

log = logging.getLogger("foresize.adapters.history")

MAINTENANCE_INTERVAL = 3600.0
"""Prune and downsample hourly: retention is measured in days and a 1-minute chunk holds
4.8 hours, so an hourly pass keeps the file within one chunk of its steady size while
costing one short transaction an hour."""


@dataclass(frozen=True, slots=True)
class MaintenanceResult:
    pruned_chunks: int
    downsampled_chunks: int
    seconds: float


def maintain_once(store: HistoryStore, now: float) -> MaintenanceResult:
    """One pass on a fresh connection to `store`'s file (callable from any thread)."""
    started = time.monotonic()
    with HistoryStore(
        store.path,
        step=store.step,
        retention=store.retention,
        coarse_step=store.coarse_step,
        downsample_after=store.downsample_after,
    ) as own:
        pruned = own.prune(now)
        folded = own.downsample(now)
    return MaintenanceResult(pruned, folded, time.monotonic() - started)


async def run_maintenance(
    store: HistoryStore,
    stop: asyncio.Event,
    *,
    interval: float = MAINTENANCE_INTERVAL,
    clock: Callable[[], float] = time.time,
    on_pass: Callable[[MaintenanceResult], None] | None = None,
) -> None:
    """Run `maintain_once` at start and then every `interval` seconds until `stop`."""
    while not stop.is_set():
        try:
            result = await asyncio.to_thread(maintain_once, store, clock())
        except Exception as exc:  # a failed pass is retried next interval, never fatal
            log.warning("history maintenance failed: %s", exc)
        else:
            log.info(
                "history maintenance: %d chunks past retention dropped, %d downsampled (%.2fs)",
                result.pruned_chunks,
                result.downsampled_chunks,
                result.seconds,
            )
            if on_pass is not None:
                on_pass(result)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


def open_store(path: str | Path, metrics: Any = None) -> HistoryStore:
    """The operator's store at `path`: a damaged file is moved aside and an empty store
    started (one error line, `foresize_history_recoveries_total`), and samples dropped on
    read as impossible count in `foresize_history_bad_values_total`."""
    store = HistoryStore(path, recover=True)
    if store.recovered is not None:
        aside, problem = store.recovered
        log.error(
            "history store %s was damaged (%s): moved to %s, started empty", path, problem, aside
        )
        if metrics is not None:
            metrics.history_recoveries.inc()
    if metrics is not None:
        store.on_bad_values = metrics.history_bad_values.inc
    return store


def recovery_event(store: HistoryStore, namespace: str, pod: str | None) -> EmitEvent | None:
    """A Warning Event on the operator's own Pod when `store` was recovered (None when it
    was not, or when the Pod's name is unknown outside a cluster)."""
    if store.recovered is None or not pod:
        return None
    aside, problem = store.recovered
    return EmitEvent(
        namespace=namespace,
        kind="Pod",
        name=pod,
        reason="HistoryStoreRecovered",
        message=f"history store {store.path} was damaged ({problem}); moved to {aside.name} "
        "and restarted empty",
        type="Warning",
    )


async def history_upkeep(
    store: HistoryStore,
    stop: asyncio.Event,
    apply: Callable[[EmitEvent], Awaitable[Any]],
    namespace: str,
    pod: str | None,
) -> None:
    """The operator's history task: the recovery Event (if any), then `run_maintenance`
    until `stop`."""
    event = recovery_event(store, namespace, pod)
    if event is not None:
        try:
            await apply(event)
        except Exception as exc:  # the log line and the metric already tell the story
            log.warning("could not post the history recovery Event: %s", exc)
    await run_maintenance(store, stop)
