"""The target-level guards a target passes before any of its pods is considered, in order.

Each guard reads the target and the pass, may record notes and Events, and returns False
to stop the target here (nothing is changed on its pods). Then the batch gates: the
disruption budget, PDB back-off and the circuit breaker decide how many pods may be
disrupted and evicted in this pass.
"""

from __future__ import annotations

from collections.abc import Callable

from foresize.core.api.access import JSONValue
from foresize.core.cluster.coordination import coordination_problem
from foresize.core.cluster.model import Pod, odd_disruption_annotation
from foresize.core.cluster.qos import has_pod_level_resources
from foresize.core.cluster.snapshot import labels_match
from foresize.core.vertical.policy import batch_size
from foresize.core.vertical.run import PassContext, TargetRun
from foresize.core.vertical.stall import stall_reason
from foresize.core.vertical.state import HALF_OPEN, OPEN

CLAIM_CONDITION = "ClaimedByAnotherAutoscaler"


def claimed_elsewhere(run: TargetRun, ctx: PassContext) -> bool:
    """A workload another vertical autoscaler acts on (a VerticalPodAutoscaler in any mode
    but Off, a MultidimPodAutoscaler, ...) is not Foresize's to size: two vertical
    autoscalers on one workload undo each other's changes. A scaleTargetRef target stops
    here; a selector target leaves the claimed workloads' pods and keeps the others.
    Said in a condition naming the object and one Event per claim."""
    pol, snap = run.policy, ctx.snapshot
    claims = []
    if pol.ref_kind and pol.ref_name:
        claim = snap.vertical_claim_for(pol.ref_kind, pol.namespace, pol.ref_name)
        if claim is not None:
            claims.append(claim)
    elif snap.vertical_claims and run.pods:
        kept = []
        for p in run.pods:
            top = snap.top_owner(p)
            claim = snap.vertical_claim_for(top.kind, p.namespace, top.name) if top else None
            if claim is None:
                kept.append(p)
            elif claim not in claims:
                claims.append(claim)
        run.pods = kept
        run.replicas = len(kept)
    if not claims:
        run.state.reported.pop("claimed", None)
        return True
    names = ", ".join(c.describe() for c in claims)
    run.claimed_by = names
    msg = f"not sized by Foresize: {names} also sizes the workload (one vertical autoscaler)"
    run.notes.append(msg)
    if run.report_once("claimed", names):
        run.target_event("ClaimedByAnotherAutoscaler", msg, "Warning")
    return bool(run.pods) and not (pol.ref_kind and pol.ref_name)


def excluded(run: TargetRun, ctx: PassContext) -> bool:
    """The operator's label selector keeps chosen workloads away from in-place resizes."""
    selector = ctx.config.exclude_selector
    pol, wl = run.policy, run.workload
    wl_labels = getattr(wl, "labels", {}) if wl is not None else {}
    if selector and (labels_match(selector, wl_labels) or labels_match(selector, pol.labels)):
        run.notes.append("excluded by the operator's label selector")
        if run.report_once("excluded", "1"):
            run.target_event(
                "Excluded",
                "workload excluded from vertical actuation by the operator's label selector",
            )
        return False
    run.state.reported.pop("excluded", None)
    return True


def acting(run: TargetRun, ctx: PassContext) -> bool:
    """Only an autonomous target with a suggestion acts, and not while paused or deleted;
    the others keep their stall count honest and change nothing."""
    pol = run.policy
    if (
        pol.vertical_mode == "autonomous"
        and not ctx.snapshot.paused
        and not pol.deleting
        and run.suggestion is not None
    ):
        return True
    run.stalled += sum(1 for p in run.pods if stall_reason(p) is not None)
    return False


def hpa_left_alone(run: TargetRun, ctx: PassContext) -> bool:
    """Leave the resource an HPA scales on alone unless the user opted in (the HPA's
    utilisation arithmetic divides by the request)."""
    wl = run.workload
    hpa = ctx.snapshot.hpa_for(wl) if wl is not None else None
    hpa_res = frozenset(hpa.scaling_resources()) if hpa is not None else frozenset()
    policy = run.policy.hpa_resource_policy
    problem = coordination_problem(hpa) if hpa is not None and policy == "coordinate" else None
    if not hpa_res or policy == "override" or (policy == "coordinate" and problem is None):
        # coordinate: the suggestion carries the coordinated request of the HPA's
        # resource, or none (`horizontal.coordinate`), so what it holds may be applied.
        run.state.reported.pop("hpa", None)
        return True
    assert hpa is not None
    run.skip = hpa_res
    res = ",".join(sorted(hpa_res))
    if problem is not None:
        run.notes.append(f"not coordinating: {problem}; leaving {res} alone")
        if run.report_once("hpa", f"{res}:{problem}"):
            run.target_event(
                "HPACoordinationIgnored",
                f"not coordinating {res}: {problem}; its request is left alone",
            )
        return True
    run.notes.append(f"leaving {res} alone: HorizontalPodAutoscaler {hpa.name} scales on it")
    if run.report_once("hpa", res):
        run.target_event(
            "HPAResourceLeftAlone",
            f"not changing {res}: HorizontalPodAutoscaler {hpa.name} scales on its "
            "utilisation (set spec.vertical.hpa_resource_policy: coordinate or override "
            "to change it)",
        )
    return True


# In order: a guard that says no stops the target there.
TARGET_GUARDS: tuple[Callable[[TargetRun, PassContext], bool], ...] = (
    claimed_elsewhere,
    excluded,
    acting,
    hpa_left_alone,
)


def open_gates(run: TargetRun, now: float) -> int:
    """Set the eviction gates (PDB back-off, circuit breaker) and the pacing; returns the
    batch size (disruptions allowed before counting pods already disrupted)."""
    pol, ts = run.policy, run.state
    size = batch_size(pol.max_disrupted, run.replicas or len(run.pods))
    run.paced = ts.last_batch_at is not None and now - ts.last_batch_at < pol.disruption_interval
    if ts.evict_retry_at is not None and now >= ts.evict_retry_at:
        ts.evict_retry_at = None
    if ts.evict_retry_at is not None:
        run.evictions_left = 0
    b = ts.breaker
    if b.state == OPEN:
        run.evictions_left = 0
    elif b.state == HALF_OPEN:
        run.evictions_left = 0 if any(p.probe for p in ts.pending_evictions) else 1
    return size


# --------------------------------------------------------------------------- per pod

POD_LEVEL_CONDITION = "PodLevelResourcesLeftAlone"


def pod_level_left_alone(run: TargetRun, pod: Pod) -> bool:
    """A pod with pod-level resources (`spec.resources`) is neither resized nor evicted:
    the API server refuses to resize it (Kubernetes 1.33-1.35), its pod-level requests
    decide its QoS class and scheduling whatever its containers ask, and a recreated pod
    would come back with the same template values (the webhook leaves it alone too).
    Said once per pod with an Event, and on the target with a condition (`conditions`)."""
    if not has_pod_level_resources(pod):
        return False
    run.pod_level_left.append(pod.name)
    if run.report_once(f"podlevel:{pod.uid}", "1"):
        run.pod_event(
            pod,
            POD_LEVEL_CONDITION,
            "not resized: the pod sets pod-level resources (spec.resources), which in-place "
            "resize does not support; its template's values stay in force",
            "Warning",
        )
    return True


def pod_level_conditions(run: TargetRun) -> list[dict[str, JSONValue]] | None:
    """The target's conditions with PodLevelResourcesLeftAlone set (True naming the pods
    left alone, False once there are none), or None when nothing needs writing."""
    current = next((c for c in run.target_conditions if c.get("type") == POD_LEVEL_CONDITION), None)
    if run.pod_level_left:
        names = sorted(run.pod_level_left)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        wanted = {
            "type": POD_LEVEL_CONDITION,
            "status": "True",
            "reason": "PodLevelResources",
            "message": f"{len(names)} pod(s) set pod-level resources and are not resized: {shown}",
        }
    elif current is not None and current.get("status") == "True":
        wanted = {
            "type": POD_LEVEL_CONDITION,
            "status": "False",
            "reason": "NoPodLevelResources",
            "message": "no pod of the target sets pod-level resources",
        }
    else:
        return None
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return None
    return [c for c in run.target_conditions if c.get("type") != POD_LEVEL_CONDITION] + [wanted]


def claim_condition(run: TargetRun) -> dict[str, JSONValue] | None:
    """ClaimedByAnotherAutoscaler as it should now read (True naming the objects, False
    once none claims), or None when the target's condition already says so."""
    current = next((c for c in run.target_conditions if c.get("type") == CLAIM_CONDITION), None)
    if run.claimed_by:
        wanted = {
            "type": CLAIM_CONDITION,
            "status": "True",
            "reason": "VerticalAutoscalerActs",
            "message": f"{run.claimed_by} sizes the workload; Foresize leaves it alone",
        }
    elif current is not None and current.get("status") == "True":
        wanted = {
            "type": CLAIM_CONDITION,
            "status": "False",
            "reason": "NoOtherVerticalAutoscaler",
            "message": "no other vertical autoscaler acts on the workload",
        }
    else:
        return None
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return None
    return wanted


HISTORY_CONDITION = "HistoryIncomplete"


def history_condition(run: TargetRun) -> dict[str, JSONValue] | None:
    """HistoryIncomplete as it should now read (True naming why the usage history cannot
    be read whole, while the last suggestion stays in force; False once it reads whole
    again), or None when the target's condition already says so (or it never was True):
    a store that is always whole writes nothing."""
    current = next((c for c in run.target_conditions if c.get("type") == HISTORY_CONDITION), None)
    if run.history_problem is not None:
        wanted: dict[str, JSONValue] = {
            "type": HISTORY_CONDITION,
            "status": "True",
            "reason": "HistoryStoreUnreadable",
            "message": f"{run.history_problem}; the last suggestion stays in force, no new "
            "one is made from a partial history",
        }
    elif current is not None and current.get("status") == "True":
        wanted = {
            "type": HISTORY_CONDITION,
            "status": "False",
            "reason": "HistoryWhole",
            "message": "the usage history reads whole",
        }
    else:
        return None
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return None
    return wanted


# Set while a pod of the target carries a node autoscaler's opt-out annotation with a value
# it would not recognise (treated as an opt-out: see `admit.disruption_hold`).
ODD_ANNOTATION_CONDITION = "DisruptionAnnotationUnrecognised"


def odd_annotation_conditions(
    run: TargetRun, conditions: list[dict[str, JSONValue]]
) -> list[dict[str, JSONValue]] | None:
    """`conditions` with DisruptionAnnotationUnrecognised set (True naming the pods and
    their values, False once there are none), or None when it needs no change."""
    current = next((c for c in conditions if c.get("type") == ODD_ANNOTATION_CONDITION), None)
    if run.entries:  # the pods' entries, looked up by the decision step: read already
        odd = sorted(f"{e.pod.name} ({e.odd_annotation})" for e in run.entries if e.odd_annotation)
    else:
        odd = sorted(
            f"{p.name} ({why})"
            for p in run.pods
            if (why := odd_disruption_annotation(p.annotations))
        )
    if odd:
        shown = ", ".join(odd[:5]) + (f" and {len(odd) - 5} more" if len(odd) > 5 else "")
        wanted = {
            "type": ODD_ANNOTATION_CONDITION,
            "status": "True",
            "reason": "UnrecognisedValue",
            "message": f"{len(odd)} pod(s) annotate a disruption opt-out with a value node "
            f'autoscalers ignore (they read "true"/"false"); treated as opted out, resized '
            f"in place only: {shown}",
        }
    elif current is not None and current.get("status") == "True":
        wanted = {
            "type": ODD_ANNOTATION_CONDITION,
            "status": "False",
            "reason": "NoUnrecognisedValue",
            "message": "no pod of the target has an unrecognised disruption annotation",
        }
    else:
        return None
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return None
    return [c for c in conditions if c.get("type") != ODD_ANNOTATION_CONDITION] + [wanted]
