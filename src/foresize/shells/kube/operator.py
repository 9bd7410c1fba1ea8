"""`foresize operator`: everything of the real-cluster shell in one process.

Tasks, all on one asyncio loop:
- informers: list+watch of every kind into `ClusterState` (`kube/informer.py`);
- Kopf: the CRD handlers (validation verdicts in status), started once the API answers;
- the API server's version, re-read every `--version-check-interval` (upgrades);
- leader election: one Lease per shard; only shards held are planned and acted on, and
  the executor checks the Lease (within its renew deadline) before every single call;
- collector: metrics-server polling into the in-memory history (or Prometheus history);
- control loop: nothing before every informer has listed once (the cache-sync barrier);
  then suggestions, the vertical planner, the executor, the change recorder, every pass;
- admission webhooks (every replica serves them, leader or not), fed from the snapshot;
- `/metrics`, `/healthz` (liveness: the control loop makes progress) and `/readyz`
  (caches synced and a recent pass) on the metrics port and the webhook port.

Supervision (`kube/supervision.py`): every task above is meant to run until the stop
flag. If one ends or fails on its own (Kopf's observer giving up, an informer crashing),
the process stops and exits 1 so Kubernetes restarts it. SIGTERM/SIGINT set the stop flag
(re-installed after Kopf installs its own handlers, which would otherwise stop Kopf
alone): the executor refuses every call from then on, held Leases are released so another
replica takes over at once, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from foresize.core.history import SeriesKey
from foresize.shells.kube.supervision import (
    HUNG_SHUTDOWN_SLACK,
    StopOnSignal,
    Supervisor,
    drain_other_tasks,
    exit_if_shutdown_hangs,
)

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
    lease_duration: float = 15.0  # client-go's LeaseDuration
    lease_renew_deadline: float = 10.0  # client-go's RenewDeadline: stop acting after this
    lease_retry: float = 2.0  # client-go's RetryPeriod: renew this often
    kube_api_qps: float = 50.0  # client-side rate limit (VPA's --kube-api-qps)
    kube_api_burst: int = 100
    cert_check_interval: float = 300.0  # webhook certificate expiry/renewal/reload check
    # GET /version this often: the resize API (and its rules) depend on the server's
    # version, and control planes are upgraded under a running operator.
    version_check_interval: float = 60.0
    liveness_timeout: float | None = None  # /healthz fails after this; default max(5 passes, 120 s)
    # Labels of workloads (or targets) the disruption worker never touches.
    exclude_selector: dict[str, str] = field(default_factory=dict)
    eviction_rate_limit: float | None = None  # evictions/s, all targets (VPA's flag)
    eviction_rate_burst: int = 1
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
    shutdown_grace: float = 5.0  # seconds the tasks get to stop before they are cancelled


def open_history(opts: OperatorOptions, metrics: Any = None) -> Any:
    """The recommender's history: SQLite with --history-db (survives restarts), else memory.
    A damaged SQLite file is moved aside and replaced by an empty store (logged, counted)."""
    if opts.history_db:
        from foresize.adapters.history.maintenance import open_store

        return open_store(opts.history_db, metrics)
    from foresize.adapters.history.memory import UsageHistory

    return UsageHistory(step=60.0)


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


class Health:
    """What the probes answer: liveness = the control loop makes progress; readiness =
    every cache synced and a pass finished recently."""

    def __init__(self, liveness_timeout: float, clock: Any = time.monotonic) -> None:
        self.liveness_timeout = liveness_timeout
        self.clock = clock
        self.started = clock()
        self.progress_at = self.started  # last sign of life of the control loop
        self.pass_at: float | None = None  # end of the last control-loop pass
        self.synced = False
        self.failed: str | None = None  # a supervised task that ended

    def beat(self) -> None:
        self.progress_at = self.clock()

    def passed(self) -> None:
        self.pass_at = self.progress_at = self.clock()

    def live(self) -> tuple[bool, str]:
        if self.failed:
            return False, f"task ended: {self.failed}"
        stalled = self.clock() - self.progress_at
        if stalled > self.liveness_timeout:
            return False, f"control loop stalled for {stalled:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        live, why = self.live()
        if not live:
            return False, why
        if not self.synced:
            return False, "caches not synced"
        if self.pass_at is None or self.clock() - self.pass_at > self.liveness_timeout:
            return False, "no recent control-loop pass"
        return True, "ok"

    def middleware(self) -> Any:
        """aiohttp middleware answering GET /healthz and /readyz from this object (put on
        both the metrics and the webhook application)."""
        from aiohttp import web

        @web.middleware
        async def probes(request: web.Request, handler: Any) -> web.StreamResponse:
            if request.method == "GET" and request.path in ("/healthz", "/readyz"):
                ok, why = self.live() if request.path == "/healthz" else self.ready()
                return web.Response(text=why, status=200 if ok else 503)
            return await handler(request)

        return probes


class GatedExecutor:
    """The executor, asked before every call whether this replica may still act: not
    after the stop flag, and only on targets of shards whose Lease it holds right now
    (renewed within the renew deadline). A refused call is answered, not sent."""

    def __init__(
        self, inner: Any, shards: Any, stop: asyncio.Event, health: Health | None = None
    ) -> None:
        self.inner = inner
        self.shards = shards
        self.stop = stop
        self.health = health
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def server_version(self) -> tuple[int, int]:
        version: tuple[int, int] = self.inner.server_version
        return version

    def _allowed(self, target: str | None, shard: int | None = None) -> str | None:
        if self.stop.is_set():
            return "stopping"
        if self.shards is None:
            return None
        if shard is not None:
            return None if self.shards.holds(shard) else f"shard {shard} not held"
        if target:
            return None if self.shards.owns(target) else "shard not held"
        return None if self.shards.owned else "no shard held"

    def _refusal(self, why: str) -> Any:
        from foresize.core.cluster.actions import ActionResult

        self.refused += 1
        return ActionResult(ok=False, code=0, reason="NotLeader", message=f"not sent: {why}")

    async def _call(self, target: str | None, shard: int | None, name: str, *args: Any) -> Any:
        why = self._allowed(target, shard)
        if why is not None:
            return self._refusal(why)
        if self.health is not None:
            self.health.beat()
        return await getattr(self.inner, name)(*args)

    async def apply(self, action: Any) -> Any:
        return await self._call(_target_of(action), _shard_of_action(action), "apply", action)

    async def apply_guarded(self, action: Any) -> Any:
        return await self._call(
            _target_of(action), _shard_of_action(action), "apply_guarded", action
        )

    async def add_finalizer(self, kind: str, ns: str, name: str, finalizer: str) -> Any:
        return await self._call(f"{ns}/{name}", None, "add_finalizer", kind, ns, name, finalizer)

    async def remove_finalizer(self, kind: str, ns: str, name: str, finalizer: str) -> Any:
        return await self._call(f"{ns}/{name}", None, "remove_finalizer", kind, ns, name, finalizer)

    # Templates are cluster-wide work: the holder of shard 0 does it.
    async def create_object(self, kind: str, obj: dict[str, Any]) -> Any:
        return await self._call(None, 0, "create_object", kind, obj)

    async def update_object(self, kind: str, obj: dict[str, Any]) -> Any:
        return await self._call(None, 0, "update_object", kind, obj)

    async def delete_object(self, kind: str, ns: str, name: str) -> Any:
        return await self._call(None, 0, "delete_object", kind, ns, name)


def _shard_of_action(action: Any) -> int | None:
    """ClusterAIScaleTemplate status belongs to shard 0's holder."""
    from foresize.core.cluster.actions import EmitEvent, WriteTargetStatus

    if (
        isinstance(action, WriteTargetStatus | EmitEvent)
        and action.kind == "ClusterAIScaleTemplate"
    ):
        return 0
    return None


def _target_of(action: Any) -> str | None:
    """The target key an action is for (its shard decides), if it names one."""
    from foresize.core.cluster.actions import EmitEvent, WriteTargetStatus

    target = getattr(action, "target", "") or ""
    if target:
        return str(target)
    if isinstance(action, WriteTargetStatus):
        if action.kind == "ClusterAIScaleTemplate":
            return None
        return f"{action.namespace}/{action.name}"
    if isinstance(action, EmitEvent) and action.kind in ("AIScaleTarget", "DaemonSetAutoscaler"):
        return f"{action.namespace}/{action.name}"
    return None


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
    while not stop.is_set():
        try:
            await shell.run_pass()
        except Exception:  # one bad pass must not stop the operator
            log.exception("control-loop pass failed")
        health.passed()
        _export_leadership(shell, metrics, shards)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


def _export_leadership(shell: Any, metrics: Any, shards: Any) -> None:
    """foresize_leader per shard, and no per-target gauge for targets now gone or held
    by another replica."""
    from foresize.adapters.telemetry.recorder import target_key

    owned = shards.owned if shards is not None else {0}
    for i in range(shards.shards if shards is not None else 1):
        metrics.leader.labels(str(i)).set(1 if i in owned else 0)
    snap = shell.state.snapshot(0.0)
    keep = {
        target_key(t)
        for t in [*snap.targets, *snap.daemonset_autoscalers]
        if shards is None or shards.owns(target_key(t))
    }
    metrics.forget_targets(keep)


@dataclass(slots=True)
class _Components:
    """The parts of the operator process, built from its options (nothing started)."""

    api: Any
    state: Any
    metrics: Any
    health: Health
    shards: Any
    executor: Any  # the KubeExecutor itself (upkeep, certificates, server version)
    informers: Any
    store: Any  # the history store
    history: Any  # the store behind its lock: the collector writes, the pass reads
    dsa_window: Any
    shell: Any


def _build_components(opts: OperatorOptions, stop: asyncio.Event) -> _Components:
    """The parts, wired: the API client (no writes once stopping, but the Lease release),
    the cache, metrics, probes, Leases, executor, informers, history and the shell."""
    from foresize.adapters.telemetry.metrics import ForesizeMetrics
    from foresize.adapters.timezones import SYSTEM_ZONES
    from foresize.core.lifecycle.daemonset import UsageWindow
    from foresize.core.vertical.policy import WorkerConfig
    from foresize.shells.kube.api import KubeApi
    from foresize.shells.kube.executor import KubeExecutor
    from foresize.shells.kube.handlers import WATCHED, parse_foresize
    from foresize.shells.kube.informer import Informer, Informers
    from foresize.shells.kube.leader import ShardManager
    from foresize.shells.kube.shell import KubeShell, Locked
    from foresize.shells.kube.state import ClusterState

    identity = opts.identity or os.environ.get("POD_NAME") or socket.gethostname()
    api = (
        KubeApi.from_url(opts.server)
        if opts.server
        else KubeApi.from_environment(opts.kubeconfig, opts.context)
    )
    api.configure(qps=opts.kube_api_qps, burst=opts.kube_api_burst)

    def no_writes_after_stop(method: str, path: str) -> str | None:
        # A call that passed the executor's gate may still wait for the rate limit:
        # once stopping, only the Lease release goes out.
        if stop.is_set() and method != "GET" and "/leases" not in path:
            return "stopping"
        return None

    api.veto = no_writes_after_stop
    state = ClusterState(
        target_parser=parse_foresize,
        pause_namespace=opts.namespace,
        pause_configmap=opts.pause_configmap,
    )
    metrics = ForesizeMetrics()
    health = Health(opts.liveness_timeout or max(5 * opts.interval, 120.0))
    shards = ShardManager(
        api,
        opts.namespace,
        identity,
        shards=opts.shards,
        lease_duration=opts.lease_duration,
        renew_interval=opts.lease_retry,
        renew_deadline=opts.lease_renew_deadline,
        max_shards=opts.max_shards,
    )
    executor = KubeExecutor(api, pod_lookup=state.pod, instance=identity)
    informers = Informers([Informer(api, state, w) for w in WATCHED])
    store = open_history(opts, metrics)
    # Written by the collector on this loop, read by the pass in its worker thread.
    history = Locked(store)
    dsa_window = Locked(UsageWindow())
    shell = KubeShell(
        state,
        GatedExecutor(executor, shards, stop, health),
        metrics=metrics,
        shards=shards,
        history=history,
        suggest_interval=opts.suggest_interval,
        worker_config=WorkerConfig(
            time_zones=SYSTEM_ZONES,
            exclude_selector=dict(opts.exclude_selector),
            eviction_rate_limit=opts.eviction_rate_limit,
            eviction_rate_burst=opts.eviction_rate_burst,
        ),
    )
    shell.dsa_window = dsa_window
    return _Components(
        api, state, metrics, health, shards, executor, informers, store, history, dsa_window, shell
    )


def _start_tasks(
    supervisor: Supervisor,
    parts: _Components,
    opts: OperatorOptions,
    stop: asyncio.Event,
    reinstall_signals: Callable[[], None],
) -> None:
    """Start every task of the module docstring but the webhook's."""
    from foresize.adapters.history.metrics_server import (
        DaemonSetSink,
        HistorySink,
        MetricsServerPoller,
    )

    if opts.history_db:  # retention/downsampling off the loop; an Event if it was recovered
        from foresize.adapters.history.maintenance import history_upkeep

        pod_name = os.environ.get("POD_NAME")
        upkeep = history_upkeep(parts.store, stop, parts.executor.apply, opts.namespace, pod_name)
        supervisor.start(upkeep, "history upkeep")
    for informer_task in parts.informers.tasks(stop):
        supervisor.adopt(informer_task)
    supervisor.start(_versioned_start(parts, opts, stop, reinstall_signals), "kopf")
    if opts.prometheus:
        loader = PrometheusHistory(opts.prometheus, parts.history)
        supervisor.start(loader.run(stop, opts.suggest_interval), "prometheus history")
    else:
        sinks: list[Any] = [
            HistorySink(parts.history),
            DaemonSetSink(parts.dsa_window, parts.state),
        ]
        poller = MetricsServerPoller(
            parts.api, sinks, state=parts.state, interval=opts.collect_interval
        )
        supervisor.start(poller.run(stop), "metrics-server poller")
    supervisor.start(parts.shards.run(stop), "leader election")
    supervisor.start(
        follow_server_version(parts.executor, parts.state, stop, opts.version_check_interval),
        "server version",
    )
    supervisor.start(watch_pause(parts.api, parts.state, opts, stop), "pause flag")
    supervisor.start(
        control_loop(
            parts.shell,
            parts.informers,
            stop,
            opts.interval,
            parts.health,
            parts.metrics,
            parts.shards,
        ),
        "control loop",
    )


async def _versioned_start(
    parts: _Components,
    opts: OperatorOptions,
    stop: asyncio.Event,
    reinstall_signals: Callable[[], None],
) -> None:
    """The server version, then Kopf: both need the API server to answer."""
    from foresize.shells.kube.handlers import build_registry

    api, executor = parts.api, parts.executor
    if not await wait_for_api(api, stop):
        return
    try:
        version = await executor.detect_server_version()
        log.info("API server %d.%d", *version)
    except Exception as exc:
        log.warning(
            "could not read the server version (%s); assuming %s",
            exc,
            executor.server_version,
        )
    parts.state.server_version = executor.server_version
    registry = build_registry(
        server=opts.server,
        lightkube_config=None if opts.server else api.client.config,
    )
    await run_kopf(registry, stop, asyncio.Event(), reinstall_signals)


class _Servers:
    """The operator's HTTP servers. Each is kept here as soon as it exists, so `stop`
    also cleans up one that failed to start."""

    def __init__(self) -> None:
        self.runners: list[Any] = []  # aiohttp AppRunners
        self.webhook: Any = None  # WebhookServer

    async def serve_metrics(self, parts: _Components, opts: OperatorOptions) -> None:
        """/metrics, /healthz and /readyz on the metrics port."""
        from aiohttp import web

        metrics_app = parts.metrics.aiohttp_app()
        metrics_app.middlewares.append(parts.health.middleware())
        metrics_runner = web.AppRunner(metrics_app, access_log=None)
        await metrics_runner.setup()
        self.runners.append(metrics_runner)
        await web.TCPSite(metrics_runner, opts.metrics_host, opts.metrics_port).start()
        log.info("metrics on %s:%d/metrics", opts.metrics_host, opts.metrics_port)

    async def serve_webhook(
        self,
        supervisor: Supervisor,
        parts: _Components,
        opts: OperatorOptions,
        stop: asyncio.Event,
    ) -> None:
        """The admission webhooks (and the probes) on the webhook port, with the tasks
        that keep their index and their certificate current."""
        from foresize.shells.webhook.server import AdmissionState, WebhookServer, create_app

        admission = AdmissionState()
        supervisor.start(
            refresh_admission_index(admission, parts.state, parts.health, stop),
            "admission index",
        )
        # AdmissionState is the state provider (callable); pods sized at admission are
        # counted and get an Event on their target, like every request change.
        metrics = parts.metrics
        app = create_app(
            admission,
            on_bad_request=lambda reason: metrics.webhook_bad_requests.labels(reason).inc(),
            on_pod_change=parts.shell.recorder.admitted,
        )
        app.middlewares.append(parts.health.middleware())
        app.middlewares.append(metrics.webhook_middleware())
        certificate = await _webhook_tls(opts, parts.api, metrics, parts.executor)
        ssl_context = certificate.context if certificate is not None else None
        if certificate is not None:
            supervisor.start(certificate.run(stop, opts.cert_check_interval), "webhook certificate")
        self.webhook = WebhookServer(
            app, host=opts.webhook_host, port=opts.webhook_port, ssl_context=ssl_context
        )
        await self.webhook.start()
        parts.state.admission_health = admission_health(self.webhook, certificate)
        log.info(
            "webhooks on %s:%d (tls=%s)",
            opts.webhook_host,
            self.webhook.port,
            ssl_context is not None,
        )

    async def stop(self) -> None:
        if self.webhook is not None:
            await self.webhook.stop()
        for runner in self.runners:
            await runner.cleanup()


async def refresh_admission_index(
    admission: Any, state: Any, health: Health, stop: asyncio.Event, period: float = 2.0
) -> None:
    """Rebuild the webhook's index from the cache every `period` s, once the caches have
    synced (an index from a partial cache would mislead)."""
    while not stop.is_set():
        if health.synced:
            try:
                admission.update_from_snapshot(state.snapshot(time.time()))
            except Exception as exc:
                log.warning("admission index refresh failed: %s", exc)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), period)


async def run_operator(
    opts: OperatorOptions, stop: asyncio.Event | None = None, *, bounded_exit: bool = False
) -> int:
    """Run until SIGTERM/SIGINT or `stop` (returns 0), or until a task fails (returns 1).
    `bounded_exit` (the real process): once stopping, a shutdown that hangs past the grace
    plus `HUNG_SHUTDOWN_SLACK` ends the process with exit 1 and every thread's stack."""
    stop = stop or asyncio.Event()
    # One INFO line per API request (the HTTP client's) drowns the operator's own log.
    for noisy in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    signals = StopOnSignal(stop)
    signals.install()
    parts = _build_components(opts, stop)
    supervisor = Supervisor()
    _start_tasks(supervisor, parts, opts, stop, signals.install)
    servers = _Servers()
    try:
        await servers.serve_metrics(parts, opts)
        if opts.webhook:
            await servers.serve_webhook(supervisor, parts, opts, stop)
        # Supervision: every task runs until stop; one that ends on its own ends us.
        failed = await supervisor.watch(stop)
        if failed is not None:
            parts.health.failed = failed
    except Exception as exc:
        log.error("operator failed to start: %s", exc)
        parts.health.failed = "startup"
    finally:
        stop.set()
        log.info("stopping")
        if bounded_exit:
            exit_if_shutdown_hangs(opts.shutdown_grace + HUNG_SHUTDOWN_SLACK)
        await supervisor.stop_all(opts.shutdown_grace)
        await servers.stop()
        await parts.api.close()
    if parts.health.failed:
        return 1
    log.info("stopped")
    return 0


async def run_operator_process(opts: OperatorOptions) -> int:
    """`foresize operator`'s event loop, the operator's alone: `run_operator` with the
    bounded exit, then the tasks still running (Kopf's, still stopping) are given
    `LEFTOVER_TASKS_GRACE` to end before they are cancelled, rather than left to asyncio.run's
    clean-up, which can hang on them (see `kube/supervision.py`); any left is logged."""
    code = await run_operator(opts, bounded_exit=True)
    for task in await drain_other_tasks():
        log.error("still running after the shutdown (the exit may hang): %s", task)
    return code


def admission_health(webhook: Any, certificate: Any) -> Callable[[float], bool] | None:
    """now -> is this replica's pod webhook serving with a valid certificate? The vertical
    worker holds evictions while it is not (`ClusterSnapshot.admission_healthy`). Every
    replica serves the same certificate from the shared Secret, so this replica's server
    stands for the Service's. None without a webhook here (served elsewhere): the circuit
    breaker is then the only guard."""
    if webhook is None:
        return None

    def healthy(now: float) -> bool:
        if not webhook.serving:
            return False
        not_after = getattr(certificate, "not_after", 0.0) if certificate is not None else 0.0
        return not not_after or now < not_after

    return healthy


async def _webhook_tls(opts: OperatorOptions, api: Any, metrics: Any, executor: Any) -> Any:
    """Files given on the command line, else the shared Secret, else None: plain HTTP
    (development only). Returns the `WebhookCertificate` that keeps it current."""
    from foresize.shells.kube.tls import WebhookCertificate

    if not (opts.tls_cert and opts.tls_key) and not opts.tls_secret:
        log.warning("no TLS configured: webhooks served over plain HTTP (development only)")
        return None
    certificate = WebhookCertificate(
        api,
        namespace=opts.namespace,
        secret=None if opts.tls_cert else opts.tls_secret,
        service=opts.webhook_service,
        configuration=opts.webhook_configuration,
        cert_manager=opts.cert_manager,
        cert_file=opts.tls_cert,
        key_file=opts.tls_key,
        metrics=metrics,
        emit=executor.apply,
    )
    await certificate.start()
    return certificate
