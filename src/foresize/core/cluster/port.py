"""The Cluster port: the one small interface both shells implement.

The sim shell implements `ClusterPort` (synchronous, simulated time); the kube shell
implements `AsyncClusterPort` over the real API server. The core never calls either: a
shell's control loop takes a snapshot, asks the core to plan, and applies the actions.
"""

from __future__ import annotations

from typing import Protocol

from foresize.core.cluster.actions import Action, ActionResult
from foresize.core.cluster.snapshot import ClusterSnapshot


class ClusterPort(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...

    def apply(self, action: Action) -> ActionResult: ...


class AsyncClusterPort(Protocol):
    async def snapshot(self) -> ClusterSnapshot: ...

    async def apply(self, action: Action) -> ActionResult: ...
