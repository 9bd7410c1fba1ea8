"""The kube shell sends a pass's actions several targets at once, one target's in order.

One at a time, a call's round trip set the pace of a pass (1,000 resizes took two minutes
at "50 QPS", kube.md N6). The executor here answers after a delay and records what was in
flight; the planner is the real pass's output shape (resizes, then each target's status)."""

from __future__ import annotations

import asyncio

from foresize.core.cluster.actions import (
    ActionResult,
    ContainerResize,
    EvictPod,
    ResizePod,
    WriteTargetStatus,
)
from foresize.core.reconcile import ActionQueue
from foresize.core.vertical import TargetState, WorkerState
from foresize.shells.kube.shell import ACTION_CONCURRENCY, KubeShell
from foresize.shells.kube.state import ClusterState


class SlowExecutor:
    """Answers every call after `delay` seconds; records the calls in flight."""

    server_version = (1, 35)

    def __init__(self, delay: float = 0.01, answers: dict[str, ActionResult] | None = None):
        self.delay = delay
        self.answers = answers or {}
        self.inflight: list[str] = []
        self.most = 0
        self.sent: list[str] = []
        self.overlaps: list[str] = []  # two calls of one target in flight at once

    async def apply_guarded(self, action):
        key = f"{type(action).__name__}:{action.namespace}/{action.name}"
        target = getattr(action, "target", "") or f"{action.namespace}/{action.name}"
        if any(t == target for t in self.inflight):
            self.overlaps.append(key)
        self.inflight.append(target)
        self.most = max(self.most, len(self.inflight))
        self.sent.append(key)
        await asyncio.sleep(self.delay)
        self.inflight.remove(target)
        return self.answers.get(key, ActionResult(ok=True, code=200))

    apply = apply_guarded


def resize(ns: str, target: str, pod: str) -> ResizePod:
    return ResizePod(
        ns, pod, (ContainerResize("app", {"cpu": 200}),), target=f"{ns}/{target}", uid=pod
    )


def shell_with(executor: SlowExecutor) -> KubeShell:
    return KubeShell(ClusterState(), executor)  # type: ignore[arg-type]


async def test_targets_are_sent_side_by_side_and_each_target_in_its_order() -> None:
    actions = []
    for t in range(20):
        actions += [resize("ns", f"t{t}", f"t{t}-p{i}") for i in range(3)]
        actions.append(WriteTargetStatus("ns", f"t{t}", {"pods_stalled": 0}))
    executor = SlowExecutor()
    shell = shell_with(executor)
    queue = ActionQueue(actions, WorkerState(), 0.0)
    await shell._send(queue)

    assert executor.most == ACTION_CONCURRENCY  # never more, and the limit is used
    assert executor.overlaps == []  # one target's calls never overlap
    assert len(queue.done) == len(actions)
    for t in range(20):
        mine = [k for k in executor.sent if k.endswith(f"/t{t}") or f"/t{t}-" in k]
        assert mine == [
            f"ResizePod:ns/t{t}-p0",
            f"ResizePod:ns/t{t}-p1",
            f"ResizePod:ns/t{t}-p2",
            f"WriteTargetStatus:ns/t{t}",
        ]


async def test_an_eviction_held_behind_a_refused_one_of_its_target_is_not_sent() -> None:
    refused = ActionResult(ok=False, code=429, reason="TooManyRequests", retry_after_seconds=30)
    executor = SlowExecutor(answers={"EvictPod:ns/a-0": refused})
    state = WorkerState(targets={"ns/a": TargetState(), "ns/b": TargetState()})
    actions = [
        EvictPod("ns", "a-0", target="ns/a", uid="a-0"),
        EvictPod("ns", "a-1", target="ns/a", uid="a-1"),  # held behind a-0, then deferred
        EvictPod("ns", "b-0", target="ns/b", uid="b-0"),
    ]
    queue = ActionQueue(actions, state, 100.0)
    await shell_with(executor)._send(queue)

    evictions = [k for k in executor.sent if k.startswith("EvictPod")]
    assert sorted(evictions) == ["EvictPod:ns/a-0", "EvictPod:ns/b-0"]
    assert "EmitEvent:ns/a" in executor.sent  # the planner's EvictionDeferred, at once
    results = {a.name: r for a, r in queue.done}
    assert results["a-1"] is None  # deferred after the 429, not sent
    assert results["a-0"] is refused and results["b-0"].ok


async def test_one_at_a_time_when_the_concurrency_is_one() -> None:
    executor = SlowExecutor()
    shell = shell_with(executor)
    shell.concurrency = 1
    actions = [resize("ns", f"t{t}", f"t{t}-p") for t in range(5)]
    await shell._send(ActionQueue(actions, WorkerState(), 0.0))
    assert executor.most == 1 and len(executor.sent) == 5


async def test_a_target_s_status_counts_the_resizes_sent_before_it() -> None:
    """One status write a target a pass: planned before its resizes, it would count none
    of them and the next pass would write it again only to count them."""
    from foresize.core.vertical.state import STATUS_KEY

    executor = SlowExecutor()
    sent: list[dict] = []
    send = executor.apply_guarded

    async def recording(action):
        if isinstance(action, WriteTargetStatus):
            sent.append(action.status)
        return await send(action)

    executor.apply_guarded = recording  # type: ignore[method-assign]
    state = WorkerState(targets={"ns/t0": TargetState()})
    planned = {"pods_resized": 0, "pods_stalled": 0, STATUS_KEY: TargetState().to_status()}
    actions = [
        resize("ns", "t0", "p0"),
        resize("ns", "t0", "p1"),
        WriteTargetStatus("ns", "t0", planned),
    ]
    queue = ActionQueue(actions, state, 0.0)
    await shell_with(executor)._send(queue)
    assert sent[0]["pods_resized"] == 2 and sent[0]["pods_stalled"] == 0
    assert queue.state.targets["ns/t0"].last_status == sent[0]  # the next pass writes nothing
    # A status write that is not the worker's (a recommendation) is sent as planned.
    other = WriteTargetStatus("ns", "t0", {"vertical_suggestion": {"uid": "s"}})
    assert queue.prepared(other) is other
