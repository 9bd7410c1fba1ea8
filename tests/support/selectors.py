"""Builders shared by the tests (moved out of test_selector_targets.py)."""

from __future__ import annotations

from typing import Any

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import HistorySink, Sample
from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    ResourceRequirements,
)
from foresize.core.cluster.snapshot import ClusterSnapshot

NOW = 1_780_000_000.0


def _pod(name: str, owner: OwnerRef | None, labels: dict[str, str]) -> Pod:
    req = {"cpu": 100, "memory": 128 * MIB}
    return Pod(
        namespace="batch",
        name=name,
        uid=f"uid-{name}",
        labels=labels,
        owner=owner,
        node_name="n1",
        containers=[Container("work", ResourceRequirements(dict(req), {}))],
        phase="Running",
        conditions=[PodCondition("Ready", "True")],
        container_statuses=[
            ContainerStatus("work", allocated=dict(req), resources=ResourceRequirements(req, {}))
        ],
        creation_time=NOW - 3 * 86400,
    )


def _history(cpu: dict[str, float]) -> UsageHistory:
    """Two days of usage every 5 minutes per workload (constant cpu, 200Mi memory)."""
    history = UsageHistory(step=60.0)
    samples = [
        Sample(NOW - i * 300.0, "batch", wl, f"{wl}-pod", "work", cores, 200 * MIB)
        for i in range(2 * 288)
        for wl, cores in cpu.items()
    ]
    HistorySink(history).add_samples(samples)
    return history


def _target(selector: dict[str, str], status: dict[str, Any] | None = None) -> Any:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "batch", "namespace": "batch", "uid": "t-batch", "generation": 1},
            "spec": {
                "selector": {"matchLabels": selector},
                "vertical": {
                    "mode": "autonomous",
                    "update_policy": {"update_mode": "in_place"},
                    "disruption": {"max_disrupted": "100%"},
                },
            },
            **({"status": status} if status else {}),
        }
    )


def _snapshot(target: Any) -> ClusterSnapshot:
    pods = [
        # A bare pod (history under its own name) and a Job's pod (under the Job).
        _pod("light", None, {"tier": "batch", "size": "small"}),
        _pod("heavy-x7k2p", OwnerRef("Job", "heavy"), {"tier": "batch", "size": "big"}),
        _pod("other", None, {"tier": "web"}),
    ]
    return ClusterSnapshot(
        now=NOW,
        nodes={"n1": Node("n1", allocatable={"cpu": 16000, "memory": 64 * 1024 * MIB})},
        pods=pods,
        targets=[target],
    )
