"""The gate on the executor: before every call, may this replica still act (not after the
stop flag, and only on targets of shards whose Lease it holds right now)?"""

from __future__ import annotations

import asyncio
from typing import Any

from foresize.shells.kube.probes import Health


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
        return await getattr(self.inner, name)(*args)

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
