"""The zone database for the maintenance windows (`core.cluster.windows.TimeZones`): the
system's IANA tz files through `zoneinfo` (or the `tzdata` package where the system has
none, as in a slim container image). Reading them is I/O, so it lives here; the core
gets the answers (an offset at an instant) and does the windows' arithmetic itself.

A zone that cannot be loaded is unknown (None), never an exception: the core then holds
what the window guards and says so in the target's status.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

# Offsets are asked for a handful of zones at many instants (every pass, every opening of
# the overlap check): the loaded zones are kept, and so are recent answers.
_ZONE_CACHE = 256
_OFFSET_CACHE = 65536


@lru_cache(maxsize=_ZONE_CACHE)
def _zone(name: str) -> ZoneInfo | None:
    # zoneinfo takes paths apart itself, but a name with ".." or a leading "/" is refused
    # here first: a zone name is never a path outside the database.
    if not name or name.startswith("/") or ".." in name.split("/"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


class SystemZones:
    """`TimeZones` from the zone database of this machine."""

    def offset(self, zone: str, at: float) -> float | None:
        return _offset(zone, int(at))

    def names(self) -> frozenset[str]:
        """Every zone the database knows (for error messages and tests)."""
        return frozenset(available_timezones())


@lru_cache(maxsize=_OFFSET_CACHE)
def _offset(zone: str, at: int) -> float | None:
    tz = _zone(zone)
    if tz is None:
        return None
    try:
        delta = datetime.fromtimestamp(at, UTC).astimezone(tz).utcoffset()
    except (OverflowError, OSError, ValueError):
        return None
    return None if delta is None else delta.total_seconds()


SYSTEM_ZONES = SystemZones()
