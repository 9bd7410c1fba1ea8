"""A strict zone table for the maintenance windows' tests: a few zones with the DST changes
their rules give for 2026-2028, so the core's window arithmetic is tested against fixed
facts, not the machine's zone database (`tests/adapters/test_timezones.py` checks these
instants against zoneinfo).

Sources: the EU rule (Directive 2000/84/EC: summer time from 01:00 UTC on the last Sunday
of March to 01:00 UTC on the last Sunday of October) and the US rule (Energy Policy Act
of 2005: from 02:00 local on the second Sunday of March to 02:00 local on the first Sunday
of November).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from datetime import UTC, datetime

HOUR = 3600.0


def utc(text: str) -> float:
    """Epoch seconds of an ISO time in UTC (`2026-03-29T01:00`)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# zone -> (standard offset, [(UTC instant of a change, offset from then on), ...])
_RULES: dict[str, tuple[float, list[tuple[str, float]]]] = {
    "UTC": (0.0, []),
    "Europe/Berlin": (
        HOUR,
        [
            ("2026-03-29T01:00", 2 * HOUR),
            ("2026-10-25T01:00", HOUR),
            ("2027-03-28T01:00", 2 * HOUR),
            ("2027-10-31T01:00", HOUR),
            ("2028-03-26T01:00", 2 * HOUR),
            ("2028-10-29T01:00", HOUR),
        ],
    ),
    "America/New_York": (
        -5 * HOUR,
        [
            ("2026-03-08T07:00", -4 * HOUR),
            ("2026-11-01T06:00", -5 * HOUR),
            ("2027-03-14T07:00", -4 * HOUR),
            ("2027-11-07T06:00", -5 * HOUR),
            ("2028-03-12T07:00", -4 * HOUR),
            ("2028-11-05T06:00", -5 * HOUR),
        ],
    ),
    "Asia/Kolkata": (5.5 * HOUR, []),
}

# The span the table holds: asking outside it is a test's mistake, not an answer.
_FIRST = utc("2025-06-01T00:00")
_LAST = utc("2029-06-01T00:00")


class TableZones:
    """`TimeZones` from `_RULES`. Strict: a zone not in the table is unknown (None, as the
    database answers); an instant outside 2025-06..2029-06 or not finite raises."""

    def __init__(self) -> None:
        self.asked = 0
        self._changes = {
            zone: ([utc(t) for t, _ in changes], [o for _, o in changes], base)
            for zone, (base, changes) in _RULES.items()
        }

    def offset(self, zone: str, at: float) -> float | None:
        if not math.isfinite(at) or not _FIRST <= at <= _LAST:
            raise AssertionError(f"offset asked at {at!r}, outside the table's span")
        self.asked += 1
        entry = self._changes.get(zone)
        if entry is None:
            return None
        instants, offsets, base = entry
        i = bisect_right(instants, at)
        return base if i == 0 else offsets[i - 1]


def changes(zone: str) -> list[tuple[float, float]]:
    """The table's (instant, offset from then on) for `zone`."""
    return [(utc(t), o) for t, o in _RULES[zone][1]]
