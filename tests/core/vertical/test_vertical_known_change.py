"""The vertical planner derives a pod's change and whether a resize of it is in flight
once per pod object (`desired.known_pod`, `known_pod_change`, `known_in_flight`): a
replaced pod, a new suggestion or other thresholds give a fresh computation, and a gone
pod is forgotten."""

from __future__ import annotations

from foresize.core.api.hysteresis import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, Threshold
from foresize.core.api.quantity import MIB
from foresize.core.api.types import parse_target
from foresize.core.cluster.actions import ResizePod
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    ContainerSuggestion,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    ResourceRequirements,
    Suggestion,
    Workload,
)
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.vertical import WorkerState, plan
from foresize.core.vertical.desired import (
    KnownPod,
    known_in_flight,
    known_pod_change,
    pod_change,
    resize_in_flight,
)


def _pod(cpu: int, *, limit: int | None = None, name: str = "p0") -> Pod:
    """A running pod of Deployment web; `limit` gives it a cpu and memory limit equal to
    the requests (Guaranteed) when it equals `cpu`."""
    req = {"cpu": cpu, "memory": 100 * MIB}
    lim = {"cpu": limit, "memory": 100 * MIB} if limit is not None else {}
    return Pod(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        labels={"app": "web"},
        owner=OwnerRef("Deployment", "web"),
        node_name="n1",
        containers=[Container("app", ResourceRequirements(req, lim))],
        phase="Running",
        conditions=[PodCondition("Ready", "True")],
        container_statuses=[
            ContainerStatus("app", dict(req), ResourceRequirements(dict(req), dict(lim)))
        ],
    )


def _suggestion(cpu: int, uid: str = "s1") -> Suggestion:
    return Suggestion(uid, 0.0, {"*": ContainerSuggestion("*", {"cpu": cpu, "memory": 100 * MIB})})


def _sig(change: object) -> str | None:
    return None if change is None else change.signature  # type: ignore[attr-defined]


def _known(
    known: dict[str, KnownPod],
    pod: Pod,
    suggestion: Suggestion,
    skip: frozenset[str] = frozenset(),
    up: Threshold = DEFAULT_SCALE_UP,
) -> str | None:
    return _sig(known_pod_change(known, pod, suggestion, skip, up, DEFAULT_SCALE_DOWN))


def _fresh(
    pod: Pod,
    suggestion: Suggestion,
    skip: frozenset[str] = frozenset(),
    up: Threshold = DEFAULT_SCALE_UP,
) -> str | None:
    return _sig(pod_change(pod, suggestion, skip, up, DEFAULT_SCALE_DOWN))


def test_the_same_pod_and_suggestion_reuse_the_change() -> None:
    known: dict[str, KnownPod] = {}
    p, s = _pod(100), _suggestion(200)
    first = known_pod_change(known, p, s, frozenset(), DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)
    again = known_pod_change(known, p, s, frozenset(), DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)
    assert first is not None and again is first


def test_a_replaced_pod_is_computed_afresh() -> None:
    known: dict[str, KnownPod] = {}
    s = _suggestion(200)
    assert _known(known, _pod(100), s) == _fresh(_pod(100), s) is not None
    # The resize landed: the shell hands a new pod object (same uid) at the new size.
    resized = _pod(200)
    assert _fresh(resized, s) is None
    assert _known(known, resized, s) is None
    # The QoS class is read from the pod it was computed for: a Guaranteed pod (limits
    # equal to requests) keeps its limits with its requests, a Burstable one does not.
    guaranteed = _pod(100, limit=100)
    assert _known(known, guaranteed, s) == _fresh(guaranteed, s)
    burstable = _pod(100, limit=400)
    assert _known(known, burstable, s) == _fresh(burstable, s) != _fresh(guaranteed, s)


def test_a_new_suggestion_or_other_thresholds_are_computed_afresh() -> None:
    known: dict[str, KnownPod] = {}
    p = _pod(100)
    assert _known(known, p, _suggestion(200)) == _fresh(p, _suggestion(200))
    newer = _suggestion(300, uid="s2")
    assert _known(known, p, newer) == _fresh(p, newer) != _fresh(p, _suggestion(200))
    # The HPA's resource left alone (skip): only memory, which does not move.
    assert _known(known, p, newer, skip=frozenset({"cpu"})) is None
    # A scale-up threshold the change does not clear: the change is not significant.
    strict = Threshold("percent", 500.0)
    change = known_pod_change(known, p, newer, frozenset(), strict, DEFAULT_SCALE_DOWN)
    assert change is not None and not change.significant


def test_in_flight_is_read_from_the_pod_object_it_was_asked_for() -> None:
    known: dict[str, KnownPod] = {}
    settled = _pod(200)
    assert known_in_flight(known, settled) is resize_in_flight(settled) is False
    # The spec asks for more than the kubelet allocated: a new pod object, same uid.
    asked = _pod(200)
    asked.containers[0].resources.requests["cpu"] = 300  # before it is handed to a pass
    assert known_in_flight(known, asked) is resize_in_flight(asked) is True
    assert known_in_flight(known, settled) is False
    # Its change is still computed from the suggestion once asked.
    assert _known(known, settled, _suggestion(300)) == _fresh(settled, _suggestion(300))
    assert known_in_flight(known, settled) is False


def _target() -> object:
    return parse_target(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "default", "uid": "t-web"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "autonomous",
                    "update_policy": {"update_mode": "in_place", "min_replicas": 1},
                },
            },
        }
    )


def _snap(pods: list[Pod], target: object) -> ClusterSnapshot:
    return ClusterSnapshot(
        now=0.0,
        nodes={"n1": Node("n1", allocatable={"cpu": 64000, "memory": 256 * 1024 * MIB})},
        pods=pods,
        workloads={
            "Deployment/default/web": Workload("Deployment", "default", "web", replicas=len(pods))
        },
        targets=[target],
    )


def test_the_planner_follows_replaced_pods_and_forgets_gone_ones() -> None:
    target = _target()
    s = {"default/web": _suggestion(200)}
    actions, state = plan(_snap([_pod(100)], target), 100.0, WorkerState(), suggestions=s)
    assert [a.name for a in actions if isinstance(a, ResizePod)] == ["p0"]
    # The pod came back at the suggested size: nothing more to do.
    actions, state = plan(_snap([_pod(200)], target), 200.0, state, suggestions=s)
    assert not [a for a in actions if isinstance(a, ResizePod)]
    assert set(state.memo.pods) == {"uid-p0"}
    # p0 is gone, p1 came: only p1 is remembered.
    actions, state = plan(_snap([_pod(100, name="p1")], target), 300.0, state, suggestions=s)
    assert [a.name for a in actions if isinstance(a, ResizePod)] == ["p1"]
    assert set(state.memo.pods) == {"uid-p1"}
