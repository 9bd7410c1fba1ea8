"""The simulator's event log: every state change worth asserting on or reporting.

Each `SimEvent` has the simulated time, a `kind` (what happened, e.g. `PodScheduled`,
`Preempted`, `ResizeApplied`, `ResizeDeferred`, `OOMKilled`, `Evicted`), the `object`
(`Pod/namespace/name`, `Deployment/namespace/name`, `Node/name`, ...), the Kubernetes-style
`reason`, a human `message` and a `details` dict of machine-readable facts. Two runs with
the same seed produce identical logs (`EventLog.fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SimEvent:
    time: float
    kind: str
    object: str
    reason: str = ""
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "kind": self.kind,
            "object": self.object,
            "reason": self.reason,
            "message": self.message,
            "details": self.details,
        }


class EventLog(list[SimEvent]):
    """A list of `SimEvent` with simple queries."""

    def query(
        self,
        kind: str | None = None,
        *,
        object: str | None = None,
        object_prefix: str | None = None,
        reason: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[SimEvent]:
        out = []
        for e in self:
            if kind is not None and e.kind != kind:
                continue
            if object is not None and e.object != object:
                continue
            if object_prefix is not None and not e.object.startswith(object_prefix):
                continue
            if reason is not None and e.reason != reason:
                continue
            if since is not None and e.time < since:
                continue
            if until is not None and e.time > until:
                continue
            out.append(e)
        return out

    def count(self, kind: str | None = None, **kw: Any) -> int:  # type: ignore[override]
        return len(self.query(kind, **kw))

    def kinds(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self:
            out[e.kind] = out.get(e.kind, 0) + 1
        return out

    def fingerprint(self) -> str:
        """A digest of the whole log (for reproducibility checks)."""
        h = hashlib.sha256()
        for e in self:
            h.update(json.dumps(e.as_dict(), sort_keys=True, default=str).encode())
        return h.hexdigest()
