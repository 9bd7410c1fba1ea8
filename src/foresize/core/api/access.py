"""Reading API objects that come as pydantic models or as plain dicts (watch events,
AdmissionReview JSON, test fixtures): one way for every module, no pydantic needed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

JSONValue: TypeAlias = Any
"""A value of a Kubernetes object that is free-form JSON: a field of a watch event, an
AdmissionReview or a manifest dict, or an API model's field read by name through the readers
below. Its shape is checked where it is used (`int()`, `str()`, `isinstance`), not here. The
one place the core says `Any`: everything else is typed."""

KubeObject: TypeAlias = Mapping[str, JSONValue]
"""A Kubernetes object as JSON (`metadata`, `spec`, `status`, ...)."""

_MISSING = object()

# Whether instances of a type are mappings, per type: `isinstance(obj, Mapping)` goes
# through the ABC machinery on every call, and these readers run on every object of every
# planning pass (the simulator runs tens of thousands). Types are few (dict, the API
# models), so the table stays small.
_mapping_types: dict[type, bool] = {dict: True}


def _is_mapping(obj: object) -> bool:
    kind = type(obj)
    known = _mapping_types.get(kind)
    if known is None:
        known = _mapping_types[kind] = isinstance(obj, Mapping)
    return known


def first(obj: object, *names: str, default: JSONValue = None) -> JSONValue:
    """The first present, non-null attribute or mapping key among `names` (field aliases:
    `first(spec, "min_replicas", "minReplicas")`), else `default`."""
    if obj is None:
        return default
    mapping = _is_mapping(obj)
    source: JSONValue = obj  # a mapping where `mapping` says so (the table, not a narrowing)
    for name in names:
        value = source.get(name, _MISSING) if mapping else getattr(obj, name, _MISSING)
        if value is not _MISSING and value is not None:
            return value
    return default


def get_path(obj: object, *names: str) -> JSONValue:
    """`obj.a.b` or `obj["a"]["b"]` for get_path(obj, "a", "b"), through models and dicts
    alike; None where the path stops."""
    node: JSONValue = obj
    for name in names:
        if node is None:
            return None
        # `_is_mapping` inlined: this loop runs millions of times in a simulation.
        mapping = _mapping_types.get(type(node))
        if mapping is None:
            mapping = _is_mapping(node)
        node = node.get(name) if mapping else getattr(node, name, None)
    return node
