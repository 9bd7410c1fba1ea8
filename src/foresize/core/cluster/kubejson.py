"""Kubernetes JSON -> the core's value types (foresize.core.cluster.model).

The watches hand us raw API objects (dicts exactly as the API server serves them). The
planners reason about small typed values with canonical integer amounts, so every object
is converted once, on arrival. Conversion is lenient about what the API server may omit
(defaults as the API server would apply them) and strict about amounts: a quantity that
does not parse is dropped from that one map, and a timestamp that does not parse is read
as absent, rather than taking down the watch. The core does no I/O, so the converter does
not log: each drop is described in one line naming the object and field, appended to the
caller's `dropped` list, and the shell logs them. (`strict=True`, the admission webhook's
reading of a pod, raises `QuantityError` naming the field instead: its caller answers the
review allowed-unchanged with a warning rather than deciding on a partly read pod.)

The one converter for each kind: the kube shell's watches and the pod webhook read pods
with the same `pod_from`.
"""

from __future__ import annotations

import functools
from typing import Any

from foresize.core.api.access import JSONValue
from foresize.core.api.fields import parse_timestamp
from foresize.core.api.quantity import QuantityError, to_canonical
from foresize.core.cluster.model import (
    Container,
    ContainerStatus,
    HorizontalPodAutoscaler,
    HPAMetric,
    HPAScalingPolicy,
    HPAScalingRules,
    JobOutcome,
    Node,
    OwnerRef,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    PodTemplate,
    ResourceMap,
    ResourceRequirements,
    VerticalClaim,
    Workload,
)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# kind -> (api group/version, plural) for the workload kinds Foresize follows.
WORKLOAD_KINDS: dict[str, tuple[str, str]] = {
    "Deployment": ("apps/v1", "deployments"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "DaemonSet": ("apps/v1", "daemonsets"),
    "ReplicaSet": ("apps/v1", "replicasets"),
    "Rollout": ("argoproj.io/v1alpha1", "rollouts"),
    "CronJob": ("batch/v1", "cronjobs"),
    "Job": ("batch/v1", "jobs"),
}


def _time(value: JSONValue, where: str, dropped: list[str] | None) -> float | None:
    """An RFC 3339 time of a Kubernetes object, read by the API's one parser
    (`api.fields.parse_timestamp`); a time that does not parse reads as absent, noted in
    `dropped`."""
    if not value:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        _drop(dropped, f"{where}: unparseable timestamp {value!r} ignored")
        return None


def _drop(dropped: list[str] | None, problem: str) -> None:
    if dropped is not None:
        dropped.append(problem)


@functools.lru_cache(maxsize=4096)
def _canonical(resource: str, value: str) -> int:
    # Pods of one workload repeat the same few quantity strings (every watch event, every
    # admission review): parse each once. Bounded: a hostile stream cannot grow it.
    return to_canonical(resource, value)


def resource_map(
    values: dict[str, Any] | None,
    where: str = "",
    strict: bool = False,
    dropped: list[str] | None = None,
) -> ResourceMap:
    """A `requests`/`limits`/`allocatable` map -> canonical ints; bad entries dropped and
    noted in `dropped` (`strict`: a QuantityError naming the field)."""
    if strict and values is not None and not isinstance(values, dict):
        raise QuantityError(f"{where}: not a map of quantities")
    out: ResourceMap = {}
    for name, raw in (values or {}).items():
        try:
            out[name] = _canonical(name, raw) if isinstance(raw, str) else to_canonical(name, raw)
        except (QuantityError, TypeError, ValueError) as exc:
            if strict:
                raise QuantityError(f"{where}.{name}: {exc}") from None
            _drop(
                dropped, f"{where}: {name} quantity {raw!r} is not a Kubernetes quantity; ignored"
            )
    return out


def _requirements(
    raw: dict[str, Any] | None, where: str, strict: bool = False, dropped: list[str] | None = None
) -> ResourceRequirements:
    raw = raw or {}
    return ResourceRequirements(
        requests=resource_map(raw.get("requests"), f"{where}.requests", strict, dropped),
        limits=resource_map(raw.get("limits"), f"{where}.limits", strict, dropped),
    )


def container_from(
    raw: dict[str, Any], where: str = "", strict: bool = False, dropped: list[str] | None = None
) -> Container:
    name = raw.get("name", "")
    path = f"{where}[{name}]"
    return Container(
        name=name,
        resources=_requirements(raw.get("resources"), f"{path}.resources", strict, dropped),
        resize_policy={
            p["resourceName"]: p.get("restartPolicy", "NotRequired")
            for p in raw.get("resizePolicy") or []
            if "resourceName" in p
        },
        restart_policy=raw.get("restartPolicy"),
        command=_words(raw.get("command")),
        args=_words(raw.get("args")),
        env=_env(raw.get("env")),
        env_from=bool(raw.get("envFrom")),
    )


def _words(raw: object) -> tuple[str, ...]:
    return tuple(str(w) for w in raw) if isinstance(raw, list) else ()


def _env(raw: object) -> dict[str, str | None]:
    """`env` as name -> value (None: `valueFrom`); a later duplicate wins, as in the pod."""
    out: dict[str, str | None] = {}
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            value = item.get("value")
            out[item["name"]] = None if "valueFrom" in item else str(value or "")
    return out


def container_status_from(
    raw: dict[str, Any], where: str = "", dropped: list[str] | None = None
) -> ContainerStatus:
    name = raw.get("name", "")
    path = f"{where}[{name}]"
    terminated = (raw.get("lastState") or {}).get("terminated") or {}
    return ContainerStatus(
        name=name,
        allocated=resource_map(
            raw.get("allocatedResources"), f"{path}.allocatedResources", dropped=dropped
        ),
        resources=_requirements(raw.get("resources"), f"{path}.resources", dropped=dropped),
        ready=bool(raw.get("ready", False)),
        restart_count=int(raw.get("restartCount", 0) or 0),
        last_termination_reason=terminated.get("reason"),
        last_termination_time=_time(
            terminated.get("finishedAt"), f"{path}.lastState.terminated.finishedAt", dropped
        ),
    )


def owner_from(meta: dict[str, Any]) -> OwnerRef | None:
    """The controlling owner reference (the one with controller: true), else the first one."""
    refs = meta.get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if chosen is None:
        return None
    return OwnerRef(
        kind=chosen.get("kind", ""),
        name=chosen.get("name", ""),
        uid=chosen.get("uid", ""),
        api_version=chosen.get("apiVersion", ""),
        controller=bool(chosen.get("controller", False)),
    )


def pod_from(
    obj: dict[str, Any],
    namespace: str = "",
    strict: bool = False,
    dropped: list[str] | None = None,
) -> Pod:
    """A core/v1 Pod -> `Pod` (spec, resize conditions, allocated and actual resources).

    `namespace`: where the pod is when its metadata does not say (a pod in an admission
    request may carry none, nor a name yet: then `generateName` names it). `strict`: a bad
    quantity raises QuantityError rather than being dropped. `dropped`: where each dropped
    field is described."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = meta.get("namespace") or namespace
    name = meta.get("name") or meta.get("generateName") or ""
    where = f"pod {namespace}/{name}"
    annotations = dict(meta.get("annotations") or {})
    owner = owner_from(meta)
    return Pod(
        namespace=namespace,
        name=name,
        uid=meta.get("uid", ""),
        labels=dict(meta.get("labels") or {}),
        annotations=annotations,
        owner=owner,
        node_name=spec.get("nodeName"),
        priority=int(spec.get("priority") or 0),
        containers=[
            container_from(c, f"{where} containers", strict, dropped)
            for c in spec.get("containers") or []
        ],
        init_containers=[
            container_from(c, f"{where} initContainers", strict, dropped)
            for c in spec.get("initContainers") or []
        ],
        phase=status.get("phase", "Pending"),
        conditions=[
            PodCondition(
                type=c.get("type", ""),
                status=c.get("status", "True"),
                reason=c.get("reason") or "",
                message=c.get("message") or "",
                last_transition_time=_time(
                    c.get("lastTransitionTime"), f"{where} conditions.lastTransitionTime", dropped
                )
                or 0.0,
            )
            for c in status.get("conditions") or []
        ],
        container_statuses=[
            container_status_from(s, f"{where} containerStatuses", dropped)
            for s in status.get("containerStatuses") or []
        ],
        init_container_statuses=[
            container_status_from(s, f"{where} initContainerStatuses", dropped)
            for s in status.get("initContainerStatuses") or []
        ],
        generation=int(meta.get("generation") or 1),
        observed_generation=int(status.get("observedGeneration") or 0),
        creation_time=_time(
            meta.get("creationTimestamp"), f"{where} metadata.creationTimestamp", dropped
        )
        or 0.0,
        start_time=_time(status.get("startTime"), f"{where} status.startTime", dropped),
        deletion_time=_time(
            meta.get("deletionTimestamp"), f"{where} metadata.deletionTimestamp", dropped
        ),
        restart_policy=spec.get("restartPolicy", "Always"),
        static=MIRROR_ANNOTATION in annotations or (owner is not None and owner.kind == "Node"),
        os=((spec.get("os") or {}).get("name") or "linux"),
        resources=(
            _requirements(spec["resources"], f"{where} spec.resources", strict, dropped)
            if spec.get("resources") is not None
            else None
        ),
        overhead=resource_map(spec.get("overhead"), f"{where} spec.overhead", strict, dropped),
    )


def node_from(obj: dict[str, Any], dropped: list[str] | None = None) -> Node:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    where = f"node {meta.get('name', '')}"
    ready = True
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    return Node(
        name=meta.get("name", ""),
        allocatable=resource_map(
            status.get("allocatable"), f"{where} allocatable", dropped=dropped
        ),
        capacity=resource_map(status.get("capacity"), f"{where} capacity", dropped=dropped),
        labels=dict(meta.get("labels") or {}),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable", False)),
        ready=ready,
    )


def _int_or_str(value: JSONValue) -> int | str | None:
    if value is None or isinstance(value, int):
        return value
    text = str(value)
    return int(text) if text.isdigit() else text


def pdb_from(obj: dict[str, Any]) -> PodDisruptionBudget:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return PodDisruptionBudget(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        selector=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        min_available=_int_or_str(spec.get("minAvailable")),
        max_unavailable=_int_or_str(spec.get("maxUnavailable")),
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
        current_healthy=int(status.get("currentHealthy") or 0),
        desired_healthy=int(status.get("desiredHealthy") or 0),
        expected_pods=int(status.get("expectedPods") or 0),
    )


# Other vertical autoscalers' kinds: where each names its workload and its update mode
# (the mode defaults to Auto in both APIs when unset).
VERTICAL_CLAIM_KINDS: dict[str, tuple[str, tuple[str, str]]] = {
    # autoscaling.k8s.io/v1: spec.targetRef, spec.updatePolicy.updateMode
    "VerticalPodAutoscaler": ("targetRef", ("updatePolicy", "updateMode")),
    # autoscaling.gke.io/v1beta1: spec.scaleTargetRef, spec.policy.updateMode
    "MultidimPodAutoscaler": ("scaleTargetRef", ("policy", "updateMode")),
}


def vertical_claim_from(kind: str, obj: dict[str, Any]) -> VerticalClaim:
    """A VerticalPodAutoscaler or MultidimPodAutoscaler as the workload it claims."""
    ref_field, (policy_field, mode_field) = VERTICAL_CLAIM_KINDS[kind]
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ref = spec.get(ref_field) or {}
    mode = (spec.get(policy_field) or {}).get(mode_field) or "Auto"
    return VerticalClaim(
        kind=kind,
        namespace=meta.get("namespace", "") or "",
        name=meta.get("name", "") or "",
        target_kind=str(ref.get("kind", "")),
        target_name=str(ref.get("name", "")),
        update_mode=str(mode),
    )


def hpa_from(obj: dict[str, Any], dropped: list[str] | None = None) -> HorizontalPodAutoscaler:
    """An autoscaling/v2 HorizontalPodAutoscaler (v1's targetCPUUtilizationPercentage too)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    metrics: list[HPAMetric] = []
    for m in spec.get("metrics") or []:
        mtype = m.get("type", "")
        body = m.get("resource") if mtype == "Resource" else m.get("containerResource")
        if mtype in ("Resource", "ContainerResource") and body:
            target = body.get("target") or {}
            resource = body.get("name")
            avg = target.get("averageValue")
            metrics.append(
                HPAMetric(
                    type=mtype,
                    resource=resource,
                    target_utilization=target.get("averageUtilization"),
                    target_average_value=(
                        resource_map(
                            {resource: avg},
                            f"hpa {meta.get('namespace', '')}/{meta.get('name', '')}",
                            dropped=dropped,
                        ).get(resource)
                        if avg is not None and resource
                        else None
                    ),
                    container=body.get("container"),
                )
            )
        else:
            metrics.append(HPAMetric(type=mtype))
    if "targetCPUUtilizationPercentage" in spec:
        metrics.append(
            HPAMetric(resource="cpu", target_utilization=spec["targetCPUUtilizationPercentage"])
        )
    return HorizontalPodAutoscaler(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        target_kind=ref.get("kind", ""),
        target_name=ref.get("name", ""),
        min_replicas=int(spec.get("minReplicas") or 1),
        max_replicas=int(spec.get("maxReplicas") or 1),
        metrics=metrics,
        current_replicas=int(status.get("currentReplicas") or 0),
        desired_replicas=int(status.get("desiredReplicas") or 0),
        scale_up=_hpa_rules((spec.get("behavior") or {}).get("scaleUp")),
        scale_down=_hpa_rules((spec.get("behavior") or {}).get("scaleDown")),
    )


def _hpa_rules(raw: object) -> HPAScalingRules | None:
    """`behavior.scaleUp|scaleDown` (None when absent: the defaults apply)."""
    if not isinstance(raw, dict):
        return None
    policies = []
    for p in raw.get("policies") or []:
        if isinstance(p, dict) and p.get("type") in ("Pods", "Percent"):
            policies.append(
                HPAScalingPolicy(
                    str(p["type"]), int(p.get("value") or 0), float(p.get("periodSeconds") or 0)
                )
            )
    window = raw.get("stabilizationWindowSeconds")
    return HPAScalingRules(
        float(window) if isinstance(window, int | float) else None,
        str(raw.get("selectPolicy") or "Max"),
        tuple(policies),
    )


def template_from(
    raw: dict[str, Any] | None, where: str = "", dropped: list[str] | None = None
) -> PodTemplate:
    raw = raw or {}
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    return PodTemplate(
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        containers=[
            container_from(c, f"{where} containers", dropped=dropped)
            for c in spec.get("containers") or []
        ],
        init_containers=[
            container_from(c, f"{where} initContainers", dropped=dropped)
            for c in spec.get("initContainers") or []
        ],
        priority=int(spec.get("priority") or 0),
        resources=(
            _requirements(spec["resources"], f"{where} spec.resources", dropped=dropped)
            if spec.get("resources") is not None
            else None
        ),
    )


def workload_from(kind: str, obj: dict[str, Any], dropped: list[str] | None = None) -> Workload:
    """Deployment / StatefulSet / DaemonSet / ReplicaSet / Argo Rollout / CronJob / Job
    -> `Workload`. A CronJob's template is its `jobTemplate`'s pod template and its
    replicas the Job's parallelism; a Job's owner is its CronJob (`cluster.jobs`)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    where = f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        where += " jobTemplate.spec"
    if kind == "DaemonSet":
        replicas = int(status.get("desiredNumberScheduled") or 0)
    elif kind in ("CronJob", "Job"):
        replicas = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
    else:
        replicas = int(spec["replicas"]) if spec.get("replicas") is not None else 1
    return Workload(
        kind=kind,
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        labels=dict(meta.get("labels") or {}),
        selector=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        replicas=replicas,
        template=template_from(spec.get("template"), f"{where} template", dropped),
        paused=bool((obj.get("spec") or {}).get("suspend" if kind == "CronJob" else "paused")),
        owner=owner_from(meta) if kind in ("ReplicaSet", "Job") else None,
        job=job_outcome_from(status, where, dropped) if kind == "Job" else None,
    )


def job_outcome_from(
    status: dict[str, Any], where: str, dropped: list[str] | None = None
) -> JobOutcome:
    """A Job's `status`: its start, and the Complete or Failed condition that ended it
    (`status` "True"; the end is the condition's lastTransitionTime, else completionTime)."""
    start = _time(status.get("startTime"), f"{where} status.startTime", dropped)
    for cond in status.get("conditions") or []:
        if not isinstance(cond, dict) or cond.get("status") != "True":
            continue
        kind = cond.get("type")
        if kind not in ("Complete", "Failed"):
            continue
        end = _time(
            cond.get("lastTransitionTime"), f"{where} conditions.lastTransitionTime", dropped
        )
        if end is None:
            end = _time(status.get("completionTime"), f"{where} status.completionTime", dropped)
        return JobOutcome(start, end, str(kind), str(cond.get("reason") or ""))
    return JobOutcome(start)


def parse_server_version(info: dict[str, Any]) -> tuple[int, int]:
    """`GET /version` -> (major, minor). Minor strings like `33+` (EKS, GKE) are accepted."""
    try:
        major = int("".join(ch for ch in str(info.get("major", "")) if ch.isdigit()))
        minor = int("".join(ch for ch in str(info.get("minor", "")) if ch.isdigit()))
        return major, minor
    except ValueError:
        pass
    git = str(info.get("gitVersion", "")).lstrip("v").split(".")
    try:
        return int(git[0]), int(git[1])
    except (IndexError, ValueError) as exc:
        raise ValueError(f"unrecognised server version {info!r}") from exc
