"""The simulated cluster: a discrete-event model of the Kubernetes parts Foresize touches.

`SimCluster` (facade.py) implements `foresize.core.cluster.port.ClusterPort` at simulated time.
It composes the state the parts share, each in its own module, and hands every part the
state it works on (never the facade):

- **clock** (clock.py): simulated time and the event queue;
- **journal** (journal.py): the event log and the per-workload counters;
- **object store** (store.py): pods and their `PodMeta`, workloads and their
  `WorkloadState`, the custom resources, copy-on-write epochs, uids and generated names;
- **node set** (nodeset.py): the nodes, their positions in the usage arrays, the
  scheduler's per-node charge cache, every node's bill.

Each part of Kubernetes is a collaborator holding its own state, given those and the peers
it calls (`SimCluster._connect`):

- **scheduler** (scheduler.py): filters nodes on the scheduler's charge
  (`foresize.core.cluster.qos.pod_charge`: max of spec, allocated and actual requests), scores
  LeastAllocated, preempts lower-priority pods only when nothing fits (lowest priorities
  first, with the scheduler's reprieve of higher-priority victims), leaves the rest Pending
  and retries, reporting what it cannot place to the node autoscaler;
- **node autoscalers** (nodes.py): Karpenter-like and Cluster-Autoscaler-like, priced node
  types, provisioning, consolidation / scale-down through the Eviction API, drains;
- **kubelet** (kubelet.py): in-place resize (`Deferred` / `Infeasible` /
  `PodResizeInProgress` `Error`, all or nothing per pod, `generation`/`observedGeneration`,
  retried each sync: downsizes first, then higher priority, Guaranteed before Burstable, then
  oldest), `resizePolicy` `RestartContainer` restarts, OOM kills above the memory limit (with
  crash back-off), node-pressure eviction (BestEffort, Burstable, Guaranteed);
- **pod lifecycle** (lifecycle.py): admission, binding, readiness delay, graceful termination;
- **usage** (metering.py): usage arrays, CPU throttling and contention, accounting;
- **controllers** (controllers.py): Deployment -> ReplicaSet (rolling restart with
  maxSurge/maxUnavailable 25%), StatefulSet (ordered `name-0..`, OrderedReady), DaemonSet (one
  pod per node, also on nodes added later), Job (optionally periodic); every pod CREATE goes
  through `admission_hook`; **HPAs** (hpa.py) with the replica arithmetic of the HPA
  controller;
- **API** (api.py, disruption.py): the resize subresource (validated by
  `foresize.core.cluster.validation`), the Eviction API with PDBs (201 / 429 DisruptionBudget / 429
  retryAfterSeconds 10 while a PDB is being processed / 500 for several PDBs), scale, metadata
  patches, rollout restarts, target status and events;
- **summary** (summary.py): the run's figures.

Usage lives in numpy arrays (`foresize.shells.sim.usage.UsageState`), one slot per running
container, so a usage step for thousands of containers is a few vector operations.
Everything random comes from one seed: the same seed gives the same event log.
"""

from foresize.shells.sim.cluster.api import RESTARTED_AT
from foresize.shells.sim.cluster.facade import AdmissionHook, Periodic, ScaleHook, SimCluster
from foresize.shells.sim.cluster.metering import UsageObserver

__all__ = [
    "RESTARTED_AT",
    "AdmissionHook",
    "Periodic",
    "ScaleHook",
    "SimCluster",
    "UsageObserver",
]
