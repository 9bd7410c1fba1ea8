"""The merge rules of the policy hierarchy (docs/policies.md), on plain JSON.

A level is a `Layer`: a partial spec in the API's JSON spelling holding only the fields
that level sets (a pydantic model dumped with `exclude_unset`: the CRDs carry no schema
defaults, so "unset" survives the API server), and the name of where it came from. Layers
are applied lowest first; a field set by a later layer replaces the earlier value. Where
several fields mean one thing they are replaced together:

- a model's cadence (`forecast_interval` / `forecast_cron`), and a `mode` other than
  `percentile` drops an inherited `percentile_value` (as `ModelSpec.merged`);
- `horizontal.multipleOf` / `allowedReplicas`;
- a hysteresis threshold (`scaling_behavior.scale_up` / `scale_down`), the start-up boost
  and every list but `vertical.containers` are taken whole.

`vertical.containers` merges by container name, field by field. Within one layer a named
entry stands for that container instead of the layer's `*` entry (the rule of a single
target, `TargetView.policy_for`); across layers the fields overlay, so a target's own `*`
floor still holds for a container a policy above names. Where the result has a lowerbound
above the upperbound, the bound of the later (more local) layer is kept and the other
dropped, and `Merged.kept` says so: a local floor or bound is never silently lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from foresize.core.api.access import JSONValue
from foresize.core.api.containers import ANY_CONTAINER
from foresize.core.api.quantity import CPU, MEMORY, format_quantity, to_canonical

DEFAULT_SOURCE = "default"
"""The source of a field no level sets: the API's default."""
CONTAINERS = "vertical.containers"

# Fields replaced together: setting one drops the others' inherited values.
_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"forecast_interval", "forecast_cron"}),
    frozenset({"multipleOf", "allowedReplicas"}),
)
# Objects taken whole (their fields are only valid together).
_WHOLE = frozenset({"scale_up", "scale_down", "startup_boost"})


@dataclass(frozen=True, slots=True)
class Layer:
    source: str
    values: dict[str, JSONValue]


@dataclass(slots=True)
class Merged:
    values: dict[str, JSONValue] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # dotted field path -> source
    kept: list[str] = field(default_factory=list)  # local bounds kept, one line each


def _copied(value: JSONValue) -> JSONValue:
    """A copy of a JSON value's dicts and lists (its leaves are immutable): the layers'
    values are shared (a policy's with every target under it) and the merge edits what it
    builds. `copy.deepcopy` did the same at several times the cost (it was most of a cold
    resolution of 10,000 targets, issue 26)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def merge(layers: Sequence[Layer]) -> Merged:
    """The layers applied lowest first, with where each field's value came from."""
    out = Merged()
    for layer in layers:
        values = _copied(layer.values)
        assert isinstance(values, dict)
        vertical = values.get("vertical")
        if isinstance(vertical, dict):
            vertical.pop("containers", None)
        _overlay(out.values, values, "", layer.source, out.sources)
    containers = _containers(layers, out)
    if containers:
        vertical = out.values.setdefault("vertical", {})
        assert isinstance(vertical, dict)
        vertical["containers"] = containers
    return out


def _drop(sources: dict[str, str], path: str) -> None:
    for key in [k for k in sources if k == path or k.startswith(f"{path}.")]:
        del sources[key]


def _overlay(
    base: dict[str, JSONValue],
    over: dict[str, JSONValue],
    path: str,
    source: str,
    sources: dict[str, str],
) -> None:
    for key, value in over.items():
        here = f"{path}.{key}" if path else key
        for group in _GROUPS:
            if key in group:
                for other in group - {key}:
                    if other in base and other not in over:
                        del base[other]
                        _drop(sources, f"{path}.{other}" if path else other)
        dropped = key == "mode" and value != "percentile" and "percentile_value" not in over
        if dropped and "percentile_value" in base:
            del base["percentile_value"]
            _drop(sources, f"{path}.percentile_value" if path else "percentile_value")
        inner = base.get(key)
        if isinstance(value, dict) and key not in _WHOLE and isinstance(inner, dict):
            _overlay(inner, value, here, source, sources)
            continue
        # Only a dict below `here` can have sources under it; a leaf has `here` alone (a
        # scan of every source for each field was a third of a merge).
        if isinstance(inner, dict):
            _drop(sources, here)
        else:
            sources.pop(here, None)
        if isinstance(value, dict) and key not in _WHOLE:
            fresh: dict[str, JSONValue] = {}
            base[key] = fresh
            _overlay(fresh, value, here, source, sources)
            continue
        base[key] = value
        sources[here] = source


def _entries(layer: Layer) -> dict[str, dict[str, JSONValue]]:
    vertical = layer.values.get("vertical")
    items = vertical.get("containers") if isinstance(vertical, dict) else None
    out: dict[str, dict[str, JSONValue]] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            out[str(item["name"])] = item
    return out


def _containers(layers: Sequence[Layer], out: Merged) -> list[JSONValue]:
    per_layer = [_entries(layer) for layer in layers]
    names = sorted(
        {n for entries in per_layer for n in entries}, key=lambda n: (n != ANY_CONTAINER, n)
    )
    result: list[JSONValue] = []
    for name in names:
        entry: dict[str, JSONValue] = {}
        sources: dict[str, str] = {}
        ranks: dict[str, int] = {}  # field path -> index of the layer that set it
        for rank, (layer, entries) in enumerate(zip(layers, per_layer, strict=True)):
            own = entries.get(name)
            if own is None and name != ANY_CONTAINER:
                own = entries.get(ANY_CONTAINER)
            if own is None:
                continue
            given = {k: _copied(v) for k, v in own.items() if k != "name"}
            _overlay(entry, given, "", layer.source, sources)
            ranks.update(dict.fromkeys(flatten(given), rank))
        if not entry:
            continue
        for resource in (CPU, MEMORY):
            _keep_local_bound(name, resource, entry, sources, ranks, out.kept)
        prefix = f"{CONTAINERS}[{name}]"
        for key, value in sources.items():
            out.sources[f"{prefix}.{key}"] = value
        result.append({"name": name, **entry})
    return result


def _keep_local_bound(
    name: str,
    resource: str,
    entry: dict[str, JSONValue],
    sources: dict[str, str],
    ranks: dict[str, int],
    kept: list[str],
) -> None:
    """A lowerbound above the upperbound after the merge: the later layer's bound stays."""
    bounds = entry.get(resource)
    if not isinstance(bounds, dict):
        return
    lower, upper = bounds.get("lowerbound"), bounds.get("upperbound")
    if lower is None or upper is None:
        return
    if not isinstance(lower, str | int | float) or not isinstance(upper, str | int | float):
        return
    try:
        low = to_canonical(resource, lower)
        high = to_canonical(resource, upper)
    except (ValueError, TypeError):
        return  # not a quantity: the spec's validation names it
    if low <= high:
        return
    low_key, high_key = f"{resource}.lowerbound", f"{resource}.upperbound"
    local_low = ranks.get(low_key, -1) >= ranks.get(high_key, -1)
    keep, drop = (low_key, high_key) if local_low else (high_key, low_key)
    kept_amount, dropped_amount = (low, high) if local_low else (high, low)
    bounds.pop(drop.split(".", 1)[1])
    kept.append(
        f"{CONTAINERS}[{name}].{keep} {format_quantity(resource, kept_amount)} "
        f"({sources[keep]}) kept over {drop.split('.', 1)[1]} "
        f"{format_quantity(resource, dropped_amount)} ({sources[drop]})"
    )
    del sources[drop]


def flatten(values: JSONValue, path: str = "") -> dict[str, JSONValue]:
    """Every leaf of a spec's JSON by dotted path, containers keyed by name
    (`vertical.containers[api].cpu.lowerbound`): the fields `status.policy` lists."""
    out: dict[str, JSONValue] = {}
    if isinstance(values, dict):
        for key, value in values.items():
            here = f"{path}.{key}" if path else str(key)
            if here == CONTAINERS and isinstance(value, list):
                for item in value:
                    if isinstance(item, dict):
                        name = item.get("name")
                        rest = {k: v for k, v in item.items() if k != "name"}
                        out.update(flatten(rest, f"{CONTAINERS}[{name}]"))
                continue
            if isinstance(value, dict) and key not in _WHOLE and value:
                out.update(flatten(value, here))
            else:
                out[here] = value
    return out
