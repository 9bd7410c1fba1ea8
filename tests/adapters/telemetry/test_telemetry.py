"""/metrics after a run: real Action/ActionResult pairs (from the kube executor against
kmock, 201/429/422 included) fed to the recorder, the node charge gap computed from pods
mid-resize, the webhook histogram fed by the real admission app, and the endpoint scraped
over HTTP and parsed with Prometheus' own text parser."""

from __future__ import annotations

import copy
import json
import logging

import aiohttp
import kmock
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from foresize.adapters.telemetry.logs import JsonFormatter
from foresize.adapters.telemetry.metrics import METRIC_NAMES, ForesizeMetrics
from foresize.adapters.telemetry.recorder import ChangeRecorder
from foresize.core.cluster.actions import (
    ActionResult,
    ContainerResize,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.cluster.kubejson import pod_from
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.state import ClusterState

PODS = kmock.resource("v1/pods")


def pod_json(name: str, cpu: str, allocated_cpu: str, node: str = "n1", oom: bool = False) -> dict:
    status = {
        "name": "app",
        "ready": True,
        "restartCount": 2 if oom else 0,
        "allocatedResources": {"cpu": allocated_cpu, "memory": "256Mi"},
        "resources": {"requests": {"cpu": allocated_cpu, "memory": "256Mi"}},
    }
    if oom:
        status["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
            ],
        },
        "status": {"phase": "Running", "containerStatuses": [status]},
    }


def build_state() -> ClusterState:
    from foresize.core.api.types import parse_object

    state = ClusterState(target_parser=lambda kind, obj: parse_object(obj))
    state.apply_event(
        "Node",
        "ADDED",
        {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}},
    )
    state.apply_event(
        "Deployment",
        "ADDED",
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    state.apply_event(
        "ReplicaSet",
        "ADDED",
        {
            "metadata": {
                "name": "web-abc",
                "namespace": "shop",
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
            },
            "spec": {"replicas": 3},
        },
    )
    # web-1: spec already raised to 500m, kubelet still on 250m (a pending upsize):
    # the scheduler charges max(spec, allocated) = 500m; spec sum counts 500m too.
    # web-2: a downsize to 100m not yet actuated: charge 300m, spec 100m -> gap +200m.
    for name, cpu, alloc, oom in (
        ("web-1", "250m", "250m", False),
        ("web-2", "100m", "300m", True),
        ("web-3", "250m", "250m", False),
    ):
        state.apply_event("Pod", "ADDED", pod_json(name, cpu, alloc, oom=oom))
    state.apply_event(
        "AIScaleTarget",
        "ADDED",
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "autonomous",
                    "containers": [
                        {
                            "name": "*",
                            "cpu": {"lowerbound": "50m"},
                            "memory": {"lowerbound": "64Mi"},
                        }
                    ],
                },
            },
        },
    )
    return state


async def scrape(app: web.Application) -> str:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as resp,
        ):
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            return await resp.text()
    finally:
        await runner.cleanup()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_endpoint_after_a_run(kmock):
    state = build_state()
    for name in ("web-1", "web-2", "web-3"):
        kmock.objects[PODS, "shop", name] = pod_json(name, "250m", "250m")
    kmock["post /api/v1/namespaces/shop/pods/web-3/eviction"] << 201 << {"kind": "Status"}
    (
        kmock["post /api/v1/namespaces/shop/pods/web-2/eviction"]
        << 429
        << {
            "kind": "Status",
            "code": 429,
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget"}], "retryAfterSeconds": 10},
        }
    )
    (
        kmock["patch /api/v1/namespaces/shop/pods/web-2/resize"]
        << 422
        << {
            "kind": "Status",
            "code": 422,
            "reason": "Invalid",
            "message": "Pod QOS Class may not change as a result of resizing",
        }
    )
    api = KubeApi.from_url(str(kmock.url).rstrip("/"))
    try:
        executor = KubeExecutor(api, pod_lookup=state.pod)
        before = state.snapshot(now=1000.0)
        actions = [
            ResizePod(
                "shop", "web-1", (ContainerResize("app", requests={"cpu": 500}),), target="shop/web"
            ),
            ResizePod(
                "shop",
                "web-2",
                (ContainerResize("app", requests={"cpu": 50}, limits={"cpu": 100}),),
                target="shop/web",
            ),
            EvictPod("shop", "web-3", target="shop/web"),
            EvictPod("shop", "web-2", target="shop/web"),
        ]
        pairs = await executor.apply_all(actions)
    finally:
        await api.close()
    assert [r.code for _, r in pairs] == [200, 422, 201, 429]
    pairs.append(
        (
            WriteTargetStatus(
                "shop",
                "web",
                {
                    "pods_stalled": 1,
                    "circuit_breaker": {"state": "open"},
                    "vertical_suggestion": {
                        "uid": "s1",
                        "containers": [
                            {
                                "name": "app",
                                "requests": {"cpu": "500m", "memory": "300Mi"},
                                "limits": {"memory": "600Mi"},
                            }
                        ],
                    },
                },
            ),
            ActionResult(ok=True),
        )
    )
    metrics = ForesizeMetrics()
    recorder = ChangeRecorder(metrics)
    events = recorder.record(pairs, before)
    # Outcome events: Resized (pod + target), Evicted (pod + target); the 422 and 429 are the
    # planner's to report.
    assert [(e.kind, e.name, e.reason) for e in events] == [
        ("Pod", "web-1", "Resized"),
        ("AIScaleTarget", "web", "Resized"),
        ("Pod", "web-3", "Evicted"),
        ("AIScaleTarget", "web", "Evicted"),
    ]
    assert "250m -> 500m" in events[0].message and events[0].uid == "uid-web-1"
    # The cluster view after the run: web-2 is mid-downsize (spec 100m, allocated 300m).
    oom_events = recorder.observe(state.snapshot(now=1010.0))
    assert [(e.name, e.reason) for e in oom_events] == [("web-2", "OOMKilled")]
    assert [(p.name, c) for p, c, _ in recorder.new_ooms] == [("web-2", "app")]  # for history
    assert recorder.observe(state.snapshot(now=1020.0)) == []  # counted once
    recorder.set_provisioning("shop/web", "cpu", requested=0.75, used=0.5)

    # The webhook histogram, fed by the real admission app's requests.
    from foresize.shells.webhook.server import create_app

    webhook = create_app(lambda: None)
    webhook.middlewares.append(metrics.webhook_middleware())
    runner = web.AppRunner(webhook)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with aiohttp.ClientSession() as session:
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "1"},
            }
            for _ in range(3):
                async with session.post(f"http://127.0.0.1:{port}/mutate-pods", json=review) as r:
                    assert r.status == 200
    finally:
        await runner.cleanup()
    with metrics.loop_duration.time():
        pass

    text = await scrape(metrics.aiohttp_app())
    families = {f.name for f in text_string_to_metric_families(text)}
    # prometheus_client strips `_total` from counter family names in the parser.
    exposed = {n.removesuffix("_total") for n in METRIC_NAMES}
    assert exposed <= families, exposed - families
    got = samples(text)
    t = ("target", "shop/web")
    assert (
        got[
            (
                "foresize_resizes_total",
                (("direction", "up"), ("outcome", "success"), ("resource", "cpu"), t),
            )
        ]
        == 1
    )
    assert (
        got[
            (
                "foresize_resizes_total",
                (("direction", "down"), ("outcome", "rejected"), ("resource", "cpu"), t),
            )
        ]
        == 1
    )
    assert got[("foresize_evictions_total", (("outcome", "success"), t))] == 1
    assert got[("foresize_evictions_total", (("outcome", "deferred"), t))] == 1
    assert got[("foresize_stalled_pods", (t,))] == 1
    assert got[("foresize_breaker_open", (t,))] == 1
    rec = (
        "foresize_recommendation",
        (("container", "app"), ("kind", "request"), ("resource", "memory"), t),
    )
    assert got[rec] == 300 * 2**20
    assert (
        got[
            (
                "foresize_recommendation",
                (("container", "app"), ("kind", "request"), ("resource", "cpu"), t),
            )
        ]
        == 0.5
    )
    assert (
        got[
            (
                "foresize_recommendation",
                (("container", "app"), ("kind", "limit"), ("resource", "memory"), t),
            )
        ]
        == 600 * 2**20
    )
    assert got[("foresize_provisioning_ratio", (("resource", "cpu"), t))] == 1.5
    assert got[("foresize_oom_kills_total", (("container", "app"), t))] == 1
    assert got[
        ("foresize_node_charge_gap", (("node", "n1"), ("resource", "cpu")))
    ] == pytest.approx(0.2)
    assert got[("foresize_node_charge_gap", (("node", "n1"), ("resource", "memory")))] == 0
    assert got[("foresize_webhook_duration_seconds_count", ())] == 3
    assert got[("foresize_loop_duration_seconds_count", ())] == 1


def test_json_logs_keep_structured_fields():
    record = logging.makeLogRecord(
        {
            "name": "foresize.changes",
            "levelname": "INFO",
            "msg": "resize %s",
            "args": ("ok",),
            "target": "shop/web",
            "code": 200,
        }
    )
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "resize ok" and line["target"] == "shop/web" and line["code"] == 200
    assert line["level"] == "info" and line["logger"] == "foresize.changes"


def test_pod_conversion_reads_resize_state():
    raw = copy.deepcopy(pod_json("web-1", "500m", "250m"))
    raw["metadata"]["generation"] = 3
    raw["status"]["observedGeneration"] = 2
    raw["status"]["conditions"] = [
        {
            "type": "PodResizePending",
            "status": "True",
            "reason": "Deferred",
            "message": "Node didn't have enough capacity",
        }
    ]
    pod = pod_from(raw)
    assert pod.generation == 3 and pod.observed_generation == 2
    assert pod.condition("PodResizePending").reason == "Deferred"
    assert pod.containers[0].resources.requests == {"cpu": 500, "memory": 256 * 2**20}
    assert pod.container_statuses[0].allocated == {"cpu": 250, "memory": 256 * 2**20}


def test_http_clients_log_each_request_only_at_debug():
    # Audit kube.md §6: an INFO line per API request (Lease renewals, polls, status writes)
    # buried the operator's own lines.
    from foresize.adapters.telemetry.logs import setup_logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("info", json_format=False)
        assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)
        assert logging.getLogger("httpx2").isEnabledFor(logging.WARNING)
        assert logging.getLogger("foresize.operator").isEnabledFor(logging.INFO)
        setup_logging("debug", json_format=False)
        assert logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        logging.getLogger("httpx2").setLevel(logging.NOTSET)


def test_admission_events_waiting_for_a_pass_are_coalesced_and_capped(caplog):
    """While no pass drains them (passes failing, say), the SizedAtAdmission Events of the
    webhook do not pile up: one per target and change, at most MAX_QUEUED_ADMISSION_EVENTS;
    the ones left out are logged, and the request-change counter still counts every pod."""
    from foresize.adapters.telemetry.recorder import MAX_QUEUED_ADMISSION_EVENTS
    from foresize.core.admission.pod import PodDecision
    from foresize.core.cluster.model import Container, OwnerRef, Pod, ResourceRequirements
    from foresize.core.cluster.target import target_view

    recorder = ChangeRecorder()
    view = target_view(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}},
        }
    )
    pod = Pod(
        "shop",
        "",
        owner=OwnerRef("ReplicaSet", "web-abc"),
        containers=[Container("app", ResourceRequirements({"cpu": 100}, {}))],
    )
    distinct = MAX_QUEUED_ADMISSION_EVENTS + 50
    for i in range(distinct):
        for _ in range(3):  # three pods with the same change: one Event
            decision = PodDecision(view, {"app": ResourceRequirements({"cpu": 200 + i}, {})})
            recorder.admitted(pod, decision)
    counted = recorder.metrics.request_changes.labels("shop/web", "cpu", "up", "admission")
    assert counted._value.get() == 3 * distinct
    with caplog.at_level(logging.WARNING, logger="foresize.changes"):
        events = recorder.drain_admissions()
    assert len(events) == MAX_QUEUED_ADMISSION_EVENTS
    assert "100m -> 200m" in events[0].message
    assert "50 SizedAtAdmission Event(s) not queued" in caplog.text
    assert recorder.drain_admissions() == []


def test_shadow_scores_become_gauges_and_go_with_their_target():
    """status.shadow (issue 24 part 3) is exported as foresize_shadow_score, one sample per
    target, policy, resource and metric; a target that is gone takes its samples along."""
    metrics = ForesizeMetrics()
    recorder = ChangeRecorder(metrics)
    score = {"slack": 0.4, "shortfall": 0.01, "under": 0.05}
    status = {
        "shadow": [
            {"name": "active", "score": {"cpu": score}},
            {"name": "cheap", "score": {"cpu": {**score, "slack": 0.2}, "memory": score}},
        ]
    }
    recorder.record([(WriteTargetStatus("shop", "web", status), ActionResult(ok=True))])
    got = samples(metrics.exposition().decode())

    def key(policy, resource, metric):
        labels = {"target": "shop/web", "policy": policy, "resource": resource, "metric": metric}
        return ("foresize_shadow_score", tuple(sorted(labels.items())))

    assert got[key("active", "cpu", "slack")] == 0.4
    assert got[key("cheap", "cpu", "slack")] == 0.2
    assert got[key("cheap", "memory", "shortfall")] == 0.01
    metrics.forget_targets(set())
    assert not any(k[0] == "foresize_shadow_score" for k in samples(metrics.exposition().decode()))
