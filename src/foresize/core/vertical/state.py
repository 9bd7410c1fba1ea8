"""The disruption worker's memory between planning passes, serialisable into target status.

Everything the worker must not forget across an operator restart lives here: when each
stall was first seen (so a restart does not reset the `stall_timeout` clock), when the last
batch went out, PDB back-off, evictions awaiting a verdict, and the circuit breaker. The
shell writes `TargetState.to_status()` into the target's status (key `disruption`) through
`WriteTargetStatus`, and a fresh worker rebuilds its state from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from foresize.core.api.access import JSONValue
from foresize.core.api.types import (
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)
from foresize.core.cluster.actions import EmitEvent
from foresize.core.cluster.pending import ComingSize
from foresize.core.cluster.refusals import Refusals
from foresize.core.cluster.target import TargetView
from foresize.core.cluster.windows import MaintenancePolicy
from foresize.core.vertical.memo import PlanMemo

STATUS_KEY = "disruption"

# As in the API's CircuitBreakerStatus.state.
CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


@dataclass(slots=True)
class StallRecord:
    pod: str  # pod name, for status readers
    first_seen: float
    reason: str  # Deferred | Infeasible | Error | Refused


@dataclass(slots=True)
class PendingEviction:
    pod: str
    uid: str
    at: float
    suggestion_uid: str
    probe: bool = False


@dataclass(slots=True)
class BreakerState:
    suggestion_uid: str = ""
    state: str = CLOSED
    no_progress: int = 0  # consecutive no-progress cycles
    openings: int = 0  # times opened for this suggestion (drives the back-off)
    next_probe_at: float | None = None
    total_openings: int = 0  # for reports: never reset
    opened_at: float | None = None
    backoff: float | None = None

    def to_status(self) -> dict[str, Any]:
        """Shaped as the CRD types `status.circuit_breaker` (CircuitBreakerStatus): times
        as RFC 3339 date-time strings, the back-off as a duration string. Numbers there are
        refused by the API server (422), and the whole status write with them."""
        return {
            "state": self.state,
            "suggestion_uid": self.suggestion_uid,
            "no_progress_cycles": self.no_progress,
            "opened_at": _time(self.opened_at),
            "retry_at": _time(self.next_probe_at),
            "backoff": format_duration(self.backoff) if self.backoff is not None else None,
            "openings": self.openings,
            "total_openings": self.total_openings,
        }

    @classmethod
    def from_status(cls, d: dict[str, Any]) -> BreakerState:
        return cls(
            suggestion_uid=str(d.get("suggestion_uid") or ""),
            state=str(d.get("state") or CLOSED),
            no_progress=int(d.get("no_progress_cycles") or 0),
            openings=int(d.get("openings") or 0),
            next_probe_at=_read(d.get("retry_at"), parse_timestamp),
            total_openings=int(d.get("total_openings") or 0),
            opened_at=_read(d.get("opened_at"), parse_timestamp),
            backoff=_read(d.get("backoff"), parse_duration),
        )


def _time(epoch: float | None) -> str | None:
    return format_timestamp(epoch) if epoch is not None else None


def _read(value: JSONValue, parse: Callable[[JSONValue], float]) -> float | None:
    """A status field as written by `to_status` (or a number, as older releases wrote it);
    None when absent or unreadable (a hand-edited status must not stop the worker)."""
    if value is None:
        return None
    try:
        return float(parse(value))
    except (TypeError, ValueError):
        return None


BUDGET_DAY = 86400.0
BUDGET_HOUR = 3600.0


@dataclass(slots=True)
class BudgetLog:
    """What the change budgets count (`vertical.limits`), from the actions that landed:
    the first action toward each suggestion in the last 24 h (one rollout is one change)
    and every disruptive action (eviction, restarting resize) in the last hour. Persisted
    in status, so an operator restart counts on from where the last one stopped."""

    changes: list[tuple[float, str]] = field(default_factory=list)  # (time, suggestion uid)
    disruptions: list[float] = field(default_factory=list)

    def trim(self, now: float) -> None:
        self.changes = [(t, u) for t, u in self.changes if now - t < BUDGET_DAY]
        self.disruptions = [t for t in self.disruptions if now - t < BUDGET_HOUR]

    def counted(self, uid: str) -> bool:
        return any(u == uid for _, u in self.changes)

    def record(self, at: float, uid: str | None, disruptive: bool) -> None:
        if uid is not None and not self.counted(uid):
            self.changes.append((at, uid))
        if disruptive:
            self.disruptions.append(at)

    def copy(self) -> BudgetLog:
        return BudgetLog(list(self.changes), list(self.disruptions))

    def to_status(self) -> dict[str, Any] | None:
        if not self.changes and not self.disruptions:
            return None
        return {
            "changes": [{"time": _time(t), "suggestionUID": u} for t, u in self.changes] or None,
            "disruptions": [_time(t) for t in self.disruptions] or None,
        }

    @classmethod
    def from_status(cls, d: JSONValue) -> BudgetLog:
        if not isinstance(d, dict):
            return cls()
        changes = []
        for entry in d.get("changes") or []:
            at = _read(entry.get("time"), parse_timestamp) if isinstance(entry, dict) else None
            if at is not None:
                changes.append((at, str(entry.get("suggestionUID", ""))))
        disruptions = [
            at for v in d.get("disruptions") or [] if (at := _read(v, parse_timestamp)) is not None
        ]
        return cls(changes, disruptions)


@dataclass(slots=True)
class TargetState:
    stalls: dict[str, StallRecord] = field(default_factory=dict)  # pod uid -> record
    last_batch_at: float | None = None
    evict_retry_at: float | None = None  # PDB said no (429): no evictions before this
    blocked_pods: dict[str, float] = field(default_factory=dict)  # uid -> until (500)
    refused: dict[str, str] = field(default_factory=dict)  # uid -> desired sig refused (422/403)
    released: dict[str, str] = field(default_factory=dict)  # uid -> desired sig released
    # uid -> when no node first had room for the pod's recreation (`vertical.provision`)
    no_room_since: dict[str, float] = field(default_factory=dict)
    pending_evictions: list[PendingEviction] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)  # pod uids already given a verdict
    breaker: BreakerState = field(default_factory=BreakerState)
    resized: int = 0
    evicted: int = 0
    stall_fallbacks: int = 0
    stalls_seen: int = 0
    # Event de-duplication: what we last reported per topic, so a persistent condition is
    # announced once, not every pass.
    reported: dict[str, str] = field(default_factory=dict)
    budget: BudgetLog = field(default_factory=BudgetLog)  # what the change budgets count
    # Not persisted: actions sent this pass that the budgets count once they land (pod
    # name -> (suggestion uid or None, disruptive)).
    budget_pending: dict[str, tuple[str | None, bool]] = field(default_factory=dict)
    # Not persisted: the last status written, to skip identical writes; events recorded by
    # `on_result` for the shell to send; pod name -> uid of pods acted on in this pass.
    last_status: dict[str, Any] | None = None
    outbox: list[EmitEvent] = field(default_factory=list)
    inflight: dict[str, str] = field(default_factory=dict)

    def clone(self) -> TargetState:
        return TargetState(
            stalls={k: StallRecord(v.pod, v.first_seen, v.reason) for k, v in self.stalls.items()},
            last_batch_at=self.last_batch_at,
            evict_retry_at=self.evict_retry_at,
            blocked_pods=dict(self.blocked_pods),
            refused=dict(self.refused),
            released=dict(self.released),
            no_room_since=dict(self.no_room_since),
            pending_evictions=[
                PendingEviction(p.pod, p.uid, p.at, p.suggestion_uid, p.probe)
                for p in self.pending_evictions
            ],
            judged=list(self.judged),
            breaker=BreakerState(
                self.breaker.suggestion_uid,
                self.breaker.state,
                self.breaker.no_progress,
                self.breaker.openings,
                self.breaker.next_probe_at,
                self.breaker.total_openings,
                self.breaker.opened_at,
                self.breaker.backoff,
            ),
            resized=self.resized,
            evicted=self.evicted,
            stall_fallbacks=self.stall_fallbacks,
            stalls_seen=self.stalls_seen,
            reported=dict(self.reported),
            budget=self.budget.copy(),
            budget_pending=dict(self.budget_pending),
            last_status=self.last_status,
            outbox=list(self.outbox),
            inflight=dict(self.inflight),
        )

    def to_status(self) -> dict[str, Any]:
        """The persisted part, as a JSON-able dict (camelCase, like the rest of status).
        Times are RFC 3339 strings, as everywhere in status (docs/api.md).

        Collections are lists, not maps: a JSON merge patch replaces a list whole, while it
        would merge a map and keep entries the worker has dropped. An empty collection is
        written as null, which a merge patch turns into "remove the key"."""
        return {
            "stalls": [
                {"uid": uid, "pod": r.pod, "firstSeen": _time(r.first_seen), "reason": r.reason}
                for uid, r in sorted(self.stalls.items())
            ]
            or None,
            "lastBatchTime": _time(self.last_batch_at),
            "evictionRetryTime": _time(self.evict_retry_at),
            "blockedPods": [
                {"uid": k, "until": _time(v)} for k, v in sorted(self.blocked_pods.items())
            ]
            or None,
            "refusedResizes": [{"uid": k, "signature": v} for k, v in sorted(self.refused.items())]
            or None,
            "releasedResizes": [
                {"uid": k, "signature": v} for k, v in sorted(self.released.items())
            ]
            or None,
            "noRoomSince": [
                {"uid": k, "since": _time(v)} for k, v in sorted(self.no_room_since.items())
            ]
            or None,
            "pendingEvictions": [
                {
                    "pod": p.pod,
                    "uid": p.uid,
                    "time": _time(p.at),
                    "suggestionUID": p.suggestion_uid,
                    "probe": p.probe,
                }
                for p in self.pending_evictions
            ]
            or None,
            "judgedPods": list(self.judged) or None,
            "circuitBreaker": self.breaker.to_status(),
            "counters": {
                "resized": self.resized,
                "evicted": self.evicted,
                "stallFallbacks": self.stall_fallbacks,
                "stallsSeen": self.stalls_seen,
            },
            "reported": [{"topic": k, "value": v} for k, v in sorted(self.reported.items())]
            or None,
            "budget": self.budget.to_status(),
        }

    @classmethod
    def from_status(cls, d: dict[str, Any] | None) -> TargetState:
        if not d:
            return cls()
        counters = d.get("counters") or {}
        # Times as `to_status` writes them (RFC 3339), or numbers as releases before wrote
        # them; an entry whose time cannot be read is dropped, not fatal.
        stalls = {}
        for r in d.get("stalls") or []:
            first_seen = _read(r.get("firstSeen"), parse_timestamp)
            if first_seen is not None:
                stalls[str(r["uid"])] = StallRecord(
                    str(r.get("pod", "")), first_seen, str(r["reason"])
                )
        blocked = {}
        for r in d.get("blockedPods") or []:
            until = _read(r.get("until"), parse_timestamp)
            if until is not None:
                blocked[str(r["uid"])] = until
        no_room = {}
        for r in d.get("noRoomSince") or []:
            since = _read(r.get("since"), parse_timestamp)
            if since is not None:
                no_room[str(r["uid"])] = since
        pending = []
        for p in d.get("pendingEvictions") or []:
            at = _read(p.get("time"), parse_timestamp)
            if at is not None:
                pending.append(
                    PendingEviction(
                        str(p["pod"]),
                        str(p["uid"]),
                        at,
                        str(p.get("suggestionUID", "")),
                        bool(p.get("probe", False)),
                    )
                )
        return cls(
            stalls=stalls,
            last_batch_at=_read(d.get("lastBatchTime"), parse_timestamp),
            evict_retry_at=_read(d.get("evictionRetryTime"), parse_timestamp),
            blocked_pods=blocked,
            refused={str(r["uid"]): str(r["signature"]) for r in d.get("refusedResizes") or []},
            released={str(r["uid"]): str(r["signature"]) for r in d.get("releasedResizes") or []},
            no_room_since=no_room,
            pending_evictions=pending,
            judged=[str(u) for u in d.get("judgedPods") or []],
            breaker=BreakerState.from_status(d.get("circuitBreaker") or {}),
            resized=int(counters.get("resized", 0)),
            evicted=int(counters.get("evicted", 0)),
            stall_fallbacks=int(counters.get("stallFallbacks", 0)),
            stalls_seen=int(counters.get("stallsSeen", 0)),
            reported={str(r["topic"]): str(r["value"]) for r in d.get("reported") or []},
            budget=BudgetLog.from_status(d.get("budget")),
        )


@dataclass(slots=True)
class EvictionBucket:
    """The cluster-wide eviction token bucket (`WorkerConfig.eviction_rate_limit`): one
    token per eviction, refilled with the pass's `now` (no clock of its own). Not
    persisted: a restarted worker starts with a full bucket, as VPA's limiter does."""

    tokens: float
    at: float

    def refill(self, now: float, rate: float, burst: int) -> None:
        self.tokens = min(float(burst), self.tokens + max(0.0, now - self.at) * rate)
        self.at = max(self.at, now)

    def take(self) -> bool:
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


TARGET_KIND = "AIScaleTarget"


def state_key(kind: str, key: str) -> str:
    """The key of an object's state in `WorkerState.targets`: an AIScaleTarget's is its
    "namespace/name" (as releases before persisted and read it), any other kind's (a
    DaemonSetAutoscaler's) is prefixed with the kind, so a DaemonSetAutoscaler never
    reads or counts into the state of an AIScaleTarget of the same namespace and name."""
    return key if kind == TARGET_KIND else f"{kind}/{key}"


def action_state_key(action: object) -> str:
    """`state_key` of whoever planned a pod action (`target`, `target_kind`)."""
    target = getattr(action, "target", "")
    return state_key(getattr(action, "target_kind", TARGET_KIND), target)


@dataclass(slots=True)
class WorkerState:
    """Per-object state, keyed by `state_key`: "namespace/name" of an AIScaleTarget,
    "Kind/namespace/name" of another kind."""

    targets: dict[str, TargetState] = field(default_factory=dict)
    # Not persisted: parsed target policies by uid, reused while metadata.generation (which
    # the API server bumps on every spec change) stays the same.
    policies: dict[str, tuple[int, TargetView]] = field(default_factory=dict)
    eviction_bucket: EvictionBucket | None = None
    # Not persisted: pod uid -> the resize of it the API server refused outright, whoever
    # sent it (the DaemonSetAutoscaler and the revert read it, `cluster.refusals`).
    refusals: Refusals = field(default_factory=dict)
    # Not persisted: the last pass's coming sizes by pod uid (`cluster.pending`), what the
    # pass publishes; every pass recomputes them.
    coming: dict[str, ComingSize] = field(default_factory=dict)
    # Not persisted: the maintenance windows' checks by policy (`vertical.limits`).
    window_checks: dict[MaintenancePolicy, list[str]] = field(default_factory=dict)
    # Not persisted, carried from pass to pass: what was derived from each pod object
    # (`vertical.memo`), whose entries check what they came from.
    memo: PlanMemo = field(default_factory=PlanMemo)

    def copy(self) -> WorkerState:
        # Shallow: the planner clones a TargetState before changing it.
        b = self.eviction_bucket
        bucket = EvictionBucket(b.tokens, b.at) if b is not None else None
        return WorkerState(
            dict(self.targets),
            self.policies,
            bucket,
            dict(self.refusals),
            dict(self.coming),
            self.window_checks,
            self.memo,
        )

    def to_status(self, key: str) -> dict[str, Any]:
        ts = self.targets.get(key)
        return (ts or TargetState()).to_status()

    @classmethod
    def from_statuses(cls, statuses: dict[str, dict[str, Any] | None]) -> WorkerState:
        """Rebuild from {target key: the target's status `disruption` dict}."""
        return cls({k: TargetState.from_status(v) for k, v in statuses.items() if v})
