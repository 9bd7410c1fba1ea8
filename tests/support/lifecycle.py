"""Builders shared by the tests (moved out of test_lifecycle_edges.py)."""

from __future__ import annotations

from typing import Any

from foresize.core.api.types import parse_target
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.lifecycle.revert import REVERT_FINALIZER


def _target(mode: str, *, deleting: bool = False, finalizer: bool = True, **policy: Any) -> Any:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "uid": "t-web"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    if finalizer:
        meta["finalizers"] = [REVERT_FINALIZER]
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": meta,
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {"mode": mode, "update_policy": policy or {"update_mode": "in_place"}},
            },
            "status": {"lifecycle": {"observed_mode": "autonomous"}},
        }
    )


def _with(s: ClusterSnapshot, target: Any) -> ClusterSnapshot:
    s.targets = [target]
    return s
