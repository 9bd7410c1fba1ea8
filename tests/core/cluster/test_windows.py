"""`cluster.windows`: inside a window or not, at its edges — time zones, both DST changes,
a window across midnight, cron edge cases — and the checks of windows taken together.
The zone data is the strict table of `tests/support/zones.py` (fixed facts)."""

from __future__ import annotations

import pytest

from foresize.core.cluster.windows import (
    UTC_ONLY,
    Window,
    next_opening,
    opening_at,
    read_budgets,
    read_maintenance,
    to_utc,
    window_problems,
    window_state,
)
from foresize.core.errors import ForesizeError
from support.zones import HOUR, TableZones, utc

ZONES = TableZones()
MINUTE = 60.0


def _w(schedule: str, hours: float, zone: str = "UTC", i: int = 0) -> Window:
    return Window.of(schedule, hours * HOUR, zone, f"windows[{i}]")


def _inside(window: Window, at: str) -> bool:
    return opening_at(window, ZONES, utc(at)) is not None


def test_edges_are_half_open():
    w = _w("0 2 * * *", 4)
    assert not _inside(w, "2026-07-01T01:59:59")
    assert _inside(w, "2026-07-01T02:00")
    assert _inside(w, "2026-07-01T05:59:59")
    assert not _inside(w, "2026-07-01T06:00")
    assert opening_at(w, ZONES, utc("2026-07-01T03:00")) == (
        utc("2026-07-01T02:00"),
        utc("2026-07-01T06:00"),
    )


def test_a_window_across_midnight():
    w = _w("0 22 * * *", 4, "Europe/Berlin")  # 22:00-02:00 Berlin = 20:00-24:00 UTC in summer
    assert _inside(w, "2026-07-01T20:00")
    assert _inside(w, "2026-07-01T23:59")
    assert not _inside(w, "2026-07-02T00:00")
    # The opening of the day before covers the small hours: Saturday 22:00 on a
    # Saturday-only schedule still covers Sunday 01:00.
    sat = _w("0 22 * * sat", 4, "Europe/Berlin")
    assert _inside(sat, "2026-07-04T23:30")  # Sunday 01:30 Berlin
    assert not _inside(sat, "2026-07-05T20:30")  # Sunday 22:30 Berlin: not a Saturday


def test_the_zone_moves_the_window():
    berlin = _w("0 2 * * *", 1, "Europe/Berlin")
    new_york = _w("0 2 * * *", 1, "America/New_York")
    kolkata = _w("0 2 * * *", 1, "Asia/Kolkata")
    assert _inside(berlin, "2026-01-15T01:30")  # 02:30 CET
    assert _inside(berlin, "2026-07-15T00:30")  # 02:30 CEST
    assert _inside(new_york, "2026-01-15T07:30")  # 02:30 EST
    assert _inside(new_york, "2026-07-15T06:30")  # 02:30 EDT
    assert _inside(kolkata, "2026-07-14T20:45")  # 02:15 IST (+05:30)
    assert not _inside(kolkata, "2026-07-14T21:30")


def test_spring_forward_a_skipped_opening_opens_at_the_jump():
    # Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00 UTC; 02:30 never happens.
    w = _w("30 2 * * *", 1, "Europe/Berlin")
    assert opening_at(w, ZONES, utc("2026-03-29T01:10")) == (
        utc("2026-03-29T01:00"),
        utc("2026-03-29T02:00"),
    )
    assert not _inside(w, "2026-03-29T00:59")
    # The day before and after: 02:30 CET = 01:30 UTC, 02:30 CEST = 00:30 UTC.
    assert _inside(w, "2026-03-28T01:30")
    assert _inside(w, "2026-03-30T00:30")
    # New York, 2026-03-08: 02:00 EST becomes 03:00 EDT at 07:00 UTC.
    ny = _w("15 2 * * *", 2, "America/New_York")
    assert opening_at(ny, ZONES, utc("2026-03-08T07:00")) == (
        utc("2026-03-08T07:00"),
        utc("2026-03-08T09:00"),
    )


def test_fall_back_a_twice_seen_opening_opens_once_and_lasts_its_real_duration():
    # Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00 UTC; 02:30 happens twice.
    w = _w("30 2 * * *", 1, "Europe/Berlin")
    assert opening_at(w, ZONES, utc("2026-10-25T00:45")) == (
        utc("2026-10-25T00:30"),  # the first 02:30 (CEST)
        utc("2026-10-25T01:30"),
    )
    assert not _inside(w, "2026-10-25T01:45")  # the second 02:30 (CET) opens nothing
    # A 4h window from 01:00 CEST lasts 4 real hours: to 04:00 - 1h by the clock.
    long = _w("0 1 * * *", 4, "Europe/Berlin")
    assert opening_at(long, ZONES, utc("2026-10-25T02:00")) == (
        utc("2026-10-24T23:00"),
        utc("2026-10-25T03:00"),
    )
    # New York, 2026-11-01: 02:00 EDT becomes 01:00 EST at 06:00 UTC; 01:30 happens twice.
    ny = _w("30 1 * * *", 0.5, "America/New_York")
    assert _inside(ny, "2026-11-01T05:45")  # 01:45 EDT
    assert not _inside(ny, "2026-11-01T06:45")  # 01:45 EST


def test_to_utc_at_both_changes():
    berlin_spring = utc("2026-03-29T00:00") + 2.5 * HOUR  # 02:30 local, skipped
    assert to_utc(ZONES, "Europe/Berlin", int(berlin_spring)) == utc("2026-03-29T01:00")
    berlin_fall = utc("2026-10-25T00:00") + 2.5 * HOUR  # 02:30 local, twice
    assert to_utc(ZONES, "Europe/Berlin", int(berlin_fall)) == utc("2026-10-25T00:30")
    assert to_utc(ZONES, "Mars/Olympus", int(berlin_fall)) is None


def test_next_opening():
    w = _w("0 1 * * sat,sun", 2, "Europe/Berlin")
    # Wednesday 2026-07-01 12:00 UTC: next is Saturday 01:00 CEST = Friday 23:00 UTC.
    assert next_opening(w, ZONES, utc("2026-07-01T12:00")) == utc("2026-07-03T23:00")
    leap = _w("0 0 29 2 *", 1)
    assert next_opening(leap, ZONES, utc("2026-03-01T00:00")) == utc("2028-02-29T00:00")
    assert next_opening(_w("0 0 * * *", 1, "Mars/Olympus"), ZONES, utc("2026-03-01")) is None


def test_the_state_of_several_windows():
    weekday = _w("0 2 * * mon-fri", 2, "Europe/Berlin", 0)
    weekend = _w("0 10 * * sat,sun", 6, "Europe/Berlin", 1)
    state = window_state([weekday, weekend], ZONES, utc("2026-07-04T09:00"))  # Sat 11:00
    assert state.open and state.window == "windows[1]"
    assert state.closes_at == utc("2026-07-04T14:00")
    closed = window_state([weekday, weekend], ZONES, utc("2026-07-06T12:00"))  # Mon 14:00
    assert not closed.open
    assert closed.opens_at == utc("2026-07-07T00:00")  # Tue 02:00 CEST
    assert closed.window == "windows[0]"
    assert "opens next at 2026-07-07T00:00:00Z" in closed.words()
    assert window_state([], ZONES, 0.0).open


def test_an_unknown_zone_never_opens():
    lost = _w("0 * * * *", 0.5, "Mars/Olympus")
    state = window_state([lost], ZONES, utc("2026-07-01T00:10"))
    assert not state.open and state.opens_at is None
    # UTC_ONLY, the core's default without a database, knows UTC and nothing else.
    assert UTC_ONLY.offset("UTC", 0.0) == 0.0
    assert UTC_ONLY.offset("Europe/Berlin", 0.0) is None


# ------------------------------------------------------------------ checks


def test_problems_an_unknown_zone_named():
    problems = window_problems([_w("0 2 * * *", 1, "Mars/Olympus")], ZONES)
    assert problems == [
        "spec.vertical.maintenance.windows[0].timeZone: 'Mars/Olympus' is not a time zone"
        " of the zone database (IANA names such as Europe/Berlin, America/New_York, UTC)"
    ]
    # Without a database the zone is not judged.
    assert window_problems([_w("0 2 * * *", 1, "Mars/Olympus")], None) == []


def test_problems_a_window_that_overlaps_itself():
    problems = window_problems([_w("0 */2 * * *", 3)], ZONES)
    assert len(problems) == 1
    assert problems[0].startswith("spec.vertical.maintenance.windows[0].duration: 3h is longer")


def test_problems_two_windows_of_one_zone():
    a = _w("0 22 * * *", 4, "Europe/Berlin", 0)
    b = _w("0 1 * * *", 2, "Europe/Berlin", 1)  # inside a's 22:00-02:00
    (problem,) = window_problems([a, b], ZONES)
    assert problem.startswith("spec.vertical.maintenance.windows[1]: overlaps windows[0]")
    assert "01:00:00 wall-clock" in problem
    # Back to back is not an overlap.
    c = _w("0 2 * * *", 2, "Europe/Berlin", 1)
    assert window_problems([a, c], ZONES) == []


def test_problems_windows_of_two_zones_compared_in_utc():
    berlin = _w("0 3 * * *", 1, "Europe/Berlin", 0)  # 02:00 UTC in winter, 01:00 in summer
    utc_window = _w("30 1 * * *", 0.25, "UTC", 1)  # 01:30-01:45 UTC
    (problem,) = window_problems([berlin, utc_window], ZONES)
    assert "windows[1]: overlaps windows[0]" in problem
    assert "2028-03-26T01:30:00Z" in problem  # the first summer night of the span
    # Without a database, windows of different zones are not compared.
    assert window_problems([berlin, utc_window], None) == []


def test_a_dst_change_is_no_overlap():
    # Hourly openings of 5 minutes: on the spring-forward night the skipped 02:xx openings
    # open at the jump with 03:00's; in the zone's own time nothing overlaps.
    hourly = [_w(f"{7 * i} * * * *", 5 / 60, "Europe/Berlin", i) for i in range(4)]
    assert window_problems(hourly, ZONES) == []


# ------------------------------------------------------------------ reading a spec


def test_read_from_a_manifest_dict():
    vertical = {
        "maintenance": {
            "windows": [{"schedule": "0 2 * * *", "duration": "90m", "timeZone": "UTC"}],
            "restrict": "all",
        },
        "oom_remediation": {"outside_windows": True},
        "budgets": {"changes_per_workload_per_day": 2},
    }
    policy = read_maintenance(vertical, "spec.vertical")
    assert policy is not None
    assert policy.windows[0].duration == 5400
    assert policy.restrict == "all" and policy.oom_outside_windows
    assert policy.holds(disruptive=False)
    budgets = read_budgets(vertical, "spec.vertical")
    assert budgets is not None
    assert budgets.changes_per_day == 2 and budgets.disruptions_per_hour is None
    assert read_maintenance({}, "spec.vertical") is None
    assert read_budgets({}, "spec.vertical") is None


@pytest.mark.parametrize(
    ("vertical", "field"),
    [
        ({"maintenance": {"windows": []}}, "spec.vertical.maintenance.windows"),
        (
            {"maintenance": {"windows": [{"schedule": "0 2 * * *", "duration": "soon"}]}},
            "spec.vertical.maintenance.windows[0].duration",
        ),
        (
            {"maintenance": {"windows": [{"schedule": "0 2 * * *"}]}},
            "spec.vertical.maintenance.windows[0].duration",
        ),
        (
            {"maintenance": {"windows": [{"schedule": "@daily", "duration": "1h"}], "restrict": 1}},
            "spec.vertical.maintenance.restrict",
        ),
        (
            {"budgets": {"disruptions_per_namespace_per_hour": 0}},
            "spec.vertical.budgets.disruptions_per_namespace_per_hour",
        ),
    ],
)
def test_read_refuses_what_the_model_refuses(vertical, field):
    with pytest.raises(ForesizeError, match=r"^" + field.replace("[", r"\[").replace("]", r"\]")):
        read_maintenance(vertical, "spec.vertical")
        read_budgets(vertical, "spec.vertical")


def test_a_schedule_that_cannot_be_read_is_a_problem_of_the_windows():
    """Read, not refused: that window never opens and the problem names the field (the
    planner holds the other windows closed while it lasts)."""
    vertical = {
        "maintenance": {
            "windows": [
                {"schedule": "0 2 * * *", "duration": "1h"},
                {"schedule": "0 2 * *", "duration": "1h"},
            ]
        }
    }
    policy = read_maintenance(vertical, "spec.vertical")
    assert policy is not None and [w.label for w in policy.windows] == ["windows[0]"]
    (problem,) = policy.problems
    assert problem.startswith("spec.vertical.maintenance.windows[1].schedule: '0 2 * *' needs 5")


def test_how_many_offsets_a_pass_asks_for():
    """A pass asks a handful of offsets per window, not one per minute of the window."""
    zones = TableZones()
    w = _w("0 1 * * *", 24 * 7 - 1, "Europe/Berlin")
    window_state([w], zones, utc("2026-07-01T12:00"))
    assert zones.asked < 40
