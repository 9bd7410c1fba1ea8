"""Durations: the one parser every Foresize input goes through (CRDs, the webhook, the CLI
options, scenario files, the `--state` file).

The accepted form, decided once:

- a number (YAML `90`, `1.5`) is seconds; it must be finite and not negative;
- a string is Go's `time.ParseDuration` syntax plus two longer units: one or more
  `<number><unit>` with no spaces, units `ns us µs ms s m h d w` (`d` = 24h, `w` = 7d);
  `1h30m`, `250ms`, `8d`, `1w`. The bare string `"0"` is zero, as in Go. Any other unitless
  string (`"90"`) is refused: the API server's schema pattern refuses it too, so the CLI must;
- never negative, never longer than `MAX_DURATION_LENGTH` characters, never more than
  `MAX_DURATION_SECONDS`. Fields that must be positive refuse zero where they are declared.

Parsing is one left-to-right scan with an unambiguous pattern, so its cost is linear in the
(capped) length. Errors never echo a long input back; they quote it only when it is short.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal

from foresize.core.errors import ForesizeError

_UNITS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
    "d": Decimal(86400),
    "w": Decimal(7 * 86400),
}
# `ms` is tried before `m` so that `250ms` is not `250m` followed by junk.
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w)")

DURATION_PATTERN = r"^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h|d|w))+)$"
"""The schema pattern for a duration string: exactly what `parse_duration` accepts."""

# The CRD schema's maxLength for a duration string; `1h30m15s` needs 8, and no honest value
# needs more than a few parts. Checked before any matching.
MAX_DURATION_LENGTH = 64
# Ten years: no Foresize duration (lookback, retention, forecast horizon, stall timeout)
# means more, and it keeps float seconds exact to the nanosecond digit we print.
MAX_DURATION_SECONDS = 10 * 365 * 86400.0

DURATION_HINT = "expected e.g. 60s, 15m, 1h30m, 8d or 1w"


class DurationError(ValueError):
    """A value that is not a Foresize duration."""


def shown(value: object, limit: int = 40) -> str:
    """`repr(value)` when short, else a description that does not echo the input."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = repr(value)
        if len(text) <= limit:
            return text
        if isinstance(value, str):
            return f"a {len(value)}-character string"
        return "a very long number"
    return f"a {type(value).__name__}"


def parse_duration(value: object) -> float:
    """A duration (see the module docstring) -> float seconds; `DurationError` otherwise."""
    if isinstance(value, bool):
        raise DurationError(f"not a duration: {shown(value)} ({DURATION_HINT})")
    if isinstance(value, numbers.Real):
        seconds = float(value)
        if not math.isfinite(seconds) or seconds < 0:
            raise DurationError(f"not a duration: {shown(value)} ({DURATION_HINT})")
        return _bounded(seconds, value)
    if not isinstance(value, str):
        raise DurationError(f"not a duration: {shown(value)} ({DURATION_HINT})")
    text = value.strip()
    if len(text) > MAX_DURATION_LENGTH:
        raise DurationError(
            f"not a duration: {len(text)} characters (at most {MAX_DURATION_LENGTH})"
        )
    if text == "0":
        return 0.0
    if not text:
        raise DurationError(f"not a duration: an empty string ({DURATION_HINT})")
    total = Decimal(0)
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise DurationError(f"not a duration: {shown(value)} ({DURATION_HINT})")
        total += Decimal(match[1]) * _UNITS[match[2]]
        pos = match.end()
    return _bounded(float(total), value)


def parse_duration_field(value: object, field: str) -> float | None:
    """`parse_duration` for an optional field of an object: None (unset) stays None; a bad
    value is a ForesizeError naming `field`."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ForesizeError(f"{field}: {exc}") from None


def _bounded(seconds: float, original: object) -> float:
    if seconds > MAX_DURATION_SECONDS:
        raise DurationError(f"duration {shown(original)} is longer than ten years")
    return seconds


def format_duration(seconds: float) -> str:
    """Float seconds -> the compact Go-compatible string (`15m`, `1h30m`, `192h`, `1.5s`,
    `250ms`). Hours are the largest unit so CEL's `duration()` can read every value written."""
    ns = round(Decimal(repr(float(seconds))) * 1_000_000_000)
    if ns < 0:
        raise ValueError("negative duration")
    if ns == 0:
        return "0s"
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("us", 1_000)):
            if ns % size == 0:
                return f"{ns // size}{unit}"
        return f"{ns}ns"
    hours, rest = divmod(ns, 3600 * 1_000_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000_000)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if rest:
        secs = Decimal(rest) / Decimal(1_000_000_000)
        text = format(secs.normalize(), "f")
        parts.append(f"{text}s")
    return "".join(parts)
