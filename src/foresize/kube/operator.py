"""`foresize operator`: everything of the real-cluster shell in one process.

Tasks, all on one asyncio loop:
- Kopf: watches into `ClusterState`, CRD validation, the AIScaleTarget finalizer;
- leader election: one Lease per shard; only shards held are planned and acted on;
- collector: metrics-server polling into the in-memory history (or Prometheus history);
- control loop: suggestions from history every forecast interval, the vertical planner,
  the executor, the change recorder;
- admission webhooks (every replica serves them, leader or not), fed from the snapshot;
- `/metrics` (and `/healthz`) for Prometheus.
SIGTERM/SIGINT stop everything; held Leases are released so another replica takes over
at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any

from foresize.history.traces import SeriesKey

log = logging.getLogger("foresize.operator")


@dataclass(slots=True)
class OperatorOptions:
    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    namespace: str = "foresize-system"
    identity: str = ""
    shards: int = 1
    max_shards: int | None = None
    interval: float = 30.0
    collect_interval: float = 60.0
    suggest_interval: float = 900.0
    lease_duration: float = 15.0
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    webhook: bool = True
    webhook_host: str = "0.0.0.0"
    webhook_port: int = 8443
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_secret: str | None = None  # shared Secret for the webhook certificate (in-cluster)
    webhook_service: str = "foresize-webhook"
    webhook_configuration: str = "foresize"
    cert_manager: bool = False
    prometheus: str | None = None
    history_db: str | None = None  # SQLite history file (default: in memory)
    pause_configmap: str = "foresize-pause"
    shutdown_grace: float = 15.0  # seconds each task gets to stop before it is cancelled


def open_history(opts: OperatorOptions, metrics: Any = None) -> Any:
    """The recommender's history: SQLite with --history-db (survives restarts), else memory.
    A damaged SQLite file is moved aside and replaced by an empty store (logged, counted)."""
    if opts.history_db:
        from foresize.history.maintenance import open_store

        return open_store(opts.history_db, metrics)
    from foresize.history.memory import UsageHistory

    return UsageHistory(step=60.0)


class PrometheusHistory:
    """Loads Prometheus history into the recommender's history before each forecast round
    (per workload/container peaks at a 5-minute step; 14 days back)."""

    def __init__(
        self, url: str, store: Any, lookback: float = 14 * 86400.0, step: float = 300.0
    ) -> None:
        from foresize.history.prometheus import PrometheusReader

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
            if hasattr(self.store, "indices"):
                self.store.append(t, self.store.indices(keys), cpu=cpu, memory=mem)
            else:
                self.store.append(t, keys, "cpu", cpu)
                self.store.append(t, keys, "memory", mem)
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


async def run_operator(opts: OperatorOptions, stop: asyncio.Event | None = None) -> None:
    import kopf
    from aiohttp import web

    from foresize.history.metrics_server import DaemonSetSink, HistorySink, MetricsServerPoller
    from foresize.kube.api import KubeApi
    from foresize.kube.executor import KubeExecutor
    from foresize.kube.handlers import build_registry, parse_foresize
    from foresize.kube.leader import ShardManager
    from foresize.kube.shell import KubeShell
    from foresize.kube.state import ClusterState
    from foresize.telemetry.metrics import ForesizeMetrics

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)

    identity = opts.identity or os.environ.get("POD_NAME") or socket.gethostname()
    api = (
        KubeApi.from_url(opts.server)
        if opts.server
        else KubeApi.from_environment(opts.kubeconfig, opts.context)
    )
    state = ClusterState(
        target_parser=parse_foresize,
        pause_namespace=opts.namespace,
        pause_configmap=opts.pause_configmap,
    )
    executor = KubeExecutor(api, pod_lookup=state.pod, instance=identity)
    try:
        version = await executor.detect_server_version()
        log.info("API server %d.%d", *version)
    except Exception as exc:
        log.warning(
            "could not read the server version (%s); assuming %s", exc, executor.server_version
        )
    state.server_version = executor.server_version
    metrics = ForesizeMetrics()
    shards = ShardManager(
        api,
        opts.namespace,
        identity,
        shards=opts.shards,
        lease_duration=opts.lease_duration,
        renew_interval=max(1.0, opts.lease_duration / 3),
        max_shards=opts.max_shards,
    )
    tasks: list[asyncio.Task] = []
    history = open_history(opts, metrics)
    if opts.history_db:  # retention/downsampling off the loop, and the Event of a recovery
        from foresize.history.maintenance import recovery_event, run_maintenance

        tasks.append(asyncio.create_task(run_maintenance(history, stop)))
        event = recovery_event(history, opts.namespace, os.environ.get("POD_NAME"))
        if event is not None:
            tasks.append(asyncio.create_task(executor.apply(event)))
    from foresize.lifecycle.daemonset import UsageWindow

    dsa_window = UsageWindow()
    if opts.prometheus:
        loader = PrometheusHistory(opts.prometheus, history)
        tasks.append(asyncio.create_task(loader.run(stop, opts.suggest_interval)))
    else:
        sinks: list[Any] = [HistorySink(history), DaemonSetSink(dsa_window, state)]
        poller = MetricsServerPoller(api, sinks, state=state, interval=opts.collect_interval)
        tasks.append(asyncio.create_task(poller.run(stop)))
    shell = KubeShell(
        state,
        executor,
        metrics=metrics,
        shards=shards,
        history=history,
        suggest_interval=opts.suggest_interval,
    )
    shell.dsa_window = dsa_window
    registry = build_registry(
        state,
        server=opts.server,
        lightkube_config=None if opts.server else api.client.config,
    )
    ready = asyncio.Event()
    tasks.append(
        asyncio.create_task(
            kopf.operator(
                registry=registry,
                clusterwide=True,
                standalone=True,  # Foresize elects leaders per shard with its own Leases
                stop_flag=stop,
                ready_flag=ready,
            )
        )
    )
    tasks.append(asyncio.create_task(shards.run(stop)))
    tasks.append(asyncio.create_task(watch_pause(api, state, opts, stop)))
    tasks.append(asyncio.create_task(shell.run(stop, opts.interval)))

    runners: list[web.AppRunner] = []
    metrics_runner = web.AppRunner(metrics.aiohttp_app(), access_log=None)
    await metrics_runner.setup()
    await web.TCPSite(metrics_runner, opts.metrics_host, opts.metrics_port).start()
    runners.append(metrics_runner)
    log.info("metrics on %s:%d/metrics", opts.metrics_host, opts.metrics_port)

    if opts.webhook:
        from foresize.admission.server import AdmissionState, WebhookServer, create_app

        admission = AdmissionState()

        async def refresh_index() -> None:
            while not stop.is_set():
                try:
                    admission.update_from_snapshot(state.snapshot(time.time()))
                except Exception as exc:
                    log.warning("admission index refresh failed: %s", exc)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 2.0)

        tasks.append(asyncio.create_task(refresh_index()))
        app = create_app(admission)  # AdmissionState is the state provider (callable)
        app.middlewares.append(metrics.webhook_middleware())
        ssl_context = await _webhook_tls(opts, api)
        webhook = WebhookServer(
            app, host=opts.webhook_host, port=opts.webhook_port, ssl_context=ssl_context
        )
        await webhook.start()
        log.info(
            "webhooks on %s:%d (tls=%s)", opts.webhook_host, webhook.port, ssl_context is not None
        )
    else:
        webhook = None

    try:
        await stop.wait()
    finally:
        log.info("stopping")
        stop.set()
        for task in tasks:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, opts.shutdown_grace)
        if webhook is not None:
            await webhook.stop()
        for runner in runners:
            await runner.cleanup()
        await api.close()


async def _webhook_tls(opts: OperatorOptions, api: Any) -> Any:
    """Files given on the command line, else the shared Secret, else plain HTTP (dev)."""
    import tempfile
    from pathlib import Path

    from foresize.admission.certs import server_ssl_context
    from foresize.kube.tls import webhook_ssl_context

    if opts.tls_cert and opts.tls_key:
        return server_ssl_context(opts.tls_cert, opts.tls_key)
    if opts.tls_secret:
        return await webhook_ssl_context(
            api,
            namespace=opts.namespace,
            secret=opts.tls_secret,
            service=opts.webhook_service,
            configuration=opts.webhook_configuration,
            cert_manager=opts.cert_manager,
            workdir=Path(tempfile.mkdtemp(prefix="foresize-tls-")),
        )
    log.warning("no TLS configured: webhooks served over plain HTTP (development only)")
    return None
