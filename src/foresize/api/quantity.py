"""Kubernetes resource quantities, parsed and formatted exactly.

Inside Foresize every amount is an integer in a canonical unit: CPU in millicores and
everything else (memory, storage) in bytes / base units. Parsing goes through Decimal so
that `0.1`, `100m` and `1e-1` are the same number and no float drift creeps in. Amounts that
are not whole in the canonical unit are rounded up, as the API server does when it
canonicalises a quantity (a request is never silently made smaller).
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

CPU = "cpu"
MEMORY = "memory"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY_RE = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse a Kubernetes quantity (`100m`, `1.5`, `512Mi`, `1G`, `1e3`) into an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    text = str(value).strip()
    match = _QUANTITY_RE.match(text)
    if not match:
        raise QuantityError(f"not a quantity: {value!r} (expected e.g. 100m, 1.5, 512Mi, 1G)")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex already guards this
        raise QuantityError(f"not a quantity: {value!r}") from exc
    if match["exp"]:
        return number * (Decimal(10) ** int(match["exp"][1:]))
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _ceil_int(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(value: str | int | float | Decimal) -> int:
    """CPU quantity -> integer millicores (rounded up to 1m, as the API server does)."""
    return _ceil_int(parse_quantity(value) * 1000)


def to_bytes(value: str | int | float | Decimal) -> int:
    """Memory (or any non-CPU) quantity -> integer base units, rounded up."""
    return _ceil_int(parse_quantity(value))


def to_canonical(resource: str, value: str | int | float | Decimal) -> int:
    """Quantity -> the canonical integer for `resource` (millicores for cpu, else base units)."""
    return cpu_millis(value) if resource == CPU else to_bytes(value)


def format_cpu(millis: int) -> str:
    """Millicores -> the shortest exact quantity string (`250m`, `2`)."""
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"


def format_bytes(amount: int) -> str:
    """Bytes -> the shortest exact quantity string, binary suffixes preferred (`512Mi`)."""
    if amount == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def format_quantity(resource: str, amount: int) -> str:
    """Canonical integer -> quantity string for `resource`."""
    return format_cpu(amount) if resource == CPU else format_bytes(amount)


def parse_resource_map(values: dict[str, str | int | float] | None) -> dict[str, int]:
    """A Kubernetes `requests`/`limits` map -> canonical integers per resource."""
    if not values:
        return {}
    return {name: to_canonical(name, v) for name, v in values.items()}


def format_resource_map(values: dict[str, int]) -> dict[str, str]:
    """Canonical integers per resource -> a Kubernetes `requests`/`limits` map."""
    return {name: format_quantity(name, v) for name, v in values.items()}


MIB = 2**20
GIB = 2**30
