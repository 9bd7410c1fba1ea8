"""The API server's answers to the core's actions (`ClusterPort.apply`): the resize
subresource, metadata patches, scale, rollout restarts, target status and events, and
the headroom placeholders (their PriorityClass, Deployment and releases)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.cluster.actions import (
    OK,
    Action,
    ActionResult,
    EmitEvent,
    EnsureHeadroom,
    EvictPod,
    PatchPodMetadata,
    PatchScale,
    ReleaseHeadroom,
    ResizePod,
    RestartWorkload,
    WriteTargetStatus,
)
from foresize.core.cluster.model import (
    Pod,
)
from foresize.core.cluster.qos import spec_requests
from foresize.core.cluster.validation import apply_resize_patch, check_resize
from foresize.shells.sim.cluster.clock import Clock
from foresize.shells.sim.cluster.journal import Journal
from foresize.shells.sim.cluster.nodeset import NodeSet
from foresize.shells.sim.cluster.store import ObjectStore
from foresize.shells.sim.objects import (
    clone_pod,
)

if TYPE_CHECKING:
    from foresize.shells.sim.cluster.controllers import Controllers
    from foresize.shells.sim.cluster.disruption import Disruption
    from foresize.shells.sim.cluster.kubelet import Kubelet
    from foresize.shells.sim.cluster.lifecycle import PodLifecycle

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def _rfc3339(t: float) -> str:
    import datetime as _dt

    base = _dt.datetime(2026, 1, 5, tzinfo=_dt.UTC)  # a Monday: day 0 of every simulation
    return (base + _dt.timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386) of `patch` into `into`.

    A null removes its key at any depth, also inside an object the patch newly adds (the
    RFC merges an object value into `{}` when the target has no object there), and the
    stored values are copies, never the caller's dicts. Arrays are replaced whole."""
    for k, v in patch.items():
        if v is None:
            into.pop(k, None)
        elif isinstance(v, dict):
            sub = into.get(k)
            if not isinstance(sub, dict):
                sub = into[k] = {}
            _merge(sub, v)
        else:
            into[k] = copy.deepcopy(v)


class ApiServer:
    """The API server's handling of the core's actions."""

    # Peers, connected by the facade once every part exists.
    controllers: Controllers
    kubelet: Kubelet
    disruption: Disruption
    lifecycle: PodLifecycle

    def __init__(
        self, clock: Clock, journal: Journal, store: ObjectStore, nodeset: NodeSet
    ) -> None:
        self.clock = clock
        self.journal = journal
        self.store = store
        self.nodeset = nodeset
        self.priority_classes: dict[str, int] = {}  # name -> value (scheduling.k8s.io)

    def apply(self, action: Action) -> ActionResult:
        """Apply one action as the API server would and answer like it."""
        if isinstance(action, ResizePod):
            return self.resize(action)
        if isinstance(action, EvictPod):
            return self.disruption.evict(action)
        if isinstance(action, PatchPodMetadata):
            return self.metadata(action)
        if isinstance(action, PatchScale):
            return self.scale(action)
        if isinstance(action, RestartWorkload):
            return self.restart(action)
        if isinstance(action, WriteTargetStatus):
            return self.status(action)
        if isinstance(action, EmitEvent):
            return self.event(action)
        if isinstance(action, EnsureHeadroom):
            return self.ensure_headroom(action)
        if isinstance(action, ReleaseHeadroom):
            return self.release_headroom(action)
        return ActionResult(False, 400, "BadRequest", f"unsupported action {type(action).__name__}")

    @staticmethod
    def not_found(resource: str, name: str) -> ActionResult:
        return ActionResult(False, 404, "NotFound", f'{resource} "{name}" not found')

    def resize(self, a: ResizePod) -> ActionResult:
        key = f"{a.namespace}/{a.name}"
        pod = self.store.pods.get(key)
        if pod is None:
            return self.not_found("pods", a.name)
        if a.uid and a.uid != pod.uid:
            # The kube executor's patch tests /metadata/uid first: another pod under the same
            # name (a recreated StatefulSet ordinal) is a stale plan, answered 409.
            return ActionResult(
                False,
                409,
                "Conflict",
                f"pod {key} changed since the resize was planned (/metadata/uid is "
                f"{pod.uid!r}, expected {a.uid!r}); not resized",
            )
        refused = check_resize(pod, a, self.store.server_version)
        if refused is not None:
            self.journal.log(
                "ResizeRefused",
                f"Pod/{key}",
                refused.reason,
                refused.message,
                code=refused.code,
                target=a.target,
            )
            return refused
        containers, inits = apply_resize_patch(pod, a)
        if self.store.server_version >= (1, 36) and pod.node_name in self.nodeset.nodes:
            refused = self.node_capacity_refusal(pod, containers, inits)
            if refused is not None:
                self.journal.log(
                    "ResizeRefused", f"Pod/{key}", refused.reason, refused.message, code=403
                )
                return refused
        if [c.resources for c in containers] == [c.resources for c in pod.containers] and [
            c.resources for c in inits
        ] == [c.resources for c in pod.init_containers]:
            return OK
        pod = self.store.writable_pod(key)
        pod.containers = containers
        pod.init_containers = inits
        pod.generation += 1
        meta = self.store.meta[key]
        if meta.resize_requested_at is None:
            meta.resize_requested_at = self.clock.now
        self.journal.log(
            "ResizeRequested",
            f"Pod/{key}",
            a.reason or "Resize",
            "pods/resize patched",
            generation=pod.generation,
            target=a.target,
            direction=a.direction,
            containers={
                c.name: {"requests": dict(c.requests), "limits": dict(c.limits)}
                for c in a.containers
            },
        )
        self.nodeset.recharge(key)  # a pending upsize is charged at its larger request at once
        if pod.node_name is not None and pod.phase == "Running":
            self.kubelet.request_resize(key, pod.uid)
        return OK

    def node_capacity_refusal(self, pod: Pod, containers: list, inits: list) -> ActionResult | None:
        """1.36+: a resize larger than the node's allocatable is refused at admission
        (403, cause NodeCapacity) instead of becoming Infeasible."""
        probe = clone_pod(pod)
        probe.containers, probe.init_containers = containers, inits
        want = spec_requests(probe)
        node = self.nodeset.nodes[pod.node_name or ""]
        for r in (MEMORY, CPU):
            cap = node.allocatable.get(r, 0)
            if want.get(r, 0) > cap:
                detail = (
                    f"Node didn't have enough capacity: {r}, requested: {want[r]}, capacity: {cap}"
                )
                return ActionResult(
                    False,
                    403,
                    "Forbidden",
                    f'pods "{pod.name}" is forbidden: {detail}',
                    ({"type": "NodeCapacity", "message": detail},),
                )
        return None

    def metadata(self, a: PatchPodMetadata) -> ActionResult:
        key = f"{a.namespace}/{a.name}"
        if key not in self.store.pods:
            return self.not_found("pods", a.name)
        pod = self.store.writable_pod(key)
        for src, dst in ((a.annotations, pod.annotations), (a.labels, pod.labels)):
            for k, v in src.items():
                if v is None:
                    dst.pop(k, None)
                else:
                    dst[k] = v
        if a.labels:
            self.disruption.index(pod)
        self.journal.log(
            "PodMetadataPatched",
            f"Pod/{key}",
            "Patched",
            "",
            annotations=dict(a.annotations),
            labels=dict(a.labels),
        )
        return OK

    def scale(self, a: PatchScale) -> ActionResult:
        wkey = f"{a.kind}/{a.namespace}/{a.name}"
        if wkey not in self.store.wl_state or a.kind not in ("Deployment", "StatefulSet"):
            return self.not_found(f"{a.kind.lower()}s.apps", a.name)
        if a.replicas < 0:
            return ActionResult(
                False,
                422,
                "Invalid",
                f'{a.kind} "{a.name}" is invalid: spec.replicas: Invalid value: {a.replicas}: '
                "must be greater than or equal to 0",
            )
        self.controllers.set_replicas(wkey, a.replicas, source=a.target or "PatchScale")
        return OK

    def restart(self, a: RestartWorkload) -> ActionResult:
        wkey = f"{a.kind}/{a.namespace}/{a.name}"
        st = self.store.wl_state.get(wkey)
        if st is None or a.kind not in ("Deployment", "StatefulSet", "DaemonSet"):
            return self.not_found(f"{a.kind.lower()}s.apps", a.name)
        wl = self.store.writable_workload(wkey)
        if wl.paused:
            return ActionResult(
                False,
                400,
                "BadRequest",
                f'deployments.apps "{a.name}" can\'t restart paused deployment '
                "(run rollout resume first)",
            )
        wl.template.annotations[RESTARTED_AT] = _rfc3339(a.restarted_at)
        st.revision += 1
        st.rollout = True
        if a.kind == "Deployment":
            self.controllers.new_replicaset(wkey)
        self.journal.log(
            "RolloutRestart",
            wkey,
            a.reason or "Restarted",
            f"rollout restart at {_rfc3339(a.restarted_at)}",
            target=a.target,
            revision=st.revision,
        )
        self.controllers.queue_reconcile(wkey)
        return OK

    def status(self, a: WriteTargetStatus) -> ActionResult:
        key = (a.kind, a.namespace, a.name)
        current = self.store.target_status.setdefault(key, {})
        _merge(current, a.status)
        return OK

    def event(self, a: EmitEvent) -> ActionResult:
        obj = f"{a.kind}/{a.namespace}/{a.name}"
        if a.reason in ("CircuitBreakerOpen", "CircuitBreakerOpened"):
            wl = self.workload_for_object(a.kind, a.namespace, a.name)
            self.journal.count(wl, "breaker_openings")
        self.journal.log("Event", obj, a.reason, a.message, type=a.type)
        return OK

    def ensure_headroom(self, a: EnsureHeadroom) -> ActionResult:
        """Create the PriorityClass where missing, then create or update the placeholder
        Deployment (a change of its pods' requests rolls it out, as a template change
        does). The simulated scheduler has no node selectors: a pool's placeholders may
        land on any node (the bench's scenarios have one pool)."""
        from foresize.core.cluster.headroom import HEADROOM_LABEL
        from foresize.shells.sim.scenario_spec import ContainerSpec, WorkloadSpec
        from foresize.shells.sim.usage import GeneratorSpec

        if a.priority_class not in self.priority_classes:
            self.priority_classes[a.priority_class] = a.priority
            self.journal.log(
                "PriorityClassCreated",
                f"PriorityClass/{a.priority_class}",
                "Created",
                f"value {a.priority}, preemptionPolicy Never",
            )
        priority = self.priority_classes[a.priority_class]
        wkey = f"Deployment/{a.namespace}/{a.name}"
        if wkey not in self.store.workloads:
            self.controllers.add_workload(
                WorkloadSpec(
                    kind="Deployment",
                    name=a.name,
                    namespace=a.namespace,
                    replicas=0,
                    labels={HEADROOM_LABEL: a.pool},
                    priority=priority,
                    containers=[
                        ContainerSpec(
                            "pause",
                            requests=dict(a.requests),
                            limits=dict(a.requests),
                            # A pause container uses next to nothing.
                            cpu=GeneratorSpec("constant", base=0.001),
                            memory=GeneratorSpec("constant", base=1 * 2**20),
                        )
                    ],
                    readiness_delay=0.0,
                    termination_grace=0.0,
                    jitter=0.0,
                )
            )
            self.journal.log("HeadroomCreated", wkey, "Created", f"pool {a.pool!r}")
        wl = self.store.workloads[wkey]
        pause = wl.template.containers[0]
        if dict(pause.resources.requests) != dict(a.requests):
            wl = self.store.writable_workload(wkey)
            wl.template.containers[0] = pause.copy(
                type(pause.resources)(dict(a.requests), dict(a.requests))
            )
            st = self.store.wl_state[wkey]
            st.revision += 1
            st.rollout = True
            self.controllers.new_replicaset(wkey)
            self.controllers.queue_reconcile(wkey)
        if wl.replicas != a.replicas:
            self.journal.log(
                "HeadroomSized",
                wkey,
                "Sized",
                f"{a.replicas} placeholders for the forecast upsize demand",
                replicas=a.replicas,
                demand=dict(a.demand),
            )
            self.controllers.set_replicas(wkey, a.replicas, source="headroom")
        return OK

    def release_headroom(self, a: ReleaseHeadroom) -> ActionResult:
        """DELETE the placeholder pod with grace 0: it stops at once and its room is free
        before the kubelet acts on the resize that needed it."""
        key = f"{a.namespace}/{a.name}"
        pod = self.store.pods.get(key)
        if pod is None:
            return self.not_found("pods", a.name)
        if a.uid and a.uid != pod.uid:
            return ActionResult(
                False, 409, "Conflict", f"pod {key} changed since the release was planned"
            )
        self.journal.log("HeadroomReleased", f"Pod/{key}", "Released", a.reason, node=a.node)
        self.lifecycle.delete(key, 0.0, "HeadroomReleased")
        return OK

    def workload_for_object(self, kind: str, namespace: str, name: str) -> str | None:
        key = f"{kind}/{namespace}/{name}"
        if key in self.store.wl_state:
            return key
        if kind == "Pod" and f"{namespace}/{name}" in self.store.meta:
            return self.store.meta[f"{namespace}/{name}"].top
        for t in [*self.store.targets, *self.store.daemonset_autoscalers]:
            meta = getattr(t, "metadata", None)
            ref = getattr(getattr(t, "spec", None), "scaleTargetRef", None)
            if meta is None or ref is None:
                continue
            if getattr(meta, "name", None) == name and getattr(meta, "namespace", None) in (
                namespace,
                None,
            ):
                key = f"{getattr(ref, 'kind', '')}/{namespace}/{getattr(ref, 'name', '')}"
                if key in self.store.wl_state:
                    return key
        for k in self.store.wl_state:  # else: a target named after its workload
            if k.endswith(f"/{namespace}/{name}"):
                return k
        return None
