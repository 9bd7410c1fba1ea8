"""The memo a pass hands to the next (`vertical.memo.PlanMemo`: what was derived from each
pod object, its charge on the node) changes nothing: on a seeded random cluster that
changes between passes (pods added, removed, resized, stalled, handed in again as equal
new objects; nodes resized, added and removed; new suggestions), every pass with the memo
carried plans exactly what the same pass plans from an empty memo. A memo that answered
for another object than the one it came from (a stale entry) is caught."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import pytest

from foresize.core.cluster import capacity
from foresize.core.cluster.model import (
    ContainerStatus,
    ContainerSuggestion,
    Node,
    PodCondition,
    ResourceRequirements,
    Suggestion,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.vertical import WorkerState, plan
from foresize.core.vertical import desired as desired_module
from foresize.core.vertical import planner as planner_module
from foresize.core.vertical import run as run_module
from foresize.core.vertical.desired import KnownPod
from foresize.core.vertical.memo import PlanMemo
from foresize.front.cli.bench_plan import build_snapshot

PASSES = 8
STEP = 400.0  # seconds between passes: stalls pass their timeouts along the way


def _resized(pod, rng: random.Random):  # type: ignore[no-untyped-def]
    """The pod as a new object at another size, the kubelet's allocation landed or not."""
    c = pod.containers[0]
    req = {
        r: max(1, int(v * rng.choice((0.5, 0.8, 1.25, 2.0))))
        for r, v in c.resources.requests.items()
    }
    landed = rng.random() < 0.5
    status = pod.container_statuses[0]
    alloc = dict(req) if landed else dict(status.allocated)
    return dataclasses.replace(
        pod,
        containers=[c.copy(ResourceRequirements(req, dict(c.resources.limits)))],
        container_statuses=[
            ContainerStatus(
                status.name, alloc, ResourceRequirements(dict(alloc), dict(c.resources.limits))
            )
        ],
        generation=pod.generation + 1,
        observed_generation=pod.generation + (1 if landed else 0),
    )


def _restated(pod, rng: random.Random):  # type: ignore[no-untyped-def]
    """The pod as a new object whose conditions moved: a stall, not Ready, or Ready."""
    kind = rng.choice(("Deferred", "Infeasible", "notready", "ready"))
    if kind == "notready":
        conditions = [PodCondition("Ready", "False")]
    elif kind == "ready":
        conditions = [PodCondition("Ready", "True")]
    else:
        conditions = [PodCondition("Ready", "True"), PodCondition("PodResizePending", "True", kind)]
    return dataclasses.replace(pod, conditions=conditions)


def _changed(snap: ClusterSnapshot, rng: random.Random, n: int) -> ClusterSnapshot:
    """The next pass's snapshot: a new snapshot object, most pods and nodes the same
    objects as before (as both shells hand them in), some of them changed."""
    pods = []
    for p in snap.pods:
        roll = rng.random()
        if roll < 0.03:
            continue  # removed
        if roll < 0.08:
            p = _resized(p, rng)
        elif roll < 0.11:
            p = _restated(p, rng)
        elif roll < 0.16:
            p = dataclasses.replace(p)  # handed in again: an equal, new object
        pods.append(p)
    for p in rng.sample(snap.pods, len(snap.pods) // 30):  # added: new uids
        pods.append(dataclasses.replace(p, uid=f"{p.uid}-n{n}", name=f"{p.name}-n{n}"))
    nodes = dict(snap.nodes)
    names = sorted(nodes)
    for name in rng.sample(names, 2):  # resized
        node = nodes[name]
        cpu = int(node.allocatable["cpu"] * rng.choice((0.25, 0.5, 2.0)))
        nodes[name] = Node(name, allocatable={**node.allocatable, "cpu": cpu})
    del nodes[rng.choice(names)]  # removed: its pods name a node that is gone
    nodes[f"node-new-{n}"] = Node(
        f"node-new-{n}", allocatable=dict(snap.nodes[names[0]].allocatable)
    )
    return dataclasses.replace(snap, pods=pods, nodes=nodes, _by_node=None, _by_owner=None)


def _new_suggestions(
    suggestions: dict[str, Suggestion], rng: random.Random, n: int
) -> dict[str, Suggestion]:
    out = dict(suggestions)
    for key in rng.sample(sorted(out), max(1, len(out) // 10)):
        old = out[key].containers["*"]
        cpu = max(10, int(old.requests["cpu"] * rng.choice((0.7, 1.4))))
        out[key] = Suggestion(
            f"{out[key].uid}-{n}",
            n * STEP,
            {"*": ContainerSuggestion("*", {**old.requests, "cpu": cpu})},
        )
    return out


def _passes(seed: int) -> Iterator[tuple[int, tuple[object, ...], tuple[object, ...]]]:
    """Each pass of a changing cluster twice, from the same state: with the memo the
    passes before left, and from an empty memo; what each planned."""
    rng = random.Random(seed)
    snap, suggestions = build_snapshot(400, 40, 20, seed=seed)
    state = WorkerState()
    for n in range(PASSES):
        now = 1000.0 + n * STEP
        fresh_actions, fresh_state = plan(
            snap, now, dataclasses.replace(state, memo=PlanMemo()), suggestions=suggestions
        )
        snap = dataclasses.replace(snap, _by_node=None, _by_owner=None)
        actions, state = plan(snap, now, state, suggestions=suggestions)
        keys = sorted(set(state.targets) | set(fresh_state.targets))
        yield (
            n,
            (actions, [state.to_status(k) for k in keys], state.coming, state.refusals),
            (
                fresh_actions,
                [fresh_state.to_status(k) for k in keys],
                fresh_state.coming,
                fresh_state.refusals,
            ),
        )
        snap = _changed(snap, rng, n)
        if n % 3 == 1:
            suggestions = _new_suggestions(suggestions, rng, n)


@pytest.mark.parametrize("seed", [3, 17])
def test_the_memoised_pass_plans_what_a_fresh_pass_plans(seed: int) -> None:
    actions_seen = 0
    for n, memoised, fresh in _passes(seed):
        assert memoised == fresh, f"pass {n}: the memo changed the plan"
        actions_seen += len(memoised[0])  # type: ignore[arg-type]
    assert actions_seen > 100  # the passes did plan something


def test_the_memo_is_used_and_forgets_gone_pods() -> None:
    snap, suggestions = build_snapshot(400, 40, 20, seed=3)
    _, state = plan(snap, 1000.0, WorkerState(), suggestions=suggestions)
    live = {p.uid for p in snap.pods}
    assert set(state.memo.pods) <= live and set(state.memo.ledger.charges) <= live
    assert len(state.memo.ledger.charges) > 100
    # The next pass reads the entries it can (no pod changed): none is derived again.
    before = {uid: (entry, entry.change) for uid, entry in state.memo.pods.items()}
    charges = dict(state.memo.ledger.charges)
    snap = dataclasses.replace(snap, _by_node=None, _by_owner=None)
    _, state = plan(snap, 1400.0, state, suggestions=suggestions)
    assert all(state.memo.pods[u] is e and e.change is c for u, (e, c) in before.items())
    assert all(state.memo.ledger.charges[u][1] is c[1] for u, c in charges.items())
    # Half the pods gone: so are their entries.
    kept = snap.pods[::2]
    snap = dataclasses.replace(snap, pods=kept, _by_node=None, _by_owner=None)
    _, state = plan(snap, 1800.0, state, suggestions=suggestions)
    live = {p.uid for p in kept}
    assert set(state.memo.pods) <= live and set(state.memo.ledger.charges) <= live


def _by_uid_alone(known: dict[str, KnownPod], pod):  # type: ignore[no-untyped-def]
    """A broken lookup: the entry of the uid, whatever object it came from."""
    hit = known.get(pod.uid)
    if hit is None:
        hit = known[pod.uid] = KnownPod(pod)
    return hit


def _charge_by_uid_alone(self, pod):  # type: ignore[no-untyped-def]
    hit = self._charges.get(pod.uid)
    if hit is not None:
        return hit[1]
    charge = capacity.pod_charge(pod)
    self._charges[pod.uid] = (pod, charge)
    return charge


@pytest.mark.parametrize(
    "targets, attribute, broken",
    [
        # Every module that looks entries up (each holds its own name for the function).
        ((desired_module, planner_module, run_module), "known_pod", _by_uid_alone),
        ((capacity.NodeLedger,), "charge", _charge_by_uid_alone),
        ((capacity.NodeRoom,), "holds_for", lambda self, node, pods, headroom: True),
        # A room carried over unadjusted when the node's pods moved.
        ((capacity.NodeLedger,), "_moved_room", lambda self, room, node, pods: room),
    ],
)
def test_a_stale_memo_entry_is_caught(monkeypatch, targets, attribute, broken) -> None:  # type: ignore[no-untyped-def]
    """What the test above guards against: a memo that answers by uid alone gives a
    resized pod the change or the charge of its old object, one that answers by node
    name alone the room of a node whose pods moved; and the plans differ."""
    for target in targets:
        monkeypatch.setattr(target, attribute, broken)
    assert any(memoised != fresh for _, memoised, fresh in _passes(3))


def test_a_room_is_adjusted_by_the_pods_that_moved(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The passes above (which plan what a fresh memo plans) do take the path that
    adjusts a node's room by its changed pods instead of walking every pod on it."""
    adjusted = []
    moved_room = capacity.NodeLedger._moved_room

    def counted(self, room, node, pods):  # type: ignore[no-untyped-def]
        out = moved_room(self, room, node, pods)
        adjusted.append(out is not None)
        return out

    monkeypatch.setattr(capacity.NodeLedger, "_moved_room", counted)
    for n, memoised, fresh in _passes(3):
        assert memoised == fresh, f"pass {n}: the adjusted room changed the plan"
    assert sum(adjusted) > 20
