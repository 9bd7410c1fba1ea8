"""Reading API objects that come as pydantic models or as plain dicts (watch events,
AdmissionReview JSON, test fixtures): one way for every module, no pydantic needed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MISSING = object()

# Whether instances of a type are mappings, per type: `isinstance(obj, Mapping)` goes
# through the ABC machinery on every call, and these readers run on every object of every
# planning pass (the simulator runs tens of thousands). Types are few (dict, the API
# models), so the table stays small.
_mapping_types: dict[type, bool] = {dict: True}


def _is_mapping(obj: Any) -> bool:
    kind = type(obj)
    known = _mapping_types.get(kind)
    if known is None:
        known = _mapping_types[kind] = isinstance(obj, Mapping)
    return known


def first(obj: Any, *names: str, default: Any = None) -> Any:
    """The first present, non-null attribute or mapping key among `names` (field aliases:
    `first(spec, "min_replicas", "minReplicas")`), else `default`."""
    if obj is None:
        return default
    mapping = _is_mapping(obj)
    for name in names:
        value = obj.get(name, _MISSING) if mapping else getattr(obj, name, _MISSING)
        if value is not _MISSING and value is not None:
            return value
    return default


def get_path(obj: Any, *names: str) -> Any:
    """`obj.a.b` or `obj["a"]["b"]` for get_path(obj, "a", "b"), through models and dicts
    alike; None where the path stops."""
    for name in names:
        if obj is None:
            return None
        # `_is_mapping` inlined: this loop runs millions of times in a simulation.
        mapping = _mapping_types.get(type(obj))
        if mapping is None:
            mapping = _is_mapping(obj)
        obj = obj.get(name) if mapping else getattr(obj, name, None)
    return obj
