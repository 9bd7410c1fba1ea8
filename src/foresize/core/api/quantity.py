"""Kubernetes resource quantities, parsed and formatted exactly.

Inside Foresize every amount is an integer in a canonical unit: CPU in millicores and
everything else (memory, storage) in bytes / base units. Parsing goes through Decimal so
that `0.1`, `100m` and `1e-1` are the same number and no float drift creeps in. Amounts that
are not whole in the canonical unit are rounded up, as the API server does when it
canonicalises a quantity (a request is never silently made smaller).
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation, localcontext

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
# Unambiguous, so matching is linear: the integer part, then optionally `.` and a fraction.
# (The old `\d+\.?\d*` let `\d+` and `\d*` split a run of digits every possible way, and a
# long digit string that did not match backtracked quadratically: 10 KB blocked for seconds.)
_QUANTITY_RE = re.compile(
    r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


# Kubernetes refuses quantities above 2^63-1 in magnitude; so do we. Bounding the digits and
# the exponent keeps every product exact (a 200-digit context, not Decimal's 28-digit
# default) and keeps `1e999999999` from becoming a Decimal overflow.
MAX_QUANTITY = Decimal(2**63 - 1)
_MAX_DIGITS = 64
# The longest text worth parsing: 64 digits, a sign, a point and a 4-character exponent fit
# in 72; anything longer is refused before any matching, so the cost of a hostile string is
# its length check. Kubernetes' own parser refuses far shorter strings (it caps at 2^63-1).
MAX_QUANTITY_LENGTH = 80
_MAX_EXPONENT = 64
_PRECISION = 200


def _checked(value: Decimal, original: object) -> Decimal:
    if abs(value) > MAX_QUANTITY:
        shown = repr(original) if len(repr(original)) <= MAX_QUANTITY_LENGTH else "value"
        raise QuantityError(f"quantity too large: {shown} (at most 2^63-1)")
    return value


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse a Kubernetes quantity (`100m`, `1.5`, `512Mi`, `1G`, `1e3`) into an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, numbers.Integral):  # int, numpy integers
        return _checked(Decimal(int(value)), value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise QuantityError(f"not a quantity: {value!r}")
        return _checked(value, value)
    if isinstance(value, numbers.Real):  # float, numpy floats
        number = float(value)
        if not math.isfinite(number):
            raise QuantityError(f"not a quantity: {number!r}")
        return _checked(Decimal(repr(number)), value)
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: a {type(value).__name__}")
    text = value.strip()
    if len(text) > MAX_QUANTITY_LENGTH:
        raise QuantityError(
            f"not a quantity: {len(text)} characters (at most {MAX_QUANTITY_LENGTH})"
        )
    match = _QUANTITY_RE.fullmatch(text)
    if not match:
        raise QuantityError(f"not a quantity: {value!r} (expected e.g. 100m, 1.5, 512Mi, 1G)")
    if len(match["num"]) > _MAX_DIGITS:
        raise QuantityError(f"not a quantity: {value!r} (more than {_MAX_DIGITS} digits)")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex already guards this
        raise QuantityError(f"not a quantity: {value!r}") from exc
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        if match["exp"]:
            exponent = int(match["exp"][1:])
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"quantity out of range: {value!r}")
            return _checked(number.scaleb(exponent), value)
        suffix = match["suffix"] or ""
        if suffix in _BINARY:
            return _checked(number * _BINARY[suffix], value)
        return _checked(number * _DECIMAL[suffix], value)


def _ceil_int(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(value: str | int | float | Decimal) -> int:
    """CPU quantity -> integer millicores (rounded up to 1m, as the API server does)."""
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        return _ceil_int(parse_quantity(value) * 1000)


def to_bytes(value: str | int | float | Decimal) -> int:
    """Memory (or any non-CPU) quantity -> integer base units, rounded up."""
    return _ceil_int(parse_quantity(value))


def to_canonical(resource: str, value: str | int | float | Decimal) -> int:
    """Quantity -> the canonical integer for `resource` (millicores for cpu, else base units)."""
    return cpu_millis(value) if resource == CPU else to_bytes(value)


def _whole(amount: int | float | Decimal) -> int:
    """An int-like amount (int, numpy int, integral float) as int; fractions round up."""
    try:
        return operator.index(amount)  # type: ignore[arg-type]
    except TypeError:
        return _ceil_int(parse_quantity(amount))


def format_cpu(millis: int) -> str:
    """Millicores -> the shortest exact quantity string (`250m`, `2`)."""
    millis = _whole(millis)
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"


def format_bytes(amount: int) -> str:
    """Bytes -> the shortest exact quantity string, binary suffixes preferred (`512Mi`)."""
    amount = _whole(amount)
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


def format_resource_map(values: dict[str, int]) -> dict[str, str]:
    """Canonical integers per resource -> a Kubernetes `requests`/`limits` map."""
    return {name: format_quantity(name, v) for name, v in values.items()}


MIB = 2**20
GIB = 2**30

# Requests are rounded up to the resource's granularity (1m of CPU, 1Mi of memory), never
# down: rounding down could cut below the quantile chosen. History stores keep float32
# samples, so 0.3 cores reads back as 300.00001m; what lies below a thousandth of a
# millicore, or a millionth of a MiB, is that noise and must not cost a whole unit (301m).
REQUEST_UNIT = {CPU: 1.0, MEMORY: float(MIB)}  # canonical units: millicores, bytes
UNIT_NOISE_DIGITS = {CPU: 3, MEMORY: 6}


def round_up_to_unit(resource: str, value: float) -> int:
    """`value` (millicores or bytes) rounded up to whole units of `resource`, float noise
    ignored; the scalar form of `recommend.core.round_up`."""
    unit = REQUEST_UNIT[resource]
    return int(math.ceil(round(value / unit, UNIT_NOISE_DIGITS[resource]))) * int(unit)


# The most usage any container can show. The biggest machines sold have ~900 vCPUs and
# ~32 TiB; these limits sit above them and far below where arithmetic on the value misbehaves.
# A reading above them is corrupt (a bit flip in the history store, a unit mistake, `1e308`
# in a trace): it is dropped and counted, never turned into a request.
MAX_PLAUSIBLE_CORES = 4096.0
MAX_PLAUSIBLE_MEMORY_BYTES = float(2**46)  # 64 TiB


def usage_problem(resource: str, value: float) -> str | None:
    """Why a usage reading (cpu in cores, memory in bytes) cannot be real; None if it can.
    NaN is a missing reading, not a problem."""
    if math.isnan(value):
        return None
    if math.isinf(value):
        return f"{resource} usage is not finite"
    if value < 0:
        return f"{resource} usage is negative"
    limit = MAX_PLAUSIBLE_CORES if resource == CPU else MAX_PLAUSIBLE_MEMORY_BYTES
    if value > limit:
        unit = "cores" if resource == CPU else "bytes"
        return f"{resource} usage {value:.3g} {unit} is above any machine ({limit:.3g})"
    return None
