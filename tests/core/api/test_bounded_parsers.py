"""One bounded, linear parser per concept (quantity, duration, cron): hostile lengths are
refused fast with a short message, and every caller (API models = `foresize validate` and
the CRD loader, the validating webhook, scenario files, the vertical policy, the admission
read-model) accepts and refuses the same inputs."""

from __future__ import annotations

import contextlib
import time

import pytest

from foresize.core.admission.validate import validate_target
from foresize.core.api.cron import cron_error
from foresize.core.api.duration import (
    MAX_DURATION_LENGTH,
    DurationError,
    parse_duration,
    parse_duration_field,
)
from foresize.core.api.quantity import MAX_QUANTITY_LENGTH, QuantityError, parse_quantity
from foresize.core.api.types import parse_object
from foresize.core.errors import ForesizeError
from foresize.shells.sim import scenario


def _elapsed(fn, *args) -> float:
    start = time.perf_counter()
    with contextlib.suppress(ValueError, ForesizeError):
        fn(*args)
    return time.perf_counter() - start


# --- quantity -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [70, 2_000, 10_000, 1_000_000])
def test_a_long_digit_string_is_refused_in_linear_time(n):
    # Audit F-1: "1"*n + "x" backtracked quadratically (4,000 digits: 1.9 s, 8,000: 8.7 s).
    assert _elapsed(parse_quantity, "1" * n + "x") < 0.05


def test_the_length_cap_is_checked_before_matching_and_not_echoed():
    with pytest.raises(QuantityError) as info:
        parse_quantity("1" * 10_000 + "x")
    assert len(str(info.value)) < 120 and str(MAX_QUANTITY_LENGTH) in str(info.value)


@pytest.mark.parametrize(
    "text,value",
    [("100m", "0.1"), ("1.5", "1.5"), (".5", "0.5"), ("5.", "5"), ("1e3", "1000"), ("2Ki", "2048")],
)
def test_the_linear_pattern_still_reads_every_kubernetes_form(text, value):
    from decimal import Decimal

    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("bad", ["1..5", "1.5.", "..5", "1e", "1Kib", "", "1 Gi", "0x10"])
def test_malformed_quantities_are_refused(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


# --- duration -------------------------------------------------------------------------


def _scenario(value):
    return scenario.parse_duration(value)


def _field(value):
    # How the target read-model reads an optional duration field (the disruption's).
    return parse_duration_field(value, "f")


PARSERS = [parse_duration, _scenario, _field]


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(
    "text,seconds",
    [
        ("1w", 604800.0),
        ("0", 0.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("8d", 691200.0),
        (90, 90.0),
    ],
)
def test_every_caller_reads_durations_alike(parse, text, seconds):
    # The four old parsers disagreed on "1w" (two refused it) and "0" (one refused it).
    assert parse(text) == seconds


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(
    "bad", ["90", "-5m", "1h 30m", float("inf"), float("nan"), -1, "m", "", "3651d", True]
)
def test_every_caller_refuses_durations_alike(parse, bad):
    with pytest.raises((ValueError, ForesizeError)):
        parse(bad)


def test_a_long_duration_is_refused_fast_without_echo():
    text = "1h" * 30_000
    assert _elapsed(parse_duration, text) < 0.05
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(MAX_DURATION_LENGTH) in str(info.value) and len(str(info.value)) < 120


def test_the_crd_pattern_accepts_exactly_the_units_the_parser_reads():
    import re

    from foresize.core.api.duration import DURATION_PATTERN

    for ok in ("1w", "0", "2d12h", "250ms"):
        assert re.match(DURATION_PATTERN, ok)
        parse_duration(ok)
    assert not re.match(DURATION_PATTERN, "90")


# --- cron -----------------------------------------------------------------------------


def _target(cron: str) -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "model": {"forecast_cron": cron},
        },
    }


@pytest.mark.parametrize(
    "cron", ["99 * * * *", "* 24 * * *", "*/0 * * * *", "*/² * * * *", "5-1 * * * *", "@often"]
)
def test_the_cli_and_the_webhook_refuse_the_same_cron(cron):
    # Audit 4c: `foresize validate` accepted "99 * * * *" that /validate-targets denied.
    assert cron_error(cron)
    with pytest.raises(ForesizeError, match="forecast_cron"):
        parse_object(_target(cron), "t.yaml")
    assert any("forecast_cron" in e for e in validate_target(_target(cron)))


@pytest.mark.parametrize("cron", ["*/15 * * * *", "0 9-17 * * mon-fri", "@hourly", "0 0 1 jan 7"])
def test_the_cli_and_the_webhook_accept_the_same_cron(cron):
    assert cron_error(cron) is None
    parse_object(_target(cron), "t.yaml")
    assert validate_target(_target(cron)) == []


def test_a_long_cron_is_refused_fast():
    text = "1," * 20_000 + "1 * * * *"
    assert _elapsed(cron_error, text) < 0.05
    assert "at most 128" in cron_error(text)


# --- label keys and values --------------------------------------------------------------


def _selector_target(match_labels: dict, key: str = "app") -> dict:
    obj = _target("@hourly")
    spec = obj["spec"]
    del spec["scaleTargetRef"]
    spec["selector"] = {
        "matchLabels": match_labels,
        "matchExpressions": [{"key": key, "operator": "Exists"}],
    }
    return obj


@pytest.mark.parametrize(
    "labels,key",
    [
        ({"app": "Web_Bad!"}, "app"),
        ({"app": "x" * 64}, "app"),
        ({"-app": "web"}, "app"),
        ({"Example.com/app": "web"}, "app"),
        ({"app": "web"}, "bad key!"),
        ({"app": "web"}, "a/b/c"),
    ],
)
def test_the_cli_and_the_webhook_refuse_the_same_labels(labels, key):
    with pytest.raises(ForesizeError, match="label"):
        parse_object(_selector_target(labels, key), "t.yaml")
    assert any("label" in e for e in validate_target(_selector_target(labels, key)))


@pytest.mark.parametrize(
    "labels,key",
    [
        ({"app": "web", "tier": ""}, "app"),
        ({"example.com/app": "v1.2_3-x"}, "kubernetes.io/os"),
        ({"a": "b" * 63}, "A_b.c"),
    ],
)
def test_the_cli_and_the_webhook_accept_the_same_labels(labels, key):
    parse_object(_selector_target(labels, key), "t.yaml")
    assert validate_target(_selector_target(labels, key)) == []


def test_a_long_label_is_refused_fast():
    from foresize.core.api.labels import label_key_error, label_value_error

    assert _elapsed(label_value_error, "a" * 1_000_000 + "!") < 0.05
    assert "63" in label_value_error("a" * 100)
    assert _elapsed(label_key_error, "a." * 500_000 + "/x") < 0.05


def test_scenario_labels_use_the_same_rules(tmp_path):
    import yaml

    from foresize.shells.sim.scenario import load_scenario
    from support.sim import workload

    data = {"nodes": [{"name": "n", "cpu": "2", "memory": "4Gi"}], "workloads": [workload("a")]}
    data["workloads"][0]["labels"] = {"app": "Web_Bad!"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ForesizeError, match=r"workloads\[0\]\.labels.*label value") as info:
        load_scenario(str(path))
    assert len(str(info.value).splitlines()) == 1
