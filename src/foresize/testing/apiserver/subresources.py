"""The scale and eviction subresources of the strict API server's `ObjectStore` (its base):
a `*/scale` write as kube-apiserver validates it, and an Eviction through the
PodDisruptionBudget's budget (`apiserver.disruption`), as the disruption controller counts
it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from foresize.testing.apiserver.disruption import eviction_budget, pod_ready
from foresize.testing.apiserver.errors import STALE, ApiError, bad_request, conflict
from foresize.testing.apiserver.resources import ResourceType, set_path


class Subresources:
    """`*/scale` and `pods/eviction` over the store's objects and write path."""

    # The store's own, which these write through (`ObjectStore` defines them).
    objects: dict[tuple[str, str, str], dict[str, Any]]
    _require: Callable[..., dict[str, Any]]
    _check_preconditions: Callable[..., None]
    _commit: Callable[..., dict[str, Any]]
    _delete: Callable[..., Any]
    update: Callable[..., Any]

    # ----------------------------------------------------------------- scale
    def _apply_scale(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        current: dict[str, Any],
        wanted: dict[str, Any],
        dry_run: bool,
    ) -> dict[str, Any]:
        name = old["metadata"]["name"]
        rv = (wanted.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rtype, name, STALE)
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(
                422,
                "Invalid",
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas!r}: must be greater than or equal to 0",
                details={
                    "name": name,
                    "group": "autoscaling",
                    "kind": "Scale",
                    "causes": [
                        {
                            "reason": "FieldValueInvalid",
                            "message": f"Invalid value: {replicas!r}: must be greater than "
                            "or equal to 0",
                            "field": "spec.replicas",
                        }
                    ],
                },
            )
        new = copy.deepcopy(old)
        set_path(new, rtype.scale_paths[0], replicas)  # type: ignore[index]
        new["metadata"].pop("resourceVersion", None)
        return self._commit(rtype, old, new, subresource="*", dry_run=dry_run)

    # --------------------------------------------------------------- eviction
    def _evict(
        self, rtype: ResourceType, namespace: str, name: str, body: Any, dry_run: bool
    ) -> dict[str, Any]:
        if (
            not isinstance(body, dict)
            or body.get("kind") != "Eviction"
            or body.get("apiVersion") not in ("policy/v1", "policy/v1beta1")
        ):
            raise bad_request("the body must be a policy/v1 Eviction")
        if (body.get("metadata") or {}).get("name") != name:
            raise bad_request("name in URL does not match name in Eviction object")
        pod = self._require(rtype, namespace, name)
        options = body.get("deleteOptions") or {}
        self._check_preconditions(rtype, pod, options)
        success = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            if not dry_run:
                self._delete(rtype, namespace, name, options)
            return success
        budget = eviction_budget(pod, namespace, self.objects)
        if budget is not None and not dry_run and pod_ready(pod):
            self.update("PodDisruptionBudget", namespace, budget.name, budget.account)
        if not dry_run:
            self._delete(rtype, namespace, name, options)
        return success
