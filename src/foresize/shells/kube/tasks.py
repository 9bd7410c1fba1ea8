"""The operator's long-running tasks besides the informers, the Leases and the servers: the
control loop behind its cache-sync barrier, the pause flag, the API server's version, Kopf,
the Prometheus history loader and the admission index refresh. Each runs until the stop
flag (supervised: `kube/supervision.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from foresize.core.history import SeriesKey
from foresize.shells.kube.leader import shard_of
from foresize.shells.kube.options import OperatorOptions
from foresize.shells.kube.probes import Health

log = logging.getLogger("foresize.operator")


class PrometheusHistory:
    """Loads Prometheus history into the recommender's history before each forecast round
    (per workload/container peaks at a 5-minute step; 14 days back)."""

    def __init__(
        self, url: str, store: Any, lookback: float = 14 * 86400.0, step: float = 300.0
    ) -> None:
        from foresize.adapters.history.prometheus import PrometheusReader

        self.reader = PrometheusReader(url)
        self.store = store
        self.lookback = lookback
        self.step = step
        self._loaded_until: float | None = None

    async def refresh(self, now: float) -> int:
        import numpy as np

        start = self._loaded_until if self._loaded_until is not None else now - self.lookback
        history = await self.reader.read(start, now, self.step)
        rows: dict[float, dict[SeriesKey, tuple[float, float]]] = {}
        for s in history.series:
            mem = s.memory if s.memory is not None else np.full(s.timestamps.size, np.nan)
            for t, c, m in zip(s.timestamps, s.cpu, mem, strict=True):
                rows.setdefault(float(t), {})[s.key] = (float(c), float(m))
        for t in sorted(rows):
            keys = list(rows[t])
            cpu = np.array([rows[t][k][0] for k in keys])
            mem = np.array([rows[t][k][1] for k in keys])
            self.store.write_poll(t, keys, cpu, mem)
        for key, times in history.oom_kills.items():
            for t in times:
                self.store.record_event(key, "oom", t, 0.0)
        self._loaded_until = now
        return len(rows)

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            try:
                await self.refresh(time.time())
            except Exception as exc:
                log.warning("Prometheus history refresh failed: %s", exc)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


async def follow_history_store(
    store: Any, history: Any, metrics: Any, stop: asyncio.Event, interval: float
) -> None:
    """The shared history store (`adapters.history.shared`), every `interval` s: send what
    was collected since (the holder of shard 0 only: `SharedHistory.writes`), then read
    what the store holds since the last read. A failed read leaves the history not whole
    (the pass keeps the last suggestions); a failed write keeps the samples for the next
    attempt, up to the outbox's bound. Neither ever stops the operator."""
    from foresize.adapters.history.shared import refresh

    while not stop.is_set():
        outbox = history.take_outbox()
        try:
            await store.push(outbox)
        except Exception as exc:
            history.requeue(outbox)
            metrics.history_store_failures.labels("write").inc()
            log.warning("remote write to the history store failed: %s", exc)
        dropped = store.dropped_samples - store.dropped_reported
        if dropped > 0:
            metrics.history_store_dropped.inc(dropped)
            store.dropped_reported = store.dropped_samples
        problem = await refresh(history, store, time.time())
        if problem is not None:
            metrics.history_store_failures.labels("read").inc()
            log.warning("reading the history store failed: %s", problem)
        metrics.history_store_skew.set(store.skew)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
    with contextlib.suppress(Exception):  # what the last interval collected, once more
        await asyncio.wait_for(store.push(history.take_outbox()), 5.0)


async def watch_pause(
    api: Any, state: Any, opts: OperatorOptions, stop: asyncio.Event, period: float = 10.0
) -> None:
    """The cluster-wide pause flag: the ConfigMap in the operator's own namespace (read
    with a namespaced GET, so the Role on that namespace is all it needs)."""
    path = f"/api/v1/namespaces/{opts.namespace}/configmaps/{opts.pause_configmap}"
    while not stop.is_set():
        try:
            resp = await api.request("GET", path)
            if resp.ok and isinstance(resp.body, dict):
                state.apply_event("ConfigMap", "MODIFIED", resp.body)
            elif resp.code == 404:
                state.apply_event(
                    "ConfigMap",
                    "DELETED",
                    {"metadata": {"name": opts.pause_configmap, "namespace": opts.namespace}},
                )
        except Exception as exc:
            log.warning("reading the pause ConfigMap failed: %s", exc)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), period)


async def wait_for_api(api: Any, stop: asyncio.Event, cap: float = 10.0) -> bool:
    """Until GET /version answers (backing off to `cap` s) or stop; True when it did."""
    delay = 0.5
    while not stop.is_set():
        try:
            resp = await api.request("GET", "/version")
            if resp.ok:
                return True
        except Exception as exc:
            log.info("API server not reachable yet: %s", exc)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        delay = min(cap, delay * 2)
    return False


async def follow_server_version(
    executor: Any, state: Any, stop: asyncio.Event, period: float
) -> None:
    """Re-read the API server's version every `period` s into the executor (its resize
    checks) and the cache (the snapshot the pass plans with), so an upgrade of the control
    plane (say 1.32 -> 1.33, when `pods/resize` arrives) is acted on without a restart. A
    failed read keeps the last version known."""
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), period)
        if stop.is_set():
            return
        before = executor.server_version
        try:
            version = await executor.detect_server_version()
        except Exception as exc:
            log.warning("could not re-read the server version (%s); keeping %s", exc, before)
            continue
        if version != before:
            log.info("API server version changed: %d.%d -> %d.%d", *before, *version)
        state.server_version = version


async def run_kopf(
    registry: Any, stop: asyncio.Event, ready: asyncio.Event, on_spawned: Any
) -> None:
    """Kopf's root tasks, run until one ends. Kopf installs SIGTERM/SIGINT handlers that
    would stop Kopf alone: `on_spawned` runs right after, to put ours back. Kopf's own
    `run_tasks` is not used: at its end it cancels every task of the loop (ours too)."""
    import kopf

    tasks = await kopf.spawn_tasks(
        registry=registry,
        clusterwide=True,
        standalone=True,  # Foresize elects leaders per shard with its own Leases
        stop_flag=stop,
        ready_flag=ready,
    )
    on_spawned()
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5.0)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    if not stop.is_set():
        names = ", ".join(sorted(t.get_name() for t in done))
        raise RuntimeError(f"Kopf stopped on its own ({names})")


async def control_loop(
    shell: Any,
    informers: Any,
    stop: asyncio.Event,
    interval: float,
    health: Health,
    metrics: Any,
    shards: Any,
) -> None:
    """The cache-sync barrier, then a pass every `interval` s until stop."""
    while not stop.is_set() and not informers.synced:
        health.beat()  # waiting for the API is progress, not a stall
        log.info("waiting for caches to sync: %s", ", ".join(informers.unsynced()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(informers.wait_synced(stop), interval)
    if stop.is_set():
        return
    health.synced = True
    metrics.cache_synced.set(1)
    log.info("caches synced; control loop starts")
    # A run's OOM kill seen on the pod watch brings the next pass forward: the kubelet
    # restarts the container after 10 s, and the pass's in-place raise must land first
    # (`core.vertical.modes.new_run_oom_kill`).
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    state = getattr(shell, "state", None)
    if state is not None:
        state.on_run_oom_kill = lambda: loop.call_soon_threadsafe(wake.set)
    while not stop.is_set():
        wake.clear()
        try:
            await shell.run_pass()
        except Exception:  # one bad pass must not stop the operator
            log.exception("control-loop pass failed")
        if stop.is_set():  # the export walks every target: not for a stopping process
            return
        health.passed()
        await _export_leadership(shell, metrics, shards)
        await _sleep_until_woken(stop, wake, interval)


async def _sleep_until_woken(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    """`seconds`, or less when `stop` or `wake` is set."""
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _export_leadership(shell: Any, metrics: Any, shards: Any) -> None:
    """foresize_leader per shard, and no per-target gauge for targets now gone or held
    by another replica. The second walks every target and every per-target label set
    (10k targets: ~100k), so it runs in a worker thread, off the loop that answers the
    webhooks and renews the Leases (prometheus_client's metrics take their own locks)."""
    owned = shards.owned if shards is not None else {0}
    for i in range(shards.shards if shards is not None else 1):
        metrics.leader.labels(str(i)).set(1 if i in owned else 0)

    count = shards.shards if shards is not None else 1  # what the loop holds now

    def forget() -> None:
        keys = shell.state.target_keys()
        metrics.forget_targets({k for k in keys if shard_of(k, count) in owned})

    await asyncio.to_thread(forget)


async def refresh_admission_index(
    admission: Any, state: Any, health: Health, stop: asyncio.Event, period: float = 2.0
) -> None:
    """Rebuild the webhook's index from the cache every `period` s, once the caches have
    synced (an index from a partial cache would mislead). In a worker thread: the snapshot
    and the index grow with the cluster, and this loop answers the webhooks and renews the
    Leases (the cache's lock makes the snapshot safe there; the new index replaces the old
    one in one assignment)."""

    def rebuild() -> None:
        admission.update_from_snapshot(state.snapshot(time.time()))

    while not stop.is_set():
        if health.synced:
            try:
                await asyncio.to_thread(rebuild)
            except Exception as exc:
                log.warning("admission index refresh failed: %s", exc)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), period)
