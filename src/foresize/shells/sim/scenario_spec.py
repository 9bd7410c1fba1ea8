"""The parsed form of a scenario file (`foresize.shells.sim.scenario`): nodes, workloads and their
containers, PodDisruptionBudgets, HPAs, priced node types and the node autoscaler."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from foresize.core.cluster.model import VerticalClaim
from foresize.shells.sim.usage import GeneratorSpec


@dataclass(slots=True)
class NodeSpec:
    name: str
    cpu: int  # millicores allocatable
    memory: int  # bytes allocatable
    capacity_cpu: int
    capacity_memory: int
    labels: dict[str, str] = field(default_factory=dict)
    add_at: float = 0.0  # seconds into the run at which the node joins
    node_type: str = ""  # a name from the scenario's `node_types` ("" for an untyped node)
    price_per_hour: float = 0.0


@dataclass(slots=True)
class ContainerSpec:
    name: str
    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    resize_policy: dict[str, str] = field(default_factory=dict)
    cpu: GeneratorSpec = field(default_factory=GeneratorSpec)
    memory: GeneratorSpec = field(default_factory=GeneratorSpec)
    restart_policy: str | None = None  # init containers: "Always" makes a sidecar
    # What the container runs and its environment, as a pod spec writes them: the heap
    # ceiling of a managed runtime is read from them (`cluster.runtime.heap_ceiling`).
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # Start-up demand: `startup_work` core-seconds to do at up to `startup_cpu` cores
    # before the container is ready (JIT, caches): time-to-Ready follows the CPU it gets.
    startup_work: float = 0.0
    startup_cpu: float = 0.0
    # The heap a managed runtime's program would use with no ceiling (scenario
    # `usage.heap`, bytes): the container's memory is then `memory` (outside the heap) plus
    # this, capped at the heap ceiling its spec as admitted fixes (`cluster.metering`).
    heap: GeneratorSpec | None = None


@dataclass(slots=True)
class WorkloadSpec:
    kind: str
    name: str
    namespace: str = "default"
    replicas: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)  # the pod template's
    priority: int = 0
    containers: list[ContainerSpec] = field(default_factory=list)
    init_containers: list[ContainerSpec] = field(default_factory=list)
    pod_requests: dict[str, int] = field(default_factory=dict)  # pod-level spec.resources
    pod_limits: dict[str, int] = field(default_factory=dict)
    overhead: dict[str, int] = field(default_factory=dict)  # the RuntimeClass's pod overhead
    readiness_delay: float = 10.0
    termination_grace: float = 30.0
    load_shared: bool = False  # demand is spread over the ready replicas (HPA-driven tiers)
    jitter: float = 0.1  # per-replica variation of the usage level
    # Job and CronJob (a CronJob's runs are Jobs it creates, each with these)
    completions: int = 1
    parallelism: int = 1
    run_time: float = 3600.0
    # Job: rerun the same Job on this period; CronJob: its schedule's period, a new Job
    # each time, the first `first_run` seconds into the run.
    every: float | None = None
    first_run: float = 0.0
    policy: str | None = None  # its target's spec.policy (a ClusterAIScalePolicy's name)


@dataclass(slots=True)
class PDBSpec:
    name: str
    namespace: str
    selector: dict[str, str]
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"  # or AlwaysAllow


@dataclass(frozen=True, slots=True)
class HPAMetricSpec:
    """A Resource metric of an HPA: a utilisation percent or an average value target."""

    resource: str  # cpu | memory
    target_utilization: int | None = None  # percent of request
    target_average_value: int | None = None  # millicores (cpu) or bytes (memory) per pod


@dataclass(frozen=True, slots=True)
class HPAScalingPolicy:
    type: str  # Pods | Percent
    value: int
    period: float  # seconds


@dataclass(frozen=True, slots=True)
class HPAScalingRules:
    """One direction of `spec.behavior` (None: the API server's default for the field)."""

    stabilization_window: float | None = None
    select_policy: str | None = None  # Max | Min | Disabled
    policies: tuple[HPAScalingPolicy, ...] | None = None
    tolerance: float | None = None


@dataclass(frozen=True, slots=True)
class HPABehavior:
    scale_up: HPAScalingRules | None = None
    scale_down: HPAScalingRules | None = None


@dataclass(slots=True)
class HPASpec:
    name: str
    namespace: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    metrics: list[HPAMetricSpec]
    behavior: HPABehavior | None = None  # None: the controller's behaviour without one


@dataclass(slots=True)
class Scenario:
    name: str
    source: str
    nodes: list[NodeSpec] = field(default_factory=list)
    workloads: list[WorkloadSpec] = field(default_factory=list)
    pdbs: list[PDBSpec] = field(default_factory=list)
    hpas: list[HPASpec] = field(default_factory=list)
    # Other vertical autoscalers' objects (VPAs, ...), as the snapshot shows them.
    vertical_autoscalers: list[VerticalClaim] = field(default_factory=list)
    seed: int | None = None
    hpa_sync_period: float = 15.0
    description: str = ""
    node_types: dict[str, NodeTypeSpec] = field(default_factory=dict)
    node_autoscaler: NodeAutoscalerSpec | None = None
    # The policy hierarchy (`scenario_policies`): ClusterAIScalePolicies, and Namespaces'
    # labels by name (`foresize.io/policy` picks a namespace's policy).
    policies: list[Any] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(slots=True)
class NodeTypeSpec:
    """An instance type a node autoscaler may launch: its size and its price."""

    name: str
    cpu: int  # millicores allocatable
    memory: int  # bytes allocatable
    capacity_cpu: int
    capacity_memory: int
    price_per_hour: float
    labels: dict[str, str] = field(default_factory=dict)


KARPENTER = "karpenter"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
NODE_AUTOSCALER_FLAVOURS = (KARPENTER, CLUSTER_AUTOSCALER)
WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"


@dataclass(slots=True)
class NodeAutoscalerSpec:
    """A node autoscaler (`foresize.shells.sim.cluster.nodes`); the defaults are upstream's."""

    flavour: str  # KARPENTER or CLUSTER_AUTOSCALER
    node_types: list[str]  # the pool: names in `Scenario.node_types`
    max_nodes: int = 20  # nodes of the pool at most (Karpenter's NodePool limits)
    min_nodes: int = 0  # Cluster Autoscaler never scales the pool below this
    startup_delay: float = 60.0  # from launch to a Ready node
    # Karpenter (NodePool `disruption`, the provisioner's batching)
    batch_idle_duration: float = 1.0
    batch_max_duration: float = 10.0
    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: float | None = 0.0  # None: "Never"
    disruption_budget: int | str = "10%"  # NodePool budgets' `nodes`
    # Cluster Autoscaler (its flags)
    scan_interval: float = 10.0
    scale_down_utilization_threshold: float = 0.5
    scale_down_unneeded_time: float = 600.0
    scale_down_delay_after_add: float = 600.0
    max_empty_bulk_delete: int = 10
    max_pod_eviction_time: float = 120.0  # a drain gives up after this
