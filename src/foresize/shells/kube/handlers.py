"""Kopf wiring: the Foresize CRD handlers, and the kinds the informers watch.

The cache (`ClusterState`) is kept by Foresize's own informers (`kube/informer.py`:
list, replace, watch, relist after 410, a sync barrier), on the event loop. Kopf only runs
the CRD handlers: they validate each Foresize object with the API types and report the
verdict in `status.conditions` (an invalid spec is refused with the field named, never
crashes the loop). No handler here holds deletions: Kopf's own finalizer is not used. The
control loop puts the lifecycle's `foresize.io/revert` finalizer on every target, reverts
the pods of a target being deleted (lifecycle planner) and then removes that finalizer.
"""

from __future__ import annotations

import logging
from typing import Any

from foresize.shells.kube.informer import WatchedKind

log = logging.getLogger("foresize.operator")

FINALIZER = "foresize.io/finalizer"  # Kopf's finalizer name, should a handler ever need one

# Every kind the control loop plans from (list + watch, cluster-wide).
WATCHED: tuple[WatchedKind, ...] = (
    WatchedKind("", "v1", "pods", "Pod"),
    WatchedKind("", "v1", "nodes", "Node"),
    WatchedKind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    WatchedKind("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    WatchedKind("apps", "v1", "deployments", "Deployment"),
    WatchedKind("apps", "v1", "statefulsets", "StatefulSet"),
    WatchedKind("apps", "v1", "daemonsets", "DaemonSet"),
    WatchedKind("apps", "v1", "replicasets", "ReplicaSet"),
    # A CronJob target's runs: the CronJobs and their Jobs (the owner chain of Job pods).
    WatchedKind("batch", "v1", "cronjobs", "CronJob"),
    WatchedKind("batch", "v1", "jobs", "Job"),
    WatchedKind("argoproj.io", "v1alpha1", "rollouts", "Rollout", optional=True),
    # Other vertical autoscalers: a workload they act on is left alone (not installed: fine).
    WatchedKind(
        "autoscaling.k8s.io",
        "v1",
        "verticalpodautoscalers",
        "VerticalPodAutoscaler",
        optional=True,
    ),
    WatchedKind(
        "autoscaling.gke.io",
        "v1beta1",
        "multidimpodautoscalers",
        "MultidimPodAutoscaler",
        optional=True,
    ),
    WatchedKind("foresize.io", "v1", "aiscaletargets", "AIScaleTarget"),
    WatchedKind("foresize.io", "v1", "daemonsetautoscalers", "DaemonSetAutoscaler"),
    WatchedKind("foresize.io", "v1", "clusteraiscaletemplates", "ClusterAIScaleTemplate"),
    # The policy hierarchy: the policies, and the Namespaces' `foresize.io/policy` label.
    WatchedKind("foresize.io", "v1", "clusteraiscalepolicies", "ClusterAIScalePolicy"),
    WatchedKind("", "v1", "namespaces", "Namespace"),
)


def parse_foresize(kind: str, obj: dict[str, Any]) -> Any:
    """Kubernetes JSON -> API model; an invalid object is kept out of planning."""
    from foresize.core.api.types import parse_object
    from foresize.core.errors import ForesizeError

    body = dict(obj)
    body.setdefault("kind", kind)
    # Kopf's own bookkeeping annotations and server-set metadata are not part of the API.
    try:
        return parse_object(body, f"{kind} {_name(obj)}")
    except ForesizeError as exc:
        log.warning("ignoring invalid %s %s: %s", kind, _name(obj), exc)
        return None


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def validation_message(kind: str, body: dict[str, Any]) -> str | None:
    from foresize.adapters.timezones import SYSTEM_ZONES
    from foresize.core.admission.validate import window_errors
    from foresize.core.api.types import parse_object
    from foresize.core.errors import ForesizeError

    data = dict(body)
    data.setdefault("kind", kind)
    try:
        parse_object(data, "")
    except ForesizeError as exc:
        return str(exc)
    # Windows the zone database cannot read: the object is planned (on the safe side,
    # `vertical.limits`), and its Accepted condition says what is wrong.
    problems = window_errors(data, SYSTEM_ZONES)
    return "; ".join(problems) or None


def diffbase_storage() -> Any:
    """Where Kopf keeps the spec it last handled (an annotation on each object): an object
    whose spec has not changed since is not handled as created or updated again."""
    import kopf

    return kopf.AnnotationsDiffBaseStorage(prefix="foresize.io", key="last-handled-configuration")


def handled(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as Kopf leaves it once handled: with the annotation of the spec it handled
    (a cluster in its steady state, as `foresize bench loop` seeds it)."""
    import kopf

    storage = diffbase_storage()
    body = kopf.Body(obj)  # type: ignore[arg-type]
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **patch["metadata"]["annotations"]}
    out["metadata"] = meta
    return out


def accepted_condition(problem: str | None) -> dict[str, str]:
    """The `Accepted` condition the CRD handlers write for a spec and its problem."""
    return {
        "type": "Accepted",
        "status": "False" if problem else "True",
        "reason": "InvalidSpec" if problem else "Valid",
        "message": problem or "spec accepted",
    }


def configure(settings: Any, *, scanning: bool = True, idle_timeout: float | None = None) -> None:
    """Kopf settings for Foresize: its own finalizer, annotations, quiet handler events."""
    import kopf

    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="foresize.io")
    settings.persistence.diffbase_storage = diffbase_storage()
    settings.posting.level = logging.WARNING
    settings.scanning.disabled = not scanning
    settings.watching.server_timeout = 270
    settings.watching.client_timeout = 300
    if idle_timeout is not None:
        # Per-object workers exit after this much quiet; shutdown waits for them.
        settings.batching.idle_timeout = idle_timeout


def connection_from_lightkube(config: Any) -> Any:
    """Kopf's ConnectionInfo from the lightkube configuration the executor uses, so both
    talk to the same cluster as the same user (`--kubeconfig`/`--context`). Returns None
    for users authenticated by an exec plugin or auth provider (Kopf's own kubeconfig
    login handles those).

    A token file wins over the token read at start (in a pod lightkube's configuration
    has both): Kopf calls the login handler again after a 401, and only the file has the
    token the kubelet rotated in (Kopf refuses to retry with a token that got a 401)."""
    import base64

    import kopf

    cluster, user = config.cluster, config.user
    if user is not None and (user.exec or user.auth_provider):
        return None

    def path(value: Any) -> Any:
        return config.abs_file(value) if value else None

    def data(value: Any) -> Any:
        return base64.b64decode(value) if value else None

    token = None
    if user is not None:
        token = user.token
        if user.token_file:
            with open(path(user.token_file)) as f:
                token = f.read().strip() or token
    return kopf.ConnectionInfo(
        server=cluster.server,
        ca_path=path(cluster.certificate_auth),
        ca_data=data(cluster.certificate_auth_data),
        insecure=bool(cluster.insecure),
        username=getattr(user, "username", None),
        password=getattr(user, "password", None),
        scheme="Bearer" if token else None,
        token=token,
        certificate_path=path(getattr(user, "client_cert", None)),
        certificate_data=data(getattr(user, "client_cert_data", None)),
        private_key_path=path(getattr(user, "client_key", None)),
        private_key_data=data(getattr(user, "client_key_data", None)),
        default_namespace=config.namespace,
    )


def build_registry(
    *,
    server: str | None = None,
    lightkube_config: Any = None,
    idle_timeout: float | None = None,
) -> Any:
    """A Kopf registry with the Foresize CRD handlers.

    `server` (tests, `kubectl proxy`): log in to that URL without credentials;
    `lightkube_config`: the same cluster and user as the executor. Otherwise (or for exec
    plugin users) Kopf's own login: the in-cluster service account, else the kubeconfig.
    """
    import kopf

    def connection() -> Any:
        if server is not None:
            return kopf.ConnectionInfo(server=server, insecure=True, default_namespace="default")
        if lightkube_config is not None:
            return connection_from_lightkube(lightkube_config)
        return None

    registry = kopf.OperatorRegistry()
    if connection() is not None:

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo | None:
            # Called again on a 401: re-reads a rotated service-account token file.
            info: kopf.ConnectionInfo | None = connection()
            return info

    else:
        # Kopf's own logins (what its unexported "smart" registry would add without the
        # kubernetes/pykube clients): the in-cluster service account, else the kubeconfig.
        # The latter knows tokens, certificates and basic auth, not exec plugins.
        log.warning(
            "the kubeconfig user authenticates through an exec plugin or auth provider; "
            "the CRD handlers log in with Kopf's own kubeconfig reader, which has neither"
        )
        for login_fn in (kopf.login_with_service_account, kopf.login_with_kubeconfig):
            kopf.on.login(registry=registry, errors=kopf.ErrorsMode.IGNORED)(login_fn)

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings, scanning=server is None, idle_timeout=idle_timeout)

    def check(kind: str) -> Any:
        def validate(body: Any, patch: kopf.Patch, **_: Any) -> None:
            problem = validation_message(kind, dict(body))
            condition = accepted_condition(problem)
            current = list((body.get("status") or {}).get("conditions") or [])
            # Written only when it changes: `on.resume` runs for every object at each
            # start, and 10k targets would be 10k status writes of what is there already.
            if condition not in current:
                # A merge patch replaces the list: keep the other conditions as they are.
                others = [c for c in current if c.get("type") != "Accepted"]
                patch.status["conditions"] = [*others, condition]
            if problem:
                raise kopf.PermanentError(problem)

        return validate

    for plural, kind in (
        ("aiscaletargets", "AIScaleTarget"),
        ("daemonsetautoscalers", "DaemonSetAutoscaler"),
        ("clusteraiscaletemplates", "ClusterAIScaleTemplate"),
    ):
        fn = check(kind)
        fn.__name__ = f"validate_{plural}"
        kopf.on.create("foresize.io", "v1", plural, registry=registry, id="validate")(fn)
        kopf.on.update("foresize.io", "v1", plural, registry=registry, id="validate", field="spec")(
            fn
        )
        kopf.on.resume("foresize.io", "v1", plural, registry=registry, id="validate")(fn)

    return registry
