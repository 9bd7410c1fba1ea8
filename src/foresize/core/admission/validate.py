"""AIScaleTarget validation for what the CRD's CEL rules cannot express (pure).

CEL sees one object and has no quantity, duration or cron parser of ours; these checks
need them or need the other targets in the cluster:
- quantities parse, and lowerbound <= upperbound once parsed; limit.ratio >= 1;
- container names are unique;
- durations parse; forecast_interval <= forecast_blocks; min_lookback_to_scale >= 3h;
- forecast_cron is a valid 5-field cron expression;
- only one of vertical / horizontal is autonomous; `selector` targets are vertical only;
- no other AIScaleTarget already targets the same workload (needs the cluster's view).

Every message starts with the field path it is about (`spec.vertical.containers[1].cpu`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from foresize.core.admission.index import AdmissionIndex
from foresize.core.api.access import first as get
from foresize.core.api.cron import cron_error
from foresize.core.api.duration import parse_duration, shown
from foresize.core.api.labels import label_key_error, label_map_errors
from foresize.core.api.quantity import CPU, MEMORY, QuantityError, to_canonical
from foresize.core.api.vocabulary import FORECAST_MODES, SCALING_MODES, UPDATE_MODES
from foresize.core.cluster.target import (
    AUTONOMOUS,
    normalise_kind,
    normalise_mode,
)

MIN_LOOKBACK = 3 * 3600.0


def _duration(errors: list[str], path: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        errors.append(f"{path}: {exc}")
        return None


def _quantity(errors: list[str], path: str, resource: str, value: Any) -> int | None:
    if value is None:
        return None
    try:
        q = (
            value
            if isinstance(value, int) and not isinstance(value, bool)
            else to_canonical(resource, value)
        )
    except (QuantityError, TypeError, ValueError) as exc:
        errors.append(f"{path}: {exc}")
        return None
    if q < 0:
        errors.append(f"{path}: must not be negative")
    return q


def _check_model(errors: list[str], path: str, model: Any) -> None:
    if model is None:
        return
    mode = get(model, "mode")
    if mode is not None and str(mode) not in FORECAST_MODES:
        errors.append(f"{path}.mode: {mode!r} is not one of {', '.join(sorted(FORECAST_MODES))}")
    if str(mode) == "percentile":
        pv = get(model, "percentile_value", "percentileValue")
        if pv is None:
            errors.append(f"{path}.percentile_value: required when mode is percentile")
        elif not 0 < float(pv) <= 100:
            errors.append(f"{path}.percentile_value: must be in (0, 100], got {pv}")
    blocks = _duration(errors, f"{path}.forecast_blocks", get(model, "forecast_blocks"))
    interval = _duration(errors, f"{path}.forecast_interval", get(model, "forecast_interval"))
    cron = get(model, "forecast_cron")
    if cron is not None:
        if interval is not None:
            errors.append(f"{path}.forecast_cron: exclusive with {path}.forecast_interval")
        problem = cron_error(cron)
        if problem:
            errors.append(f"{path}.forecast_cron: {shown(cron)} {problem}")
    if interval is not None and interval <= 0:
        errors.append(f"{path}.forecast_interval: must be positive")
    eff_blocks = blocks if blocks is not None else 15 * 60.0
    if interval is not None and interval > eff_blocks:
        errors.append(
            f"{path}.forecast_interval: {get(model, 'forecast_interval')} is longer than "
            f"forecast_blocks ({get(model, 'forecast_blocks') or '15m'})"
        )
    lookback = _duration(
        errors, f"{path}.min_lookback_to_scale", get(model, "min_lookback_to_scale")
    )
    if lookback is not None and lookback < MIN_LOOKBACK:
        errors.append(f"{path}.min_lookback_to_scale: must be at least 3h")
    buf = get(model, "forecast_buffer_percentage")
    if buf is not None and float(buf) < 0:
        errors.append(f"{path}.forecast_buffer_percentage: must not be negative")


def _check_containers(errors: list[str], path: str, containers: Any) -> None:
    seen: dict[str, int] = {}
    if containers is not None and not isinstance(containers, list | tuple):
        errors.append(f"{path}: must be a list, not {shown(containers)}")
        return
    for i, c in enumerate(containers or ()):
        cpath = f"{path}[{i}]"
        name = str(get(c, "name", default=""))
        if not name:
            errors.append(f"{cpath}.name: required (a container name or *)")
        elif name in seen:
            errors.append(f"{cpath}.name: {name!r} already listed at {path}[{seen[name]}]")
        else:
            seen[name] = i
        for resource in (CPU, MEMORY):
            r = get(c, resource)
            if r is None:
                continue
            rpath = f"{cpath}.{resource}"
            lo = _quantity(errors, f"{rpath}.lowerbound", resource, get(r, "lowerbound"))
            hi = _quantity(errors, f"{rpath}.upperbound", resource, get(r, "upperbound"))
            if get(r, "lowerbound") is None:
                errors.append(f"{rpath}.lowerbound: required")
            if lo is not None and hi is not None and lo > hi:
                errors.append(
                    f"{rpath}.upperbound: {get(r, 'upperbound')} is below lowerbound "
                    f"{get(r, 'lowerbound')}"
                )
            limit = get(r, "limit")
            ratio = get(limit, "ratio") if limit is not None else None
            if ratio is not None:
                try:
                    ok = float(ratio) >= 1.0
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    errors.append(f"{rpath}.limit.ratio: must be a number >= 1, got {ratio!r}")


def validate_target(obj: Mapping[str, Any] | Any, index: AdmissionIndex | None = None) -> list[str]:
    """Problems with an AIScaleTarget (manifest dict or API model); [] when valid. An object
    of the wrong shape (a list where a map belongs; the CRD schema refuses those first) is a
    problem too, never an exception the webhook would have to answer with allow."""
    try:
        return _target_problems(obj, index)
    except (TypeError, AttributeError, ValueError) as exc:
        return [f"spec: malformed object ({type(exc).__name__}: {shown(str(exc), 120)})"]


def _target_problems(obj: Mapping[str, Any] | Any, index: AdmissionIndex | None) -> list[str]:  # noqa: C901
    # Complexity over 15 on purpose: one independent check per spec field, in the order of
    # the spec and of the CRD's CEL rules, so the two read side by side; splitting it would
    # scatter one checklist over helpers without a seam between them.
    errors: list[str] = []
    meta = get(obj, "metadata", default={})
    namespace = str(get(meta, "namespace", default="default"))
    name = str(get(meta, "name", default=""))
    spec = get(obj, "spec")
    if spec is None:
        return ["spec: required"]
    ref = get(spec, "scaleTargetRef", "scale_target_ref")
    selector = get(spec, "selector")
    if (ref is None) == (selector is None):
        errors.append("spec: exactly one of spec.scaleTargetRef and spec.selector is required")
    if ref is not None:
        kind = normalise_kind(get(ref, "kind"))
        if kind not in ("Deployment", "StatefulSet", "Rollout"):
            errors.append(
                f"spec.scaleTargetRef.kind: {get(ref, 'kind')!r} is not Deployment, StatefulSet "
                "or Rollout"
            )
        if not get(ref, "name"):
            errors.append("spec.scaleTargetRef.name: required")
    vertical = get(spec, "vertical")
    horizontal = get(spec, "horizontal")
    vmode = normalise_mode(get(vertical, "mode"))
    hmode = normalise_mode(get(horizontal, "mode"))
    for path, raw, mode in (
        ("spec.vertical.mode", get(vertical, "mode"), vmode),
        ("spec.horizontal.mode", get(horizontal, "mode"), hmode),
    ):
        if raw is not None and mode not in SCALING_MODES:
            errors.append(f"{path}: {raw!r} is not autonomous, recommendation or observe")
    if vmode == AUTONOMOUS and hmode == AUTONOMOUS:
        errors.append("spec.horizontal.mode: only one of vertical and horizontal may be autonomous")
    if selector is not None and horizontal is not None:
        errors.append("spec.horizontal: a selector target is vertical only")
    if selector is not None:
        match_labels = get(selector, "matchLabels", "match_labels")
        if match_labels is not None:
            errors.extend(f"spec.selector.matchLabels: {p}" for p in label_map_errors(match_labels))
        for i, req in enumerate(get(selector, "matchExpressions", "match_expressions") or ()):
            problem = label_key_error(get(req, "key"))
            if problem:
                errors.append(f"spec.selector.matchExpressions[{i}].key: {problem}")
    _check_model(errors, "spec.model", get(spec, "model"))
    if vertical is not None:
        _check_model(errors, "spec.vertical.model", get(vertical, "model"))
        _check_containers(errors, "spec.vertical.containers", get(vertical, "containers"))
        policy = get(vertical, "update_policy", "updatePolicy")
        umode = get(policy, "update_mode", "updateMode")
        if umode is not None and str(getattr(umode, "value", umode)) not in UPDATE_MODES:
            errors.append(
                f"spec.vertical.update_policy.update_mode: {umode!r} is not one of "
                + ", ".join(UPDATE_MODES)
            )
        disruption = get(vertical, "disruption")
        _duration(errors, "spec.vertical.disruption.interval", get(disruption, "interval"))
        _duration(
            errors, "spec.vertical.disruption.stall_timeout", get(disruption, "stall_timeout")
        )
        md = get(disruption, "max_disrupted")
        if md is not None and not _valid_int_or_percent(md):
            errors.append(
                f"spec.vertical.disruption.max_disrupted: {md!r} is not an integer >= 1 or a "
                "percentage like 20%"
            )
    if horizontal is not None:
        _check_model(errors, "spec.horizontal.model", get(horizontal, "model"))
        lo = get(horizontal, "minReplicas", "min_replicas")
        hi = get(horizontal, "maxReplicas", "max_replicas")
        if lo is not None and hi is not None and int(lo) > int(hi):
            errors.append(f"spec.horizontal.maxReplicas: {hi} is below minReplicas {lo}")
        allowed = get(horizontal, "allowedReplicas", "allowed_replicas")
        if allowed is not None and get(horizontal, "multipleOf", "multiple_of") is not None:
            errors.append(
                "spec.horizontal.allowedReplicas: exclusive with spec.horizontal.multipleOf"
            )
    errors.extend(_model_errors(obj, errors, "AIScaleTarget"))
    if index is not None and ref is not None:
        kind = normalise_kind(get(ref, "kind"))
        other = index.target_for(kind, namespace, str(get(ref, "name", default="")))
        if other is not None and other.name != name:
            errors.append(
                f"spec.scaleTargetRef: {kind} {namespace}/{get(ref, 'name')} is already targeted "
                f"by AIScaleTarget {other.key}"
            )
    return errors


def _model_errors(obj: Any, found: list[str], kind: str) -> list[str]:
    """What the API model of `kind` itself refuses (the same words the CLI uses), minus
    problems already reported with a more precise path."""
    if not isinstance(obj, Mapping):
        return []
    from pydantic import ValidationError

    from foresize.core.api.types import KINDS, format_validation_error

    data = {k: v for k, v in obj.items() if k != "status"}
    try:
        KINDS[kind].model_validate(data)
    except ValidationError as exc:
        lines = format_validation_error(exc).splitlines()
        covered = {f.split(":", 1)[0] for f in found}
        return [
            line for line in lines if not any(c.startswith(line.split(":", 1)[0]) for c in covered)
        ]
    return []


def _valid_int_or_percent(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return value >= 1
    return bool(re.fullmatch(r"([1-9]\d?|100)%", str(value)))


def validate_daemonset_autoscaler(
    obj: Mapping[str, Any] | Any, index: AdmissionIndex | None = None
) -> list[str]:
    """Problems with a DaemonSetAutoscaler: the API model's rules, container bounds with
    precise paths, and a second DSA for the same DaemonSet."""
    errors: list[str] = []
    meta = get(obj, "metadata", default={})
    namespace = str(get(meta, "namespace", default="default"))
    name = str(get(meta, "name", default=""))
    spec = get(obj, "spec")
    if spec is None:
        return ["spec: required"]
    _check_containers(errors, "spec.containers", get(spec, "containers"))
    errors.extend(_model_errors(obj, errors, "DaemonSetAutoscaler"))
    ref = str(get(get(spec, "scaleTargetRef"), "name", default=""))
    if index is not None and ref:
        other = index.by_daemonset.get((namespace, ref))
        if other is not None and other.name != name:
            errors.append(
                f"spec.scaleTargetRef: DaemonSet {namespace}/{ref} is already autoscaled by "
                f"DaemonSetAutoscaler {other.key}"
            )
    return errors
