"""The parts of the operator process, built from its options and wired (nothing started):
the API client, the cache, metrics, probes, Leases, the gated executor, informers, the
history and the shell."""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass
from typing import Any

from foresize.shells.kube.gate import GatedExecutor, api_veto
from foresize.shells.kube.options import OperatorOptions
from foresize.shells.kube.probes import Health


def open_history(opts: OperatorOptions, metrics: Any = None, shards: Any = None) -> Any:
    """The recommender's history: a shared Prometheus-compatible store with
    --history-store (every replica reads it; the holder of shard 0 writes what is
    collected), SQLite with --history-db (survives restarts), else memory. A damaged
    SQLite file is moved aside and replaced by an empty store (logged, counted)."""
    if opts.history_store:
        from foresize.adapters.history.prometheus import PrometheusReader
        from foresize.adapters.history.remote_write import RemoteWriter
        from foresize.adapters.history.shared import SharedHistory

        url = opts.history_store.rstrip("/")
        write = opts.history_store_write
        write_url = f"{url}/api/v1/write" if write is None else write
        return SharedHistory(
            PrometheusReader(url, refuse_partial=True, auth=opts.history_store_auth),
            RemoteWriter(write_url, auth=opts.history_store_auth) if write_url else None,
            stale_after=max(600.0, 5 * opts.history_store_interval),
            writes=(lambda: shards.holds(0)) if shards is not None else (lambda: True),
        )
    if opts.history_db:
        from foresize.adapters.history.maintenance import open_store

        return open_store(opts.history_db, metrics)
    from foresize.adapters.history.memory import UsageHistory

    return UsageHistory(step=60.0)


@dataclass(slots=True)
class Components:
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


def build_components(opts: OperatorOptions, stop: asyncio.Event) -> Components:
    """The parts, wired: the API client (no writes once stopping, but the Lease release),
    the cache, metrics, probes, Leases, executor, informers, history and the shell."""
    from foresize.adapters.telemetry.metrics import ForesizeMetrics
    from foresize.adapters.timezones import SYSTEM_ZONES
    from foresize.core.cluster.boost import PodCpuWindow
    from foresize.core.lifecycle.daemonset import UsageWindow
    from foresize.core.vertical.policy import WorkerConfig
    from foresize.shells.kube.api import KubeApi
    from foresize.shells.kube.executor import KubeExecutor
    from foresize.shells.kube.handlers import WATCHED, parse_foresize
    from foresize.shells.kube.informer import Informer, Informers
    from foresize.shells.kube.leader import ShardManager
    from foresize.shells.kube.members import Members
    from foresize.shells.kube.shell import KubeShell, Locked
    from foresize.shells.kube.state import ClusterState

    identity = opts.identity or os.environ.get("POD_NAME") or socket.gethostname()
    api = (
        KubeApi.from_url(opts.server)
        if opts.server
        else KubeApi.from_environment(opts.kubeconfig, opts.context)
    )
    api.configure(qps=opts.kube_api_qps, burst=opts.kube_api_burst)

    # A call that passed the executor's gate may still wait for the rate limit, or retry
    # a 429 seconds later: each request is asked again before it goes out.
    api.veto = api_veto(stop)
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
        # Balanced: at most ceil(shards / live replicas) each, the replicas counted from
        # their member Leases (one shard needs no balance).
        members=Members(
            api,
            opts.namespace,
            identity,
            lease_duration=opts.lease_duration,
            renew_deadline=opts.lease_renew_deadline,
        )
        if opts.shards > 1
        else None,
    )
    executor = KubeExecutor(api, pod_lookup=state.pod, instance=identity)
    executor.events.metrics = metrics  # the Events dropped and folded
    informers = Informers([Informer(api, state, w, freeze=True) for w in WATCHED])
    store = open_history(opts, metrics, shards)
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
        headroom=opts.headroom,
        worker_config=WorkerConfig(
            time_zones=SYSTEM_ZONES,  # the maintenance windows read the machine's zones
            exclude_selector=dict(opts.exclude_selector),
            eviction_rate_limit=opts.eviction_rate_limit,
            eviction_rate_burst=opts.eviction_rate_burst,
            node_autoscaler=opts.node_autoscaler,
        ),
    )
    shell.dsa_window = dsa_window
    shell.pod_usage = Locked(PodCpuWindow())  # the boosts' settling, fed by the collector
    return Components(
        api, state, metrics, health, shards, executor, informers, store, history, dsa_window, shell
    )
