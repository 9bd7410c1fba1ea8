"""Event aggregation, as client-go's EventRecorder does for the kubelet and controllers.

The same (involved object, type, reason) seen again within `window` does not create a new
Event: the existing one gets `count` + 1, the new `lastTimestamp` and the latest message
(a merge patch). A PDB-blocked target retried every pass is then one Event whose count
grows, not one object per try. An Event the server no longer has (Events expire after
an hour by default; a 404 on the patch) is created again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from foresize.shells.kube.api import JSON, MERGE_PATCH, ApiResponse, KubeApi

# client-go's EventCorrelator aggregates within a 10-minute window.
AGGREGATION_WINDOW = 600.0
# Series remembered at most (least recently used go first; client-go keeps 4096).
MAX_SERIES = 4096


@dataclass(slots=True)
class _Series:
    name: str
    count: int
    last: float


class EventAggregator:
    """POST the first Event of a series, PATCH its count afterwards."""

    def __init__(
        self,
        api: KubeApi,
        *,
        window: float = AGGREGATION_WINDOW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.window = window
        self.clock = clock
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self.created = 0
        self.patched = 0

    @staticmethod
    def key(namespace: str, body: dict[str, Any]) -> tuple[str, ...]:
        obj = body.get("involvedObject") or {}
        return (
            namespace,
            str(obj.get("kind", "")),
            str(obj.get("namespace", "")),
            str(obj.get("name", "")),
            str(obj.get("uid", "")),
            str(body.get("type", "")),
            str(body.get("reason", "")),
        )

    async def record(self, namespace: str, body: dict[str, Any]) -> ApiResponse:
        now = self.clock()
        key = self.key(namespace, body)
        series = self._series.get(key)
        if series is not None and now - series.last <= self.window:
            patch = {
                "count": series.count + 1,
                "lastTimestamp": body.get("lastTimestamp"),
                "message": body.get("message", ""),
            }
            path = f"/api/v1/namespaces/{namespace}/events/{series.name}"
            resp = await self.api.request("PATCH", path, patch, MERGE_PATCH)
            if resp.ok:
                series.count += 1
                series.last = now
                self._series.move_to_end(key)
                self.patched += 1
                return resp
            if resp.code != 404:
                return resp
        resp = await self.api.request("POST", f"/api/v1/namespaces/{namespace}/events", body, JSON)
        if resp.ok and isinstance(resp.body, dict):
            name = (resp.body.get("metadata") or {}).get("name")
            if name:
                self._series[key] = _Series(str(name), int(body.get("count") or 1), now)
                self._series.move_to_end(key)
                while len(self._series) > MAX_SERIES:
                    self._series.popitem(last=False)
            self.created += 1
        return resp
