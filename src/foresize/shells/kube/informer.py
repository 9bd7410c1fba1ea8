"""List+watch informers that keep `ClusterState` current (client-go's reflector).

One `Informer` per watched kind:
1. LIST (paginated) and `ClusterState.replace` the kind with exactly what was listed: an
   object deleted while nothing was watching (a 410 gap, an outage) leaves the cache;
2. WATCH from the list's resourceVersion (with bookmarks), applying each event;
3. on `410 Gone` (the version is too old) LIST again; on any other failure back off
   (exponential with jitter) and LIST again.

`Informers.synced` is the cache-sync barrier (client-go's `WaitForCacheSync`): true once
every kind has completed its first listing. The control loop does not plan or act before
that, so a pass never sees templates and targets without their workloads.

The watches run on the event loop; a listing is decoded and converted in a worker
thread and installed under the state's lock (`ClusterState.install`), so a snapshot never
iterates a dict being changed and the loop is never held for the size of the cluster.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import gc
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from foresize.adapters.collector import without_cyclic_gc
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.state import ClusterState, Converted

log = logging.getLogger("foresize.operator")

T = TypeVar("T")

LIST_PAGE = 500  # objects per LIST page (client-go's pager default)
# Watch requests end server-side after this long and are re-opened from the last version
# (Kopf used 270 s; client-go picks 5-10 min at random).
WATCH_TIMEOUT = 270
# Backoff between failed list/watch rounds: 0.5 s doubling to 10 s, full jitter, so a
# cache is listed again within ~10 s of an outage ending (client-go: 800 ms .. 30 s).
BACKOFF_BASE = 0.5
BACKOFF_CAP = 10.0
# An optional kind whose API is not served (Argo Rollouts without its CRD) is looked for
# again this often.
OPTIONAL_RETRY = 300.0


@dataclass(frozen=True, slots=True)
class WatchedKind:
    group: str
    version: str
    plural: str
    kind: str
    optional: bool = False

    @property
    def path(self) -> str:
        if not self.group:
            return f"/api/{self.version}/{self.plural}"
        return f"/apis/{self.group}/{self.version}/{self.plural}"


class Informer:
    """LIST then WATCH one kind into `state` until `stop` is set."""

    def __init__(
        self,
        api: KubeApi,
        state: ClusterState,
        watched: WatchedKind,
        *,
        watch_timeout: int = WATCH_TIMEOUT,
        backoff_cap: float = BACKOFF_CAP,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        freeze: bool = False,
    ) -> None:
        self.api = api
        # After each listing, move every object alive into the garbage collector's
        # permanent generation (`gc.freeze`), the operator's setting: the cache is most of
        # the heap, and every full collection walked all of it with every thread stopped
        # (at 10k pods, stalls of seconds of the loop serving the webhooks and the Leases).
        # Frozen objects are still freed when no longer referenced (the cache's objects
        # hold no cycles); only a cycle that was already garbage at the freeze is kept,
        # and a listing happens at the start and after a 410, not every pass.
        self.freeze = freeze
        self.state = state
        self.watched = watched
        self.watch_timeout = watch_timeout
        self.backoff_cap = backoff_cap
        self._rng = rng or random.Random()
        self.clock = clock
        self.synced = asyncio.Event()
        self.served = True  # False: an optional kind the server does not serve
        self.lists = 0
        self.relists_after_gone = 0
        self.last_event_at: float | None = None  # clock() of the last list or watch event
        self.failures = 0  # consecutive failed rounds

    async def list(self) -> str | None:
        """LIST every page, replace the kind in the state; returns the list's version.
        None: the kind is not served (optional kinds only).

        Each page's JSON is decoded and its objects converted in a worker thread, and the
        cache takes the converted kind in one quick swap under its lock: a listing of
        100k pods is seconds of decoding and converting, and this loop also answers the
        admission webhooks and renews the Leases (kube.md N2). With `freeze` (the
        operator's setting) the cyclic collector is off for the listing: its full
        collections over the objects the listing builds stopped every thread for up to
        95 ms at 10k pods (`adapters.collector`); what is alive is frozen at the end."""
        if not self.freeze:
            return await self._list()
        with without_cyclic_gc():
            return await self._list()

    async def _list(self) -> str | None:
        converted: builtins.list[Converted] = []
        params: dict[str, str] = {"limit": str(LIST_PAGE)}
        version = ""
        while True:
            resp = await self.api.request("GET", self.watched.path, params=params, raw=True)
            if resp.code == 404 and self.watched.optional:
                return None
            if not resp.ok or not isinstance(resp.body, bytes | bytearray):
                raise RuntimeError(f"LIST {self.watched.path} answered {resp.code}")
            meta, page = await asyncio.to_thread(self._page, resp.body)
            converted.extend(page)
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue")
            if not token:
                break
            params = {"limit": str(LIST_PAGE), "continue": str(token)}
        removed = await asyncio.to_thread(self.state.install, self.watched.kind, converted)
        del converted
        if self.freeze:
            gc.freeze()
        if removed:
            log.info(
                "%s relisted: %d object(s) deleted while unwatched left the cache",
                self.watched.kind,
                removed,
            )
        self.lists += 1
        self.last_event_at = self.clock()
        return version

    def _page(self, body: bytes) -> tuple[dict[str, Any], builtins.list[Converted]]:
        """One LIST page (in a worker thread): its metadata and its objects converted."""
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise RuntimeError(
                f"LIST {self.watched.path}: the answer is not JSON ({exc})"
            ) from None
        if not isinstance(doc, dict):
            raise RuntimeError(f"LIST {self.watched.path}: the answer is not a list object")
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise RuntimeError(f"LIST {self.watched.path}: items is not a list")
        meta = doc.get("metadata") or {}
        kind = self.watched.kind
        objects = [self.state.convert(kind, obj) for obj in items if isinstance(obj, dict)]
        return meta if isinstance(meta, dict) else {}, objects

    async def watch(self, version: str, stop: asyncio.Event) -> str | None:
        """Apply watch events from `version`; returns the version to continue from, or
        None when the version is gone (410: LIST again)."""
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(self.watch_timeout),
        }
        async for event in self.api.stream(
            self.watched.path, params, read_timeout=self.watch_timeout + 30.0
        ):
            if stop.is_set():
                return version
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                if code == 410:
                    self.relists_after_gone += 1
                    log.info(
                        "%s watch: version %s is gone (410); relisting", self.watched.kind, version
                    )
                    return None
                raise RuntimeError(f"watch {self.watched.path}: {code} {obj.get('message', '')}")
            meta = obj.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            self.last_event_at = self.clock()
            if kind == "BOOKMARK":
                continue
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.state.apply_event(self.watched.kind, kind, obj)
        return version

    async def run(self, stop: asyncio.Event) -> None:
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    version = await self.list()
                    if version is None:  # an optional kind not served: nothing to cache
                        self.served = False
                        self.synced.set()
                        await _sleep_unless(stop, OPTIONAL_RETRY)
                        continue
                    self.served = True
                    self.synced.set()
                version = await _unless_stopped(self.watch(version, stop), stop)
                self.failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                delay = self._rng.uniform(
                    0.0, min(self.backoff_cap, BACKOFF_BASE * 2 ** min(self.failures, 16))
                )
                log.warning(
                    "%s list/watch failed (%s); retrying in %.1fs",
                    self.watched.kind,
                    exc or type(exc).__name__,
                    delay,
                )
                # What the watch missed meanwhile is recovered by a fresh LIST.
                version = None
                await _sleep_unless(stop, delay)


class Informers:
    """All informers of the operator and the cache-sync barrier over them."""

    def __init__(self, informers: list[Informer]) -> None:
        self.informers = informers

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    def unsynced(self) -> list[str]:
        return [i.watched.kind for i in self.informers if not i.synced.is_set()]

    async def wait_synced(self, stop: asyncio.Event) -> bool:
        """Wait until every kind has listed once (True), or `stop` (False).

        One kind after the other, each raced against `stop`, with no `gather`: the control
        loop bounds this wait with `wait_for(..., interval)`, and a cancelled gather leaves
        an exception nobody retrieves (an asyncio ERROR with a traceback every interval
        while the API is unreachable, kube.md N4)."""
        for informer in self.informers:
            if not await _unless_stopped(informer.synced.wait(), stop, default=False):
                return False
        return self.synced

    def tasks(self, stop: asyncio.Event) -> list[asyncio.Task]:
        return [
            asyncio.create_task(i.run(stop), name=f"foresize:informer:{i.watched.plural}")
            for i in self.informers
        ]


async def _unless_stopped(work: Awaitable[T], stop: asyncio.Event, default: Any = None) -> Any:
    """`work`'s result, or `default` as soon as `stop` is set (`work` is then cancelled and
    awaited). A watch on a quiet kind sees no event for up to a minute (kube-apiserver's
    bookmark period): waiting for one made every shutdown take the whole grace and warn
    once per kind (kube.md N3)."""
    if stop.is_set():
        if asyncio.iscoroutine(work):
            work.close()
        return default
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return default if task.cancelled() else task.result()


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
