"""`spec.vertical.maintenance` and `spec.vertical.budgets` (issue 24 part 2): when the
vertical worker may disrupt pods, and how much it may change.

- `maintenance.windows`: each a cron `schedule` (5 fields or a macro, as CronJob), a
  `duration` and an IANA `timeZone`; a window is open from each time its schedule fires,
  in that zone's wall-clock time, for `duration` of real (elapsed) time. Outside every
  window no disruptive action is planned (evictions, resizes that restart a container,
  workload restarts); with `restrict: all`, no change to a running pod at all.
- `budgets`: changes per workload per day and disruptions per namespace per hour, over
  the last 24 h and the last hour (rolling, not calendar days: the count does not depend
  on a time zone, and a budget never refills all at once at midnight).

What one window's fields say is checked here, by the model (so `foresize validate`, the
webhook and the CRD loader alike). What needs the time-zone database or all windows
together (a zone that does not exist, windows that overlap) is checked by
`cluster.windows.window_problems`, which the webhook, `foresize validate` and the
operator call with the zone data their shell reads (`adapters.timezones`).
"""

from __future__ import annotations

import re
from typing import Annotated, TypeAlias

from pydantic import Field, PlainValidator, WithJsonSchema, model_validator

from foresize.core.api.cron import cron_error, parse_cron
from foresize.core.api.duration import format_duration, shown
from foresize.core.api.fields import (
    CronShape,
    PositiveDuration,
    StrictModel,
    enum_schema,
    one_of,
)

MAX_WINDOWS = 8
"""At most 8 windows per target: enough for a weekday and a weekend rule per region; each
is scanned on every pass, and the overlap check compares every pair."""

MAX_WINDOW_DURATION = 7 * 86400.0
"""A window lasts at most a week: longer, and it is a mode (`recommendation`), not a
window; it also bounds how far back a pass looks for the opening that covers `now`."""

MAX_OPENINGS_PER_DAY = 24
"""A schedule may open its window at most 24 times a day (hourly): one that fires more
often is not a maintenance window, and the bound keeps the overlap check to a few
thousand openings."""

ZONE_PATTERN = r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,3}$"
"""An IANA zone name's shape (`Europe/Berlin`, `America/Argentina/Buenos_Aires`, `UTC`,
`Etc/GMT+5`); whether the zone exists is the zone database's answer, not a pattern's."""
_ZONE_RE = re.compile(ZONE_PATTERN)
ZONE_MAX_LENGTH = 64

RESTRICTIONS = ("disruptive", "all")
"""What is held outside the windows: `disruptive` actions only (evictions, restarting
resizes; in-place resizes go on), or `all` changes to running pods."""

BUDGET_MAX = 100_000
"""A budget above this is no limit; the bound keeps the CRD's integers sane."""


def _zone(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be an IANA time zone name (e.g. Europe/Berlin), not {shown(value)}")
    if len(value) > ZONE_MAX_LENGTH or not _ZONE_RE.match(value):
        raise ValueError(f"{shown(value)} is not an IANA time zone name (e.g. Europe/Berlin, UTC)")
    return value


TimeZoneName: TypeAlias = Annotated[
    str,
    PlainValidator(_zone),
    WithJsonSchema({"type": "string", "pattern": ZONE_PATTERN, "maxLength": ZONE_MAX_LENGTH}),
]


def _budget(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be an integer >= 1, not {shown(value)}")
    if value < 1:
        raise ValueError(
            f"must be at least 1, not {value}: a budget of 0 would hold every change for"
            " ever (to stop acting, set vertical.mode: recommendation)"
        )
    if value > BUDGET_MAX:
        raise ValueError(f"must be at most {BUDGET_MAX}, not {value}")
    return value


Budget: TypeAlias = Annotated[
    int,
    PlainValidator(_budget),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": BUDGET_MAX}),
]

Restriction: TypeAlias = Annotated[
    str, PlainValidator(one_of(RESTRICTIONS)), enum_schema(RESTRICTIONS)
]


class MaintenanceWindow(StrictModel):
    """One window: open from each time `schedule` fires (wall-clock time in `timeZone`)
    for `duration`."""

    schedule: CronShape
    """When the window opens: 5 cron fields (minute hour day-of-month month day-of-week)
    or a macro (@daily, @weekly, ...), read in `timeZone`."""
    duration: PositiveDuration
    """How long the window stays open (elapsed time; at most 7d)."""
    timeZone: TimeZoneName = "UTC"
    """The IANA time zone the schedule is read in (default UTC)."""

    @model_validator(mode="after")
    def _check(self) -> MaintenanceWindow:
        if self.duration > MAX_WINDOW_DURATION:
            raise ValueError(
                f"duration: {format_duration(self.duration)} is longer than"
                f" {format_duration(MAX_WINDOW_DURATION)}"
            )
        if cron_error(self.schedule) is not None:
            # Not refused here: `cluster.windows.read_maintenance` names the field, so the
            # webhook and `foresize validate` refuse it, and an object that got past them
            # is read with the MaintenanceWindowsInvalid condition (what it guards held).
            return self
        openings = len(parse_cron(self.schedule).minutes_of_day())
        if openings > MAX_OPENINGS_PER_DAY:
            raise ValueError(
                f"schedule: {self.schedule!r} opens the window {openings} times a day"
                f" (at most {MAX_OPENINGS_PER_DAY}: a maintenance window opens at most hourly)"
            )
        return self


class Maintenance(StrictModel):
    """Windows outside which the vertical worker holds what `restrict` names."""

    windows: list[MaintenanceWindow] = Field(min_length=1, max_length=MAX_WINDOWS)
    """When disruptive actions (or, with restrict: all, any change) may happen."""
    restrict: Restriction = "disruptive"
    """disruptive: outside the windows no eviction, restarting resize or workload restart
    (in-place resizes go on); all: no change to a running pod outside the windows."""


class ChangeBudgets(StrictModel):
    """How much the vertical worker may change: counted from what it did, over the last
    24 h and the last hour (rolling)."""

    changes_per_workload_per_day: Budget | None = None
    """New sizes rolled out to the workload in the last 24 h (a rollout of one suggestion
    to all its pods is one change)."""
    disruptions_per_namespace_per_hour: Budget | None = None
    """Evictions and restarting resizes in the namespace in the last hour, by every
    target there (each target holds the namespace's count to its own number)."""
