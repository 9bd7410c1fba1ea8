"""The HTTP side of reading a Prometheus-compatible store (Prometheus, VictoriaMetrics,
Thanos, Mimir): `PrometheusClient` sends PromQL to `/api/v1/query_range`, `/api/v1/query`
and the label-values API under one `QueryBudget` (`adapters.history.query_budget`:
bounded concurrency, range chunking, a series limit per answer, retries with back-off on
429/503), with the store's authentication (bearer token, basic auth, extra headers such as
a tenant's `X-Scope-OrgID`) and TLS; every error names the query that failed. What is
queried and how the answers become history is the reader's (`adapters.history.prometheus`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np

from foresize.adapters.history.query_budget import RETRIED_STATUSES, QueryBudget
from foresize.adapters.history.store_auth import StoreAuth
from foresize.core.errors import ForesizeError


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


class PrometheusClient:
    """PromQL over HTTP (`/api/v1/query_range`, `/api/v1/query`, label values), under a
    `QueryBudget`: the transport every reader of a Prometheus-compatible store shares."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        ca_file: str | None = None,
        insecure_skip_verify: bool = False,
        budget: QueryBudget | None = None,
        refuse_partial: bool = False,
        auth: StoreAuth | None = None,
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
        self.auth = auth  # headers from files, read again for every session
        if bearer_token:
            self.headers["Authorization"] = f"Bearer {bearer_token}"
        if basic_auth is not None:
            import base64

            pair = f"{basic_auth[0]}:{basic_auth[1]}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self.ca_file = ca_file
        self.insecure_skip_verify = insecure_skip_verify

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
            headers={**self.headers, **(self.auth.headers() if self.auth else {})},
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
