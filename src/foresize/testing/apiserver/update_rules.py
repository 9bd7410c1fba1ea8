"""What an update of a stored object must keep, as kube-apiserver checks it: the object's
identity (metadata, resourceVersion, name, uid, kind), the metadata only the server sets,
and each resource type's own update rules."""

from __future__ import annotations

from typing import Any

from foresize.testing.apiserver.errors import STALE, bad_request, conflict, invalid
from foresize.testing.apiserver.pods import check_pod_update
from foresize.testing.apiserver.resources import ResourceType
from foresize.testing.validation import FieldError

# Metadata only the API server sets: an update keeps the stored values (or their absence).
SERVER_OWNED_METADATA = (
    "uid",
    "creationTimestamp",
    "namespace",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def check_identity(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """An update names the object it replaces: metadata present, the stored
    resourceVersion if any (else 409), the same name and uid, the URL's kind; checked in
    kube-apiserver's order."""
    old_meta = old["metadata"]
    name = old_meta["name"]
    meta = new.get("metadata")
    if not isinstance(meta, dict):
        raise invalid(rtype, name, [FieldError("metadata", "FieldValueRequired", "Required value")])
    wanted_rv = meta.get("resourceVersion")
    if wanted_rv and str(wanted_rv) != old_meta["resourceVersion"]:
        raise conflict(rtype, name, STALE)
    if meta.get("name") != name:
        raise invalid(
            rtype,
            name,
            [FieldError("metadata.name", "FieldValueInvalid", "field is immutable")],
        )
    if meta.get("uid") and meta["uid"] != old_meta["uid"]:
        raise invalid(
            rtype, name, [FieldError("metadata.uid", "FieldValueInvalid", "field is immutable")]
        )
    if new.get("kind") not in (None, rtype.kind) or new.get("apiVersion") not in (
        None,
        rtype.api_version,
    ):
        raise bad_request("the kind or apiVersion of the object does not match the URL")


def keep_server_owned_metadata(old_meta: dict[str, Any], meta: dict[str, Any]) -> None:
    """Put back what the client may not write: server-owned fields, the stored
    resourceVersion (the write gets the next one); managedFields are not kept."""
    for owned in SERVER_OWNED_METADATA:
        if owned in old_meta:
            meta[owned] = old_meta[owned]
        else:
            meta.pop(owned, None)
    meta["resourceVersion"] = old_meta["resourceVersion"]
    meta.pop("managedFields", None)


def check_update_rules(
    rtype: ResourceType, old: dict[str, Any], new: dict[str, Any], subresource: str | None
) -> None:
    """The rules of an update beyond the schema: no new finalizers on an object being
    deleted, pods' update rules (writes to the pod itself), immutable workload selectors."""
    name = old["metadata"]["name"]
    if old["metadata"].get("deletionTimestamp"):
        before = old["metadata"].get("finalizers") or []
        added = [f for f in new["metadata"].get("finalizers") or [] if f not in before]
        if added:
            raise invalid(
                rtype,
                name,
                [
                    FieldError(
                        "metadata.finalizers",
                        "FieldValueForbidden",
                        f"Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {added!r}",
                    )
                ],
            )
    if rtype.kind == "Pod" and subresource is None:
        check_pod_update(rtype, old, new)
    if rtype.kind == "PriorityClass":
        from foresize.testing.apiserver.scheduling import priority_class_update_errors

        errors = priority_class_update_errors(old, new)
        if errors:
            raise invalid(rtype, name, errors)
    workload = rtype.kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet")
    if workload and (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get(
        "selector"
    ):
        raise invalid(
            rtype,
            name,
            [FieldError("spec.selector", "FieldValueInvalid", "field is immutable")],
        )
