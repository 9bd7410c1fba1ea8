"""Reading API objects that come as pydantic models or as plain dicts (watch events,
AdmissionReview JSON, test fixtures): one way for every module, no pydantic needed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MISSING = object()


def first(obj: Any, *names: str, default: Any = None) -> Any:
    """The first present, non-null attribute or mapping key among `names` (field aliases:
    `first(spec, "min_replicas", "minReplicas")`), else `default`."""
    if obj is None:
        return default
    for name in names:
        if isinstance(obj, Mapping):
            value = obj.get(name, _MISSING)
        else:
            value = getattr(obj, name, _MISSING)
        if value is not _MISSING and value is not None:
            return value
    return default


def get_path(obj: Any, *names: str) -> Any:
    """`obj.a.b` or `obj["a"]["b"]` for get_path(obj, "a", "b"), through models and dicts
    alike; None where the path stops."""
    for name in names:
        if obj is None:
            return None
        obj = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return obj
