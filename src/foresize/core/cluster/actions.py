"""What the core asks the shells to do, and what they answer.

Every planner returns a list of these; the kube shell turns them into API calls and the
sim shell into simulated ones. Results carry the HTTP status and the API server's cause
so the core can react (429 -> defer, 422 / 403 NodeCapacity -> fallback) the same way in
both shells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foresize.core.cluster.model import ResourceMap

# The StatusCause type of the 1.36+ admission check that refuses a resize larger than the
# node's allocatable (kubernetes #136043; before 1.36 the kubelet marked it Infeasible).
NODE_CAPACITY = "NodeCapacity"


@dataclass(frozen=True, slots=True)
class ContainerResize:
    name: str
    requests: ResourceMap = field(default_factory=dict)
    limits: ResourceMap = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResizePod:
    """PATCH pods/{name}/resize with these container resources (JSON patch)."""

    namespace: str
    name: str
    containers: tuple[ContainerResize, ...]
    target: str = ""  # "namespace/name" of the AIScaleTarget (or DSA) asking for it
    reason: str = ""
    direction: str = ""  # "up" | "down" | "mixed"
    # The uid of the pod the change was planned for: a StatefulSet pod recreated under the
    # same name has another, and the API server then refuses (precondition) instead of
    # resizing or evicting a pod nobody planned for. "" = no precondition.
    uid: str = ""
    target_kind: str = "AIScaleTarget"  # or "DaemonSetAutoscaler": whose Events these are


@dataclass(frozen=True, slots=True)
class PatchPodMetadata:
    """Merge-patch a pod's labels/annotations (a value of None removes the key)."""

    namespace: str
    name: str
    annotations: dict[str, str | None] = field(default_factory=dict)
    labels: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvictPod:
    """POST pods/{name}/eviction (policy/v1): PDBs apply."""

    namespace: str
    name: str
    target: str = ""
    reason: str = ""
    grace_period_seconds: int | None = None
    uid: str = ""  # precondition, as ResizePod.uid


@dataclass(frozen=True, slots=True)
class PatchScale:
    """PATCH {kind}/{name}/scale to `replicas`."""

    namespace: str
    kind: str
    name: str
    replicas: int
    target: str = ""


@dataclass(frozen=True, slots=True)
class RestartWorkload:
    """Set spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"]."""

    namespace: str
    kind: str
    name: str
    restarted_at: float
    target: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class WriteTargetStatus:
    """Merge-patch the status subresource of a Foresize object."""

    namespace: str
    name: str
    status: dict[str, Any]
    kind: str = "AIScaleTarget"
    # Keys of `status` another step of the pass folded into this write (the effective
    # policy, `cluster.policies`): the vertical worker's memory of what it wrote
    # (`last_status`) leaves them out, so the next pass does not write again for them.
    folded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EmitEvent:
    """A Kubernetes Event (core/v1) about an object."""

    namespace: str
    kind: str
    name: str
    reason: str
    message: str
    type: str = "Normal"  # Normal | Warning
    uid: str = ""


@dataclass(frozen=True, slots=True)
class EnsureHeadroom:
    """Create or update a pool's placeholder Deployment (`cluster.headroom`): pause pods
    of `requests` each, `replicas` of them, in PriorityClass `priority_class` (created
    with value `priority` and `preemptionPolicy: Never` where missing), on the nodes
    whose `pool_label` is `pool` (no node selector where `pool_label` is "")."""

    namespace: str
    name: str
    pool: str
    pool_label: str
    replicas: int
    requests: ResourceMap
    priority_class: str
    priority: int
    demand: ResourceMap = field(default_factory=dict)  # the forecast it was sized for


@dataclass(frozen=True, slots=True)
class ReleaseHeadroom:
    """DELETE a placeholder pod (grace 0) so an upsize on its node lands in place; its
    Deployment recreates it wherever there is room, or Pending for the node autoscaler."""

    namespace: str
    name: str
    node: str
    uid: str = ""  # precondition: the placeholder the release was planned for
    reason: str = ""


Action = (
    ResizePod
    | PatchPodMetadata
    | EvictPod
    | PatchScale
    | RestartWorkload
    | WriteTargetStatus
    | EmitEvent
    | EnsureHeadroom
    | ReleaseHeadroom
)


@dataclass(frozen=True, slots=True)
class ActionResult:
    """The outcome of one action as the API server (or the simulator) answered it."""

    ok: bool
    code: int = 200
    reason: str = ""  # Kubernetes Status reason, e.g. TooManyRequests, Invalid, Forbidden
    message: str = ""
    causes: tuple[dict[str, str], ...] = ()
    retry_after_seconds: float | None = None

    def has_cause(self, cause_type: str) -> bool:
        return any(c.get("type") == cause_type for c in self.causes)

    @property
    def node_capacity_refused(self) -> bool:
        """Kubernetes 1.36+: the resize asks more than the node's allocatable and was
        refused at admission (403, cause `NodeCapacity`) instead of becoming Infeasible.
        A 403 without that cause is RBAC or another admission plugin: not a verdict on
        the resize."""
        return self.code == 403 and self.has_cause(NODE_CAPACITY)

    @property
    def resize_refused(self) -> bool:
        """The API server refused a resize outright (422 Invalid, or 403 `NodeCapacity`):
        the same patch can never land, so no planner sends it again (`cluster.refusals`)."""
        return not self.ok and (self.code == 422 or self.node_capacity_refused)


OK = ActionResult(ok=True)
