"""A restarted operator reads each target's last recommendation round back from its status
(`suggestions.resumed_rounds`): the cadence holds across restarts and handovers."""

from __future__ import annotations

from foresize.core.api.fields import format_timestamp
from foresize.core.recommend.suggestions import resumed_rounds

NOW = 1_800_000_000.0


def _target(name: str, created_at: object) -> dict:
    suggestion = {"uid": "u", "containers": []}
    if created_at is not None:
        suggestion["created_at"] = created_at
    return {
        "metadata": {"namespace": "shop", "name": name},
        "status": {"vertical_suggestion": suggestion},
    }


def test_the_last_round_is_read_from_the_suggestion_s_creation_time() -> None:
    targets = [
        _target("recent", format_timestamp(NOW - 60)),
        _target("known", format_timestamp(NOW - 60)),  # this process made a round already
        _target("never", None),
        _target("future", format_timestamp(NOW + 60)),  # a clock ahead: no round
        _target("garbled", "yesterday"),
    ]
    assert resumed_rounds(targets, {"shop/known": NOW - 5}, NOW) == {"shop/recent": NOW - 60}
    assert resumed_rounds([{"metadata": {"namespace": "a", "name": "b"}}], {}, NOW) == {}
