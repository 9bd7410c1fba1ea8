"""Conventions shared by every `foresize` command's options (one meaning per name).

- `-o/--output FORMAT`: the output format (`table`, `json`, ...), as kubectl; the trace
  file format is `--trace-format`.
- Durations take units everywhere (`30s`, `5m`, `1h30m`, `14d`), as in the API objects;
  a bare number still means seconds (the older spelling of some options).
- `--repeats N`: how many times a benchmark repeats.
- `--wide`: every column; tables are narrow by default and fit the terminal.
"""

from __future__ import annotations

from foresize.errors import ForesizeError
from foresize.report.terminal import terminal_width

__all__ = ["choice", "duration", "format_seconds", "split_list", "terminal_width"]


def duration(text: str | float, option: str, *, positive: bool = True) -> float:
    """A duration option (`90s`, `5m`, `1h30m`, `14d`) -> seconds."""
    from foresize.api.duration import parse_duration

    value: str | float = text
    if isinstance(text, str):
        try:
            value = float(text.strip())  # a bare number is seconds (the older spelling)
        except ValueError:
            value = text.strip()
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise ForesizeError(
            f"{option}: {text!r} is not a duration (e.g. 30s, 5m, 1h30m, 14d)"
        ) from None
    if positive and not seconds > 0:
        raise ForesizeError(f"{option}: must be more than 0, got {text!r}")
    return seconds


def format_seconds(seconds: float) -> str:
    """Seconds -> the shortest of `90s`, `5m`, `2h`, `14d` that is exact."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def choice(value: str, option: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ForesizeError(f"{option}: must be one of {', '.join(choices)}, not {value!r}")
    return value


def split_list(values: list[str] | None) -> list[str]:
    """Repeatable options that also take comma lists: `-n a -n b` = `-n a,b`."""
    out: list[str] = []
    for v in values or []:
        out += [part.strip() for part in v.split(",") if part.strip()]
    return out
