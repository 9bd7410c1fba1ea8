"""`foresize operator`: everything of the real-cluster shell in one process.

Tasks, all on one asyncio loop:
- informers: list+watch of every kind into `ClusterState` (`kube/informer.py`);
- Kopf: the CRD handlers (validation verdicts in status), started once the API answers
  (on this loop: in a thread of its own it competed with the webhook for the interpreter
  and doubled the webhook's p99, docs/scale.md);
- the API server's version, re-read every `--version-check-interval` (upgrades);
- leader election, once every informer has listed: one Lease per shard, each replica
  holding at most its share (ceil(shards / live replicas)); only shards held are planned
  and acted on, and the Lease (within its renew deadline) is checked before every call
  and again as each write goes to the socket;
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

The parts, one module each: the options (`kube/options.py`), the parts built from them
(`kube/components.py`), the tasks (`kube/tasks.py`), the probes (`kube/probes.py`), the
per-call gate on the executor (`kube/gate.py`) and the HTTP servers (`kube/servers.py`);
this module starts them, watches them and stops them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from foresize.shells.kube.components import Components, build_components
from foresize.shells.kube.options import OperatorOptions
from foresize.shells.kube.servers import Servers
from foresize.shells.kube.supervision import (
    HUNG_SHUTDOWN_SLACK,
    StopOnSignal,
    Supervisor,
    drain_other_tasks,
    exit_if_shutdown_hangs,
)
from foresize.shells.kube.tasks import (
    PrometheusHistory,
    control_loop,
    follow_history_store,
    follow_server_version,
    run_kopf,
    wait_for_api,
    watch_pause,
)

log = logging.getLogger("foresize.operator")


def _start_tasks(
    supervisor: Supervisor,
    parts: Components,
    opts: OperatorOptions,
    stop: asyncio.Event,
    reinstall_signals: Callable[[], None],
) -> None:
    """Start every task of the module docstring but the webhook's."""
    from foresize.adapters.history.metrics_server import (
        DaemonSetSink,
        HistorySink,
        MetricsServerPoller,
        PodCpuSink,
    )

    if opts.history_db:  # retention/downsampling off the loop; an Event if it was recovered
        from foresize.adapters.history.maintenance import history_upkeep

        pod_name = os.environ.get("POD_NAME")
        upkeep = history_upkeep(parts.store, stop, parts.executor.apply, opts.namespace, pod_name)
        supervisor.start(upkeep, "history upkeep")
    for informer_task in parts.informers.tasks(stop):
        supervisor.adopt(informer_task)
    supervisor.start(_versioned_start(parts, opts, stop, reinstall_signals), "kopf")
    if opts.history_store:
        supervisor.start(
            follow_history_store(
                parts.store, parts.history, parts.metrics, stop, opts.history_store_interval
            ),
            "history store",
        )
    if opts.prometheus:
        loader = PrometheusHistory(opts.prometheus, parts.history)
        supervisor.start(loader.run(stop, opts.suggest_interval), "prometheus history")
    else:
        sinks: list[Any] = [
            HistorySink(parts.history),
            DaemonSetSink(parts.dsa_window, parts.state),
        ]
        poller = MetricsServerPoller(
            parts.api,
            sinks,
            state=parts.state,
            interval=opts.collect_interval,
            startup_sinks=[PodCpuSink(parts.shell.pod_usage, parts.state)],
        )
        supervisor.start(poller.run(stop), "metrics-server poller")
    # No Lease before the caches have synced: a replica that has not listed owns nothing.
    supervisor.start(
        parts.shards.run(stop, lambda: parts.informers.wait_synced(stop)), "leader election"
    )
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
    parts: Components,
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
    _import_before_serving()
    parts = build_components(opts, stop)
    supervisor = Supervisor()
    _start_tasks(supervisor, parts, opts, stop, signals.install)
    servers = Servers()
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


def _import_before_serving() -> None:
    """Import what the start's tasks would import on the event loop once the webhook
    serves: Kopf (its import held the loop for about 200 ms at each start, the webhook's
    slowest answers at 10k pods) and what its handlers read a spec with."""
    import kopf  # noqa: F401

    import foresize.adapters.timezones
    import foresize.core.admission.validate
    import foresize.shells.kube.handlers  # noqa: F401


async def run_operator_process(opts: OperatorOptions) -> int:
    """`foresize operator`'s event loop, the operator's alone: `run_operator` with the
    bounded exit, then the tasks still running (Kopf's, still stopping) are given
    `LEFTOVER_TASKS_GRACE` to end before they are cancelled, rather than left to asyncio.run's
    clean-up, which can hang on them (see `kube/supervision.py`); any left is logged."""
    code = await run_operator(opts, bounded_exit=True)
    for task in await drain_other_tasks():
        log.error("still running after the shutdown (the exit may hang): %s", task)
    return code
