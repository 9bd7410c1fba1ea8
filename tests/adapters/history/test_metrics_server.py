"""metrics.k8s.io polling (against the strict API server) into the in-memory history, the start-up
exclusion, and history -> the target's vertical suggestion (bounds, limit ratio, lookback)."""

from __future__ import annotations

import numpy as np
import pytest

from foresize.adapters.history.memory import UsageHistory
from foresize.adapters.history.metrics_server import (
    METRICS_PATH,
    TOTAL_CONTAINER,
    HistorySink,
    MetricsServerPoller,
    PodCpuSink,
    Sample,
)
from foresize.core.cluster.boost import BOOST_ANNOTATION, PodCpuWindow
from foresize.core.history import SeriesKey
from foresize.core.recommend.suggestions import cadence_of, plan_suggestions
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.handlers import parse_foresize
from foresize.shells.kube.state import ClusterState
from support.traces import NOW, crane_samples


def owned_pod(name: str, start: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "creationTimestamp": start,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f8", "controller": True}],
        },
        "spec": {"containers": [{"name": "app"}]},
        "status": {"phase": "Running", "startTime": start},
    }


def state_with_workload() -> ClusterState:
    state = ClusterState(target_parser=parse_foresize)
    state.apply_event(
        "Deployment",
        "ADDED",
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "128Mi"},
                                    "limits": {"memory": "1Gi"},
                                },
                            }
                        ]
                    }
                },
            },
        },
    )
    state.apply_event(
        "ReplicaSet",
        "ADDED",
        {
            "metadata": {
                "name": "web-7d9f8",
                "namespace": "shop",
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
            },
            "spec": {"replicas": 2},
        },
    )
    return state


async def test_poller_reads_metrics_api_and_skips_new_pods(apiserver):
    state = state_with_workload()
    state.apply_event("Pod", "ADDED", owned_pod("web-7d9f8-aaaaa", "2026-05-28T19:00:00Z"))
    # Started 60 s before the sample: inside its first 2 minutes.
    state.apply_event("Pod", "ADDED", owned_pod("web-7d9f8-bbbbb", "2026-05-28T20:25:40Z"))
    for item in [
        {
            "metadata": {"name": "web-7d9f8-aaaaa", "namespace": "shop"},
            "timestamp": "2026-05-28T20:26:40Z",
            "window": "15s",
            "containers": [{"name": "app", "usage": {"cpu": "123456789n", "memory": "204800Ki"}}],
        },
        {
            "metadata": {"name": "web-7d9f8-bbbbb", "namespace": "shop"},
            "timestamp": "2026-05-28T20:26:40Z",
            "window": "15s",
            "containers": [{"name": "app", "usage": {"cpu": "2", "memory": "2Gi"}}],
        },
        {
            "metadata": {"name": "agent-x7k2p", "namespace": "ops"},
            "timestamp": "2026-05-28T20:26:40Z",
            "window": "15s",
            "containers": [{"name": "agent", "usage": {"cpu": "5m", "memory": "10Mi"}}],
        },
    ]:
        apiserver.seed({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics", **item})
    history = UsageHistory(step=60.0)
    api = KubeApi.from_url(apiserver.url)
    try:
        poller = MetricsServerPoller(api, [HistorySink(history)], state=state, clock=lambda: NOW)
        samples = await poller.poll_once()
    finally:
        await api.close()
    (req,) = apiserver.calls("GET", f"^{METRICS_PATH}$")
    assert req.code == 200 and req.verb == "list"
    # In the API server's order (by namespace, then name).
    assert samples == [
        Sample(NOW, "ops", "agent", "agent-x7k2p", "agent", 0.005, 10 * 2**20),
        Sample(
            NOW, "shop", "web", "web-7d9f8-aaaaa", "app", 0.123456789, 204800 * 1024.0, "Deployment"
        ),
    ]
    # The owner the state holds gives the kind; a pod known by its name alone has none.
    assert sorted(history.keys) == [
        SeriesKey("ops", "agent", TOTAL_CONTAINER),
        SeriesKey("ops", "agent", "agent"),
        SeriesKey("shop", "web", TOTAL_CONTAINER, "Deployment"),
        SeriesKey("shop", "web", "app", "Deployment"),
    ]
    web = SeriesKey("shop", "web", "app", "Deployment")
    _, mem = history.series(web, "memory", NOW - 60, NOW + 60)
    assert np.nanmax(mem) == 204800 * 1024  # the new pod's 2 GiB is not history


@pytest.mark.parametrize("days,enough", [(2.0, True), (0.25, False)])
def test_history_becomes_a_bounded_suggestion(days, enough):
    history = UsageHistory(step=60.0)
    HistorySink(history).add_samples(crane_samples(days))
    key = SeriesKey("shop", "web", "app")
    _, cpu = history.series(key, "cpu", NOW - days * 86400, NOW + 60)
    assert np.isfinite(cpu).sum() == int(days * 1440)
    state = state_with_workload()
    target = {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "t-web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "vertical": {
                "mode": "autonomous",
                "containers": [
                    {
                        "name": "app",
                        "cpu": {"lowerbound": "50m", "upperbound": "300m"},
                        "memory": {"lowerbound": "64Mi", "limit": {"ratio": 1.5}},
                    }
                ],
            },
        },
    }
    state.apply_event("AIScaleTarget", "ADDED", target)
    snap = state.snapshot(NOW)
    assert plan_suggestions(snap, history, NOW, due=lambda t: False) == []
    assert cadence_of(snap.targets[0], 60.0) == 900.0  # forecast_blocks (15m) by default
    (write,) = plan_suggestions(snap, history, NOW)
    assert (write.namespace, write.name) == ("shop", "web")
    assert write.status["hasEnoughDataToScale"] is enough
    if not enough:  # autonomous: no suggestion before min_lookback_to_scale (24 h)
        assert "vertical_suggestion" not in write.status
        return
    (entry,) = write.status["vertical_suggestion"]["containers"]
    from foresize.core.api.quantity import cpu_millis, to_bytes
    from foresize.core.recommend.histories import load_histories
    from foresize.core.recommend.target import recommend_target

    # Exactly what the recommender's entry point says for the same history and template.
    direct = recommend_target(
        snap.targets[0],
        load_histories(history, "shop", "web", ["app"], NOW, window=14 * 86400.0),
        {"app": snap.workload("Deployment", "shop", "web").template.containers[0].resources},
        None,
        NOW,
    )
    want = direct.suggestion.containers["app"]
    cpu = cpu_millis(entry["requests"]["cpu"])
    mem = to_bytes(entry["requests"]["memory"])
    assert (cpu, mem) == (want.requests["cpu"], want.requests["memory"])
    assert 50 <= cpu <= 300  # the bounds
    assert mem >= 300 * 2**20  # covers the observed working set
    assert abs(to_bytes(entry["limits"]["memory"]) - 1.5 * mem) <= 2**20  # limit.ratio
    # Same content, same uid (the breaker and stall tracking are per suggestion).
    (again,) = plan_suggestions(state.snapshot(NOW + 60), history, NOW + 60)
    assert again.status["vertical_suggestion"]["uid"] == write.status["vertical_suggestion"]["uid"]


def test_suggestions_price_memory_risk_against_the_whole_fleet(monkeypatch):
    """The suggestion state keeps every target's memory forecast at its mode's level; the
    fleet's mean is the risk allocation's reference for the targets due this round, and
    targets that left the cluster drop out of it."""
    from foresize.core.api.quantity import to_bytes
    from foresize.core.recommend import core as recommend_core
    from foresize.core.recommend.suggestions import SuggestionState

    # The recent-peak rule would hold the spike by itself; this checks the allocation.
    monkeypatch.setattr(recommend_core, "MEMORY_PEAK_WINDOW", 0.0)

    history = UsageHistory(step=60.0)
    sink = HistorySink(history)
    sink.add_samples(crane_samples(2.0))
    # One spike of 12 GiB just now: this container's high memory levels lie far apart.
    sink.add_samples([Sample(NOW, "shop", "web", "web-7d9f8-aaaaa", "app", 0.1, 12 * 2**30)])
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}

    def target(name: str, mode: str) -> dict:
        return {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": name, "namespace": "shop", "uid": f"t-{name}"},
            "spec": {"scaleTargetRef": ref, "vertical": {"mode": mode}},
        }

    state = state_with_workload()
    state.apply_event("AIScaleTarget", "ADDED", target("web", "recommendation"))
    state.apply_event("AIScaleTarget", "ADDED", target("big", "observe"))
    snap = state.snapshot(NOW)

    def memory(sstate: SuggestionState) -> int:
        (write,) = plan_suggestions(snap, history, NOW, state=sstate)
        (entry,) = write.status["vertical_suggestion"]["containers"]
        return to_bytes(entry["requests"]["memory"])

    alone = SuggestionState()
    own = memory(alone)
    assert set(alone.memory_at_mode) == {"shop/web/app"}
    assert alone.memory_at_mode["shop/web/app"] > 0
    # A fleet of far larger containers makes this one's protection cheap: it buys safety;
    # a fleet of tiny ones makes it expensive: it takes the cheapest level.
    rich = memory(SuggestionState(memory_at_mode={"shop/big/app": 1e15}))
    poor_state = SuggestionState(memory_at_mode={"shop/big/app": 1.0, "shop/gone/app": 1e15})
    poor = memory(poor_state)
    assert poor <= own <= rich and poor < rich
    assert "shop/gone/app" not in poor_state.memory_at_mode  # that target left the cluster


def test_samples_persist_in_the_sqlite_store_across_a_restart(tmp_path):
    from foresize.adapters.history.sqlite import HistoryStore

    path = tmp_path / "history.db"
    store = HistoryStore(path)
    sink = HistorySink(store)
    sink.add_samples(crane_samples(0.5))
    sink.record_oom(SeriesKey("shop", "web", "app"), NOW - 600, 400 * 2**20)
    store.close()
    reopened = HistoryStore(path)  # the operator restarted: the history is still there
    key = SeriesKey("shop", "web", "app")
    _, cpu = reopened.series(key, "cpu", NOW - 720 * 60, NOW + 60)
    assert np.isfinite(cpu).sum() == 720
    _, total = reopened.series(SeriesKey("shop", "web", TOTAL_CONTAINER), "cpu", NOW - 60, NOW + 60)
    _, per_replica = reopened.series(key, "cpu", NOW - 60, NOW + 60)
    # Two replicas (the second at 90%): the container's CPU is their median (0.95x the
    # first), the total their sum (1.9x the first).
    assert np.nanmax(total) == pytest.approx(1.9 / 0.95 * np.nanmax(per_replica), rel=1e-6)
    assert [e[0] for e in reopened.events(key, "oom", NOW - 3600, NOW)] == [NOW - 600]
    assert reopened.first_seen(key) == pytest.approx(NOW - 719 * 60)
    reopened.close()


async def test_a_boosted_pods_start_up_samples_reach_its_cpu_window_not_the_history(apiserver):
    """The start-up boost's settling is made of a pod's first minutes: the poller hands
    them to the pods' CPU window (`PodCpuSink`, pods with a boost annotation only) while
    the history still leaves them out."""
    state = state_with_workload()
    boosted = owned_pod("web-7d9f8-bbbbb", "2026-05-28T20:25:40Z")  # 60 s old: starting
    boosted["metadata"]["annotations"] = {BOOST_ANNOTATION: '{"containers": {}}'}
    state.apply_event("Pod", "ADDED", boosted)
    state.apply_event("Pod", "ADDED", owned_pod("web-7d9f8-ccccc", "2026-05-28T20:25:40Z"))
    for name, cpu in (("web-7d9f8-bbbbb", "900m"), ("web-7d9f8-ccccc", "800m")):
        apiserver.seed(
            {
                "apiVersion": "metrics.k8s.io/v1beta1",
                "kind": "PodMetrics",
                "metadata": {"name": name, "namespace": "shop"},
                "timestamp": "2026-05-28T20:26:40Z",
                "window": "15s",
                "containers": [{"name": "app", "usage": {"cpu": cpu, "memory": "100Mi"}}],
            }
        )
    history = UsageHistory(step=60.0)
    window = PodCpuWindow()
    api = KubeApi.from_url(apiserver.url)
    try:
        poller = MetricsServerPoller(
            api,
            [HistorySink(history)],
            state=state,
            clock=lambda: NOW,
            startup_sinks=[PodCpuSink(window, state)],
        )
        assert await poller.poll_once() == []  # both pods are in their first 2 minutes
    finally:
        await api.close()
    assert window.samples("shop/web-7d9f8-bbbbb") == [(NOW, {"app": 0.9})]
    assert window.samples("shop/web-7d9f8-ccccc") == []  # not boosted
    assert history.keys == []
