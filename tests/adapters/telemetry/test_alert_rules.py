"""The shipped alerts (`foresize manifests monitoring`, the Helm chart) against the series the
exporter really produces (seed.md N1).

Each promtool unit test's input series are scraped, once a simulated minute, from the real
`/metrics` endpoint of one or more `ForesizeMetrics` registries (one per operator replica,
told apart by a `pod` label as Prometheus' target labels would), while the real recorder
paths count and set them: `ChangeRecorder.declare` / `record` / `admitted` / `observe`, as
the kube shell calls them. No counter series is written by hand, so a series that only
appears with its first change (the exporter's behaviour before N1) is tested as it is.
Only `up` (made by Prometheus itself) is hand-written."""

from __future__ import annotations

import copy
import dataclasses
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from foresize.adapters.telemetry.metrics import (
    DIRECTIONS,
    OUTCOMES,
    RESOURCES,
    ForesizeMetrics,
)
from foresize.adapters.telemetry.recorder import ChangeRecorder
from foresize.core.admission.pod import PodDecision
from foresize.core.cluster.actions import (
    ActionResult,
    ContainerResize,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.model import ResourceRequirements
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import target_view
from foresize.front.cli.manifests import build
from foresize.shells.kube.state import ClusterState

PROMTOOL = shutil.which("promtool")
pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) missing"),
]
GI = 2**30


# ---- a small cluster in the kube shell's own state ------------------------------------


def _pod(name: str, node: str, cpu: str, alloc_cpu: str, mem: str = "256Mi", alloc_mem=None):
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app": name.rsplit("-", 1)[0]},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "allocatedResources": {"cpu": alloc_cpu, "memory": alloc_mem or mem},
                    "resources": {"requests": {"cpu": alloc_cpu, "memory": alloc_mem or mem}},
                }
            ],
        },
    }


def _target(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "vertical": {"mode": "autonomous", "containers": [{"name": "*"}]},
        },
    }


def _state(targets: list[str], pods: list[dict[str, Any]] = ()) -> ClusterState:
    from foresize.core.api.types import parse_object

    state = ClusterState(target_parser=lambda kind, obj: parse_object(obj))
    for node in ("n1", "n2"):
        state.apply_event(
            "Node",
            "ADDED",
            {"metadata": {"name": node}, "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}},
        )
    for pod in pods:
        state.apply_event("Pod", "ADDED", pod)
    for name in targets:
        state.apply_event("AIScaleTarget", "ADDED", _target(name))
    return state


class Replica:
    """One operator replica: its real metrics registry and recorder, and a cluster view."""

    def __init__(self, pod: str, state: ClusterState) -> None:
        self.pod = pod
        self.metrics = ForesizeMetrics()
        self.recorder = ChangeRecorder(self.metrics)
        self.state = state

    def snapshot(self) -> ClusterSnapshot:
        return self.state.snapshot(now=0.0)

    def start_pass(self) -> None:
        """What `KubeShell.run_pass` does before its actions (one replica holds it all)."""
        snap = self.snapshot()
        self.recorder.declare(snap, snap, 0.0)

    def resize(self, target: str, pod: str, cpu: int, code: int = 200) -> None:
        action = ResizePod(
            "shop", pod, (ContainerResize("app", requests={"cpu": cpu}),), target=f"shop/{target}"
        )
        result = ActionResult(ok=code < 300, code=code, reason="" if code < 300 else "Invalid")
        self.recorder.record([(action, result)], self.snapshot())

    def admit(self, target: str, pod: str, cpu: int) -> None:
        """The pod webhook sized a new pod of `target` (`on_pod_change`)."""
        snap = self.snapshot()
        (pod_obj,) = [p for p in snap.pods if p.name == pod]
        view = target_view(_target(target))
        decision = PodDecision(view, {"app": ResourceRequirements({"cpu": cpu})})
        self.recorder.admitted(pod_obj, decision)

    def status(self, target: str, status: dict[str, Any]) -> None:
        self.recorder.record([(WriteTargetStatus("shop", target, status), ActionResult(ok=True))])


async def _serve(metrics: ForesizeMetrics) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(metrics.aiohttp_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/metrics"


Step = Callable[[dict[str, Replica]], None]


async def exported_series(
    replicas: dict[str, Replica], steps: dict[int, list[Step]], minutes: int, names: set[str]
) -> dict[str, str]:
    """Run `steps[m]` at each minute m, then scrape every replica's /metrics over HTTP; the
    samples of the metric `names` as promtool input series (`_` where a series was not
    exported in that scrape), each with its replica's `pod` label."""
    served = {pod: await _serve(r.metrics) for pod, r in replicas.items()}
    scrapes: list[dict[str, float]] = []
    try:
        async with aiohttp.ClientSession() as session:
            for minute in range(minutes + 1):
                for step in steps.get(minute, []):
                    step(replicas)
                seen: dict[str, float] = {}
                for pod, (_, url) in served.items():
                    async with session.get(url) as resp:
                        assert resp.status == 200
                        text = await resp.text()
                    # The lines of the metrics the rules read (the parser is slow).
                    text = "\n".join(
                        line
                        for line in text.splitlines()
                        if re.split(r"[{ ]", line, maxsplit=1)[0] in names
                    )
                    for family in text_string_to_metric_families(text):
                        for s in family.samples:
                            if s.name not in names:
                                continue
                            labels = {**s.labels, "pod": pod}
                            body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                            seen[f"{s.name}{{{body}}}"] = s.value
                scrapes.append(seen)
    finally:
        for runner, _ in served.values():
            await runner.cleanup()
    keys = sorted({k for scrape in scrapes for k in scrape})
    return {
        k: " ".join(f"{scrape[k]:g}" if k in scrape else "_" for scrape in scrapes) for k in keys
    }


def _group(series: dict[str, str], checks: list[tuple[str, str, list[dict[str, str]]]]) -> dict:
    return {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series.items()],
        "alert_rule_test": [
            {
                "eval_time": at,
                "alertname": alert,
                "exp_alerts": [{"exp_labels": labels} for labels in fires],
            }
            for alert, at, fires in checks
        ],
    }


def _promtool(tmp_path: Path, name: str, content: Any, *args: str) -> None:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    proc = subprocess.run(
        [PROMTOOL, *args, str(path)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _rules(tmp_path: Path) -> None:
    groups = build("monitoring")[0]["spec"]["groups"]
    _promtool(tmp_path, "full.yaml", {"groups": groups}, "check", "rules")
    # Unit tests compare annotations exactly; strip them and test the expressions.
    bare = copy.deepcopy(groups)
    for rule in bare[0]["rules"]:
        rule.pop("annotations")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": bare}))


def _run(tmp_path: Path, groups: list[dict]) -> None:
    _rules(tmp_path)
    _promtool(
        tmp_path,
        "tests.yaml",
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": groups},
        "test",
        "rules",
    )


CHANGES = {"foresize_request_changes_total", "foresize_resizes_total"}


def test_every_counter_label_set_of_a_target_is_exported_at_zero_before_its_first_change():
    """N1: `declare` (each pass, before its actions) exports every label set a target's
    counters can take at 0: the admission request changes of every target in the cluster,
    the in-place ones and the resize outcomes of the targets this replica holds."""
    state = _state(["web", "db"])
    replica = Replica("a", state)
    full = replica.snapshot()
    web = [t for t in full.targets if t.metadata.name == "web"]
    owned = dataclasses.replace(full, targets=web)
    replica.recorder.declare(full, owned, 0.0)
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(replica.metrics.exposition().decode())
        for s in f.samples
        if s.name in CHANGES
    }
    want = set()
    for target, sources in (("shop/web", ("in_place", "admission")), ("shop/db", ("admission",))):
        for resource in RESOURCES:
            for direction in DIRECTIONS:
                for source in sources:
                    labels = {"target": target, "resource": resource, "direction": direction}
                    labels["source"] = source
                    want.add(("foresize_request_changes_total", tuple(sorted(labels.items()))))
                if target == "shop/web":
                    for outcome in OUTCOMES:
                        labels = {"target": target, "resource": resource, "direction": direction}
                        labels["outcome"] = outcome
                        want.add(("foresize_resizes_total", tuple(sorted(labels.items()))))
    assert set(got) == want
    assert set(got.values()) == {0.0}
    assert replica.metrics.declare_targets(["shop/web", "shop/db"], ["shop/web"]) == 0  # once


async def test_request_change_and_rejected_alerts_fire_on_the_first_change_after_a_start(
    tmp_path,
):
    """N1: the first change of every series fires, whether its label set was declared at 0
    first (shop/web, shop/db: targets seen by an earlier pass) or is exported already
    counted (shop/new: created after the last pass; the webhook sizes a pod of it and that
    pass's resize is refused before the next scrape)."""
    pods = [_pod("web-1", "n1", "250m", "250m"), _pod("db-1", "n1", "250m", "250m")]
    state = _state(["web", "db"], pods)
    replicas = {"a": Replica("a", state)}

    def create_new(rs: dict[str, Replica]) -> None:
        state.apply_event("AIScaleTarget", "ADDED", _target("new"))
        state.apply_event("Pod", "ADDED", _pod("new-1", "n2", "250m", "250m"))

    def every_pass(rs: dict[str, Replica]) -> None:
        rs["a"].start_pass()

    steps: dict[int, list[Step]] = {m: [every_pass] for m in range(46)}
    steps[2] = [every_pass, lambda rs: rs["a"].resize("web", "web-1", 500)]
    steps[3] = [
        create_new,
        lambda rs: rs["a"].admit("new", "new-1", 400),
        every_pass,
        lambda rs: rs["a"].resize("new", "new-1", 500, code=422),
    ]
    steps[4] = [every_pass, lambda rs: rs["a"].resize("db", "db-1", 100, code=422)]
    series = await exported_series(replicas, steps, 45, CHANGES)
    # The exporter as it is: shop/web existed at 0 before its change, shop/new's first
    # scrape already holds its first change.
    changes = 'foresize_request_changes_total{direction="up",pod="a",resource="cpu",%s}'
    web = changes % 'source="in_place",target="shop/web"'
    new = changes % 'source="admission",target="shop/new"'
    assert series[web].split()[:4] == ["0", "0", "1", "1"]
    assert series[new].split()[:4] == ["_", "_", "_", "1"]

    changed = "ForesizeRequestChanged"
    info = {"severity": "info", "resource": "cpu"}
    rejected = "ForesizeResizeRejected"
    _run(
        tmp_path,
        [
            _group(
                series,
                [
                    (changed, "1m", []),
                    (
                        changed,
                        "5m",
                        [
                            {**info, "target": "shop/web", "source": "in_place"},
                            {**info, "target": "shop/new", "source": "admission"},
                        ],
                    ),
                    (changed, "10m", []),
                    (rejected, "8m", [{"severity": "warning", "target": "shop/new"}]),
                    (
                        rejected,
                        "10m",
                        [
                            {"severity": "warning", "target": "shop/db"},
                            {"severity": "warning", "target": "shop/new"},
                        ],
                    ),
                    (rejected, "45m", []),
                ],
            )
        ],
    )


async def test_every_other_alert_fires_on_the_series_the_exporter_produces(tmp_path):
    """The remaining alerts, each on its conditions and not beside them, with the series
    made by the recorder and metric families as the operator sets them."""
    pods = [
        _pod("web-1", "n1", "250m", "250m"),
        _pod("calm-1", "n1", "250m", "250m"),
        # n1: spec 2 cores, 1 allocated (an upsize the kubelet has not landed): gap 1 core.
        _pod("big-1", "n1", "2", "1"),
        # n2: 100m over 200m allocated (gap 0.1 core) and 6Gi allocated over 1Gi (5 GiB).
        _pod("odd-1", "n2", "100m", "200m", mem="1Gi", alloc_mem="6Gi"),
    ]
    state = _state(["web", "calm", "ok"], pods)
    replicas = {"a": Replica("a", state), "b": Replica("b", state)}

    def pass_a(rs: dict[str, Replica]) -> None:
        rs["a"].start_pass()
        rs["a"].recorder.observe(rs["a"].snapshot())

    def churn(minute: int) -> Step:
        def step(rs: dict[str, Replica]) -> None:
            # shop/web up and down every 5 minutes; shop/calm only up.
            rs["a"].resize("web", "web-1", 500 if minute % 10 == 0 else 100)
            rs["a"].resize("calm", "calm-1", 500)

        return step

    def start(rs: dict[str, Replica]) -> None:
        for replica in rs.values():
            replica.metrics.leader.labels("1").set(0)
            replica.metrics.certificate_expiry.set(86400 if replica.pod == "a" else 9e6)
        rs["a"].metrics.leader.labels("0").set(1)
        rs["a"].status("web", {"pods_stalled": 2, "circuit_breaker": {"state": "open"}})
        rs["a"].status("ok", {"pods_stalled": 0, "circuit_breaker": {"state": "closed"}})

    def webhook_timeouts(rs: dict[str, Replica]) -> None:
        rs["b"].metrics.webhook_bad_requests.labels("timeout").inc(60)

    minutes = 100
    steps: dict[int, list[Step]] = {m: [pass_a, webhook_timeouts] for m in range(minutes + 1)}
    steps[0] = [start, *steps[0]]
    for m in range(0, minutes + 1, 5):
        steps[m] = [*steps[m], churn(m)]
    names = {
        *CHANGES,
        "foresize_stalled_pods",
        "foresize_breaker_open",
        "foresize_node_charge_gap",
        "foresize_leader",
        "foresize_webhook_bad_requests_total",
        "foresize_webhook_certificate_expiry_seconds",
    }
    series = await exported_series(replicas, steps, minutes, names)
    warning = {"severity": "warning"}
    up = {'up{job="foresize-webhook"}': "1x5 0x20"}
    _run(
        tmp_path,
        [
            _group(
                series,
                [
                    (
                        "ForesizeResizeChurn",
                        "80m",
                        [{**warning, "target": "shop/web", "resource": "cpu"}],
                    ),
                    ("ForesizeResizeChurn", "15m", []),
                    ("ForesizeResizeStalled", "5m", []),
                    ("ForesizeResizeStalled", "20m", [{**warning, "target": "shop/web"}]),
                    (
                        "ForesizeCircuitBreakerOpen",
                        "5m",
                        [{"severity": "critical", "target": "shop/web"}],
                    ),
                    ("ForesizeSchedulerChargeDivergence", "30m", [{**warning, "node": "n1"}]),
                    (
                        "ForesizeSchedulerChargeDivergenceMemory",
                        "30m",
                        [{**warning, "node": "n2"}],
                    ),
                    ("ForesizeNoLeaseHeld", "20m", [{"severity": "critical", "shard": "1"}]),
                    ("ForesizeWebhookErrors", "30m", [warning]),
                    ("ForesizeWebhookCertificateExpiry", "90m", [warning]),
                    ("ForesizeWebhookCertificateExpiry", "30m", []),
                ],
            ),
            _group(up, [("ForesizeOperatorDown", "20m", [{"severity": "critical"}])]),
            _group({'up{job="foresize-webhook"}': "1x30"}, [("ForesizeOperatorDown", "20m", [])]),
        ],
    )


def test_a_deleted_targets_counters_go_an_hour_after_it_and_come_back_at_zero():
    """Declared counters must not outlive their target for ever (24 label sets each): a
    target gone from the cluster keeps its counters (its last changes are still scraped
    and alerted on) for FORGET_COUNTERS_AFTER, then they are removed; back, it starts at 0."""
    from foresize.adapters.telemetry.recorder import FORGET_COUNTERS_AFTER

    state = _state(["web", "db"], [_pod("db-1", "n1", "250m", "250m")])
    replica = Replica("a", state)
    snap = replica.snapshot()
    replica.recorder.declare(snap, snap, 0.0)
    replica.resize("db", "db-1", 500)

    def targets() -> dict[str, float]:
        out: dict[str, float] = {}
        for f in text_string_to_metric_families(replica.metrics.exposition().decode()):
            for s in f.samples:
                if s.name in CHANGES:
                    t = s.labels["target"]
                    out[t] = out.get(t, 0.0) + s.value
        return out

    assert targets() == {"shop/web": 0.0, "shop/db": 2.0}  # a resize and a request change
    state.apply_event("AIScaleTarget", "DELETED", _target("db"))
    snap = replica.snapshot()
    replica.recorder.declare(snap, snap, 60.0)
    replica.recorder.declare(snap, snap, FORGET_COUNTERS_AFTER - 1.0)
    assert targets() == {"shop/web": 0.0, "shop/db": 2.0}
    replica.recorder.declare(snap, snap, FORGET_COUNTERS_AFTER + 1.0)
    assert targets() == {"shop/web": 0.0}
    state.apply_event("AIScaleTarget", "ADDED", _target("db"))
    snap = replica.snapshot()
    replica.recorder.declare(snap, snap, FORGET_COUNTERS_AFTER + 60.0)
    assert targets() == {"shop/web": 0.0, "shop/db": 0.0}
