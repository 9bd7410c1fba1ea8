"""The in-place gate of the pass (step 6 of `reconcile.plan_pass`): on a server without
`pods/resize`, autonomous targets asking for an in-place update mode get a condition and
an event once and are left out of the vertical planner; on a server with it, a refusal
written before is cleared."""

from __future__ import annotations

from foresize.core.api.access import JSONValue, get_path
from foresize.core.cluster import server_version as kver
from foresize.core.cluster.actions import Action, EmitEvent, WriteTargetStatus
from foresize.core.cluster.snapshot import ClusterSnapshot, DsaObject, TargetObject
from foresize.core.cluster.target import target_view


def target_key(target: TargetObject | DsaObject) -> str:
    """ "namespace/name" of a Foresize object (model or dict)."""
    meta = get_path(target, "metadata")
    return f"{get_path(meta, 'namespace') or 'default'}/{get_path(meta, 'name')}"


def merged_conditions(
    target: TargetObject, condition: dict[str, JSONValue]
) -> list[dict[str, JSONValue]]:
    """The target's conditions with `condition` replacing the one of its type: a merge patch
    replaces the whole list, so the others must be written back unchanged."""
    out = [dict(c) for c in target_view(target).conditions if c.get("type") != condition["type"]]
    out.append(condition)
    return out


def _in_place_condition(
    target: TargetObject, status: str, reason: str, message: str
) -> WriteTargetStatus:
    """The status write that sets the target's InPlaceResizeUnsupported condition."""
    ns, name = target_key(target).split("/", 1)
    condition = {
        "type": kver.CONDITION_INPLACE_UNSUPPORTED,
        "status": status,
        "reason": reason,
        "message": message,
    }
    return WriteTargetStatus(ns, name, {"conditions": merged_conditions(target, condition)})


def gate_in_place(
    snapshot: ClusterSnapshot, reported: set[str]
) -> tuple[list[Action], list[TargetObject]]:
    """(actions, targets the vertical planner may see). On a server without `pods/resize`,
    autonomous targets asking for an in-place update mode get an InPlaceResizeUnsupported
    condition and a Warning event once and are left out; on a server with it, a refusal
    written before is cleared (once per target). `reported` is updated in place."""
    refusal = kver.in_place_refusal(snapshot.server_version)
    actions: list[Action] = []
    if refusal is None:
        major, minor = snapshot.server_version
        for target in snapshot.targets:
            status = get_path(target, "status")
            cond = None
            if hasattr(status, "condition"):
                cond = status.condition(kver.CONDITION_INPLACE_UNSUPPORTED)
            key = target_key(target)
            if cond is not None and cond.status == "True" and key not in reported:
                reported.add(key)
                actions.append(
                    _in_place_condition(
                        target,
                        "False",
                        "Supported",
                        f"Kubernetes {major}.{minor} serves pods/resize",
                    )
                )
        return actions, list(snapshot.targets)
    kept = []
    for target in snapshot.targets:
        view = target_view(target)
        if view.update_mode in kver.IN_PLACE_MODES and view.vertical_autonomous:
            key = target_key(target)
            if key not in reported:
                reported.add(key)
                write = _in_place_condition(target, "True", "ServerTooOld", refusal)
                actions.append(write)
                actions.append(
                    EmitEvent(
                        write.namespace,
                        "AIScaleTarget",
                        write.name,
                        "InPlaceUnsupported",
                        refusal,
                        "Warning",
                    )
                )
            continue
        kept.append(target)
    return actions, kept


__all__ = ["gate_in_place", "merged_conditions", "target_key"]
