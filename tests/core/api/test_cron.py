"""`api.cron.parse_cron`: the values a schedule matches, as Kubernetes CronJob reads them."""

from __future__ import annotations

from datetime import date

import pytest

from foresize.core.api.cron import parse_cron


def test_fields_ranges_steps_and_names():
    c = parse_cron("5,35 22-23 * jan-mar mon-fri")
    assert c.minutes == {5, 35}
    assert c.hours == {22, 23}
    assert c.months == {1, 2, 3}
    assert c.weekdays == {1, 2, 3, 4, 5}
    assert c.minutes_of_day() == (22 * 60 + 5, 22 * 60 + 35, 23 * 60 + 5, 23 * 60 + 35)


def test_a_value_with_a_step_runs_to_the_end_of_the_field():
    # robfig/cron v3 (CronJob): "5/20" is 5, 25, 45.
    assert parse_cron("5/20 * * * *").minutes == {5, 25, 45}
    assert parse_cron("*/20 * * * *").minutes == {0, 20, 40}
    assert parse_cron("10-50/20 * * * *").minutes == {10, 30, 50}


def test_sunday_is_0_and_7():
    assert parse_cron("0 0 * * 7").weekdays == {0}
    assert parse_cron("0 0 * * 5-7").weekdays == {5, 6, 0}


@pytest.mark.parametrize(
    ("macro", "same"),
    [
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@ANNUALLY", "0 0 1 1 *"),
    ],
)
def test_macros(macro, same):
    assert parse_cron(macro) == parse_cron(same)


def test_day_of_month_and_weekday_both_restricted_match_either():
    # "the 1st, or any Monday" (Vixie cron and robfig/cron alike).
    c = parse_cron("0 3 1 * mon")
    assert c.day_matches(date(2026, 6, 1))  # the 1st (a Monday too)
    assert c.day_matches(date(2026, 7, 1))  # the 1st, a Wednesday
    assert c.day_matches(date(2026, 7, 6))  # a Monday
    assert not c.day_matches(date(2026, 7, 7))


def test_one_day_field_a_star_only_the_other_counts():
    weekdays = parse_cron("0 3 * * mon")
    assert weekdays.day_matches(date(2026, 7, 6))
    assert not weekdays.day_matches(date(2026, 7, 1))
    # "*/1" is a star too; "*/2" is not (robfig/cron sets the star bit for step 1 only).
    assert parse_cron("0 3 */1 * mon").day_matches(date(2026, 7, 6))
    assert not parse_cron("0 3 */1 * mon").day_matches(date(2026, 7, 1))
    odd_days = parse_cron("0 3 */2 * mon")
    assert odd_days.day_matches(date(2026, 7, 1))  # the 1st: an odd day, a Wednesday
    assert odd_days.day_matches(date(2026, 7, 6))  # a Monday, an even day


def test_february_29():
    c = parse_cron("0 0 29 2 *")
    assert c.day_matches(date(2028, 2, 29))
    assert not c.day_matches(date(2027, 3, 1))


def test_a_bad_schedule_names_the_field():
    with pytest.raises(ValueError, match="hour '24-25' is outside 0-23"):
        parse_cron("0 24-25 * * *")
    with pytest.raises(ValueError, match="needs 5 fields"):
        parse_cron("0 3 * *")
