"""`foresize bench plan`: wall time of one vertical planning pass (snapshot -> actions).

A synthetic, seeded cluster (architecture §3.7): by default 10,000 pods in 1,000 targets on
500 nodes. The pods are in every state the worker distinguishes — already at the
suggestion, needing an upsize or a downsize, resize in flight, stalled (Deferred,
Infeasible, Error), not Ready — across the four update modes, with some HPAs, so the pass
does the work a real one does (charges per node for the capacity guard included).
Reports the median of N passes and the peak RSS. Each pass starts from fresh per-target
state but, as in the shells, from the memo of what the passes before derived from each
pod object (`vertical.memo`), with `--changed` of the pods handed in as new objects; the
pass after a restart (every pod new to the memo) is timed beside (`cold_*`). The passes
run as the shells run them, with the cyclic collector off (`adapters.collector`); the CPU
median with it on is reported beside.
"""

from __future__ import annotations

import typer

from foresize.core.errors import ForesizeError


def build_snapshot(pods: int, targets: int, nodes: int, seed: int = 7):  # type: ignore[no-untyped-def]
    """The synthetic snapshot and suggestions (deterministic for a seed)."""
    import random

    from foresize.core.api.quantity import MIB
    from foresize.core.api.types import parse_target
    from foresize.core.cluster.model import (
        Container,
        ContainerStatus,
        ContainerSuggestion,
        HorizontalPodAutoscaler,
        HPAMetric,
        Node,
        OwnerRef,
        Pod,
        PodCondition,
        ResourceRequirements,
        Suggestion,
        Workload,
    )
    from foresize.core.cluster.snapshot import ClusterSnapshot

    rng = random.Random(seed)
    modes = ("in_place_or_recreate", "in_place", "recreate", "initial")
    node_objs = {
        f"node-{i:04d}": Node(
            f"node-{i:04d}", allocatable={"cpu": 16000, "memory": 64 * 1024 * MIB}
        )
        for i in range(nodes)
    }
    node_names = list(node_objs)
    snap = ClusterSnapshot(now=0.0, nodes=node_objs)
    suggestions: dict[str, Suggestion] = {}
    per_target = [pods // targets + (1 if i < pods % targets else 0) for i in range(targets)]
    n = 0
    for t in range(targets):
        name = f"app-{t:04d}"
        ns = f"ns-{t % 20}"
        mode = modes[t % len(modes)]
        snap.targets.append(
            parse_target(
                {
                    "apiVersion": "foresize.io/v1",
                    "kind": "AIScaleTarget",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "uid": f"t-{t}",
                        "generation": 1,
                        # As every object from an API server carries one: the pass reads
                        # an unchanged target once (`cluster.target`, keyed by it).
                        "resourceVersion": str(1000 + t),
                    },
                    "spec": {
                        "scaleTargetRef": {"kind": "Deployment", "name": name},
                        "vertical": {
                            "mode": "autonomous",
                            "update_policy": {"update_mode": mode},
                        },
                    },
                }
            )
        )
        replicas = per_target[t]
        snap.workloads[f"Deployment/{ns}/{name}"] = Workload(
            "Deployment", ns, name, replicas=replicas, selector={"app": name}
        )
        if t % 10 == 0:
            snap.hpas.append(
                HorizontalPodAutoscaler(
                    ns, name, "Deployment", name, 1, 20, [HPAMetric("Resource", "cpu", 70)]
                )
            )
        base_cpu = rng.choice((100, 250, 500, 1000))
        base_mem = rng.choice((128, 256, 512, 1024)) * MIB
        sug_cpu = int(base_cpu * rng.uniform(0.6, 1.6))
        sug_mem = int(base_mem * rng.uniform(0.6, 1.6)) // MIB * MIB
        suggestions[f"{ns}/{name}"] = Suggestion(
            f"s-{t}", 0.0, {"*": ContainerSuggestion("*", {"cpu": sug_cpu, "memory": sug_mem})}
        )
        for r in range(replicas):
            kind = rng.random()
            cpu, mem = base_cpu, base_mem
            alloc = {"cpu": cpu, "memory": mem}
            conditions = [PodCondition("Ready", "True")]
            gen, obs = 1, 1
            if kind < 0.3:  # already at the suggestion
                cpu, mem = sug_cpu, sug_mem
                alloc = {"cpu": cpu, "memory": mem}
            elif kind < 0.4:  # stalled resize
                cpu, mem = sug_cpu, sug_mem
                reason = rng.choice(("Deferred", "Infeasible", "Error"))
                ctype = "PodResizeInProgress" if reason == "Error" else "PodResizePending"
                conditions.append(PodCondition(ctype, "True", reason, "stalled"))
                gen, obs = 2, 2
            elif kind < 0.45:  # not Ready
                conditions = [PodCondition("Ready", "False")]
            req = {"cpu": cpu, "memory": mem}
            snap.pods.append(
                Pod(
                    namespace=ns,
                    name=f"{name}-{r}",
                    uid=f"u-{n}",
                    labels={"app": name},
                    owner=OwnerRef("Deployment", name),
                    node_name=node_names[n % nodes],
                    priority=rng.choice((0, 0, 100, 1000)),
                    containers=[
                        Container(
                            "app", ResourceRequirements(req, {"memory": max(mem, 2 * base_mem)})
                        )
                    ],
                    phase="Running",
                    conditions=conditions,
                    container_statuses=[
                        ContainerStatus(
                            "app",
                            allocated=dict(alloc),
                            resources=ResourceRequirements(
                                dict(alloc), {"memory": max(mem, 2 * base_mem)}
                            ),
                        )
                    ],
                    generation=gen,
                    observed_generation=obs,
                    creation_time=float(n),
                )
            )
            n += 1
    return snap, suggestions


def replace_some_pods(snap, fraction: float, rng):  # type: ignore[no-untyped-def]
    """A tenth (`fraction`) of the pods handed in as new objects with the same values, as
    a shell hands in every pod that changed since the last pass: the memo (`vertical.memo`)
    knows nothing of them, so the pass derives them afresh."""
    import dataclasses

    count = round(len(snap.pods) * fraction)
    for i in rng.sample(range(len(snap.pods)), count):
        snap.pods[i] = dataclasses.replace(snap.pods[i])
    # The snapshot's owner/node indexes are built by the pass that first needs them, as
    # in the shells (a fresh snapshot each pass): reset them so each run pays it.
    snap._by_node = None
    snap._by_owner = None


def default_policy(preset: str):  # type: ignore[no-untyped-def]
    """The ClusterAIScalePolicy `default` with `preset`: every target of the cluster is in
    the policy hierarchy under it (`cluster.policies`)."""
    from foresize.core.api.cluster_policy import DEFAULT_POLICY, ClusterAIScalePolicy

    return ClusterAIScalePolicy.model_validate(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "ClusterAIScalePolicy",
            "metadata": {"name": DEFAULT_POLICY, "uid": "policy-default", "resourceVersion": "1"},
            "spec": {"preset": preset},
        }
    )


def published(target, effective):  # type: ignore[no-untyped-def]
    """`target` as the API server has it after its policy status write: the status the
    resolution gave `effective`, the resourceVersion moved on."""
    version = str(int(target.metadata.resourceVersion) + 1)
    return target.model_copy(
        update={
            "metadata": target.metadata.model_copy(update={"resourceVersion": version}),
            "status": effective.status,
        }
    )


def run_bench(
    pods: int,
    targets: int,
    nodes: int,
    repeats: int,
    changed: float,
    preset: str | None = None,
) -> dict[str, float | int]:
    import random
    import resource
    import statistics
    import time

    from foresize.adapters.collector import planned_without_cyclic_gc
    from foresize.core.cluster.policies import resolve_snapshot
    from foresize.core.vertical import WorkerState, plan
    from foresize.core.vertical.memo import PlanMemo

    snap, suggestions = build_snapshot(pods, targets, nodes)
    extra: dict[str, float | int] = {}
    if preset is not None:
        # Every pass resolves every target's effective spec first, as `reconcile.plan_pass`
        # does: the first resolution is the one after a restart (its memo empty).
        snap.policies = [default_policy(preset)]
        cpu_start = time.process_time()
        effective, _ = resolve_snapshot(snap)
        extra["resolve_cold_cpu_seconds"] = round(time.process_time() - cpu_start, 4)
        # The API server then holds what the pass published: each target's status with
        # its effective policy, at a new resourceVersion (the passes after read that).
        pairs = zip(snap.targets, effective.targets, strict=True)
        snap.targets = [published(t, e) for t, e in pairs]
        resolve_snapshot(snap)
    resolve_times: list[float] = []

    def resolved():  # type: ignore[no-untyped-def]
        if preset is None:
            return snap
        cpu_start = time.process_time()
        effective, _ = resolve_snapshot(snap)
        resolve_times.append(time.process_time() - cpu_start)
        return effective

    rng = random.Random(11)
    # A running worker keeps its state between passes (parsed policies and the memo of
    # what it derived from each pod object included); the first pass pays the parsing,
    # and each timed pass starts from that warm state less the per-target memory, so
    # every pass plans the same work.
    _, warm = plan(resolved(), 1000.0, WorkerState(), suggestions=suggestions)
    resolve_times.clear()

    def one_pass(memo: PlanMemo) -> tuple[float, float, int]:
        state = WorkerState(policies=warm.policies, memo=memo)
        start, cpu_start = time.perf_counter(), time.process_time()
        actions, _ = planned_without_cyclic_gc(
            lambda: plan(resolved(), 1000.0, state, suggestions=suggestions)
        )
        # CPU time beside wall time: on a shared machine the wall time also counts the
        # time other processes held the cores.
        return time.perf_counter() - start, time.process_time() - cpu_start, len(actions)

    # As both shells run the pass: the cyclic collector off (`adapters.collector`), the
    # memo carried from the pass before, `changed` of the pods new objects since.
    timed = []
    for _ in range(repeats):
        replace_some_pods(snap, changed, rng)
        timed.append(one_pass(warm.memo))
    if preset is not None:
        # The timed passes' resolutions, from the memo the passes before left.
        extra["resolve_cpu_seconds_median"] = round(statistics.median(resolve_times), 4)
    # The pass after a restart: every pod new to the memo.
    cold = []
    for _ in range(repeats):
        replace_some_pods(snap, 0.0, rng)
        cold.append(one_pass(PlanMemo()))
    # The same passes with the collector on, as the shells ran them before: how much of
    # a pass its full collections walking the snapshot took. Beside, not instead of, the
    # medians above.
    import gc

    gc_on: list[float] = []
    for _ in range(repeats):
        replace_some_pods(snap, changed, rng)
        cpu_start = time.process_time()
        plan(
            resolved(),
            1000.0,
            WorkerState(policies=warm.policies, memo=warm.memo),
            suggestions=suggestions,
        )
        gc_on.append(time.process_time() - cpu_start)
    gc.collect()
    times = [t for t, _, _ in timed]
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "pods": pods,
        "targets": targets,
        "nodes": nodes,
        "repeats": repeats,
        "changed": changed,
        "seconds_median": round(statistics.median(times), 4),
        "seconds_min": round(min(times), 4),
        "seconds_max": round(max(times), 4),
        "cpu_seconds_median": round(statistics.median(c for _, c, _ in timed), 4),
        "cpu_seconds_median_gc_on": round(statistics.median(gc_on), 4),
        "cold_seconds_median": round(statistics.median(t for t, _, _ in cold), 4),
        "cold_cpu_seconds_median": round(statistics.median(c for _, c, _ in cold), 4),
        "actions": timed[-1][2],
        "cold_actions": cold[-1][2],
        "peak_rss_mib": round(peak_kib / 1024.0, 1),
        **extra,
    }


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("plan")
    def bench_plan(
        pods: int = typer.Option(10_000, help="Pods in the synthetic cluster."),
        targets: int = typer.Option(1_000, help="AIScaleTargets (one Deployment each)."),
        nodes: int = typer.Option(500, help="Nodes."),
        repeats: int = typer.Option(5, help="Planning passes; the median is reported."),
        changed: float = typer.Option(
            0.1,
            help="Share of the pods handed in as new objects before each pass (0 to 1), as "
            "a shell hands in the pods that changed.",
        ),
        preset: str | None = typer.Option(
            None,
            "--default-policy",
            help="A cluster default ClusterAIScalePolicy with this preset over every target: "
            "each pass resolves the policy hierarchy first, as the shells' pass does "
            "(resolve_cpu_seconds_median, resolve_cold_cpu_seconds).",
        ),
        json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ) -> None:
        """One vertical planning pass over a synthetic cluster: median wall time, peak RSS."""
        import json

        from foresize.core.api.presets import PRESET_NAMES

        for label, value in (("pods", pods), ("targets", targets), ("nodes", nodes)):
            if value < 1:
                raise ForesizeError(f"--{label} must be at least 1, got {value}")
        if repeats < 1:
            raise ForesizeError(f"--repeats must be at least 1, got {repeats}")
        if not 0.0 <= changed <= 1.0:
            raise ForesizeError(f"--changed must be between 0 and 1, got {changed}")
        if targets > pods:
            raise ForesizeError(f"--targets ({targets}) must not exceed --pods ({pods})")
        if preset is not None and preset not in PRESET_NAMES:
            raise ForesizeError(
                f"--default-policy must be one of {', '.join(PRESET_NAMES)}, got {preset!r}"
            )
        result = run_bench(pods, targets, nodes, repeats, changed, preset)
        if json_out:
            print(json.dumps(result))
            return
        print(
            f"vertical planning pass: {result['pods']} pods, {result['targets']} targets, "
            f"{result['nodes']} nodes"
        )
        print(
            f"  median {result['seconds_median']:.3f} s over {repeats} passes "
            f"(min {result['seconds_min']:.3f}, max {result['seconds_max']:.3f}); "
            f"{result['actions']} actions; peak RSS {result['peak_rss_mib']:.0f} MiB"
        )
        print(
            f"  CPU: median {result['cpu_seconds_median']:.3f} s a pass (cyclic collector "
            f"off, as the shells run it; {changed:.0%} of the pods new objects since the "
            f"pass before); {result['cpu_seconds_median_gc_on']:.3f} s with it on"
        )
        print(
            f"  after a restart (every pod new): median {result['cold_seconds_median']:.3f} s, "
            f"CPU {result['cold_cpu_seconds_median']:.3f} s"
        )
        if preset is not None:
            print(
                f"  policy resolution (cluster default, preset {preset}): CPU median "
                f"{result['resolve_cpu_seconds_median']:.3f} s a pass from its memo, "
                f"{result['resolve_cold_cpu_seconds']:.3f} s the first"
            )
