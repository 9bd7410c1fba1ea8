"""Acceptance: `foresize simulate` on the built-in `sidecars` scenario (sidecar containers,
pod-level resources, pod overhead, a PDB) leaves no node overcommitted and evicts no pod
that kube-apiserver would have refused to evict or that could not come back.

The eviction oracle below restates `pkg/registry/core/pod/storage/eviction.go`
(EvictionREST.Create) independently of the simulator's implementation.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from foresize.core.cluster.actions import EvictPod
from foresize.core.cluster.qos import allocated_requests, has_pod_level_resources
from foresize.front.cli import app
from foresize.shells.sim.runner import build
from foresize.shells.sim.scenario import load_scenario

TWO_DAYS = 48 * 3600.0


def _expected_answer(sim, pod) -> int:
    """What kube-apiserver answers to this eviction, from the cluster's state."""
    if pod.phase in ("Pending", "Succeeded", "Failed") or pod.deletion_time is not None:
        return 201
    pdbs = [
        p
        for p in sim.scenario.pdbs
        if p.namespace == pod.namespace
        and all(pod.labels.get(k) == v for k, v in p.selector.items())
    ]
    if not pdbs:
        return 201
    (pdb,) = pdbs
    members = [
        p
        for p in sim.pods.values()
        if p.namespace == pdb.namespace
        and all(p.labels.get(k) == v for k, v in pdb.selector.items())
    ]
    healthy = sum(1 for p in members if p.deletion_time is None and p.ready)
    desired = pdb.min_available
    assert isinstance(desired, int)
    allowed = max(0, healthy - desired)
    if not pod.ready and healthy >= desired > 0:
        return 201
    return 201 if allowed > 0 else 429


@pytest.mark.slow
def test_sidecars_pod_level_and_overhead_no_overcommit_and_no_wrong_eviction():
    sim = build(load_scenario("sidecars"), policy="foresize")
    evictions: list[tuple[str, int, int]] = []
    overcommits: list[str] = []
    original_apply = sim.apply

    def apply(action):
        if isinstance(action, EvictPod):
            pod = sim.pod(action.namespace, action.name)
            expected = _expected_answer(sim, pod) if pod is not None else 404
            result = original_apply(action)
            evictions.append((action.name, expected, result.code))
            return result
        return original_apply(action)

    sim.apply = apply

    def check(sim, now):
        for name, node in sim.nodes.items():
            free_cpu, free_mem = sim.node_free(name)
            if free_cpu < 0 or free_mem < 0:
                overcommits.append(f"{now:.0f}s {name}: scheduler free {free_cpu}m {free_mem}B")
            running = [p for p in sim.pods.values() if p.node_name == name and p.phase == "Running"]
            for r in ("cpu", "memory"):
                used = sum(allocated_requests(p).get(r, 0) for p in running)
                if used > node.allocatable[r]:
                    overcommits.append(f"{now:.0f}s {name}: kubelet allocated {r} {used}")

    sim.every(60.0, check)
    sim.run(TWO_DAYS)
    summary = sim.summary(policy="foresize")
    rows = {r["name"]: r for r in summary["workloads"]}

    assert overcommits == []
    # Every eviction Foresize sent got the API server's answer; none went through wrongly.
    assert all(expected == code for _, expected, code in evictions), evictions
    # Nothing evicted sat Pending afterwards: no pod waited for a node.
    assert summary["totals"]["pending_pod_hours"] == 0
    assert sim.events.count("FailedScheduling") == 0
    # The sidecar workload was resized in place (its upsizes fit beside the sidecars).
    assert rows["Deployment/shop/web"]["resizes"] > 0
    # Pods with pod-level resources: never resized, refused or evicted; said so.
    reports = [p for p in sim.pods.values() if p.name.startswith("reports-")]
    assert reports and all(has_pod_level_resources(p) for p in reports)
    for p in reports:
        obj = f"Pod/shop/{p.name}"
        for kind in ("ResizeRequested", "ResizeRefused", "Evicted", "EvictionRefused"):
            assert sim.events.count(kind, object=obj) == 0, (kind, obj)
        left = [
            e
            for e in sim.events.query("Event", object=obj)
            if e.reason == "PodLevelResourcesLeftAlone"
        ]
        assert len(left) == 1
    conditions = sim.target_status[("AIScaleTarget", "shop", "reports")]["conditions"]
    cond = next(c for c in conditions if c["type"] == "PodLevelResourcesLeftAlone")
    assert cond["status"] == "True" and "2 pod(s)" in cond["message"]
    assert sim.events.count("ResizeRefused") == 0


def test_foresize_simulate_event_log_of_the_sidecars_scenario(tmp_path):
    events = tmp_path / "events.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--scenario",
            "sidecars",
            "--duration",
            "30h",
            "--no-progress",
            "--json",
            "--events",
            str(events),
        ],
    )
    assert result.exit_code == 0, result.output
    log = [json.loads(line) for line in events.read_text().splitlines()]
    kinds = {e["kind"] for e in log}
    assert "ResizeApplied" in kinds
    assert not kinds & {"ResizeRefused", "FailedScheduling", "Preempted", "NodePressureEviction"}
    evicted = [e for e in log if e["kind"] == "Evicted"]
    assert all("/reports-" not in e["object"] for e in evicted)
    summary = json.loads(result.stdout)
    assert summary["totals"]["pending_pod_hours"] == 0
