"""The gate on the executor: before every call, may this replica still act (not after the
stop flag, and only on targets of shards whose Lease it holds right now)? And again before
each request of that call goes out (`api_veto`): after its wait for the rate limit and
before every retry, which may come seconds later (a 429's Retry-After, up to 30 s, is longer
than the 5 s between the renew deadline and another replica's takeover)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from foresize.shells.kube.probes import Health

# The gate's question for the call in progress, in the task that makes it (a contextvar
# follows the call through its awaits, and into the tasks it starts).
_ASKING: ContextVar[Callable[[], str | None] | None] = ContextVar("foresize_gate", default=None)


def still_allowed() -> str | None:
    """Why the gated call in progress may no longer act (its shard's Lease lost, stopping),
    or None (also outside any gated call)."""
    ask = _ASKING.get()
    return ask() if ask is not None else None


def api_veto(stop: asyncio.Event) -> Callable[[str, str], str | None]:
    """The API client's last word on each request (`KubeApi.veto`): once stopping, only
    reads and the Lease release go out; a write of a gated call goes out only while the
    gate would still let the call through."""

    def veto(method: str, path: str) -> str | None:
        if method == "GET" or "/leases" in path:
            return None
        if stop.is_set():
            return "stopping"
        return still_allowed()

    return veto


class GatedExecutor:
    """The executor, asked before every call whether this replica may still act: not
    after the stop flag, and only on targets of shards whose Lease it holds right now
    (renewed within the renew deadline). A refused call is answered, not sent."""

    def __init__(
        self, inner: Any, shards: Any, stop: asyncio.Event, health: Health | None = None
    ) -> None:
        self.inner = inner
        self.shards = shards
        self.stop = stop
        self.health = health
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def server_version(self) -> tuple[int, int]:
        version: tuple[int, int] = self.inner.server_version
        return version

    def _allowed(self, target: str | None, shard: int | None = None) -> str | None:
        if self.stop.is_set():
            return "stopping"
        if self.shards is None:
            return None
        if shard is not None:
            return None if self.shards.holds(shard) else f"shard {shard} not held"
        if target:
            return None if self.shards.owns(target) else "shard not held"
        return None if self.shards.owned else "no shard held"

    def _refusal(self, why: str) -> Any:
        from foresize.core.cluster.actions import ActionResult

        self.refused += 1
        return ActionResult(ok=False, code=0, reason="NotLeader", message=f"not sent: {why}")

    async def _call(self, target: str | None, shard: int | None, name: str, *args: Any) -> Any:
        why = self._allowed(target, shard)
        if why is not None:
            return self._refusal(why)
        if self.health is not None:
            self.health.beat()
        asking = _ASKING.set(lambda: self._allowed(target, shard))
        try:
            result = await getattr(self.inner, name)(*args)
        finally:
            _ASKING.reset(asking)
        # A request the API client's veto held back (the Lease lost while the call waited)
        # is the gate's refusal, not a failed change.
        if getattr(result, "ok", True) is False and "not sent: " in getattr(result, "message", ""):
            why = self._allowed(target, shard)
            if why is not None:
                return self._refusal(why)
        return result

    async def apply(self, action: Any) -> Any:
        return await self._call(target_of(action), shard_of_action(action), "apply", action)

    async def apply_guarded(self, action: Any) -> Any:
        return await self._call(target_of(action), shard_of_action(action), "apply_guarded", action)

    async def add_finalizer(self, kind: str, ns: str, name: str, finalizer: str) -> Any:
        return await self._call(f"{ns}/{name}", None, "add_finalizer", kind, ns, name, finalizer)

    async def remove_finalizer(self, kind: str, ns: str, name: str, finalizer: str) -> Any:
        return await self._call(f"{ns}/{name}", None, "remove_finalizer", kind, ns, name, finalizer)

    # Templates are cluster-wide work: the holder of shard 0 does it.
    async def create_object(self, kind: str, obj: dict[str, Any]) -> Any:
        return await self._call(None, 0, "create_object", kind, obj)

    async def update_object(self, kind: str, obj: dict[str, Any]) -> Any:
        return await self._call(None, 0, "update_object", kind, obj)

    async def delete_object(self, kind: str, ns: str, name: str) -> Any:
        return await self._call(None, 0, "delete_object", kind, ns, name)


def shard_of_action(action: Any) -> int | None:
    """ClusterAIScaleTemplate status belongs to shard 0's holder."""
    from foresize.core.cluster.actions import EmitEvent, WriteTargetStatus

    if (
        isinstance(action, WriteTargetStatus | EmitEvent)
        and action.kind == "ClusterAIScaleTemplate"
    ):
        return 0
    return None


def target_of(action: Any) -> str | None:
    """The target key an action is for (its shard decides), if it names one."""
    from foresize.core.cluster.actions import EmitEvent, WriteTargetStatus

    target = getattr(action, "target", "") or ""
    if target:
        return str(target)
    if isinstance(action, WriteTargetStatus):
        if action.kind == "ClusterAIScaleTemplate":
            return None
        return f"{action.namespace}/{action.name}"
    if isinstance(action, EmitEvent) and action.kind in ("AIScaleTarget", "DaemonSetAutoscaler"):
        return f"{action.namespace}/{action.name}"
    return None
