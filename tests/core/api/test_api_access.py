"""Reading models and mappings alike (`api.access`): a mapping is read by key, anything
else by attribute, whichever type came first (the answer is kept per type)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from foresize.core.api.access import first, get_path


class _Tree(Mapping[str, Any]):
    """A mapping that is not a dict."""

    def __init__(self, **items: Any) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class _Model:
    """Not a mapping, though it has a `get` method and an attribute named like a key."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)

    def get(self, name: str, default: Any = None) -> Any:
        return "read by key"


def test_mappings_are_read_by_key_and_other_objects_by_attribute() -> None:
    for _ in range(2):  # the second round reads with what the first learnt per type
        assert get_path(_Tree(meta=_Tree(name="a")), "meta", "name") == "a"
        assert get_path(MappingProxyType({"meta": {"name": "b"}}), "meta", "name") == "b"
        assert get_path(_Model(meta=_Model(name="c")), "meta", "name") == "c"
        assert get_path({"meta": _Model(name="d")}, "meta", "name") == "d"
        assert first(_Model(minReplicas=2), "min_replicas", "minReplicas") == 2
        assert first(_Tree(minReplicas=3), "min_replicas", "minReplicas") == 3
        assert first(_Model(), "min_replicas", default=4) == 4
        assert get_path(_Tree(), "missing", "name") is None
