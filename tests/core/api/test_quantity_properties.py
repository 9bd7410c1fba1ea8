"""Property tests (hypothesis) for Kubernetes quantity parsing and formatting."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from foresize.core.api.quantity import (
    MAX_QUANTITY,
    QuantityError,
    cpu_millis,
    format_bytes,
    format_cpu,
    format_quantity,
    parse_quantity,
    to_bytes,
    to_canonical,
)

# Per-test settings (a loaded profile would change every other module's hypothesis tests).
_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
LIMIT = 2**63 - 1

millicores = st.integers(min_value=0, max_value=LIMIT)
byte_counts = st.integers(min_value=0, max_value=LIMIT)


@_SETTINGS
@given(millicores)
def test_cpu_round_trip(m):
    text = format_cpu(m)
    assert cpu_millis(text) == m
    # Canonical and shortest: whole cores have no suffix, everything else is in m.
    assert text == (str(m // 1000) if m % 1000 == 0 else f"{m}m")


@_SETTINGS
@given(byte_counts)
def test_memory_round_trip(n):
    text = format_bytes(n)
    assert to_bytes(text) == n
    # The largest binary suffix that divides the amount is used.
    for suffix, unit in BINARY.items():
        if text.endswith(suffix):
            count = int(text[: -len(suffix)])
            assert count * unit == n
            bigger = [u for u in BINARY.values() if u > unit]
            assert all(n % u != 0 for u in bigger)
            break
    else:
        assert n == 0 or n % 1024 != 0
        assert text == str(n)


@_SETTINGS
@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(sorted(BINARY)))
def test_binary_suffixes_are_exact(k, suffix):
    assume(k * BINARY[suffix] <= LIMIT)
    assert to_bytes(f"{k}{suffix}") == k * BINARY[suffix]


@_SETTINGS
@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(sorted(DECIMAL_EXP)))
def test_decimal_suffixes_are_exact_and_round_up(k, suffix):
    exact = Decimal(k).scaleb(DECIMAL_EXP[suffix])
    assume(exact <= LIMIT)
    assert parse_quantity(f"{k}{suffix}") == exact
    assert to_bytes(f"{k}{suffix}") == math.ceil(exact)
    assert cpu_millis(f"{k}{suffix}") == math.ceil(exact * 1000)


@_SETTINGS
@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=-12, max_value=6))
def test_exponent_form_equals_suffix_form(k, e):
    assert parse_quantity(f"{k}e{e}") == Decimal(k).scaleb(e)
    assert parse_quantity(f"{k}E{e}") == Decimal(k).scaleb(e)


@_SETTINGS
@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False))
def test_decimal_cores_equal_millicores(d):
    # 0.1 == 100m == 1e-1 for CPU, with no float drift.
    text = format(d, "f")
    m = int(d * 1000)
    assert cpu_millis(text) == m
    assert cpu_millis(f"{m}m") == m
    assert cpu_millis(f"{m}e-3") == m


@_SETTINGS
@given(st.decimals(min_value=0, max_value=1000, places=9, allow_nan=False, allow_infinity=False))
def test_cpu_rounds_up_to_a_millicore(d):
    assert cpu_millis(format(d, "f")) == math.ceil(d * 1000)


@_SETTINGS
@given(st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_float_input_is_read_as_written(f):
    assert cpu_millis(f) == math.ceil(Decimal(repr(f)) * 1000)
    assert to_bytes(f) == math.ceil(Decimal(repr(f)))


@_SETTINGS
@given(millicores)
def test_format_parse_format_is_idempotent(m):
    assert format_cpu(cpu_millis(format_cpu(m))) == format_cpu(m)
    assert format_bytes(to_bytes(format_bytes(m))) == format_bytes(m)
    assert to_canonical("cpu", format_quantity("cpu", m)) == m
    assert to_canonical("memory", format_quantity("memory", m)) == m


@_SETTINGS
@given(st.integers(min_value=1, max_value=40))
def test_long_inputs_are_not_rounded_down(extra_zeros):
    # A digit beyond Decimal's default 28-digit precision must still round up.
    text = "0.001" + "0" * extra_zeros + "1"
    assert cpu_millis(text) == 2


def test_example_equivalences():
    assert cpu_millis("0.1") == cpu_millis("100m") == cpu_millis("1e-1") == 100
    assert to_bytes("1G") == 10**9 and to_bytes("1Gi") == 2**30
    assert to_bytes("1e3") == 1000 and to_bytes("1E") == 10**18
    assert format_bytes(512 * 2**20) == "512Mi" and format_cpu(2000) == "2"


@pytest.mark.parametrize(
    "bad",
    ["", "abc", "1.5.5", "1Kb", "--1", "1 Mi", "1e", "1e999999999", "9Ei", "9223372036854775808"],
)
def test_bad_or_out_of_range_strings_raise_quantity_error(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), Decimal("NaN"), True, 2**63])
def test_non_finite_or_huge_numbers_raise_quantity_error(bad):
    with pytest.raises(QuantityError):
        cpu_millis(bad)


def test_limit_is_inclusive():
    assert parse_quantity(str(LIMIT)) == MAX_QUANTITY


def test_format_accepts_int_like_amounts_and_stays_canonical():
    np = pytest.importorskip("numpy")
    assert format_cpu(250.0) == "250m"
    assert format_bytes(1024.0) == "1Ki"
    assert format_cpu(np.int64(1500)) == "1500m"
    assert format_bytes(np.int64(3 * 2**30)) == "3Gi"
    assert format_cpu(0.4) == "1m"  # a fraction of a millicore rounds up
