"""Plain value types for the objects the planners reason about.

Amounts are canonical integers (see `foresize.core.api.quantity`): CPU in millicores, memory in
bytes. Times are float seconds on the caller's clock (wall clock in the kube shell,
simulated time in the sim shell); the core never reads a clock of its own.

The shells own these objects; planners treat them as read-only and express every change
as an `Action`. A shell replaces an object when it changes and never edits one it has
handed to a planning pass (the kube shell converts each watch event anew, the simulator
copies an object before its first write after a snapshot), so a planner may keep what it
derived from an object for as long as it is handed the very same object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from foresize.core.api.quantity import CPU, MEMORY

ResourceMap = dict[str, int]
"""Resource name -> canonical integer amount (cpu millicores, memory bytes)."""

COMPUTE_RESOURCES = (CPU, MEMORY)

# Pod condition types and reasons for in-place resize (KEP-1287, Kubernetes 1.33+).
POD_RESIZE_PENDING = "PodResizePending"
POD_RESIZE_IN_PROGRESS = "PodResizeInProgress"
REASON_DEFERRED = "Deferred"
REASON_INFEASIBLE = "Infeasible"
REASON_ERROR = "Error"
READY = "Ready"
# Set by the API server on a pod it is about to terminate for a disruption (an eviction,
# preemption, node pressure, taint manager): a Job's run ended by one did not fail itself.
DISRUPTION_TARGET = "DisruptionTarget"

# The pod annotations node autoscalers read before they disrupt a pod (Karpenter's
# `karpenter.sh/do-not-disrupt: "true"`, Cluster Autoscaler's
# `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`): the owner asked that nothing
# evicts the pod voluntarily, so Foresize honours them too (`disruption_opt_out`).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def disruption_opt_out(annotations: dict[str, str]) -> str | None:
    """The annotation by which a pod opts out of voluntary disruption, shown as
    `key="value"`, or None. Only the values the node autoscalers themselves act on count
    here (`"true"` and `"false"` exactly, as they compare them); see
    `odd_disruption_annotation` for the others."""
    if annotations.get(DO_NOT_DISRUPT) == "true":
        return f'{DO_NOT_DISRUPT}="true"'
    if annotations.get(SAFE_TO_EVICT) == "false":
        return f'{SAFE_TO_EVICT}="false"'
    return None


def disruption_hold(annotations: dict[str, str]) -> str | None:
    """Why Foresize must not evict or restart a pod with these annotations, or None: an
    opt-out (`disruption_opt_out`) or one with a value node autoscalers would not
    recognise (`odd_disruption_annotation`), meant all the same."""
    return disruption_opt_out(annotations) or odd_disruption_annotation(annotations)


def odd_disruption_annotation(annotations: dict[str, str]) -> str | None:
    """One of those annotations with a value that is neither "true" nor "false" (say
    `"True"` or `"yes"`), shown as `key="value"`: its author meant something, a node
    autoscaler ignores it, so Foresize treats the pod as opted out and says so."""
    for key in (DO_NOT_DISRUPT, SAFE_TO_EVICT):
        value = annotations.get(key)
        if value is not None and value not in ("true", "false"):
            return f"{key}={value!r}"
    return None


RESTART_NOT_REQUIRED = "NotRequired"
RESTART_CONTAINER = "RestartContainer"

QoSClass = Literal["Guaranteed", "Burstable", "BestEffort"]


@dataclass(slots=True)
class ResourceRequirements:
    """A container's `resources`: requests and limits as canonical integers."""

    requests: ResourceMap = field(default_factory=dict)
    limits: ResourceMap = field(default_factory=dict)

    def copy(self) -> ResourceRequirements:
        return ResourceRequirements(dict(self.requests), dict(self.limits))


@dataclass(slots=True)
class Container:
    """A container of a pod spec or pod template."""

    name: str
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    # resource name -> "NotRequired" | "RestartContainer"; missing means NotRequired.
    resize_policy: dict[str, str] = field(default_factory=dict)
    # Init containers only: "Always" marks a sidecar (restartable) init container.
    restart_policy: str | None = None
    # What the container runs and its environment, for the runtime's heap ceiling
    # (`cluster.runtime.heap_ceiling`): env name -> value, None where it is `valueFrom`.
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)
    env_from: bool = False

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"

    def copy(self, resources: ResourceRequirements | None = None) -> Container:
        """A copy with every field kept (the command and environment the heap ceiling is
        read from included), its resources replaced by `resources` when given. The one
        way to copy a container: a copy that drops a field loses what the rules read."""
        return Container(
            self.name,
            resources if resources is not None else self.resources.copy(),
            dict(self.resize_policy),
            self.restart_policy,
            self.command,
            self.args,
            dict(self.env),
            self.env_from,
        )


@dataclass(slots=True)
class ContainerStatus:
    """What the kubelet reports for a container."""

    name: str
    # status.containerStatuses[i].allocatedResources: requests the kubelet accepted.
    allocated: ResourceMap = field(default_factory=dict)
    # status.containerStatuses[i].resources: requests and limits actually in force.
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    ready: bool = True
    restart_count: int = 0
    last_termination_reason: str | None = None  # e.g. "OOMKilled"
    last_termination_time: float | None = None


@dataclass(slots=True)
class PodCondition:
    type: str
    status: str = "True"
    reason: str = ""
    message: str = ""
    last_transition_time: float = 0.0


@dataclass(slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    api_version: str = ""
    controller: bool = True


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owner: OwnerRef | None = None
    node_name: str | None = None
    priority: int = 0
    containers: list[Container] = field(default_factory=list)
    init_containers: list[Container] = field(default_factory=list)
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed
    conditions: list[PodCondition] = field(default_factory=list)
    container_statuses: list[ContainerStatus] = field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = field(default_factory=list)
    generation: int = 1
    observed_generation: int = 0
    creation_time: float = 0.0
    start_time: float | None = None
    deletion_time: float | None = None  # set when terminating
    restart_policy: str = "Always"
    static: bool = False  # mirror pod of a static pod: not resizable
    os: str = "linux"
    # spec.resources: pod-level requests/limits (PodLevelResources, beta and on by default
    # from 1.34); where set for cpu/memory they decide the QoS class and the pod's requests.
    resources: ResourceRequirements | None = None
    # spec.overhead: set from the RuntimeClass at admission; added to the pod's requests.
    overhead: ResourceMap = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminating(self) -> bool:
        return self.deletion_time is not None

    def condition(self, type_: str) -> PodCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def ready(self) -> bool:
        cond = self.condition(READY)
        return self.phase == "Running" and cond is not None and cond.status == "True"

    def container(self, name: str) -> Container | None:
        for c in self.containers:
            if c.name == name:
                return c
        return None

    def status_of(self, name: str) -> ContainerStatus | None:
        for s in self.container_statuses:
            if s.name == name:
                return s
        for s in self.init_container_statuses:
            if s.name == name:
                return s
        return None


@dataclass(slots=True)
class Node:
    name: str
    allocatable: ResourceMap = field(default_factory=dict)
    capacity: ResourceMap = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True


@dataclass(slots=True)
class PodTemplate:
    """A controller's pod template: what pods are created from."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    containers: list[Container] = field(default_factory=list)
    init_containers: list[Container] = field(default_factory=list)
    priority: int = 0
    resources: ResourceRequirements | None = None  # pod-level spec.resources
    overhead: ResourceMap = field(default_factory=dict)  # the RuntimeClass's pod overhead


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """A Job's `status` as the runs of its CronJob read it: when it ran and how it ended
    (`outcome` "": still running; "Complete"; "Failed" with the Failed condition's
    `reason`: BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy, ...)."""

    start: float | None = None
    end: float | None = None
    outcome: str = ""
    reason: str = ""


@dataclass(slots=True)
class Workload:
    """A pod controller: Deployment, StatefulSet, DaemonSet, Argo Rollout, ReplicaSet,
    CronJob or Job (`cluster.jobs`)."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    selector: dict[str, str] = field(default_factory=dict)
    replicas: int = 1
    template: PodTemplate = field(default_factory=PodTemplate)
    paused: bool = False
    # ReplicaSet: the Deployment (or Rollout) that owns it; Job: its CronJob.
    owner: OwnerRef | None = None
    job: JobOutcome | None = None  # a Job's status (None: not a Job, or not read)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: dict[str, str] = field(default_factory=dict)
    min_available: int | str | None = None  # int or "N%"
    max_unavailable: int | str | None = None
    # status
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0


@dataclass(slots=True)
class HPAMetric:
    """One metric of an HPA: for Resource metrics, the resource and target utilisation."""

    type: str = "Resource"  # Resource | ContainerResource | Pods | Object | External
    resource: str | None = None  # cpu | memory for (Container)Resource metrics
    target_utilization: int | None = None  # percent of request
    target_average_value: int | None = None  # canonical units per pod
    container: str | None = None


@dataclass(frozen=True, slots=True)
class HPAScalingPolicy:
    """One policy of `behavior.scaleUp|scaleDown.policies`: at most `value` pods (type
    Pods) or percent (type Percent) over `period` seconds."""

    type: str  # Pods | Percent
    value: int
    period: float


@dataclass(frozen=True, slots=True)
class HPAScalingRules:
    """`behavior.scaleUp` or `behavior.scaleDown` of an autoscaling/v2 HPA (None fields:
    the upstream defaults apply)."""

    stabilization_window: float | None = None
    select_policy: str = "Max"  # Max | Min | Disabled
    policies: tuple[HPAScalingPolicy, ...] = ()


@dataclass(slots=True)
class HorizontalPodAutoscaler:
    namespace: str
    name: str
    target_kind: str
    target_name: str
    min_replicas: int = 1
    max_replicas: int = 1
    metrics: list[HPAMetric] = field(default_factory=list)
    current_replicas: int = 0
    desired_replicas: int = 0
    scale_up: HPAScalingRules | None = None  # spec.behavior.scaleUp
    scale_down: HPAScalingRules | None = None  # spec.behavior.scaleDown

    def scaling_resources(self) -> set[str]:
        """The resources (cpu/memory) whose requests this HPA's arithmetic depends on."""
        return {
            m.resource
            for m in self.metrics
            if m.type in ("Resource", "ContainerResource")
            and m.resource
            and m.target_utilization is not None
        }


# The update modes in which a VerticalPodAutoscaler (or a like object) changes requests:
# every mode but Off. A mode Foresize does not know is counted as acting too: two
# vertical autoscalers on one workload fight, and not acting is the safe side.
NON_ACTING_VERTICAL_MODES = frozenset({"Off"})


@dataclass(frozen=True, slots=True)
class VerticalClaim:
    """Another vertical autoscaler's object naming a workload: a VerticalPodAutoscaler
    (autoscaling.k8s.io), a MultidimPodAutoscaler (autoscaling.gke.io), ..."""

    kind: str
    namespace: str
    name: str
    target_kind: str
    target_name: str
    update_mode: str

    @property
    def acting(self) -> bool:
        """It changes the workload's requests (any mode but Off)."""
        return self.update_mode not in NON_ACTING_VERTICAL_MODES

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} (updateMode {self.update_mode})"


@dataclass(slots=True)
class ContainerSuggestion:
    """Requests and limits Foresize wants for one container."""

    name: str
    requests: ResourceMap = field(default_factory=dict)
    limits: ResourceMap = field(default_factory=dict)


@dataclass(slots=True)
class Suggestion:
    """A target's latest vertical suggestion (mirrors status.vertical in the API)."""

    uid: str
    created_at: float
    containers: dict[str, ContainerSuggestion] = field(default_factory=dict)
    window_start: float = 0.0
    window_end: float = 0.0

    def for_container(self, name: str) -> ContainerSuggestion | None:
        return self.containers.get(name) or self.containers.get("*")
