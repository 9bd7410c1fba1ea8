"""Conventions shared by every `foresize` command's options (one meaning per name).

- `-o/--output FORMAT`: the output format (`table`, `json`, ...), as kubectl; the trace
  file format is `--trace-format`.
- Durations take units everywhere (`30s`, `5m`, `1h30m`, `14d`), as in the API objects;
  a bare number still means seconds (the older spelling of some options).
- `--repeats N`: how many times a benchmark repeats.
- `--wide`: every column; tables are narrow by default and fit the terminal.
"""

from __future__ import annotations

from foresize.core.errors import ForesizeError
from foresize.front.report.terminal import terminal_width

__all__ = ["choice", "duration", "format_seconds", "split_list", "terminal_width"]


def duration(text: str | float, option: str, *, positive: bool = True) -> float:
    """A duration option (`90s`, `5m`, `1h30m`, `14d`) -> seconds."""
    from foresize.core.api.duration import parse_duration

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


# `--help` says what to write after an option, as kubectl, helm and click do: newer typer
# prints the Python type (`<str>`, `<list[str]>`, `<bool>` even for flags) unless the option
# has a metavar. An option's own `metavar=` wins; else its name says what it means (one
# meaning per name, as above); else its type; a flag shows nothing.
_DURATION = "DURATION"
METAVAR_BY_OPTION: dict[str, str] = {
    **dict.fromkeys(
        (
            "--duration",
            "--step",
            "--gap-every",
            "--timeout",
            "--lookback",
            "--min-lookback",
            "--interval",
            "--collect-interval",
            "--suggest-interval",
            "--lease-duration",
            "--lease-renew-deadline",
            "--lease-retry",
            "--cert-check-interval",
            "--version-check-interval",
            "--stall-timeout",
            "--ramp-duration",
            "--budget",
        ),
        _DURATION,
    ),
    **dict.fromkeys(("--start", "--end"), "TIME"),
    **dict.fromkeys(("--output", "--trace-format", "--log-format"), "FORMAT"),
    **dict.fromkeys(("--traces",), "DIR|FILE"),
    **dict.fromkeys(
        (
            "--events",
            "--kubeconfig",
            "--history-db",
            "--tls-cert",
            "--tls-key",
            "--ca-file",
            "--cert",
            "--key",
            "--ca",
            "--webhook-config",
            "--state",
        ),
        "FILE",
    ),
    **dict.fromkeys(("--report", "--cert-dir", "--keep-logs"), "DIR"),
    **dict.fromkeys(("--prometheus", "--server"), "URL"),
    **dict.fromkeys(("--selector", "--exclude-selector"), "SELECTOR"),
    **dict.fromkeys(("--port", "--metrics-port", "--webhook-port"), "PORT"),
    **dict.fromkeys(("--namespace",), "NAMESPACE"),
    **dict.fromkeys(("--cpu-min", "--cpu-max", "--memory-min", "--memory-max"), "QUANTITY"),
    **dict.fromkeys(
        (
            "--service",
            "--webhook-service",
            "--webhook-configuration",
            "--tls-secret",
            "--pause-configmap",
            "--cluster",
            "--context",
        ),
        "NAME",
    ),
    **dict.fromkeys(("--host",), "ADDRESS"),
    **dict.fromkeys(("--log-level",), "LEVEL"),
    **dict.fromkeys(("--cluster-label",), "LABEL"),
    **dict.fromkeys(("--policy",), "POLICY"),
    **dict.fromkeys(("--mode",), "MODE"),
    **dict.fromkeys(("--compare", "--modes", "--sweep", "--changes", "--tls-hosts"), "LIST"),
}
METAVAR_BY_TYPE: dict[type, str] = {int: "N", float: "NUMBER", str: "TEXT"}


def metavar_for(option_names: list[str], annotation: object) -> str:
    """The `--help` metavar of an option without one: `` for a flag (as click)."""
    import types
    import typing
    from pathlib import Path

    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is list:
        annotation = typing.get_args(annotation)[0]
    if annotation is bool:
        return ""
    for name in option_names:
        if name in METAVAR_BY_OPTION:
            return METAVAR_BY_OPTION[name]
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "PATH"
    return METAVAR_BY_TYPE.get(annotation, "VALUE")  # type: ignore[call-overload]
