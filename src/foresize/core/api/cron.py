"""Cron schedules (`forecast_cron`): the one validator, used by the API models (so the CLI's
`foresize validate`, the CRD loader and the `--state` file) and by the validating webhook,
so they accept and refuse alike.

Accepted: the macros `@yearly @annually @monthly @weekly @daily @midnight @hourly`, or five
whitespace-separated fields (minute hour day-of-month month day-of-week), each a
comma-separated list of `*`, a value or a range `a-b`, optionally with a step `/n`. Months
and weekdays may be three-letter names; day-of-week 7 is Sunday, as in Vixie cron.
"""

from __future__ import annotations

from foresize.core.api.duration import shown

# The CRD schema's maxLength for forecast_cron; checked before anything is split, so a long
# hostile string costs one length check. Five full lists of 0-59 need well under 128 only
# with ranges, which every real schedule uses.
MAX_CRON_LENGTH = 128

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {m: i + 1 for i, m in enumerate(_MONTHS)},
    {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
)
_LABELS = ("minute", "hour", "day-of-month", "month", "day-of-week")
MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


def _number(text: str) -> int | None:
    # ASCII digits only: str.isdigit() also accepts "²" and other digits int() refuses.
    if text.isascii() and text.isdigit() and len(text) <= 4:
        return int(text)
    return None


def cron_error(expr: object) -> str | None:
    """None if `expr` is a valid schedule (see the module docstring), else what is wrong."""
    if not isinstance(expr, str):
        return f"must be a string, not {shown(expr)}"
    if len(expr) > MAX_CRON_LENGTH:
        return f"is {len(expr)} characters long (at most {MAX_CRON_LENGTH})"
    text = expr.strip()
    if text.lower() in MACROS:
        return None
    fields = text.split()
    if len(fields) != 5:
        return f"needs 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
    for i, part in enumerate(fields):
        for item in part.split(","):
            problem = _item_error(i, item)
            if problem:
                return problem
    return None


def _item_error(i: int, item: str) -> str | None:
    """What is wrong with one comma-separated item of field `i` (`*`, `5`, `1-5`, `*/15`,
    `mon-fri/2`), or None."""
    base, slash, step = item.partition("/")
    if slash:
        number = _number(step)
        if number is None or number == 0:
            return f"{_LABELS[i]} step {step!r} is not a positive number"
    if base == "*":
        return None
    bounds = base.split("-")
    if len(bounds) > 2 or not all(bounds):
        return f"{_LABELS[i]} {item!r} is not a value or range"
    values = []
    for bound in bounds:
        number = _NAMES[i].get(bound.lower())
        if number is None:
            number = _number(bound)
        if number is None:
            return f"{_LABELS[i]} {bound!r} is not a number"
        values.append(number)
    lo, hi = _RANGES[i]
    if any(v < lo or v > hi for v in values):
        return f"{_LABELS[i]} {item!r} is outside {lo}-{hi}"
    if len(values) == 2 and values[0] > values[1]:
        return f"{_LABELS[i]} range {item!r} is reversed"
    return None


def check_cron(expr: str) -> str:
    """`expr` unchanged if it is a valid schedule; ValueError naming the problem otherwise
    (the pydantic validator for forecast_cron)."""
    problem = cron_error(expr)
    if problem:
        raise ValueError(f"{shown(expr)} {problem}")
    return expr
