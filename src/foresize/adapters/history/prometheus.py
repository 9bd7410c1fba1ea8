"""Usage history from Prometheus (cAdvisor and kube-state-metrics series), read-only.

PromQL range queries, per container of every pod, on a grid of `step` aligned to
multiples of the step since the epoch (the same data give the same points whatever the
second of the run):

- CPU cores: `rate(container_cpu_usage_seconds_total[W])` with W = 1.1 x step, so each
  point is the average usage over the step that ends at it (the extra tenth lets the
  window always hold the sample one step back; rate's extrapolation is exact for that).
  `rate` needs two samples in W, so the step must be at least twice the scrape interval
  (`scrape_interval` measures it; `foresize recommend` refuses a finer step).
- Memory bytes: `max_over_time(container_memory_working_set_bytes[step - 1ms])`: the peak
  working set within the step (the window stops short of the previous step's sample).
- OOM kills: the counters themselves, last value per step, differenced here so no kill
  falls between two query windows: cAdvisor's `container_oom_events_total` and
  kube-state-metrics' restarts whose last termination reason is OOMKilled at that step.
  One kill seen by both is one kill (`merge_kills`).
- CPU throttling: throttled periods / periods (CFS), per container.
- Current requests and limits (`kube_pod_container_resource_requests`/`_limits`) and
  each workload's kind (`kube_pod_owner`), from kube-state-metrics when it is scraped.

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
answer and retries with back-off on 429/503; an error names the query that failed.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from foresize.adapters.history.prometheus_series import (
    ContainerHistory,
    HPARecord,
    PodSeries,
    Resources,
    Scope,
    align,
    counter_increases,
    fold_max,
    fold_to_workloads,
    kind_of_owner,
    merge_kills,
    promql_duration,
    workload_kinds_and_replicas,
)
from foresize.adapters.history.query_budget import RETRIED_STATUSES, QueryBudget
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey, workload_of_pod

STARTUP_EXCLUSION = 120.0  # seconds of a new pod's life left out of history
RATE_SAMPLES = 2
"""`rate()` needs two samples in its window: the step must be at least twice the scrape
interval, or CPU points go missing depending on where the grid falls."""


@dataclass(slots=True)
class QueryStats:
    """What a reader asked of its store: the bench's evidence that it kept its budget."""

    queries: int = 0  # HTTP requests answered (retries included)
    retries: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    peak_series: int = 0  # the most series one answer held


def _short(query: str, limit: int = 160) -> str:
    """A query as an error names it: whole if short, else its start."""
    one = " ".join(query.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


class PrometheusReader:
    """PromQL over HTTP (`/api/v1/query_range`, `/api/v1/query`), under a `QueryBudget`."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
        startup_exclusion: float = STARTUP_EXCLUSION,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        ca_file: str | None = None,
        insecure_skip_verify: bool = False,
        budget: QueryBudget | None = None,
        refuse_partial: bool = False,
    ) -> None:
        self.url = url.rstrip("/")
        self.budget = budget or QueryBudget()
        # An answer with warnings (Thanos' and Mimir's partial responses: a store or
        # an ingester did not answer) is an error, and Thanos is asked not to give one.
        self.refuse_partial = refuse_partial
        self.stats = QueryStats()
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self.timeout = timeout
        self.headers = dict(headers or {})
        if bearer_token:
            self.headers["Authorization"] = f"Bearer {bearer_token}"
        if basic_auth is not None:
            import base64

            pair = f"{basic_auth[0]}:{basic_auth[1]}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self.ca_file = ca_file
        self.insecure_skip_verify = insecure_skip_verify
        self.startup_exclusion = startup_exclusion

    def _slots_here(self) -> asyncio.Semaphore:
        """The concurrency budget's semaphore, one per event loop (a reader may be used
        under several `asyncio.run`s, and a semaphore belongs to one loop)."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots = asyncio.Semaphore(self.budget.concurrency)
            self._slots_loop = loop
        return self._slots

    async def _get(self, session: Any, path: str, params: dict[str, str]) -> object:
        """The `data` of a successful answer (a ForesizeError naming the cause and the
        query otherwise), at most `budget.concurrency` at once, 429/503 retried."""
        import aiohttp

        query = params.get("query") or params.get("match[]", "")
        if self.refuse_partial:
            params = {**params, "partial_response": "false"}
        attempt = 0
        while True:
            async with self._slots_here():
                self.stats.in_flight += 1
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
                try:
                    answer = await self._get_once(session, path, params, query)
                except aiohttp.ServerDisconnectedError:
                    answer = (503, None, "the connection dropped")  # restarting: "later"
                finally:
                    self.stats.in_flight -= 1
                    self.stats.queries += 1
            if not isinstance(answer, tuple):
                return answer
            status, retry_after, text = answer
            if attempt >= self.budget.retries:
                said = " ".join(text.split())[:200] or "the store is overloaded or restarting"
                raise ForesizeError(
                    f"Prometheus {self.url}{path} answered HTTP {status} "
                    f"{attempt + 1} time{'s' * (attempt > 0)} (retried with back-off) to "
                    f"query {_short(query)!r}: {said}"
                )
            await asyncio.sleep(self.budget.wait(attempt, retry_after))
            attempt += 1
            self.stats.retries += 1

    async def _get_once(
        self, session: Any, path: str, params: dict[str, str], query: str
    ) -> object | tuple[int, str | None, str]:
        """One request: its `data`, or (status, Retry-After, body) of an answer worth a
        retry."""
        import aiohttp

        try:
            async with session.get(f"{self.url}{path}", params=params) as resp:
                text = await resp.text()
                if resp.status in RETRIED_STATUSES:
                    return resp.status, resp.headers.get("Retry-After"), text
                if resp.status != 200:
                    raise ForesizeError(self._http_error(path, resp.status, resp, text, query))
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    raise ForesizeError(
                        f"{self.url}{path} answered with something that is not JSON "
                        "(is this a Prometheus URL?)"
                    ) from None
        except TimeoutError:
            raise ForesizeError(
                f"Prometheus at {self.url} did not answer within {self.timeout:g} s "
                "(raise --timeout, or narrow the query with --namespace or --lookback)"
            ) from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ForesizeError(
                f"cannot verify the TLS certificate of {self.url}: {exc.certificate_error} "
                "(give the CA with --ca-file, or --insecure-skip-verify)"
            ) from None
        except aiohttp.ClientConnectorError as exc:
            reason = exc.os_error.strerror or str(exc.os_error) or type(exc.os_error).__name__
            raise ForesizeError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        except aiohttp.ServerDisconnectedError:
            raise  # retried by `_get`
        except aiohttp.ClientError as exc:
            reason = str(exc) or type(exc).__name__
            raise ForesizeError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error", body) if isinstance(body, dict) else body
            raise ForesizeError(f"Prometheus query failed: {error} (query {_short(query)!r})")
        warnings = body.get("warnings")
        if warnings and self.refuse_partial:
            said = "; ".join(str(w) for w in warnings) if isinstance(warnings, list) else warnings
            raise ForesizeError(
                f"{self.url}{path} answered query {_short(query)!r} with warnings, so "
                f"possibly partial data: {' '.join(str(said).split())[:200]}"
            )
        return body.get("data")

    def _result(self, data: object, path: str, query: str = "") -> list[dict[str, Any]]:
        """The `result` list of a query's `data`, at most `budget.max_series` long."""
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise ForesizeError(
                f"{self.url}{path} answered success without a result list "
                "(is this a Prometheus URL?)"
            )
        self.stats.peak_series = max(self.stats.peak_series, len(result))
        if len(result) > self.budget.max_series:
            raise ForesizeError(
                f"query {_short(query)!r} returned {len(result)} series, over the budget "
                f"of {self.budget.max_series} a query: narrow it (--namespace, --selector) "
                "or raise the series limit"
            )
        return result

    def _http_error(self, path: str, status: int, resp: Any, text: str, query: str) -> str:
        where = f"Prometheus {self.url}{path} answered HTTP {status}"
        if status in (401, 403):
            return f"{where}: not authorised (give --token, or --username and --password)"
        if "html" in resp.headers.get("Content-Type", "") or text.lstrip().startswith("<"):
            return f"{where} with an HTML page (is this a Prometheus URL?)"
        # A store's own limits (Prometheus' query.max-samples, VictoriaMetrics'
        # -search.maxUniqueTimeseries: 422) are answers to one query: name it.
        named = f" to query {_short(query)!r}" if query else ""
        return f"{where}{named}: {' '.join(text.split())[:200]}"

    def _session(self) -> Any:
        import ssl

        import aiohttp

        ssl_arg: Any = None
        if self.insecure_skip_verify:
            ssl_arg = False
        elif self.ca_file:
            try:
                ssl_arg = ssl.create_default_context(cafile=self.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ForesizeError(f"--ca-file: cannot read {self.ca_file}: {exc}") from None
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            headers=self.headers,
            connector=aiohttp.TCPConnector(ssl=ssl_arg) if ssl_arg is not None else None,
        )

    async def query_range(
        self, query: str, start: float, end: float, step: float, session: Any = None
    ) -> list[tuple[dict[str, str], np.ndarray, np.ndarray]]:
        """A range query split into chunks (`budget.range_chunk`), sent at once under the
        concurrency budget, stitched per series."""
        own = session is None
        session = session or self._session()
        try:
            merged: dict[
                tuple[tuple[str, str], ...],
                tuple[dict[str, str], list[np.ndarray], list[np.ndarray]],
            ] = {}
            chunk = self.budget.range_chunk(step)
            spans = []
            t = start
            while t <= end:
                stop = min(end, t + chunk)
                spans.append((t, stop))
                t = stop + step
            path = "/api/v1/query_range"
            asks = [
                self._get(
                    session,
                    path,
                    {"query": query, "start": repr(a), "end": repr(b), "step": repr(step)},
                )
                for a, b in spans
            ]
            answers = [await asks[0]] if len(asks) == 1 else await asyncio.gather(*asks)
            for data in answers:
                for item in self._result(data, path, query):
                    labels = item.get("metric", {})
                    values = item.get("values", [])
                    if not isinstance(labels, dict) or not isinstance(values, list):
                        raise self._wrong_shape(path, query)
                    if not values:
                        continue
                    try:
                        arr = np.asarray(values, dtype=object)
                        ts = arr[:, 0].astype(np.float64)
                        vs = np.asarray([float(v) for v in arr[:, 1]], dtype=np.float64)
                    except (TypeError, ValueError, IndexError):
                        raise self._wrong_shape(path, query) from None
                    key = tuple(sorted(labels.items()))
                    entry = merged.setdefault(key, (labels, [], []))
                    entry[1].append(ts)
                    entry[2].append(vs)
            out = []
            for labels, ts_parts, v_parts in merged.values():
                ts = np.concatenate(ts_parts)
                vs = np.concatenate(v_parts)
                ts, idx = np.unique(ts, return_index=True)
                out.append((labels, ts, vs[idx]))
            return out
        finally:
            if own:
                await session.close()

    def _wrong_shape(self, path: str, query: str) -> ForesizeError:
        return ForesizeError(
            f"{self.url}{path} answered query {_short(query)!r} with series that are not "
            "[time, value] pairs under labels (is this a Prometheus-compatible store?)"
        )

    async def query(self, query: str, at: float, session: Any = None) -> list[dict[str, Any]]:
        own = session is None
        session = session or self._session()
        try:
            data = await self._get(session, "/api/v1/query", {"query": query, "time": repr(at)})
            return self._result(data, "/api/v1/query", query)
        finally:
            if own:
                await session.close()

    async def store_time(self, session: Any = None) -> float:
        """The store's own clock: `time()` evaluated at the store's now (no `time`
        parameter), to measure the skew between the store and this process."""
        own = session is None
        session = session or self._session()
        try:
            path = "/api/v1/query"
            data = await self._get(session, path, {"query": "time()"})
            result = data.get("result") if isinstance(data, dict) else None
            try:
                # Prometheus answers a scalar [t, "t"]; VictoriaMetrics a one-sample vector
                # whose value is t less its -search.latencyOffset: its time is the clock.
                if isinstance(result, list) and result and isinstance(result[0], dict):
                    return float(result[0]["value"][0])
                return float(result[0])  # type: ignore[index]
            except (TypeError, ValueError, IndexError, KeyError):
                raise self._wrong_shape(path, "time()") from None
        finally:
            if own:
                await session.close()

    async def label_values(
        self, label: str, match: str, start: float, end: float, session: Any = None
    ) -> list[str]:
        """The values `label` takes on series matching `match` in [start, end]."""
        own = session is None
        session = session or self._session()
        try:
            path = f"/api/v1/label/{label}/values"
            data = await self._get(
                session, path, {"match[]": match, "start": repr(start), "end": repr(end)}
            )
            if not isinstance(data, list):
                raise ForesizeError(
                    f"{self.url}{path} answered success without a list of values "
                    "(is this a Prometheus URL?)"
                )
            return sorted(str(v) for v in data)
        finally:
            if own:
                await session.close()

    # ------------------------------------------------------------------ queries
    @staticmethod
    def cpu_query(selector: str, step: float) -> str:
        return (
            "max by (namespace, pod, container) "
            f"(rate(container_cpu_usage_seconds_total{selector}[{promql_duration(step * 1.1)}]))"
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

    @staticmethod
    def throttling_query(selector: str, step: float) -> str:
        """The share of CFS periods throttled in each step, at every step with CFS data:
        unthrottled steps are 0, not missing (a filter to the throttled steps alone made
        the mean over them the share of a container throttled in a tenth of a percent of
        its periods read as 49%, ux.md N2)."""
        window = promql_duration(step * 1.1)
        return (
            "max by (namespace, pod, container) "
            f"(rate(container_cpu_cfs_throttled_periods_total{selector}[{window}])) / "
            "max by (namespace, pod, container) "
            f"(rate(container_cpu_cfs_periods_total{selector}[{window}]))"
        )

    async def owners(
        self, at: float, session: Any = None, scope: Scope | None = None, window: float = 300.0
    ) -> dict[tuple[str, str], tuple[str, str]]:
        """(namespace, pod) -> (owner kind, owner name) from kube-state-metrics, if scraped:
        every pod seen in the `window` before `at`."""
        matchers = ",".join(p for p in ((scope or Scope()).matchers(False), 'owner_kind!=""') if p)
        result = await self.query(
            f"last_over_time(kube_pod_owner{{{matchers}}}[{promql_duration(window)}])", at, session
        )
        out = {}
        for item in result:
            m = item.get("metric", {})
            if m.get("namespace") and m.get("pod"):
                out[(m["namespace"], m["pod"])] = (m.get("owner_kind", ""), m.get("owner_name", ""))
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

    async def resources(
        self, at: float, window: float, scope: Scope, session: Any = None
    ) -> dict[tuple[str, str, str], Resources]:
        """(namespace, pod, container) -> requests and limits, newest in `window` before `at`."""
        out: dict[tuple[str, str, str], Resources] = {}
        for kind in ("requests", "limits"):
            q = (
                "max by (namespace, pod, container, resource) (last_over_time("
                f"kube_pod_container_resource_{kind}{{{scope.matchers(False)},"
                f'resource=~"cpu|memory"}}[{promql_duration(window)}]))'
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
            cpu, mem, owners, kills, throttled, resources = await asyncio.gather(
                self.pod_series(self.cpu_query(selector, step), start, end, step, session),
                self.pod_series(self.memory_query(selector, step), start, end, step, session),
                self.owners(end, session, scope, window),
                self.kills(selector, start, end, step, session),
                self.pod_series(self.throttling_query(selector, step), start, end, step, session),
                self.resources(end, window, scope, session),
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
        history.series = fold_to_workloads(cpu, mem, owners)

        def series_key(ns: str, pod: str, container: str) -> SeriesKey:
            return SeriesKey(ns, workload_of_pod(pod, owners.get((ns, pod))), container)

        for (ns, pod, container), times in kills.items():
            history.oom_kills.setdefault(series_key(ns, pod, container), []).extend(times)
        for times in history.oom_kills.values():
            times.sort()
        for key, (ts, vs) in fold_max(throttled, owners).items():
            history.throttling[key] = (ts, vs)
        workload_kinds_and_replicas([*cpu, *mem], owners, history)
        # Every container with requests or limits in the range keeps them, usage or not:
        # one without a single reading is listed as such, not left out (ux.md N4). The
        # label selector, matched on kube_pod_labels, applies to them as to the usage.
        for (ns, pod, container), res in sorted(resources.items()):
            if keep is not None and (ns, pod) not in keep:
                continue
            key = series_key(ns, pod, container)
            wl = (key.namespace, key.workload)
            if wl not in history.kinds and kind_of_owner(owners.get((ns, pod))):
                history.kinds[wl] = kind_of_owner(owners.get((ns, pod)))
            have = history.resources.setdefault(key, Resources())
            for name in ("cpu_request", "memory_request", "cpu_limit", "memory_limit"):
                value = getattr(res, name)
                if value is not None:
                    old = getattr(have, name)
                    setattr(have, name, value if old is None else max(old, value))
        return history
