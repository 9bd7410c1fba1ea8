"""Lists and watch events of the strict API server: label/field selectors, `limit` and
`continue`, which event a watcher sees for a change (an object moving out of its
selector is DELETED for it), and the 410 Expired status."""

from __future__ import annotations

import asyncio
import base64
import bisect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from foresize.testing.apiserver.errors import ApiError, bad_request, invalid
from foresize.testing.apiserver.resources import ResourceType
from foresize.testing.selectors import SelectorError, field_matcher, label_matcher
from foresize.testing.validation import FieldError

WatchEvent = tuple[str, dict[str, Any], dict[str, Any] | None]  # (kind, object, old object)


@dataclass(slots=True)
class Watcher:
    rtype: ResourceType
    namespace: str | None
    labels: Callable[[dict[str, Any]], bool]
    fields: Callable[[dict[str, Any]], bool]
    # WatchEvents, or CLOSE.
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        ns = (obj.get("metadata") or {}).get("namespace")
        if self.namespace is not None and ns != self.namespace:
            return False
        return self.labels(obj) and self.fields(obj)


CLOSE = object()  # queued to a watcher: end its stream


def list_objects(
    objects: dict[tuple[str, str, str], dict[str, Any]],
    rtype: ResourceType,
    namespace: str | None,
    query: Any,
    *,
    rv: int,
    compacted_rv: int,
    sorted_keys: list[tuple[str, str, str]] | None = None,
) -> dict[str, Any]:
    """A list response, to serialise at once: its items share the stored objects' values
    (selectors, `limit`/`continue` pinned to the list's
    resourceVersion `rv`; 410 for a continue token older than `compacted_rv`).
    `sorted_keys`: the keys of the kind's objects in order (`ObjectStore.sorted_keys`)."""
    try:
        labels = label_matcher(query.get("labelSelector"))
        fields = field_matcher(query.get("fieldSelector"), rtype.kind)
    except SelectorError as exc:
        raise bad_request(str(exc)) from None
    # The kind's keys, sorted once (`sorted_keys`, kept until the kind gains or loses an
    # object) and filtered: sorting the whole store for every page made listing 100k pods
    # in pages of 500 quadratic (the server's loop held for seconds, the operator's Lease
    # renewals waiting on it as on no real API server).
    ordered = sorted_keys
    if ordered is None:
        ordered = sorted(k for k in objects if k[0] == rtype.key)
    everything = namespace is None and not query.get("labelSelector")
    keys = (
        ordered
        if everything and not query.get("fieldSelector")
        else [
            key
            for key in ordered
            if (namespace is None or key[1] == namespace)
            and labels(obj := objects[key])
            and fields(obj)
        ]
    )
    start = 0
    token = query.get("continue")
    list_rv = rv
    if token:
        try:
            state = json.loads(base64.urlsafe_b64decode(token.encode()))
            list_rv, after = int(state["rv"]), tuple(state["after"])
        except (ValueError, KeyError, TypeError):
            raise bad_request("invalid continue token") from None
        if list_rv < compacted_rv:
            raise ApiError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        start = bisect.bisect_right(keys, after)  # the first key > after
    limit = int(query.get("limit") or 0)
    page = [(k, objects[k]) for k in (keys[start : start + limit] if limit > 0 else keys[start:])]
    meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
    if limit > 0 and start + limit < len(keys):
        last = list(page[-1][0])
        meta["continue"] = base64.urlsafe_b64encode(
            json.dumps({"rv": list_rv, "after": last}).encode()
        ).decode()
        meta["remainingItemCount"] = len(keys) - start - limit
    # Shallow copies: the answer is serialised as soon as it is built (`web.json_response`),
    # and a deep copy of each of 500 pods was most of a page's time on the server's loop.
    out_items = []
    for _, obj in page:
        item = dict(obj)
        if rtype.custom:  # unstructured lists carry each item's kind; typed lists do not
            item["apiVersion"], item["kind"] = rtype.api_version, rtype.kind
        out_items.append(item)
    return {
        "kind": f"{rtype.kind}List",
        "apiVersion": rtype.api_version,
        "metadata": meta,
        "items": out_items,
    }


def expired_status(rv: int, compacted_rv: int) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {rv} ({compacted_rv})",
        "reason": "Expired",
        "code": 410,
    }


def event_for(
    watcher: Watcher, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
) -> tuple[str, dict[str, Any]] | None:
    now, before = watcher.matches(obj), watcher.matches(old)
    if kind == "DELETED":
        return ("DELETED", obj) if (now or before) else None
    if kind == "ADDED":
        return ("ADDED", obj) if now else None
    if now and before:
        return ("MODIFIED", obj)
    if now:
        return ("ADDED", obj)
    if before:
        return ("DELETED", obj)
    return None


async def send_event(response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")


@dataclass(slots=True)
class WatchRequest:
    """What a watch request asks for, read from its query before the stream starts."""

    watcher: Watcher
    bookmarks: bool  # allowWatchBookmarks
    timeout: float  # seconds until the server ends the stream
    # Replay the history after this resourceVersion; None: start with the current objects
    # as ADDED (no resourceVersion, "0", or sendInitialEvents).
    since_rv: int | None
    initial_events: bool  # sendInitialEvents: end the replay with a bookmark


def _timeout_seconds(raw: str | None, default: float) -> float:
    """timeoutSeconds is an int64 query parameter: anything else is the API server's 400."""
    if not raw:
        return default
    try:
        return float(int(raw))
    except ValueError:
        raise bad_request(f"invalid timeoutSeconds {raw!r}: not an integer") from None


def read_watch_request(
    query: Any, rtype: ResourceType, namespace: str | None, max_seconds: float
) -> WatchRequest:
    """The watch request in `query`, or the API server's 400/422 for a bad one."""
    try:
        watcher = Watcher(
            rtype,
            namespace,
            label_matcher(query.get("labelSelector")),
            field_matcher(query.get("fieldSelector"), rtype.kind),
        )
    except SelectorError as exc:
        raise bad_request(str(exc)) from None
    bookmarks = str(query.get("allowWatchBookmarks", "")).lower() in ("true", "1")
    timeout = min(_timeout_seconds(query.get("timeoutSeconds"), max_seconds), max_seconds)
    since = query.get("resourceVersion")
    initial = str(query.get("sendInitialEvents", "")).lower() in ("true", "1")
    if initial and query.get("resourceVersionMatch") != "NotOlderThan":
        raise invalid(
            rtype,
            "",
            [
                FieldError(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
                )
            ],
        )
    since_rv = None
    if not (since is None or since in ("", "0") or initial):
        try:
            since_rv = int(since)
        except ValueError:
            raise bad_request(f"invalid resource version {since!r}") from None
    return WatchRequest(watcher, bookmarks, timeout, since_rv, initial)


def bookmark(rtype: ResourceType, rv: int, *, initial_events_end: bool = False) -> dict[str, Any]:
    """A BOOKMARK event's object: the resourceVersion the client has seen everything up to
    (and, for sendInitialEvents, the annotation that the initial objects are all sent)."""
    metadata: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_events_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": metadata}
