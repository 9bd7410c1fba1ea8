"""Cron schedules (`forecast_cron`, maintenance windows): the one validator, used by the
API models (so the CLI's `foresize validate`, the CRD loader and the `--state` file) and
by the validating webhook, so they accept and refuse alike; and the one parser
(`parse_cron`), which the maintenance windows' arithmetic reads (`cluster.windows`).

Accepted: the macros `@yearly @annually @monthly @weekly @daily @midnight @hourly`, or five
whitespace-separated fields (minute hour day-of-month month day-of-week), each a
comma-separated list of `*`, a value or a range `a-b`, optionally with a step `/n`. Months
and weekdays may be three-letter names; day-of-week 7 is Sunday, as in Vixie cron.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

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


# What each macro stands for (Vixie cron, and Kubernetes CronJob's robfig/cron v3).
_MACRO_FIELDS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class CronTimes:
    """A parsed schedule: the values each field matches. Days follow Kubernetes CronJob
    (robfig/cron v3, as Vixie cron): where both day-of-month and day-of-week are
    restricted a day matches either; where one is `*` (or `*/1`) only the other counts.
    Day-of-week 0 and 7 are both Sunday."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday ... 6 = Saturday
    any_day: bool  # day-of-month is `*`
    any_weekday: bool  # day-of-week is `*`

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = day.isoweekday() % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def minutes_of_day(self) -> tuple[int, ...]:
        """The minutes after local midnight at which the schedule fires on a matching day."""
        return tuple(sorted(h * 60 + m for h in self.hours for m in self.minutes))


def _values(i: int, part: str) -> tuple[frozenset[int], bool]:
    """The values of field `i` (already checked by `cron_error`) and whether it is `*`."""
    lo, hi = _RANGES[i]
    out: set[int] = set()
    for item in part.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            first, last = lo, hi
        else:
            bounds = [_NAMES[i].get(b.lower(), None) for b in base.split("-")]
            numbers = [
                n if n is not None else int(b) for n, b in zip(bounds, base.split("-"), strict=True)
            ]
            first = numbers[0]
            # `5/15` is 5, 20, 35, 50 (robfig/cron: a single value with a step runs to the end).
            last = numbers[-1] if len(numbers) == 2 else (hi if step_text else first)
        out.update(range(first, last + 1, step))
    star = part in ("*", "*/1")
    if i == 4 and 7 in out:  # Sunday is 0 and 7
        out.discard(7)
        out.add(0)
    return frozenset(out), star


def parse_cron(expr: str) -> CronTimes:
    """The values a valid schedule matches; ValueError naming the problem otherwise."""
    text = check_cron(expr).strip()
    text = _MACRO_FIELDS.get(text.lower(), text)
    parsed = [_values(i, part) for i, part in enumerate(text.split())]
    return CronTimes(
        minutes=parsed[0][0],
        hours=parsed[1][0],
        days=parsed[2][0],
        months=parsed[3][0],
        weekdays=parsed[4][0],
        any_day=parsed[2][1],
        any_weekday=parsed[4][1],
    )
