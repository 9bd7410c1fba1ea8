"""Upsizes yield to replicas that cannot be scheduled (issue 27 part 3).

An upsize sent ahead of a forecast peak holds room on its node from then on. When pods of
equal or higher priority wait for a node (an HPA's scale-out at the peak) and lack that
room on a node where one of the target's pods runs, the target's suggestion is lowered,
for the resources they lack, to what its containers really use now (the highest sample
of the last `YIELD_WINDOW` of the workload's history, never below the container's lower
bound nor above the suggestion). The disruption worker then sends that as a downsize
(downsizes go first); once the kubelet has actuated it, the scheduler places the waiting
pods, and the guard (which keeps Pending pods' room) lets the upsize back only into room
nobody waits for. Only in-place modes yield: a recreated pod would only queue behind them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from foresize.core.api.quantity import CPU, MIB
from foresize.core.cluster.capacity import NodeLedger
from foresize.core.cluster.model import ContainerSuggestion, Suggestion, Workload
from foresize.core.cluster.snapshot import ClusterSnapshot
from foresize.core.cluster.target import TargetView, target_view
from foresize.core.history import (
    HistoryReader,
    HistoryWorkload,
    SeriesKey,
    history_kinds,
    merged_window,
)

# What the pod "really uses now": the highest 1-minute sample of the last 15 minutes (the
# worker's decision cadence), so a yield does not undercut a burst of the last minutes.
YIELD_WINDOW = 900.0
YIELD_STEP = 60.0
IN_PLACE_MODES = ("in_place", "in_place_or_recreate")
YIELD_SUFFIX = "+yield"  # the yielded suggestion's uid: the original's, marked


def lacking_room(ledger: NodeLedger, node: str, priority: int) -> set[str]:
    """The resources a Pending pod of priority >= `priority`, fitting no node now, lacks
    on `node` although the node is big enough to run it. (A replica an HPA is only
    forecast to add holds new upsizes back but makes none yield: a yield lowers a pod to
    what it uses now, which only a pod really waiting justifies.)"""
    out: set[str] = set()
    free = ledger.free(node)
    for q in ledger.pending():
        if q.expected or q.node is not None or q.priority < priority:
            continue
        if not ledger.could_run(node, q):
            continue
        out |= {r for r, v in q.need.items() if free.get(r, 0) < v}
    return out


def yield_to_pending(
    snapshot: ClusterSnapshot,
    suggestions: Mapping[str, Suggestion],
    history: HistoryReader | None,
    now: float,
    ledger: NodeLedger,
) -> dict[str, Suggestion]:
    """`suggestions` with the targets that hold room waiting pods lack lowered to their
    containers' current use (see the module's notes); the others unchanged."""
    out = dict(suggestions)
    if history is None or not any(q.node is None and not q.expected for q in ledger.pending()):
        return out
    for target in snapshot.targets:
        try:
            view = target_view(target)
        except Exception:  # an unreadable spec: the worker reports it
            continue
        sugg = out.get(view.key)
        if (
            sugg is None
            or not view.vertical_autonomous
            or view.update_mode not in IN_PLACE_MODES
            or not (view.ref_kind and view.ref_name)
        ):
            continue
        wl = snapshot.workload(view.ref_kind, view.namespace, view.ref_name)
        if wl is None:
            continue
        lacking: set[str] = set()
        names: set[str] = set()
        for pod in snapshot.pods_of(wl):
            if pod.node_name is not None and pod.phase == "Running":
                lacking |= lacking_room(ledger, pod.node_name, pod.priority)
                names |= {c.name for c in pod.containers}
        if lacking:
            out[view.key] = _yielded(
                view,
                wl,
                history_kinds(snapshot, wl.namespace, HistoryWorkload(wl.kind, wl.name)),
                sugg,
                sorted(names),
                lacking & {CPU, "memory"},
                history,
                now,
            )
    return out


def _yielded(
    view: TargetView,
    workload: Workload,
    kinds: Sequence[str],
    sugg: Suggestion,
    names: list[str],
    resources: set[str],
    history: HistoryReader,
    now: float,
) -> Suggestion:
    """The suggestion with each running container's `resources` at its current use (a
    `*` entry is written out per container, so each gets its own)."""
    length = int(YIELD_WINDOW // YIELD_STEP)
    containers: dict[str, ContainerSuggestion] = dict(sugg.containers)
    for name in names:
        cs = sugg.for_container(name)
        if cs is None:
            continue
        requests = dict(cs.requests)
        policy = view.policy_for(name)
        for r in resources:
            want = requests.get(r)
            if want is None:
                continue
            key = SeriesKey(view.namespace, workload.name, name, workload.kind)
            samples = merged_window(history, key, kinds, r, now, length, YIELD_STEP)
            if not np.isfinite(samples).any():
                continue
            used = float(np.nanmax(samples))
            # rounded up to 1m and 1Mi (store noise first: float32 0.3 cores is 300m, not 301m)
            used_units = (
                math.ceil(round(used * 1000, 3)) if r == CPU else math.ceil(used / MIB) * MIB
            )
            bounds = policy.for_resource(r) if policy is not None else None
            floor = bounds.lower if bounds is not None and bounds.lower is not None else 1
            requests[r] = min(want, max(used_units, floor))
        containers[name] = ContainerSuggestion(name, requests, dict(cs.limits))
    uid = sugg.uid if sugg.uid.endswith(YIELD_SUFFIX) else sugg.uid + YIELD_SUFFIX
    return Suggestion(uid, sugg.created_at, containers, sugg.window_start, sugg.window_end)
