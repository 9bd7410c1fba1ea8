"""The memo of the target readers (`cluster.target.target_view`, `dsa_view`): one view a
target object, kept while the object is unchanged."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

from foresize.core.api.access import JSONValue
from foresize.core.api.access import first as get

View = TypeVar("View")

# Reading a target is a pure function of its content, and every pass re-reads every
# target. An object with `metadata.uid` and `resourceVersion` is fingerprinted by the
# pair, as Kubernetes clients' caches do (the API server changes the resourceVersion on
# every write; both shells replace such an object on each change, `kube.state`), and
# kept under its uid with the last few objects of that uid (the target as written and
# with its effective spec share the pair, `cluster.policies`): keyed by object alone,
# 10,000 targets cleared the memo whole every pass (issue 26). Any other object (a
# manifest dict, a test's model) is keyed by its identity and fingerprinted by its full
# content, so one mutated in place is read again.
_VIEW_MEMO_LIMIT = 1 << 16  # uids: far above any real target count; cleared whole
_OBJECT_MEMO_LIMIT = 4096  # unversioned objects; cleared whole
_OBJECTS_A_UID = 4
_view_memo: dict[tuple[str, object], list[tuple[Any, str, Any]]] = {}
_object_memo: dict[tuple[str, object], list[tuple[Any, str, Any]]] = {}


def _fingerprint(obj: JSONValue) -> tuple[str | None, str | None]:
    """(uid, "uid@resourceVersion") of an object carrying both; else (None, its content
    as a string, or None when it cannot be serialised: then it is not memoised)."""
    meta = get(obj, "metadata")
    uid, version = get(meta, "uid"), get(meta, "resourceVersion", "resource_version")
    if uid and version:
        return str(uid), f"{uid}@{version}"  # content JSON starts with "{": never equal
    try:
        dump = getattr(obj, "model_dump_json", None)
        return None, str(dump()) if dump is not None else json.dumps(
            obj, sort_keys=True, default=repr
        )
    except (TypeError, ValueError):
        return None, None


def memoised(reader: str, obj: JSONValue, read: Callable[[JSONValue], View]) -> View:
    """`read(obj)`, or the view read from this very object at this fingerprint before."""
    uid, fingerprint = _fingerprint(obj)
    if fingerprint is None:
        return read(obj)
    memo, limit = (_view_memo, _VIEW_MEMO_LIMIT) if uid else (_object_memo, _OBJECT_MEMO_LIMIT)
    key = (reader, uid or id(obj))
    entries = memo.get(key)
    for held, known, view in entries or ():
        if held is obj and known == fingerprint:
            return cast(View, view)
    fresh = read(obj)
    if entries is None:
        if len(memo) >= limit:
            memo.clear()
        entries = memo[key] = []
    entries.append((obj, fingerprint, fresh))
    del entries[:-_OBJECTS_A_UID]
    return fresh
