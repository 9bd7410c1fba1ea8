"""Usage history from Prometheus (cAdvisor and kube-state-metrics series), read-only.

PromQL range queries, per container of every pod, on a grid of `step` aligned to
multiples of the step since the epoch (the same data give the same points whatever the
second of the run):

- CPU cores: from the CPU-seconds counter's last sample in each step (its value by
  `last_over_time`, its time by `timestamp()`), the average usage between the last sample
  of the step before and that of the step, computed here (`counter_rates`), not by the
  store's `rate()`: Prometheus extrapolates a rate to its window's edges and
  VictoriaMetrics does not, so the same samples read differently on the two; raw samples
  read the same. A point needs a sample in its step and the one before, so the step must
  be at least twice the scrape interval (`scrape_interval` measures it; `foresize
  recommend` refuses a finer step).
- Memory bytes: `max_over_time(container_memory_working_set_bytes[step - 1ms])`: the peak
  working set within the step (the window stops short of the previous step's sample).
- OOM kills: the counters themselves, last value per step, differenced here so no kill
  falls between two query windows: cAdvisor's `container_oom_events_total` and
  kube-state-metrics' restarts whose last termination reason is OOMKilled at that step.
  One kill seen by both is one kill (`merge_kills`).
- CPU throttling: throttled periods / periods (CFS), per container, from the counters'
  last samples per step as CPU (the same on every store).
- Current requests and limits (`kube_pod_container_resource_requests`/`_limits`) and
  each workload's kind (`kube_pod_owner`, `kube_replicaset_owner`), from
  kube-state-metrics when it is scraped.

Duplicate series of one container (a duplicate scrape, cgroup-v1's `image=""` copy, a
second cluster with the same pod name under a federated Prometheus) are folded by `max`,
never summed; `cluster_label`/`cluster` keep one cluster. Pods are folded into their
workload (owner from `kube_pod_owner` when kube-state-metrics is there, else the
controller naming conventions) and history is keyed by workload and container, the
replicas folded at each step as every shell folds them (`foresize.adapters.history.aggregate`:
CPU the median across replicas, memory the maximum), as the recommender consumes it
(`foresize.adapters.history.traces.TraceSeries`). Samples from a pod's first 2 minutes are
dropped so start-up spikes do not inflate forecasts.

Every query runs under one `QueryBudget` (`adapters.history.query_budget`): bounded
concurrency, range chunking (a day and at most 10,000 points a query), a series limit per
answer and retries with back-off on 429/503; an error names the query that failed. The
HTTP side is `adapters.history.prometheus_client`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from foresize.adapters.history.prometheus_client import PrometheusClient
from foresize.adapters.history.prometheus_series import (
    JOB_GROUP_METRIC_LABEL,
    ContainerHistory,
    HPARecord,
    PodSeries,
    Resources,
    Scope,
    align,
    counter_increases,
    counter_rates,
    fold_max,
    fold_to_workloads,
    job_group_note,
    max_per_container,
    merge_kills,
    pod_workloads,
    promql_duration,
    workload_kinds_and_replicas,
    workload_of,
)
from foresize.core.cluster.jobs import JOB_GROUP_LABEL
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey

log = logging.getLogger("foresize.adapters.history")

KSM_HAS_OWNER = 'owner_kind!~"|<none>"'
"""The owner series of an object that has an owner: kube-state-metrics writes one series
with `owner_kind="<none>"` for an object without (a bare pod, a bare ReplicaSet), which
is no workload to fold pods into."""

STARTUP_EXCLUSION = 120.0  # seconds of a new pod's life left out of history
RATE_SAMPLES = 2
"""The step must be at least twice the scrape interval: a CPU point needs a counter sample
in its step and in the step before, and at one scrape a step a jittered scrape leaves
steps without one, so points go missing depending on where the grid falls."""


def _identity(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A series' labels without its name, which `last_over_time` keeps on some stores and
    `timestamp()` drops: what pairs two queries' answers about one series."""
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


class PrometheusReader(PrometheusClient):
    """What `foresize recommend --prometheus` reads of cAdvisor and kube-state-metrics, over
    the client's HTTP and budget, folded into a `ContainerHistory`."""

    def __init__(
        self, url: str, *, startup_exclusion: float = STARTUP_EXCLUSION, **client: Any
    ) -> None:
        super().__init__(url, **client)
        self.startup_exclusion = startup_exclusion

    # ------------------------------------------------------------------ queries
    @staticmethod
    def cpu_counter_queries(selector: str, step: float) -> tuple[str, str]:
        """The CPU-seconds counter's last sample in each step, per series: its value (the
        window stops short of the previous step's sample) and its time (`timestamp()` of
        a plain selector is the sample's own time on Prometheus and VictoriaMetrics)."""
        metric = f"container_cpu_usage_seconds_total{selector}"
        return (
            f"last_over_time({metric}[{promql_duration(step - 0.001)}])",
            f"timestamp({metric})",
        )

    @staticmethod
    def memory_query(selector: str, step: float) -> str:
        return (
            "max by (namespace, pod, container) "
            f"(max_over_time(container_memory_working_set_bytes{selector}"
            f"[{promql_duration(step - 0.001)}]))"
        )

    @staticmethod
    def counter_query(metric: str, selector: str, step: float) -> str:
        """The counter's last value in each step (duplicates folded by max)."""
        return (
            "max by (namespace, pod, container) "
            f"(last_over_time({metric}{selector}[{promql_duration(step - 0.001)}]))"
        )

    @staticmethod
    def oom_reason_query(selector: str, step: float) -> str:
        inner = selector[1:-1]
        sel = "{" + ",".join(p for p in (inner, 'reason="OOMKilled"') if p) + "}"
        return (
            "max by (namespace, pod, container) "
            f"(last_over_time(kube_pod_container_status_last_terminated_reason{sel}"
            f"[{promql_duration(step - 0.001)}]))"
        )

    async def owners(
        self, at: float, session: Any = None, scope: Scope | None = None, window: float = 300.0
    ) -> dict[tuple[str, str], tuple[str, str]]:
        """(namespace, pod) -> (owner kind, owner name) from kube-state-metrics, if scraped:
        every pod seen in the `window` before `at`. A ReplicaSet's pod is given the
        ReplicaSet's own owner where `kube_replicaset_owner` names it: a Deployment's or an
        Argo Rollout's, which the ReplicaSet's name alone does not tell apart."""
        scope = scope or Scope()
        matchers = ",".join(p for p in (scope.matchers(False), KSM_HAS_OWNER) if p)
        span = promql_duration(window)
        pods, replicasets = await asyncio.gather(
            self.query(f"last_over_time(kube_pod_owner{{{matchers}}}[{span}])", at, session),
            self.query(f"last_over_time(kube_replicaset_owner{{{matchers}}}[{span}])", at, session),
        )
        above: dict[tuple[str, str], tuple[str, str]] = {}
        for item in replicasets:
            m = item.get("metric", {})
            if m.get("namespace") and m.get("replicaset") and m.get("owner_name"):
                above[(m["namespace"], m["replicaset"])] = (m["owner_kind"], m["owner_name"])
        out = {}
        for item in pods:
            m = item.get("metric", {})
            if m.get("namespace") and m.get("pod"):
                owner = (m.get("owner_kind", ""), m.get("owner_name", ""))
                if owner[0] == "ReplicaSet":
                    owner = above.get((m["namespace"], owner[1]), owner)
                out[(m["namespace"], m["pod"])] = owner
        return out

    async def pod_labels(
        self, at: float, window: float, scope: Scope, session: Any = None
    ) -> dict[tuple[str, str], dict[str, str]]:
        """(namespace, pod) -> its labels from `kube_pod_labels` (keys as kube-state-metrics
        writes them, `label_` + the key with every other character as `_`)."""
        result = await self.query(
            f"last_over_time(kube_pod_labels{{{scope.matchers(False)}}}[{promql_duration(window)}])",
            at,
            session,
        )
        out: dict[tuple[str, str], dict[str, str]] = {}
        for item in result:
            m = item.get("metric", {})
            labels = {k[len("label_") :]: v for k, v in m.items() if k.startswith("label_")}
            out.setdefault((m.get("namespace", ""), m.get("pod", "")), {}).update(labels)
        return out

    async def job_groups(
        self, at: float, window: float, scope: Scope, session: Any = None
    ) -> dict[tuple[str, str], dict[str, str]]:
        """(namespace, pod) -> {`foresize.io/job-group`: its value} of every pod whose
        `kube_pod_labels` carries the label (`JOB_GROUP_METRIC_LABEL`): what puts a bare
        Job's pod in its job group (`cluster.jobs`)."""
        matchers = ",".join(
            p for p in (scope.matchers(False), f'{JOB_GROUP_METRIC_LABEL}!=""') if p
        )
        result = await self.query(
            f"last_over_time(kube_pod_labels{{{matchers}}}[{promql_duration(window)}])",
            at,
            session,
        )
        out: dict[tuple[str, str], dict[str, str]] = {}
        for item in result:
            m = item.get("metric", {})
            if m.get("namespace") and m.get("pod") and m.get(JOB_GROUP_METRIC_LABEL):
                out[(m["namespace"], m["pod"])] = {JOB_GROUP_LABEL: m[JOB_GROUP_METRIC_LABEL]}
        return out

    async def resources(
        self, at: float, window: float, scope: Scope, session: Any = None
    ) -> dict[tuple[str, str, str], Resources]:
        """(namespace, pod, container) -> requests and limits, newest in `window` before `at`."""
        out: dict[tuple[str, str, str], Resources] = {}
        for kind in ("requests", "limits"):
            # An empty scope has no matchers: no leading comma (a PromQL parse error).
            matchers = ",".join(p for p in (scope.matchers(False), 'resource=~"cpu|memory"') if p)
            q = (
                "max by (namespace, pod, container, resource) (last_over_time("
                f"kube_pod_container_resource_{kind}{{{matchers}}}[{promql_duration(window)}]))"
            )
            for item in await self.query(q, at, session):
                m = item.get("metric", {})
                key = (m.get("namespace", ""), m.get("pod", ""), m.get("container", ""))
                res = out.setdefault(key, Resources())
                value = float(item["value"][1])
                setattr(res, f"{m.get('resource')}_{kind[:-1]}", value)
        return out

    async def nodes(
        self, at: float, window: float, scope: Scope, session: Any = None
    ) -> dict[str, dict[str, float]]:
        """node -> allocatable cpu (cores) and memory (bytes) from kube-state-metrics, the
        newest in `window` before `at` (the cluster matcher applies; namespaces do not)."""
        cluster = Scope((), scope.cluster_label, scope.cluster).matchers(False)
        matchers = ",".join(p for p in (cluster, 'resource=~"cpu|memory"') if p)
        q = (
            "max by (node, resource) (last_over_time("
            f"kube_node_status_allocatable{{{matchers}}}[{promql_duration(window)}]))"
        )
        out: dict[str, dict[str, float]] = {}
        for item in await self.query(q, at, session):
            m = item.get("metric", {})
            if m.get("node"):
                out.setdefault(m["node"], {})[m.get("resource", "")] = float(item["value"][1])
        return out

    async def hpas(
        self, at: float, window: float, scope: Scope, session: Any = None
    ) -> list[HPARecord]:
        """The HorizontalPodAutoscalers kube-state-metrics saw in `window` before `at`: their
        target, bounds and resource-utilisation targets (percent)."""
        matchers = scope.matchers(False)
        span = promql_duration(window)
        info, low, high, metric = await asyncio.gather(
            self.query(
                f"last_over_time(kube_horizontalpodautoscaler_info{{{matchers}}}[{span}])",
                at,
                session,
            ),
            self.query(
                f"last_over_time(kube_horizontalpodautoscaler_spec_min_replicas{{{matchers}}}[{span}])",
                at,
                session,
            ),
            self.query(
                f"last_over_time(kube_horizontalpodautoscaler_spec_max_replicas{{{matchers}}}[{span}])",
                at,
                session,
            ),
            self.query(
                "last_over_time(kube_horizontalpodautoscaler_spec_target_metric{"
                + ",".join(p for p in (matchers, 'metric_target_type="utilization"') if p)
                + f"}}[{span}])",
                at,
                session,
            ),
        )

        def key(item: dict[str, Any]) -> tuple[str, str]:
            m = item.get("metric", {})
            return m.get("namespace", ""), m.get("horizontalpodautoscaler", "")

        lows = {key(i): int(float(i["value"][1])) for i in low}
        highs = {key(i): int(float(i["value"][1])) for i in high}
        targets: dict[tuple[str, str], dict[str, float]] = {}
        for i in metric:
            name = i.get("metric", {}).get("metric_name", "")
            if name in ("cpu", "memory"):
                targets.setdefault(key(i), {})[name] = float(i["value"][1])
        out = []
        for i in info:
            m = i.get("metric", {})
            k = key(i)
            if not k[1] or not m.get("scaletargetref_name"):
                continue
            out.append(
                HPARecord(
                    namespace=k[0],
                    name=k[1],
                    target_kind=m.get("scaletargetref_kind", "Deployment"),
                    target_name=m["scaletargetref_name"],
                    min_replicas=lows.get(k, 1),
                    max_replicas=highs.get(k, max(lows.get(k, 1), 1)),
                    utilization=targets.get(k, {}),
                )
            )
        return sorted(out, key=lambda h: (h.namespace, h.name))

    async def cpu_series(
        self, selector: str, start: float, end: float, step: float, session: Any = None
    ) -> list[PodSeries]:
        """CPU cores per container on the grid: at each point, the average usage between
        the counter's last sample in the step before and its last sample in this step
        (`counter_rates`), per series, duplicates folded by max."""
        values_query, times_query = self.cpu_counter_queries(selector, step)
        before = start - step  # the last sample before the first point's step
        values, times = await asyncio.gather(
            self.query_range(values_query, before, end, step, session),
            self.query_range(times_query, before, end, step, session),
        )
        sample_times = {_identity(labels): (ts, vs) for labels, ts, vs in times}
        out = []
        for labels, ts, vs in values:
            when = sample_times.get(_identity(labels))
            if when is None:
                continue
            grid, rates = counter_rates(ts, vs, when[0], when[1], step)
            keep = grid >= start
            out.append(
                PodSeries(
                    labels.get("namespace", ""),
                    labels.get("pod", ""),
                    labels.get("container", ""),
                    grid[keep],
                    rates[keep],
                )
            )
        return max_per_container(out)

    async def throttling_series(
        self, selector: str, start: float, end: float, step: float, session: Any = None
    ) -> list[PodSeries]:
        """The share of CFS periods throttled in each step, at every step with CFS data
        (unthrottled steps are 0, not missing: a filter to the throttled steps alone made
        the mean over them the share of a container throttled in a tenth of a percent of
        its periods read as 49%, ux.md N2): the throttled-periods counter's rise over the
        periods counter's, between their last samples in the step before and in this step
        (one scrape carries both), per series, duplicates folded by max. From the samples,
        as `cpu_series`, so every store gives the same share."""
        window = promql_duration(step - 0.001)
        throttled, periods = await asyncio.gather(
            *(
                self.query_range(
                    f"last_over_time({metric}{selector}[{window}])",
                    start - step,
                    end,
                    step,
                    session,
                )
                for metric in (
                    "container_cpu_cfs_throttled_periods_total",
                    "container_cpu_cfs_periods_total",
                )
            )
        )
        of_periods = {_identity(labels): (ts, vs) for labels, ts, vs in periods}
        out = []
        for labels, ts, vs in throttled:
            both = of_periods.get(_identity(labels))
            if both is None:
                continue
            # Per step (the samples' own times do not matter: both rises span the same).
            t_grid, t_rise = counter_rates(ts, vs, ts, ts, step)
            p_grid, p_rise = counter_rates(both[0], both[1], both[0], both[0], step)
            grid, at_t, at_p = np.intersect1d(t_grid, p_grid, return_indices=True)
            keep = (p_rise[at_p] > 0) & (grid >= start)
            share = np.minimum(t_rise[at_t][keep] / p_rise[at_p][keep], 1.0)
            out.append(
                PodSeries(
                    labels.get("namespace", ""),
                    labels.get("pod", ""),
                    labels.get("container", ""),
                    grid[keep],
                    share,
                )
            )
        return max_per_container(out)

    async def pod_series(
        self, query: str, start: float, end: float, step: float, session: Any = None
    ) -> list[PodSeries]:
        rows = await self.query_range(query, start, end, step, session)
        return [
            PodSeries(
                labels.get("namespace", ""),
                labels.get("pod", ""),
                labels.get("container", ""),
                ts,
                vs,
            )
            for labels, ts, vs in rows
        ]

    def exclude_startup(self, series: list[PodSeries], start: float, step: float) -> None:
        """Drop each new pod's first `startup_exclusion` seconds (pods that appeared inside
        the range; a pod already running at `start` has no start-up inside it)."""
        first: dict[tuple[str, str], float] = {}
        for s in series:
            if s.timestamps.size:
                k = (s.namespace, s.pod)
                first[k] = min(first.get(k, math.inf), float(s.timestamps[0]))
        for s in series:
            born = first.get((s.namespace, s.pod), math.inf)
            if born > start + step:
                keep = s.timestamps >= born + self.startup_exclusion
                s.timestamps, s.values = s.timestamps[keep], s.values[keep]

    async def scrape_interval(self, at: float, scope: Scope, session: Any = None) -> float | None:
        """The scrape interval of cAdvisor's CPU counters in the hour before `at`: that of
        the densest series (series with gaps look sparser than they were scraped); None
        when no counter has two samples there."""
        q = (
            "min(3600 / (count_over_time(container_cpu_usage_seconds_total"
            f"{{{scope.matchers()}}}[1h]) - 1))"
        )
        result = await self.query(q, at, session)
        if not result:
            return None
        value = float(result[0]["value"][1])
        return value if math.isfinite(value) and value > 0 else None

    async def kills(
        self, selector: str, start: float, end: float, step: float, session: Any
    ) -> dict[tuple[str, str, str], list[float]]:
        """Kill times per (namespace, pod, container) in (start, end], each kill once."""
        ksm_selector = selector.replace('container!="",container!="POD"', 'container!=""')
        before = start - step  # the counters' value before the first step
        cadvisor, restarts, reasons = await asyncio.gather(
            self.query_range(
                self.counter_query("container_oom_events_total", selector, step),
                before,
                end,
                step,
                session,
            ),
            self.query_range(
                self.counter_query("kube_pod_container_status_restarts_total", ksm_selector, step),
                before,
                end,
                step,
                session,
            ),
            self.query_range(self.oom_reason_query(ksm_selector, step), before, end, step, session),
        )

        def key(labels: dict[str, str]) -> tuple[str, str, str]:
            return (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))

        from_cadvisor: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for labels, ts, vs in cadvisor:
            for t, n in counter_increases(ts, vs):
                from_cadvisor[key(labels)] += [t] * n
        oom_at = {key(labels): set(ts[vs >= 1].tolist()) for labels, ts, vs in reasons}
        from_ksm: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for labels, ts, vs in restarts:
            k = key(labels)
            for t, n in counter_increases(ts, vs):
                if t in oom_at.get(k, ()):
                    from_ksm[k] += [t] * n
        out = {}
        for k in set(from_cadvisor) | set(from_ksm):
            times = merge_kills(from_cadvisor.get(k, []), from_ksm.get(k, []), step)
            times = [t for t in times if start <= t <= end]
            if times:
                out[k] = times
        return out

    async def read(
        self,
        start: float,
        end: float,
        step: float = 300.0,
        namespaces: Iterable[str] | None = None,
        scope: Scope | None = None,
    ) -> ContainerHistory:
        """CPU, memory, OOM kills, throttling and current resources for every container
        in the range (on the grid of `step` inside [start, end])."""
        if step <= 0:
            raise ForesizeError(f"--step must be positive, got {step}")
        if scope is None:
            scope = Scope(tuple(n for n in (namespaces or []) if n))
        start, end = align(start, end, step)
        if end <= start:
            raise ForesizeError(f"empty time range: start {start} is not before end {end}")
        selector = "{" + scope.matchers() + "}"
        window = end - start + step
        async with self._session() as session:
            (cpu, mem, owners, kills, throttled, resources), groups = await asyncio.gather(
                asyncio.gather(
                    self.cpu_series(selector, start, end, step, session),
                    self.pod_series(self.memory_query(selector, step), start, end, step, session),
                    self.owners(end, session, scope, window),
                    self.kills(selector, start, end, step, session),
                    self.throttling_series(selector, start, end, step, session),
                    self.resources(end, window, scope, session),
                ),
                self.job_groups(end, window, scope, session),
            )
            labels = (
                await self.pod_labels(end, window, scope, session)
                if scope.selector is not None
                else None
            )
        keep: set[tuple[str, str]] | None = None
        if labels is not None:
            keep = {pod for pod, lab in labels.items() if scope.selector.matches(lab)}
            cpu, mem, throttled = (
                [s for s in group if (s.namespace, s.pod) in keep]
                for group in (cpu, mem, throttled)
            )
            kills = {k: v for k, v in kills.items() if (k[0], k[1]) in keep}
        # The start-up rule applies per pod, judged on every series of the pod.
        self.exclude_startup([*cpu, *mem], start, step)
        history = ContainerHistory(pods=len({(s.namespace, s.pod) for s in [*cpu, *mem]}))
        # A bare Job's pod labelled with a job group is a run of the group (`cluster.jobs`).
        workloads = pod_workloads(owners, groups)
        note = job_group_note(workloads, len(groups))
        if note is not None:
            log.warning("%s", note)
            history.notes.append(note)
        history.series = fold_to_workloads(cpu, mem, workloads)

        def series_key(ns: str, pod: str, container: str) -> SeriesKey:
            return workload_of(workloads, ns, pod).key(ns, container)

        for (ns, pod, container), times in kills.items():
            history.oom_kills.setdefault(series_key(ns, pod, container), []).extend(times)
        for times in history.oom_kills.values():
            times.sort()
        for key, (ts, vs) in fold_max(throttled, workloads).items():
            history.throttling[key] = (ts, vs)
        workload_kinds_and_replicas([*cpu, *mem], workloads, history)
        # Every container with requests or limits in the range keeps them, usage or not:
        # one without a single reading is listed as such, not left out (ux.md N4). The
        # label selector, matched on kube_pod_labels, applies to them as to the usage.
        for (ns, pod, container), res in sorted(resources.items()):
            if keep is not None and (ns, pod) not in keep:
                continue
            key = series_key(ns, pod, container)
            wl = (key.namespace, key.workload)
            if wl not in history.kinds and key.kind:
                history.kinds[wl] = key.kind
            have = history.resources.setdefault(key, Resources())
            for name in ("cpu_request", "memory_request", "cpu_limit", "memory_limit"):
                value = getattr(res, name)
                if value is not None:
                    old = getattr(have, name)
                    setattr(have, name, value if old is None else max(old, value))
        return history
