"""Which per-container entry applies to a container: one rule for container policies and
suggestions alike (the API types, the target read-model and the recommender)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

ANY_CONTAINER = "*"
"""The entry named `*` applies to every container that has no entry of its own, as a
VPA `containerPolicies` entry named `*` does."""


class Named(Protocol):
    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


def entry_for(entries: Iterable[E], container: str) -> E | None:
    """The entry named `container`, else the one named `*`, else None: an exact name
    wins wherever in the list it stands."""
    wildcard = None
    for entry in entries:
        if entry.name == container:
            return entry
        if entry.name == ANY_CONTAINER and wildcard is None:
            wildcard = entry
    return wildcard
