"""Status writes that change nothing are not sent; those that do carry only what changed.

A target's status is written by merge patch (`WriteTargetStatus`). The planners decide a
write from their own memory, which a restart empties and which does not know what the
object already says: so a pass can ask for a status the object has already (a
recommendation round that comes to the same values, a worker status equal to the one
the last process wrote). On a real cluster each is an API call on the client's 50 QPS
budget, shared with the resizes (kube.md N6). Kubernetes' own controllers compare the
status they want with the informer's copy and skip `UpdateStatus` when equal; this does
the same for merge patches:

- the base is the watch cache's status of the object, overlaid with the last patch this
  replica sent for it while the cache has not seen a newer version of the object (our
  own write, not yet back on the watch);
- a top-level status key whose patch would leave the base's value as it is is dropped
  from the patch; a patch left empty is not sent and answers `UNCHANGED`.

The planners are fed the write they asked for (their memory then matches the object),
and the recorder reads it whole (the gauges it sets from a status).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from foresize.core.cluster.actions import ActionResult, WriteTargetStatus
from foresize.shells.kube.state import ClusterState

# The answer for a write not sent because the object's status already says it all.
UNCHANGED = ActionResult(ok=True, code=200, reason="Unchanged", message="status unchanged")


def merge_patched(target: Any, patch: Any) -> Any:
    """`target` with the JSON merge patch `patch` applied (RFC 7386): a null deletes the
    key, an object merges key by key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patched(out.get(key), value)
    return out


def changed_part(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """The top-level keys of `patch` that change `base` (whole values: a key that changes
    is sent as the planner wrote it)."""
    out: dict[str, Any] = {}
    for key, value in patch.items():
        if value is None:
            if key in base:
                out[key] = None
        elif merge_patched(base.get(key), value) != base.get(key):
            out[key] = value
    return out


class StatusWrites:
    """The status each write is compared with (see the module docstring)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # (kind, namespace, name) -> (the cached resourceVersion when we sent, the patches
        # sent since, in order): the overlay while the watch has not brought the object
        # back. Dropped at the next comparison once the cache holds a newer version.
        self._sent: dict[tuple[str, str, str], tuple[str, tuple[dict[str, Any], ...]]] = {}

    def _cached(self, key: tuple[str, str, str]) -> tuple[str, dict[str, Any]] | None:
        raw = self.state.raw_object(*key)
        if not isinstance(raw, dict):
            return None
        version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        status = raw.get("status")
        return version, status if isinstance(status, dict) else {}

    def trimmed(self, action: WriteTargetStatus) -> WriteTargetStatus | None:
        """`action` with only what changes the object's status; None: nothing does. An
        object not in the cache (or without a resourceVersion) is written as asked."""
        key = (action.kind, action.namespace, action.name)
        cached = self._cached(key)
        if cached is None or not cached[0]:
            return action
        version, base = cached
        sent = self._sent.get(key)
        if sent is not None:
            if sent[0] == version:
                for patch in sent[1]:
                    base = merge_patched(base, patch)
            else:  # the watch brought a newer version: it has our write or what followed
                del self._sent[key]
        part = changed_part(base, action.status)
        if not part:
            return None
        return action if part == action.status else dataclasses.replace(action, status=part)

    def prune(self) -> int:
        """Forget the overlays the watch has caught up with or whose object is gone (each
        pass: a target deleted after a write would otherwise keep its entry for ever).
        Returns how many were dropped."""
        stale = [
            key
            for key, (version, _) in self._sent.items()
            if (cached := self._cached(key)) is None or cached[0] != version
        ]
        for key in stale:
            del self._sent[key]
        return len(stale)

    def landed(self, action: WriteTargetStatus) -> None:
        """`action` (as sent) was answered 2xx: the base until the watch brings it back."""
        key = (action.kind, action.namespace, action.name)
        cached = self._cached(key)
        if cached is None or not cached[0]:
            return
        previous = self._sent.get(key)
        patches: tuple[dict[str, Any], ...] = ()
        if previous is not None and previous[0] == cached[0]:
            patches = previous[1]  # written again before the watch caught up
        self._sent[key] = (cached[0], (*patches, action.status))
