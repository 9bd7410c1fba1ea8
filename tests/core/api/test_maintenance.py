"""`api.maintenance`: what one window's fields and the budgets refuse, the error naming
the field (as `foresize validate` and the webhook print it)."""

from __future__ import annotations

import pytest

from foresize.core.api.types import parse_object
from foresize.core.errors import ForesizeError


def _target(vertical: dict) -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "api"},
            "vertical": {"mode": "autonomous", **vertical},
        },
    }


NIGHTLY = {"schedule": "0 1 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}


def test_a_window_and_budgets_are_read():
    obj = parse_object(
        _target(
            {
                "maintenance": {"windows": [NIGHTLY], "restrict": "all"},
                "budgets": {
                    "changes_per_workload_per_day": 3,
                    "disruptions_per_namespace_per_hour": 5,
                },
                "oom_remediation": {"outside_windows": True},
            }
        )
    )
    v = obj.spec.vertical
    assert v.maintenance.windows[0].duration == 4 * 3600
    assert v.maintenance.windows[0].timeZone == "Europe/Berlin"
    assert v.maintenance.restrict == "all"
    assert v.budgets.changes_per_workload_per_day == 3
    assert v.oom_remediation.outside_windows is True


def test_defaults_utc_and_disruptive_only():
    obj = parse_object(
        _target({"maintenance": {"windows": [{"schedule": "@daily", "duration": "1h"}]}})
    )
    assert obj.spec.vertical.maintenance.windows[0].timeZone == "UTC"
    assert obj.spec.vertical.maintenance.restrict == "disruptive"
    assert obj.spec.vertical.oom_remediation.outside_windows is False


@pytest.mark.parametrize(
    ("vertical", "field", "words"),
    [
        (
            {"budgets": {"changes_per_workload_per_day": 0}},
            "spec.vertical.budgets.changes_per_workload_per_day",
            "a budget of 0 would hold every change",
        ),
        (
            {"budgets": {"disruptions_per_namespace_per_hour": 0}},
            "spec.vertical.budgets.disruptions_per_namespace_per_hour",
            "at least 1",
        ),
        (
            {"budgets": {"disruptions_per_namespace_per_hour": "2"}},
            "spec.vertical.budgets.disruptions_per_namespace_per_hour",
            "integer",
        ),
        (
            {"maintenance": {"windows": [{**NIGHTLY, "schedule": "0 1 * *"}]}},
            "spec.vertical.maintenance.windows[0].schedule",
            "",
        ),
        (
            {"maintenance": {"windows": [{**NIGHTLY, "schedule": "*/5 * * * *"}]}},
            "spec.vertical.maintenance.windows[0]",
            "288 times a day",
        ),
        (
            {"maintenance": {"windows": [{**NIGHTLY, "duration": "0s"}]}},
            "spec.vertical.maintenance.windows[0].duration",
            "positive",
        ),
        (
            {"maintenance": {"windows": [{**NIGHTLY, "duration": "8d"}]}},
            "spec.vertical.maintenance.windows[0]",
            "192h is longer than 168h",
        ),
        (
            {"maintenance": {"windows": [{**NIGHTLY, "timeZone": "Berlin time"}]}},
            "spec.vertical.maintenance.windows[0].timeZone",
            "not an IANA time zone name",
        ),
        (
            {"maintenance": {"windows": [{**NIGHTLY, "timezone": "UTC"}]}},
            "spec.vertical.maintenance.windows[0].timezone",
            "unknown field",
        ),
        (
            {"maintenance": {"windows": []}},
            "spec.vertical.maintenance.windows",
            "",
        ),
        (
            {"maintenance": {"windows": [NIGHTLY], "restrict": "evictions"}},
            "spec.vertical.maintenance.restrict",
            "disruptive, all",
        ),
        (
            {"maintenance": {"windows": [NIGHTLY] * 9}},
            "spec.vertical.maintenance.windows",
            "",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_field(vertical, field, words):
    with pytest.raises(ForesizeError) as err:
        parse_object(_target(vertical))
    message = str(err.value)
    assert field in message
    assert words in message


def test_a_schedule_field_out_of_range_is_the_webhooks_to_refuse():
    """The model (and the CRD's pattern) checks a schedule's shape; its fields are read with
    the windows, so the webhook refuses `0 25 * * *` naming the field, and an object that
    got past it is still read (and held on the safe side, `vertical.limits`)."""
    from foresize.core.admission.validate import validate_target

    target = _target({"maintenance": {"windows": [{**NIGHTLY, "schedule": "0 25 * * *"}]}})
    parse_object(target)
    (problem,) = validate_target(target)
    assert problem.startswith("spec.vertical.maintenance.windows[0].schedule: '0 25 * * *'")
    assert "outside 0-23" in problem
