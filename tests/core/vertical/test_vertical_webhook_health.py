"""Evictions wait while the pod webhook is not serving (VPA's
`--use-admission-controller-status`): an evicted pod gets its new size only through the
webhook, so evicting while it is down brings the pod back at its old size."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from foresize.core.api.quantity import GIB, MIB
from foresize.core.cluster.actions import EmitEvent, EvictPod, ResizePod, WriteTargetStatus
from foresize.core.vertical import WorkerState, plan
from foresize.core.vertical.admit import EVICTION_SKIPPED_WEBHOOK
from foresize.shells.kube.probes import admission_health
from support.sim import evicted, make_sim, operator, pods_of, suggest, workload
from support.vertical import names, of, pod, snap, sugg, target

BIG = {"max_disrupted": 10, "interval": "1s"}


def held(actions: list[Any]) -> list[EmitEvent]:
    return [e for e in of(actions, EmitEvent) if e.reason == EVICTION_SKIPPED_WEBHOOK]


def test_no_eviction_while_the_webhook_is_unhealthy_and_said_once() -> None:
    pods = [pod("p0"), pod("p1")]
    s = snap(pods, [target("recreate", disruption=BIG)])
    down = dataclasses.replace(s, admission_healthy=False)
    actions, state = plan(down, 0.0, WorkerState(), suggestions=sugg())
    assert not of(actions, EvictPod)
    assert [(e.kind, e.name, e.type) for e in held(actions)] == [
        ("AIScaleTarget", "web", "Warning")
    ]
    notes = of(actions, WriteTargetStatus)[-1].status["vertical_notes"]
    assert any("webhook" in n for n in notes)
    actions, state = plan(down, 30.0, state, suggestions=sugg())
    assert not of(actions, EvictPod) and not held(actions)  # announced once
    actions, _ = plan(s, 60.0, state, suggestions=sugg())
    assert names(actions, EvictPod) == ["p0"]  # healthy again: evictions resume


def test_in_place_resizes_go_on_while_the_webhook_is_unhealthy() -> None:
    s = snap([pod("p0")], [target("in_place", disruption=BIG)])
    actions, _ = plan(
        dataclasses.replace(s, admission_healthy=False), 0.0, WorkerState(), suggestions=sugg()
    )
    assert names(actions, ResizePod) == ["p0"]
    assert not held(actions)


def test_the_simulated_webhook_down_holds_evictions_instead_of_looping() -> None:
    sim = make_sim([workload("s", 2)], nodes=2)
    op = operator(
        sim, "recreate", disruption={"max_disrupted": 1}, targets=["Deployment/default/s"]
    )
    op.admission.serving = False  # the webhook server is down, and the operator knows it
    suggest(op, "s", app=({"cpu": 500, "memory": 256 * MIB}, {"cpu": 1000, "memory": GIB}))
    sim.run(900)
    assert not evicted(sim)
    assert sim.events.count("Event", reason=EVICTION_SKIPPED_WEBHOOK) == 1
    op.admission.serving = True
    sim.run(600)
    assert evicted(sim)
    assert all(p.containers[0].resources.requests["memory"] == 256 * MIB for p in pods_of(sim, "s"))
    assert sim.summary(policy="foresize")["totals"]["breaker_openings"] == 0


def test_the_kube_shell_derives_health_from_its_webhook_server_and_certificate() -> None:
    serving = SimpleNamespace(serving=True)
    valid = SimpleNamespace(not_after=1000.0)
    assert admission_health(None, None) is None  # no webhook here: nothing to judge by
    health = admission_health(serving, valid)
    assert health is not None and health(999.0) and not health(1000.0)  # expired
    assert admission_health(serving, None)(5.0)  # plain HTTP (development)
    stopped = admission_health(SimpleNamespace(serving=False), valid)
    assert stopped is not None and not stopped(0.0)


def test_the_kube_cache_puts_the_webhook_health_into_the_snapshot() -> None:
    from foresize.shells.kube.state import ClusterState

    cache = ClusterState()
    assert cache.snapshot(0.0).admission_healthy  # nothing to judge by
    cache.admission_health = admission_health(SimpleNamespace(serving=True), valid_until(10.0))
    assert cache.snapshot(5.0).admission_healthy and not cache.snapshot(10.0).admission_healthy


def valid_until(not_after: float) -> Any:
    return SimpleNamespace(not_after=not_after)
