"""Resizes the API server refused outright, remembered so no planner sends them again.

A resize can be refused before it ever reaches the kubelet: 422 (the change is invalid,
e.g. it would change the QoS class), or, from Kubernetes 1.36, 403 with the cause
`NodeCapacity` when the new requests exceed the node's allocatable (kubernetes #136043:
the admission check that replaced the `Infeasible` status for that case). Either way the
same patch will be refused again, so every planner that resizes (the disruption worker,
the DaemonSetAutoscaler, the revert) reads the refusal (`ActionResult.resize_refused`),
does not resend that exact change, falls back as it would for an `Infeasible` resize
and says so in its status. A different change (a new suggestion) is tried again.

The disruption worker keeps its refusals per target in the target's status (they
survive a restart, `vertical.state.TargetState.refused`); this record serves the others
and is kept in memory: after a restart one more refused patch re-creates it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from foresize.core.cluster.actions import ActionResult, ContainerResize, ResizePod


def container_signature(
    name: str, requests: Mapping[str, int | None], limits: Mapping[str, int | None]
) -> str:
    """One container's part of a resize signature (the exact resources it asks for)."""
    return f"{name}[{sorted(requests.items())}|{sorted(limits.items())}]"


def resize_signature(containers: Iterable[ContainerResize]) -> str:
    """The signature of the change a resize asks for, container by container."""
    return ";".join(container_signature(c.name, c.requests, c.limits) for c in containers)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused resize: what it asked for, and the API server's answer."""

    pod: str  # "namespace/name"
    signature: str
    code: int
    message: str
    at: float

    def describe(self) -> str:
        cause = " NodeCapacity" if self.code == 403 else ""
        return f"resize refused by the API server ({self.code}{cause}: {self.message})"


Refusals = dict[str, Refusal]
"""Pod uid -> the last resize of it the API server refused."""


def record_refusal(refusals: Refusals, action: ResizePod, result: ActionResult, now: float) -> bool:
    """Remember `action` if the API server refused it outright. True if it did."""
    if not result.resize_refused or not action.uid:
        return False
    refusals[action.uid] = Refusal(
        f"{action.namespace}/{action.name}",
        resize_signature(action.containers),
        result.code,
        result.message,
        now,
    )
    return True


def refusal_of(refusals: Mapping[str, Refusal], action: ResizePod) -> Refusal | None:
    """The refusal of this very change of this pod, or None (a different change of the
    same pod is a new request: it may land)."""
    got = refusals.get(action.uid) if action.uid else None
    if got is None or got.signature != resize_signature(action.containers):
        return None
    return got


def prune(refusals: Refusals, live_uids: Collection[str]) -> Refusals:
    """The refusals of pods that still exist (a recreated pod starts afresh)."""
    return {uid: r for uid, r in refusals.items() if uid in live_uids}
