"""`adapters.timezones`: the machine's zone database answers as the fixed table the core's
tests use (so those facts hold in production), and a name it cannot load is unknown."""

from __future__ import annotations

import pytest

from foresize.adapters.timezones import SYSTEM_ZONES
from foresize.core.cluster.windows import Window, opening_at, window_problems
from support.zones import changes, utc


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
def test_the_database_has_the_tables_dst_changes(zone):
    for instant, offset in changes(zone):
        assert SYSTEM_ZONES.offset(zone, instant) == offset
        assert SYSTEM_ZONES.offset(zone, instant - 1) != offset


def test_fixed_offsets():
    assert SYSTEM_ZONES.offset("UTC", utc("2026-07-01T00:00")) == 0
    assert SYSTEM_ZONES.offset("Asia/Kolkata", utc("2026-07-01T00:00")) == 5.5 * 3600


@pytest.mark.parametrize(
    "name", ["Mars/Olympus", "", "../../etc/passwd", "/etc/localtime", "Europe/../UTC"]
)
def test_a_name_it_cannot_load_is_unknown(name):
    assert SYSTEM_ZONES.offset(name, utc("2026-07-01T00:00")) is None


def test_the_core_on_the_real_database():
    w = Window.of("30 2 * * *", 3600, "Europe/Berlin", "windows[0]")
    assert opening_at(w, SYSTEM_ZONES, utc("2026-03-29T01:10")) == (
        utc("2026-03-29T01:00"),
        utc("2026-03-29T02:00"),
    )
    assert window_problems([Window.of("@daily", 3600, "Europe/Berlim", "windows[0]")], SYSTEM_ZONES)
