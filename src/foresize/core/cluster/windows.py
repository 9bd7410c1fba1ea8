"""Maintenance windows and change budgets as the planners read them, and the windows'
arithmetic (pure): is an instant inside a window, when does the next one open, do two
windows overlap (`api.maintenance` has the API fields).

Time zones are data the shell reads (`adapters.timezones`: the zone database) and hands
in as a `TimeZones`: the UTC offset of a zone at an instant. Everything else is here:

- a window opens each time its cron schedule fires in the zone's wall-clock time and
  stays open for `duration` of elapsed time (a 4h window that opens at 01:00 on the night
  clocks go back closes at 04:00 by the clock, after 4 real hours, at 04:00 - 1h);
- a wall-clock time the clocks skip (02:30 on the spring-forward night in Europe) opens
  the window when the clocks jump (03:00), for its full duration: a window is never lost
  to a DST change (Kubernetes CronJob's robfig/cron runs such a job at the jump too);
- a wall-clock time that happens twice (02:30 on the fall-back night) opens it once, at
  the first of the two;
- a zone the database does not know opens no window: what the window guards is held
  (the safe side) and the target's status says why (`window_problems`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Protocol

from foresize.core.api.access import JSONValue
from foresize.core.api.access import first as get
from foresize.core.api.cron import CronTimes, parse_cron
from foresize.core.api.duration import format_duration, parse_duration_field
from foresize.core.api.fields import format_timestamp
from foresize.core.errors import ForesizeError

DAY = 86400
_EPOCH = date(1970, 1, 1).toordinal()

# A zone's offset is within ±18 h of UTC (ISO 8601, Python's tzinfo): one day either side
# of a wall-clock time brackets the offsets in force before and after any DST change.
_BRACKET = DAY

NEXT_OPENING_HORIZON_DAYS = 4 * 366
"""How far ahead the next opening is looked for: a schedule on 29 February fires once in
four years."""

OVERLAP_CHECK_START = date(2027, 12, 1)
OVERLAP_CHECK_DAYS = 400
"""Windows are checked for overlap over a fixed span of 400 days (every weekday of every
month, and 29 February 2028), so the answer never depends on when it is asked."""


_CHECK_AT = float((OVERLAP_CHECK_START.toordinal() - _EPOCH) * DAY)


class TimeZones(Protocol):
    """The zone database, as the shell reads it."""

    def offset(self, zone: str, at: float) -> float | None:
        """Seconds east of UTC in force in `zone` at the UTC instant `at` (epoch
        seconds); None when the zone is not known."""
        ...


@dataclass(frozen=True, slots=True)
class FixedZones:
    """Zones with a constant offset: what the core knows without a database (UTC), and
    the default where a shell passes none (every other zone is then unknown)."""

    offsets: Mapping[str, float] = field(default_factory=lambda: {"UTC": 0.0, "Etc/UTC": 0.0})

    def offset(self, zone: str, at: float) -> float | None:
        return self.offsets.get(zone)


UTC_ONLY = FixedZones()


@dataclass(frozen=True, slots=True)
class Window:
    """One window as the planner reads it: `label` names it in messages
    (`windows[0]`)."""

    schedule: str
    times: CronTimes
    duration: float
    zone: str
    label: str

    @classmethod
    def of(cls, schedule: str, duration: float, zone: str, label: str) -> Window:
        return cls(schedule, parse_cron(schedule), float(duration), zone, label)

    def describe(self) -> str:
        return f"{self.label} ({self.schedule!r} for {format_duration(self.duration)} {self.zone})"


RESTRICT_DISRUPTIVE = "disruptive"
RESTRICT_ALL = "all"


@dataclass(frozen=True, slots=True)
class MaintenancePolicy:
    """`spec.vertical.maintenance` plus `oom_remediation.outside_windows`."""

    windows: tuple[Window, ...]
    restrict: str = RESTRICT_DISRUPTIVE
    oom_outside_windows: bool = False
    # The windows that cannot be read (a schedule field out of range), one line each
    # naming the field: they never open, and while there is one the others are held
    # closed too, as for `window_problems` (the safe side, said in the condition).
    problems: tuple[str, ...] = ()

    def holds(self, disruptive: bool) -> bool:
        """Whether a window restricts an action of this kind at all."""
        return disruptive or self.restrict == RESTRICT_ALL


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """`spec.vertical.budgets` (None: no such budget)."""

    changes_per_day: int | None = None
    disruptions_per_hour: int | None = None


# --------------------------------------------------------------------- wall-clock time


def local_time(zones: TimeZones, zone: str, at: float) -> float | None:
    """The wall-clock time in `zone` at the UTC instant `at`, as epoch-like seconds."""
    offset = zones.offset(zone, at)
    return None if offset is None else at + offset


def to_utc(zones: TimeZones, zone: str, local: int) -> float | None:
    """The UTC instant a wall-clock time in `zone` stands for: the first of two where the
    clocks went back, the moment the clocks jumped where they skipped it; None for an
    unknown zone."""
    before = zones.offset(zone, local - _BRACKET)
    after = zones.offset(zone, local + _BRACKET)
    if before is None or after is None:
        return None
    if before == after:  # no DST change within a day either side: the one answer
        return float(local - int(before))
    candidates = sorted({local - int(before), local - int(after)})
    for utc in candidates:
        if zones.offset(zone, utc) == local - utc:
            return float(utc)
    # Skipped: the clocks jumped from `before` to `after` between the two candidates.
    lo, hi = candidates[0], candidates[-1]
    new = zones.offset(zone, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if zones.offset(zone, mid) == new:
            hi = mid
        else:
            lo = mid
    return float(hi)


def _day(local: float) -> int:
    """The day number (days since 1970-01-01) of a wall-clock time."""
    return math.floor(local / DAY)


def _date(day: int) -> date:
    return date.fromordinal(_EPOCH + day)


def openings(
    window: Window, zones: TimeZones, first_day: int, last_day: int
) -> list[tuple[float, float]]:
    """The window's (open, close) UTC instants for the local days `first_day` ..
    `last_day` (day numbers), in order."""
    minutes = window.times.minutes_of_day()
    out: list[tuple[float, float]] = []
    day = _date(first_day)
    for n in range(first_day, last_day + 1):
        if window.times.day_matches(day):
            out += _day_openings(window, zones, n, minutes)
        day += timedelta(days=1)
    return out


def _day_openings(
    window: Window, zones: TimeZones, n: int, minutes: tuple[int, ...]
) -> list[tuple[float, float]]:
    """The openings of one matching local day: one offset for the whole day unless the
    clocks change within a day of it (then each opening is converted on its own)."""
    before = zones.offset(window.zone, n * DAY - _BRACKET)
    after = zones.offset(window.zone, (n + 1) * DAY + _BRACKET)
    if before is None or after is None:
        return []
    out = []
    for minute in minutes:
        local = n * DAY + minute * 60
        start = local - before if before == after else to_utc(zones, window.zone, local)
        if start is not None:
            out.append((float(start), start + window.duration))
    return out


def opening_at(window: Window, zones: TimeZones, at: float) -> tuple[float, float] | None:
    """The (open, close) of the opening of `window` that `at` is inside, if any."""
    local = local_time(zones, window.zone, at)
    if local is None:
        return None
    # Back far enough for an opening `duration` ago, plus a day for a DST shift.
    first = _day(local - window.duration) - 1
    found = None
    for start, end in openings(window, zones, first, _day(local)):
        if start <= at < end:
            found = (start, end)  # the latest opening that covers `at`
    return found


def next_opening(window: Window, zones: TimeZones, at: float) -> float | None:
    """When `window` next opens after `at` (None: unknown zone, or not within the
    horizon)."""
    local = local_time(zones, window.zone, at)
    if local is None:
        return None
    first = _day(local) - 1
    minutes = window.times.minutes_of_day()
    day = _date(first)
    for n in range(first, first + NEXT_OPENING_HORIZON_DAYS):
        if window.times.day_matches(day):
            for minute in minutes:
                start = to_utc(zones, window.zone, n * DAY + minute * 60)
                if start is not None and start > at:
                    return start
        day += timedelta(days=1)
    return None


@dataclass(frozen=True, slots=True)
class WindowState:
    """Where `at` stands: inside a window (until it closes) or not (until one opens)."""

    open: bool
    closes_at: float | None = None  # the open window's close
    opens_at: float | None = None  # the next opening, when closed
    window: str = ""  # the window open, or the one that opens next

    def words(self) -> str:
        if self.open:
            if self.closes_at is None:
                return "no maintenance window set"
            return (
                f"inside maintenance window {self.window} until {format_timestamp(self.closes_at)}"
            )
        if self.opens_at is None:
            return "outside every maintenance window (none opens within four years)"
        return (
            f"outside every maintenance window; {self.window} opens next at"
            f" {format_timestamp(self.opens_at)}"
        )


ALWAYS_OPEN = WindowState(True)


def window_state(windows: Sequence[Window], zones: TimeZones, at: float) -> WindowState:
    """Inside any window (the one closing last), else the window that opens first. No
    windows at all: always open. A window in an unknown zone never opens."""
    if not windows:
        return ALWAYS_OPEN
    inside = [(o[1], w.label) for w in windows if (o := opening_at(w, zones, at)) is not None]
    if inside:
        closes, label = max(inside)
        return WindowState(True, closes_at=closes, window=label)
    coming = [(n, w.label) for w in windows if (n := next_opening(w, zones, at)) is not None]
    if not coming:
        return WindowState(False)
    opens, label = min(coming)
    return WindowState(False, opens_at=opens, window=label)


# --------------------------------------------------------------------- checks


def window_problems(
    windows: Sequence[Window], zones: TimeZones | None, where: str = "spec.vertical.maintenance"
) -> list[str]:
    """What is wrong with a target's windows taken together, one line each naming the
    field: a zone the database does not know, windows that overlap (one window's openings
    included). Without `zones` (no database at hand) zones are not checked and only
    windows of the same zone are compared, in their wall-clock time."""
    problems: list[str] = []
    known: list[Window] = []
    for w in windows:
        if zones is not None and zones.offset(w.zone, _CHECK_AT) is None:
            problems.append(
                f"{where}.{w.label}.timeZone: {w.zone!r} is not a time zone of the zone"
                " database (IANA names such as Europe/Berlin, America/New_York, UTC)"
            )
        else:
            known.append(w)
    zones_used = sorted({w.zone for w in known})
    for zone in zones_used:
        # One zone: compared in its wall-clock time, where a DST change moves nothing
        # (two openings the clocks skip both open at the jump; that is not an overlap).
        same = [w for w in known if w.zone == zone]
        problems += _overlaps(same, FixedZones({zone: 0.0}), where, cross_only=False)
    if zones is not None and len(zones_used) > 1:
        problems += _overlaps(known, zones, where, cross_only=True)
    return problems


def _overlaps(
    windows: Sequence[Window], clock: TimeZones, where: str, *, cross_only: bool
) -> list[str]:
    """Overlapping openings over the fixed check span, on `clock` (UTC for windows of
    several zones, `cross_only`: only pairs of different zones are reported; the
    wall-clock time of one zone otherwise)."""
    first = OVERLAP_CHECK_START.toordinal() - _EPOCH
    spans: list[tuple[float, float, int]] = []
    for i, w in enumerate(windows):
        spans += [(s, e, i) for s, e in openings(w, clock, first, first + OVERLAP_CHECK_DAYS)]
    spans.sort()
    problems: list[str] = []
    seen: set[tuple[int, int]] = set()
    reach: dict[str, tuple[float, int]] = {}  # per zone: the furthest close so far
    for start, end, i in spans:
        for zone, (close, j) in reach.items():
            pair = (min(i, j), max(i, j))
            if start >= close or pair in seen or (cross_only and zone == windows[i].zone):
                continue
            seen.add(pair)
            problems.append(_overlap_words(windows[j], windows[i], start, where, cross_only))
        zone = windows[i].zone if cross_only else ""
        if zone not in reach or end > reach[zone][0]:
            reach[zone] = (end, i)
    return problems


def _overlap_words(a: Window, b: Window, start: float, where: str, utc: bool) -> str:
    if a is b:
        return (
            f"{where}.{a.label}.duration: {format_duration(a.duration)} is longer than the"
            f" time between two openings of {a.schedule!r}: the window overlaps itself"
        )
    first, second = sorted((a, b), key=lambda w: w.label)
    at = format_timestamp(start)
    at = at if utc else at.rstrip("Z") + " wall-clock"
    return (
        f"{where}.{second.label}: overlaps {first.describe()} (both open at {at}):"
        " merge them into one window"
    )


# --------------------------------------------------------------------- reading a spec


def read_maintenance(vertical: JSONValue, where: str) -> MaintenancePolicy | None:
    """`spec.vertical.maintenance` (an API model or a manifest dict) as the planners read
    it; None where none is set. A schedule whose fields cannot be read is one of the
    policy's `problems` (the window never opens; the webhook refuses it, the worker holds
    what the windows guard and says so); another field the API model would refuse is a
    ForesizeError naming it (the worker then refuses the target: nothing acts)."""
    block = get(vertical, "maintenance")
    if block is None:
        return None
    raw = get(block, "windows", default=[]) or []
    if not isinstance(raw, list | tuple) or not raw:
        raise ForesizeError(f"{where}.maintenance.windows: at least one window is required")
    windows = []
    problems = []
    for i, entry in enumerate(raw):
        label = f"windows[{i}]"
        path = f"{where}.maintenance.{label}"
        schedule = get(entry, "schedule")
        duration = parse_duration_field(get(entry, "duration"), f"{path}.duration")
        if not duration or duration <= 0:
            raise ForesizeError(f"{path}.duration: a positive duration is required")
        zone = str(get(entry, "timeZone", "time_zone", default="UTC"))
        try:
            windows.append(Window.of(str(schedule), duration, zone, label))
        except ValueError as exc:
            problems.append(f"{path}.schedule: {exc}")
    restrict = str(get(block, "restrict", default=RESTRICT_DISRUPTIVE))
    if restrict not in (RESTRICT_DISRUPTIVE, RESTRICT_ALL):
        raise ForesizeError(f"{where}.maintenance.restrict: expected disruptive or all")
    remediation = get(vertical, "oom_remediation", "oomRemediation")
    outside = bool(get(remediation, "outside_windows", "outsideWindows", default=False))
    return MaintenancePolicy(tuple(windows), restrict, outside, tuple(problems))


def read_budgets(vertical: JSONValue, where: str) -> BudgetPolicy | None:
    """`spec.vertical.budgets`; None where none is set. A budget below 1 is an error
    (the API model refuses it; read from a manifest dict it would stop every change)."""
    block = get(vertical, "budgets")
    if block is None:
        return None
    values: list[int | None] = []
    for name in ("changes_per_workload_per_day", "disruptions_per_namespace_per_hour"):
        value = get(block, name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ForesizeError(f"{where}.budgets.{name}: must be an integer >= 1")
        values.append(value)
    return BudgetPolicy(values[0], values[1])
