"""What a target's suggestion is read from (no I/O): the workloads whose history it reads
and its containers with their current resources (`history_source`), and one history per
container over several workloads (`merged_histories`: a selector target's pods)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from foresize.core.cluster.model import Container, Pod
from foresize.core.cluster.runtime import HeapCeiling, heap_ceiling
from foresize.core.cluster.snapshot import ClusterSnapshot, TargetObject
from foresize.core.cluster.target import target_view
from foresize.core.errors import ForesizeError
from foresize.core.history import HistoryWorkload, history_kinds, history_workload_of

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

    from foresize.core.recommend.histories import ContainerHistory


HistoryRead = tuple[str, tuple[str, ...]]
"""A workload whose history a target reads: its name and the kinds of history it reads
(`history.history_kinds`)."""


def history_read(
    snapshot: ClusterSnapshot, namespace: str, workload: HistoryWorkload
) -> HistoryRead:
    return workload.name, history_kinds(snapshot, namespace, workload)


def history_source(
    snapshot: ClusterSnapshot, target: TargetObject
) -> tuple[list[HistoryRead], list[Container]] | None:
    """(the workloads whose history it reads, containers with their current resources) of
    a target.

    A scaleTargetRef target: its workload and the workload's template. A selector target:
    the workload of every pod it selects, as the collector keys history (the pod's
    controller, or the pod itself: `history.history_workload_of`), and each container
    name's resources on the first selected pod that has it. None when there is nothing
    to forecast yet."""
    try:
        view = target_view(target)
    except (ForesizeError, ValueError):
        return None  # the vertical planner reports the bad spec
    ns = view.namespace
    if view.ref_kind:
        workload = snapshot.workload(view.ref_kind, ns, view.ref_name)
        if workload is None or not workload.template.containers:
            return None
        own = HistoryWorkload(workload.kind, workload.name)
        return [history_read(snapshot, ns, own)], list(workload.template.containers)
    if not view.has_selector:
        return None
    pods = sorted(
        (p for p in snapshot.pods if p.namespace == ns and view.selects(p.labels)),
        key=lambda p: (p.creation_time, p.name),
    )
    workloads: list[HistoryRead] = []
    templates: dict[str, Container] = {}
    for p in pods:
        wl = history_read(snapshot, ns, history_workload_of(p, snapshot.top_owner(p)))
        if wl not in workloads:
            workloads.append(wl)
        for c in p.containers:
            templates.setdefault(c.name, c)
    if not templates:
        return None
    return workloads, list(templates.values())


def running_heap_ceilings(
    snapshot: ClusterSnapshot, target: TargetObject, templates: list[Container]
) -> dict[str, HeapCeiling]:
    """Per container, the heap ceiling its running pods were started with, which THE heap
    rule learns the non-heap allowance against (usage above the heap is non-heap).

    The template's setting is not always the one running: with
    `runtime.keep_heap_consistent` the pod webhook rewrites a fixed heap at each pod's
    creation, so reading the usage of pods running `-Xmx1376m` against the template's
    `-Xmx1g` would take 352Mi of heap for non-heap, and the next rewrite would give the
    heap nothing more. Where the running pods' fixed ceilings differ (a rollout under
    way), the smallest: the larger non-heap allowance, the safe side. A container no
    running pod has, or whose heap follows the limit, keeps the template's reading."""
    out = {c.name: heap_ceiling(c.command, c.args, c.env, c.env_from) for c in templates}
    if not any(c.fixed is not None for c in out.values()):
        return out
    running: dict[str, HeapCeiling] = {}
    for pod in _running_pods(snapshot, target):
        for c in pod.containers:
            if out.get(c.name) is None or out[c.name].fixed is None:
                continue
            ceiling = heap_ceiling(c.command, c.args, c.env, c.env_from)
            low = running.get(c.name)
            if ceiling.fixed is not None and (low is None or ceiling.fixed < (low.fixed or 0)):
                running[c.name] = ceiling
    return {**out, **running}


def _running_pods(snapshot: ClusterSnapshot, target: TargetObject) -> list[Pod]:
    try:
        view = target_view(target)
    except (ForesizeError, ValueError):
        return []
    if view.ref_kind:
        workload = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
        pods = snapshot.pods_of(workload) if workload is not None else []
    else:
        pods = [
            p for p in snapshot.pods if p.namespace == view.namespace and view.selects(p.labels)
        ]
    return [p for p in pods if p.phase == "Running" and not p.terminating]


def merged_histories(
    sources: list[dict[str, ContainerHistory]],
) -> dict[str, ContainerHistory]:
    """One history per container over several workloads (a selector target's pods): the
    higher usage of the two at each step (the suggestion must cover the hungriest pod),
    the earliest first sample, every OOM kill."""
    import numpy as np

    from foresize.core.recommend.histories import ContainerHistory

    if len(sources) == 1:
        return sources[0]
    out: dict[str, ContainerHistory] = {}
    for hist in sources:
        for cname, h in hist.items():
            have = out.get(cname)
            if have is None:
                out[cname] = h
                continue
            with np.errstate(all="ignore"):
                cpu = np.fmax(_tail(have.cpu, len(h.cpu)), _tail(h.cpu, len(have.cpu)))
                mem = np.fmax(_tail(have.memory, len(h.memory)), _tail(h.memory, len(have.memory)))
            seen = [t for t in (have.first_seen, h.first_seen) if t is not None]
            out[cname] = ContainerHistory(
                cpu,
                mem,
                min(seen) if seen else None,
                [*have.oom_times, *h.oom_times],
                [*have.oom_usage, *h.oom_usage],
            )
    return out


def _tail(a: ArrayLike, n: int) -> NDArray[np.float64]:
    """`a` padded with NaN at the front to at least `n` (histories align at their end)."""
    import numpy as np

    values = np.asarray(a, dtype=float)
    if len(values) >= n:
        return values
    return np.concatenate([np.full(n - len(values), np.nan), values])
