"""A scenario from a real cluster's Prometheus history (`foresize simulate --prometheus`).

What `foresize recommend` reads (`adapters.history.prometheus.PrometheusReader`, the same
queries and budgets: cAdvisor usage folded per workload and container, kube-state-metrics
owners, replicas, requests and limits) plus the nodes' allocatable capacity
(`kube_node_status_allocatable`) and the HPAs (`kube_horizontalpodautoscaler_*`) become a
scenario file: every Deployment and StatefulSet with its replicas, its containers'
requests and limits as they were, each container's usage replayed from its own trace (the
workload's pods folded as the recommend reader folds them: CPU the median of the
replicas, memory the maximum), the nodes as they
were, and the HPAs on resource utilisation. The file is written with its traces into a
folder and read back by the scenario loader, so it is checked as any scenario is.

Left out, and said so on stderr by the caller: workloads of other kinds (DaemonSets,
Jobs, bare pods), containers without a usage sample.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from foresize.adapters.history.prometheus_series import ContainerHistory, HPARecord
from foresize.core.errors import ForesizeError

SIMULATED_KINDS = ("Deployment", "StatefulSet")
_NAME = re.compile(r"[^a-z0-9-]+")


@dataclass(slots=True)
class Built:
    """The scenario document, its trace files and what was left out."""

    scenario: dict[str, Any]
    traces: dict[str, np.ndarray] = field(default_factory=dict)  # file name -> values
    left_out: list[str] = field(default_factory=list)

    def write(self, folder: Path) -> Path:
        import yaml

        (folder / "traces").mkdir(parents=True, exist_ok=True)
        for name, values in self.traces.items():
            lines = ["ts,value"] + [f"{i},{v:.12g}" for i, v in enumerate(values)]
            (folder / "traces" / name).write_text("\n".join(lines) + "\n")
        path = folder / "scenario.yaml"
        path.write_text(yaml.safe_dump(self.scenario, sort_keys=False))
        return path


def _filled(values: np.ndarray | None) -> np.ndarray | None:
    """A trace without gaps: each gap holds the sample before it (the first samples the
    first known one); None without any sample."""
    if values is None:
        return None
    v = np.asarray(values, dtype=np.float64)
    known = np.isfinite(v)
    if not known.any():
        return None
    idx = np.where(known, np.arange(v.size), 0)
    np.maximum.accumulate(idx, out=idx)
    out = v[idx]
    out[: int(np.argmax(known))] = v[int(np.argmax(known))]
    return np.maximum(out, 0.0)


def _safe(name: str) -> str:
    return _NAME.sub("-", name.lower()).strip("-") or "x"


def build_scenario(
    history: ContainerHistory,
    nodes: Mapping[str, Mapping[str, float]],
    hpas: Sequence[HPARecord],
    step: float,
    source: str,
    start: float,
    end: float,
) -> Built:
    """The scenario of the cluster `history` was read from (module doc): every trace on
    one grid of `step` from `start` to `end` (simulated time 0 is `start`)."""
    from foresize.core.history import resample_max

    columns = int((end - start) // step) + 1
    if not nodes:
        raise ForesizeError(
            f"{source}: kube_node_status_allocatable: no node series (kube-state-metrics"
            " exports the nodes' capacity; the scenario needs it)"
        )
    built = Built(scenario={})
    workloads: dict[tuple[str, str], dict[str, Any]] = {}
    for s in sorted(
        history.series, key=lambda s: (s.key.namespace, s.key.workload, s.key.container)
    ):
        ns, wl, container = s.key.namespace, s.key.workload, s.key.container
        kind = history.kinds.get((ns, wl), "")
        if kind not in SIMULATED_KINDS:
            built.left_out.append(f"{ns}/{wl}/{container} ({kind or 'no controller'})")
            continue
        cpu = _filled(resample_max(s.timestamps, s.cpu, step, start, columns))
        memory = (
            _filled(resample_max(s.timestamps, s.memory, step, start, columns))
            if s.memory is not None
            else None
        )
        if cpu is None or memory is None:
            built.left_out.append(f"{ns}/{wl}/{container} (no usage sample)")
            continue
        stem = f"{_safe(ns)}_{_safe(wl)}_{_safe(container)}"
        built.traces[f"{stem}_cpu.csv"] = cpu
        built.traces[f"{stem}_memory.csv"] = memory
        res = history.resources.get(s.key)
        requests: dict[str, Any] = {}
        limits: dict[str, Any] = {}
        if res is not None:
            for target, prefix in ((requests, "request"), (limits, "limit")):
                c, m = getattr(res, f"cpu_{prefix}"), getattr(res, f"memory_{prefix}")
                if c is not None:
                    target["cpu"] = f"{max(1, math.ceil(c * 1000))}m"
                if m is not None:
                    target["memory"] = max(1, math.ceil(m))
        entry: dict[str, Any] = {
            "name": container,
            "usage": {
                r: {"generator": "trace", "file": f"traces/{stem}_{r}.csv", "step": f"{step:g}s"}
                for r in ("cpu", "memory")
            },
        }
        if requests:
            entry["requests"] = requests
        if limits:
            entry["limits"] = limits
        w = workloads.setdefault(
            (ns, wl),
            {
                "kind": kind,
                "name": wl,
                "namespace": ns,
                "replicas": max(1, history.replicas.get((ns, wl), 1)),
                "containers": [],
            },
        )
        w["containers"].append(entry)
    if not workloads:
        raise ForesizeError(
            f"{source}: no Deployment or StatefulSet with usage in the range"
            + (f" (left out: {', '.join(built.left_out[:5])})" if built.left_out else "")
        )
    scenario: dict[str, Any] = {
        "name": "prometheus",
        "description": f"built from {source}",
        "seed": 0,
        "nodes": [
            {
                "name": _safe(name),
                "count": 1,
                "cpu": f"{int(cap['cpu'] * 1000)}m",
                "memory": int(cap["memory"]),
            }
            for name, cap in sorted(nodes.items())
            if "cpu" in cap and "memory" in cap
        ],
        "workloads": list(workloads.values()),
    }
    kept = _hpa_entries(hpas, workloads)
    if kept:
        scenario["hpas"] = kept
    built.scenario = scenario
    return built


def _hpa_entries(
    hpas: Sequence[HPARecord], workloads: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The scenario's HPAs: those on resource utilisation of a simulated workload."""
    kept = []
    for h in hpas:
        if (h.namespace, h.target_name) not in workloads or not h.utilization:
            continue
        if workloads[(h.namespace, h.target_name)]["kind"] != h.target_kind:
            continue
        kept.append(
            {
                "name": h.name,
                "namespace": h.namespace,
                "target": {"kind": h.target_kind, "name": h.target_name},
                "min_replicas": h.min_replicas,
                "max_replicas": max(h.max_replicas, h.min_replicas),
                "metrics": [
                    {"resource": r, "target_utilization": round(u)}
                    for r, u in sorted(h.utilization.items())
                ],
            }
        )
    return kept
