"""The strict API server's objects and the rules of every read and write (no HTTP): server-
set metadata, optimistic concurrency, patches, status and scale subresources (scale and
eviction in `apiserver.subresources`), deletion
with finalizers, validation, pods' rules (`apiserver.pods`), the eviction budget
(`apiserver.disruption`), and the event history watches are served from."""

from __future__ import annotations

import collections
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from foresize.testing import patching
from foresize.testing.apiserver.errors import (
    ApiError,
    bad_request,
    conflict,
    invalid,
    not_found,
    status_details,
)
from foresize.testing.apiserver.pods import pod_qos, resize_strategy
from foresize.testing.apiserver.resources import (
    BUILTIN_TYPES,
    ResourceType,
    crd_types,
    json_copy,
    now_iso,
    spec_part,
)
from foresize.testing.apiserver.scheduling import admit_pod_priority
from foresize.testing.apiserver.subresources import Subresources
from foresize.testing.apiserver.update_rules import (
    check_identity,
    check_update_rules,
    keep_server_owned_metadata,
)
from foresize.testing.apiserver.watch import Watcher
from foresize.testing.custom_resources import CustomResourceValidator
from foresize.testing.validation import (
    FieldError,
    ValidationFailed,
    validate_builtin,
)

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

ObjectKey = tuple[str, str, str]  # (resource type key, namespace, name)
HistoryEntry = tuple[int, str, str, dict[str, Any], dict[str, Any] | None]


class ObjectStore(Subresources):
    """The objects of a strict API server and its rules; `StrictApiServer` serves it."""

    def __init__(
        self,
        *,
        kube_version: tuple[int, int] = (1, 34),
        clock: Callable[[], float] = time.time,
        seed: int = 0,
        history_limit: int = 10_000,
        validate: bool = True,
    ) -> None:
        self.kube_version = kube_version
        self.clock = clock
        self.validate = validate
        self.history_limit = history_limit
        self._rng = random.Random(seed)
        self.types: dict[str, ResourceType] = {}
        self._validators: dict[str, CustomResourceValidator | None] = {}
        for rtype in BUILTIN_TYPES:
            self.types[rtype.key] = rtype
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        # Per kind: a count of the keys added and removed, and the sorted keys as of a
        # count (a list page of 100k pods finds its place by bisection, not a sort).
        self._key_changes: dict[str, int] = {}
        self._sorted_keys: dict[str, tuple[int, list[ObjectKey]]] = {}
        self.rv = 0
        # Oldest first; a deque, since the oldest entry leaves at each write once full.
        self._history: collections.deque[HistoryEntry] = collections.deque()
        self.compacted_rv = 0
        self._watchers: list[Watcher] = []

    def _keys_changed(self, type_key: str) -> None:
        self._key_changes[type_key] = self._key_changes.get(type_key, 0) + 1

    def sorted_keys(self, type_key: str) -> list[ObjectKey]:
        """The keys of one kind's objects, sorted (kept until one is added or removed)."""
        changes = self._key_changes.get(type_key, 0)
        cached = self._sorted_keys.get(type_key)
        if cached is None or cached[0] != changes:
            keys = sorted(k for k in self.objects if k[0] == type_key)
            cached = self._sorted_keys[type_key] = (changes, keys)
        return cached[1]

    # ------------------------------------------------------------- types & lookup
    def add_crd(self, crd: dict[str, Any]) -> None:
        """Serve a CustomResourceDefinition's kinds (and store the CRD object)."""
        for rtype, validator in crd_types(crd):
            self.types[rtype.key] = rtype
            self._validators[rtype.key] = validator
        crd_type = self.types["apiextensions.k8s.io/v1/customresourcedefinitions"]
        if (crd_type.key, "", crd["metadata"]["name"]) not in self.objects:
            self._store_new(crd_type, json_copy(crd), keep_status=True)

    def type_of(self, kind_or_plural: str, api_version: str | None = None) -> ResourceType:
        found = [
            t
            for t in self.types.values()
            if kind_or_plural in (t.kind, t.plural)
            and (api_version is None or t.api_version == api_version)
        ]
        if not found:
            raise KeyError(f"no resource type {kind_or_plural!r} ({api_version})")
        if len(found) > 1:
            preferred = [t for t in found if t.group != "metrics.k8s.io"]
            found = preferred or found
        return found[0]

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object (a copy), or None."""
        rtype = self.type_of(kind)
        obj = self.objects.get((rtype.key, namespace or "", name))
        return json_copy(obj) if obj is not None else None

    # ------------------------------------------------------------------ seeding
    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Preload an object as if it already existed: validated like a create, but its
        status is kept and its namespace is created when missing."""
        rtype = self.type_of(obj["kind"], obj.get("apiVersion"))
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        if rtype.namespaced and ns:
            self._ensure_namespace(ns)
        if rtype.kind == "CustomResourceDefinition":
            self.add_crd(obj)
            return self.get("CustomResourceDefinition", None, obj["metadata"]["name"]) or {}
        return json_copy(self._create(rtype, ns, json_copy(obj), keep_status=True))

    def defaulted(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` as a create would store it (validated, the schema's defaults applied, its
        status kept), without storing it: a seeding that needs the object as served."""
        rtype = self.type_of(obj["kind"], obj.get("apiVersion"))
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        return self._create(rtype, ns, json_copy(obj), keep_status=True, dry_run=True)

    def _priority_class(self, name: str) -> dict[str, Any] | None:
        return self.get("PriorityClass", None, name)

    def _ensure_namespace(self, ns: str) -> None:
        nstype = self.types["/v1/namespaces"]
        if (nstype.key, "", ns) not in self.objects:
            self._create(
                nstype,
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                keep_status=False,
            )

    def update(
        self, kind: str, namespace: str | None, name: str, change: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """A controller's write (e.g. the kubelet setting pod status): `change` edits a copy
        of the object in place; the result is validated and stored, status included."""
        rtype = self.type_of(kind)
        key = (rtype.key, namespace or "", name)
        if key not in self.objects:
            raise not_found(rtype, name)
        old = self.objects[key]
        new = json_copy(old)
        change(new)
        return json_copy(self._commit(rtype, old, new, subresource="*"))

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        """A controller's delete (finalizers honoured)."""
        rtype = self.type_of(kind)
        self._delete(rtype, namespace or "", name, {})

    # ------------------------------------------------------------- read paths
    def _require(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((rtype.key, namespace, name))
        if obj is None:
            raise not_found(rtype, name)
        return obj

    def _out(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        out = json_copy(obj)
        out["apiVersion"] = rtype.api_version
        out["kind"] = rtype.kind
        return out

    @staticmethod
    def _served(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` with its URL's kind, to serialise at once (an answer, a watch event): a
        shallow copy, since a stored object is never changed in place (every write stores
        a new one). A deep copy of each pod sent was most of a watch's and a GET's time."""
        out = dict(obj)
        out["apiVersion"] = rtype.api_version
        out["kind"] = rtype.kind
        return out

    # ------------------------------------------------------------- write paths
    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _record_event(
        self, rtype: ResourceType, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        # The stored object itself: a stored object is never changed in place (each write
        # stores a new one, as `old` here shows), so the history needs no copy of its own
        # (at 100k pods, a copy of every pod seeded and a second heap of them).
        snapshot = obj
        self._history.append((rv, rtype.key, kind, snapshot, old))
        if len(self._history) > self.history_limit:
            dropped = self._history.popleft()
            self.compacted_rv = dropped[0]
        for watcher in self._watchers:
            if watcher.rtype.key == rtype.key:
                watcher.queue.put_nowait((kind, snapshot, old))

    def _validate(
        self, rtype: ResourceType, obj: dict[str, Any], *, creating: bool
    ) -> dict[str, Any]:
        if not self.validate:
            return obj
        name = (obj.get("metadata") or {}).get("name") or ""
        try:
            if rtype.custom:
                validator = self._validators.get(rtype.key)
                if validator is not None:
                    return validator.validate(obj, creating=creating)
            elif rtype.group != "metrics.k8s.io":
                validate_builtin(obj, creating=creating)
        except ValidationFailed as exc:
            if exc.unknown:
                raise bad_request(
                    "strict decoding error: " + ", ".join(e.message for e in exc.errors)
                ) from None
            raise invalid(rtype, name, exc.errors) from None
        return obj

    def _create_request(
        self, rtype: ResourceType, namespace: str, body: dict[str, Any], dry_run: bool
    ) -> dict[str, Any]:
        if body.get("kind") not in (None, rtype.kind) or body.get("apiVersion") not in (
            None,
            rtype.api_version,
        ):
            raise bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({rtype.api_version})"
            )
        meta = body.get("metadata") or {}
        if meta.get("resourceVersion"):
            raise ApiError(
                500,
                "InternalError",
                "resourceVersion should not be set on objects to be created",
            )
        if rtype.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            nstype = self.types["/v1/namespaces"]
            if (nstype.key, "", namespace) not in self.objects:
                raise not_found(nstype, namespace)
        return self._create(rtype, namespace, json_copy(body), keep_status=False, dry_run=dry_run)

    def _create(
        self,
        rtype: ResourceType,
        namespace: str,
        obj: dict[str, Any],
        *,
        keep_status: bool,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
        meta = obj.setdefault("metadata", {})
        if rtype.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            meta["name"] = meta["generateName"] + suffix
        for server_set in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ):
            meta.pop(server_set, None)
        if "status" in rtype.subresources and not keep_status:
            obj.pop("status", None)
        if rtype.kind == "Pod" and not keep_status:  # Priority admission (not on seeds)
            admit_pod_priority(obj, self._priority_class, self.list("PriorityClass"))
        obj = self._validate(rtype, obj, creating=True)
        meta = obj["metadata"]
        key = (rtype.key, namespace if rtype.namespaced else "", meta.get("name") or "")
        if key in self.objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{rtype.group_resource} "{meta["name"]}" already exists',
                details=status_details(rtype, meta["name"]),
            )
        if rtype.kind == "Pod" and not keep_status:
            obj["status"] = {"phase": "Pending", "qosClass": pod_qos(obj)}
        if rtype.kind == "Namespace":
            obj.setdefault("status", {})["phase"] = "Active"
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        if dry_run:
            return obj
        return self._store_new(rtype, obj, keep_status=True)

    def _store_new(
        self, rtype: ResourceType, obj: dict[str, Any], *, keep_status: bool
    ) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = now_iso(self.clock())
        meta["resourceVersion"] = self._next_rv()
        if rtype.generation:
            meta["generation"] = 1
        key = (rtype.key, meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
        self.objects[key] = obj
        self._keys_changed(rtype.key)
        self._record_event(rtype, "ADDED", obj, None)
        return obj

    def _patched(
        self,
        rtype: ResourceType,
        current: dict[str, Any],
        verb: str,
        content_type: str,
        body: Any,
        *,
        scale: bool = False,
    ) -> dict[str, Any]:
        if verb == "update":
            if not isinstance(body, dict):
                raise bad_request("the request body must be a JSON object")
            return json_copy(body)
        try:
            if content_type == JSON_PATCH:
                result = patching.apply_json_patch(current, body)
            elif content_type == MERGE_PATCH:
                result = patching.apply_merge_patch(current, body)
            elif content_type == STRATEGIC_PATCH and not rtype.custom:
                result = patching.apply_strategic_merge_patch(current, body)
            else:
                accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
                if not rtype.custom:
                    accepted.insert(2, STRATEGIC_PATCH)
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}",
                )
        except patching.PatchFormatError as exc:
            raise bad_request(str(exc)) from None
        except patching.PatchError as exc:
            raise ApiError(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
                details={"causes": [{"message": str(exc)}]},
            ) from None
        if not isinstance(result, dict):
            raise bad_request("the patched object is not a JSON object")
        return result

    def _check_put(
        self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any], name: str
    ) -> None:
        meta = new.get("metadata") or {}
        if meta.get("name") != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        if not meta.get("resourceVersion") and not rtype.unconditional_update:
            raise invalid(
                rtype,
                name,
                [
                    FieldError(
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )

    def _commit(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        subresource: str | None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply an update (`subresource` None = the object, "status", "resize", or "*" for
        a controller's write of everything) with the API server's rules."""
        check_identity(rtype, old, new)
        new = self._written_part(rtype, old, new, subresource)
        keep_server_owned_metadata(old["metadata"], new["metadata"])
        check_update_rules(rtype, old, new, subresource)
        new = self._validate(rtype, new, creating=False)
        if new == old:
            return old  # a no-op write: no new resourceVersion, no watch event
        if rtype.generation and spec_part(new) != spec_part(old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        if dry_run:
            return new
        return self._store_update(rtype, old, new)

    def _written_part(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
    ) -> dict[str, Any]:
        """A copy of `new` (with the URL's kind) where only what `subresource` may change
        differs from `old`: the status for "status", the resources for "resize", all but
        the status for the object itself (when the type has a status subresource)."""
        new = json_copy(new)
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        if subresource == "status":
            merged = json_copy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            return merged
        if subresource == "resize":
            node_name = (old.get("spec") or {}).get("nodeName") or ""
            node = self.objects.get(("/v1/nodes", "", node_name))
            return resize_strategy(rtype, old, new, self.kube_version, node)
        if subresource != "*" and "status" in rtype.subresources:
            if "status" in old:
                new["status"] = json_copy(old["status"])
            else:
                new.pop("status", None)
        return new

    def _store_update(
        self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """Store a checked update under the next resourceVersion and tell the watchers (an
        object being deleted whose last finalizer goes is removed: DELETED)."""
        new["metadata"]["resourceVersion"] = self._next_rv()
        old_meta = old["metadata"]
        key = (
            rtype.key,
            old_meta.get("namespace", "") if rtype.namespaced else "",
            old_meta["name"],
        )
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[key]
            self._keys_changed(rtype.key)
            self._record_event(rtype, "DELETED", new, old)
            return new
        self.objects[key] = new
        self._record_event(rtype, "MODIFIED", new, old)
        if rtype.kind == "CustomResourceDefinition":
            self.add_crd(new)
        return new

    def _delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        options: dict[str, Any],
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        key = (rtype.key, namespace if rtype.namespaced else "", name)
        obj = self.objects.get(key)
        if obj is None:
            raise not_found(rtype, name)
        self._check_preconditions(rtype, obj, options)
        if dry_run:
            return self._out(rtype, obj)
        if obj["metadata"].get("finalizers"):
            if obj["metadata"].get("deletionTimestamp"):
                return self._out(rtype, obj)
            new = json_copy(obj)
            new["metadata"]["deletionTimestamp"] = now_iso(self.clock())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["resourceVersion"] = self._next_rv()
            self.objects[key] = new
            self._record_event(rtype, "MODIFIED", new, obj)
            return self._out(rtype, new)
        del self.objects[key]
        self._keys_changed(rtype.key)
        gone = json_copy(obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._record_event(rtype, "DELETED", gone, obj)
        return self._out(rtype, gone)

    def _check_preconditions(
        self, rtype: ResourceType, obj: dict[str, Any], options: dict[str, Any]
    ) -> None:
        pre = options.get("preconditions") or {}
        meta = obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise conflict(
                rtype,
                meta["name"],
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise conflict(
                rtype,
                meta["name"],
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )

    # The last method: its name would shadow the builtin in the annotations after it.
    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        rtype = self.type_of(kind)
        return [
            json_copy(o)
            for (k, ns, _), o in sorted(self.objects.items())
            if k == rtype.key and (namespace is None or ns == namespace)
        ]
