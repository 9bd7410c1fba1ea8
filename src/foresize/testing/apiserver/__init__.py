"""A strict Kubernetes API server for tests and `foresize bench chaos` (HTTP on loopback).

It enforces what kube-apiserver enforces for every call the operator (and Kopf) makes, so
a request a real cluster refuses is refused here too:

- server-set `uid`, `creationTimestamp`, `resourceVersion` (one increasing counter over
  all objects) and `generation` (bumped when anything outside metadata and status
  changes; for pods also by every resize);
- optimistic concurrency: a stale `metadata.resourceVersion` in a PUT or patch body is
  409 Conflict; a failed JSON-patch `test` is 422; PUT of a custom resource must carry a
  resourceVersion; a resourceVersion on create is refused;
- POST 201 and 409 AlreadyExists, `generateName`, namespaces that must exist;
- JSON patch, merge patch and strategic merge patch (built-in kinds only, containers
  merged by name; 415 for custom resources, as on a real server);
- status subresources (writes to the object ignore `status`, writes to `/status` ignore
  everything else), `/scale`, `pods/resize` (only container resources and resizePolicy
  change, the rest of the body is dropped; cpu/memory only, no QoS change, no removal),
  `pods/eviction` (PodDisruptionBudgets computed as the disruption controller does:
  429 with a `DisruptionBudget` cause, 500 for more than one PDB; UID and
  resourceVersion preconditions are 409);
- deletion with finalizers (`deletionTimestamp`, no new finalizers while deleting);
- list and watch with label and field selectors, `limit`/`continue`, watch from a
  resourceVersion with BOOKMARKs (`allowWatchBookmarks`), `sendInitialEvents`, and
  410 Gone (an ERROR event) when the resourceVersion is older than the kept history;
- every write validated (`foresize.testing.validation`): custom resources against their
  CRD's openAPIV3Schema (types, formats, CEL rules), built-in kinds against the
  Kubernetes 1.34 schema; undeclared fields are refused;
- Status bodies shaped like the real server's (`reason`, `message`, `details.causes`,
  `retryAfterSeconds`), bearer-token authentication (401 with a wrong token).

Not modelled: controllers (no ReplicaSet makes pods, no kubelet runs them — tests and
benchmarks play those parts through `seed`/`update`), graceful pod deletion (a deleted
pod is gone at once, as if its kubelet had confirmed), server-side apply, admission
webhooks.

RBAC (`rbac`): every request is the operator's ServiceAccount (`system:serviceaccount:
foresize:foresize`, `operator_namespace`), authorized by the roles it ships with
(`foresize.shells.kube.rbac`, what `foresize manifests rbac` prints): a call they do not grant is
403 Forbidden, as on a real cluster. A request with `ADMIN_TOKEN` is a cluster admin (a test
playing a user or a controller over HTTP); `rbac=` other roles, or None for none (a test
that needs more rights than the shipped ones says so). The request log records each call's
verb, resource and user.

Fault injection for the operator's fault tests: `go_down()`/`come_back()` (the port stops
accepting connections), `drop_watches()`, `expire_resource_versions()` (410 on resume),
`fail(rate, codes, retry_after)` (429/500 on a fraction of calls, with Retry-After),
`rotate_token(new)` (the old token gets 401), `delay`.

    server = StrictApiServer()
    await server.start()          # server.url -> http://127.0.0.1:PORT
    server.seed(pod)               # preload (validated; status kept, namespace created)
    ... run the operator against server.url ...
    server.calls("PATCH", r"/resize$")   # the request log
    await server.stop()

Modules: `server` (HTTP, request log, faults, lists and watches), `store` (the objects and
the rules of every write), `pods` (pod updates, `pods/resize`, QoS), `disruption` (the
eviction budget), `watch` (list pages, watch events), `resources` (the served types),
`discovery`, `errors`.
"""

from foresize.testing.apiserver.errors import ApiError
from foresize.testing.apiserver.pods import pod_qos
from foresize.testing.apiserver.rbac import Rbac
from foresize.testing.apiserver.resources import BUILTIN_TYPES, ResourceType
from foresize.testing.apiserver.server import (
    ADMIN_TOKEN,
    OPERATOR_NAMESPACE,
    RecordedRequest,
    StrictApiServer,
)

__all__ = [
    "ADMIN_TOKEN",
    "BUILTIN_TYPES",
    "OPERATOR_NAMESPACE",
    "ApiError",
    "Rbac",
    "RecordedRequest",
    "ResourceType",
    "StrictApiServer",
    "pod_qos",
]
