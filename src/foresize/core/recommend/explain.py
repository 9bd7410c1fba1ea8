"""Why a request is what it is: the steps the recommendation took, recorded as it computed.

Every rule of the pipeline that reads or moves a container's request (the history, the
forecast and its model, the mode's quantile, the buffer, the CPU day schedule, the
memory headroom, ratchet and recent peak, the OOM floor, the heap rule, the bounds, the
limit in force, rounding, the QoS class, the hysteresis) records one `Step` into the
container's `Explanation` at the moment it produces its value: the value of a step is
the number that rule handed on, in canonical units (CPU millicores, memory bytes), so the
chain of a resource ends at the request written. Nothing here computes a request: the
recommender (`recommend.target`, `recommend.suggestions`) calls `Explanation.step` with
the value it has just computed. A rule that moved the number without a step would leave
the chain ending elsewhere than the request, which the tests check on every container.

The chain lands in the target's `status.explanation`, one Event line per changed
resource (`event_line`) and `foresize explain` (`explain_document`); what the vertical
worker held back since (a maintenance window, a budget: `status.held_back`) is added as a
last step by `held_steps`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, MIB

RESOURCES = (CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class Step:
    """One rule's contribution: its name, the resource, the value it handed on (canonical
    units; None where the resource is not set at all) and why, in words."""

    step: str
    resource: str
    value: float | None
    why: str

    def as_dict(self) -> dict[str, object]:
        return {
            "step": self.step,
            "resource": self.resource,
            "value": _plain(self.value),
            "why": self.why,
        }


def _plain(value: float | None) -> float | int | None:
    """A value for JSON: whole numbers as ints, others to a thousandth (millicores of a
    fraction, bytes never fractional after rounding)."""
    if value is None or not math.isfinite(value):
        return None
    if float(value).is_integer():
        return int(value)
    return round(float(value), 3)


@dataclass(slots=True)
class Explanation:
    """The steps of one container, per resource in the order the rules ran."""

    steps: list[Step] = field(default_factory=list)

    def step(self, name: str, resource: str, value: float | None, why: str) -> float | None:
        """Record the value `name` handed on and return it (so a rule writes
        `v = steps.step("lower_bound", res, max(v, lower), "...")`)."""
        self.steps.append(Step(name, resource, None if value is None else float(value), why))
        return value

    def moved(self, name: str, resource: str, before: float, after: float, why: str) -> float:
        """`after`, recorded as a step only where it differs from `before` (a clamp that
        did not bind is not a reason)."""
        if after != before:
            self.steps.append(Step(name, resource, float(after), why))
        return after

    def of(self, resource: str) -> list[Step]:
        return [s for s in self.steps if s.resource == resource]

    def last(self, resource: str) -> float | None:
        mine = self.of(resource)
        return mine[-1].value if mine else None


def amount(resource: str, value: float | None) -> str:
    """A value in words: 287.4m, 1.5 cores, 512Mi, 1.2Gi."""
    if value is None or not math.isfinite(value):
        return "none"
    if resource == CPU:
        if value >= 1000 and float(value / 1000).is_integer():
            return f"{value / 1000:g} cores" if value != 1000 else "1 core"
        return f"{value:.1f}m" if not float(value).is_integer() else f"{int(value)}m"
    mib = value / MIB
    if 0 < abs(mib) < 1:
        return f"{value / 1024:.1f}Ki"
    if mib >= 10240:
        return f"{mib / 1024:.2f}Gi"
    return f"{mib:.1f}Mi" if not float(mib).is_integer() else f"{int(mib)}Mi"


def duration_words(seconds: float) -> str:
    """12.5d, 6h, 45m."""
    if seconds >= 86400:
        return f"{seconds / 86400:.1f}d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 60:.0f}m"


def history_words(values: np.ndarray, step: float) -> tuple[float, str]:
    """(the highest usage of the history, its span and gaps in words) for a series on a
    grid of `step` seconds (NaN = no sample)."""
    y = np.asarray(values, dtype=np.float64)
    known = np.isfinite(y)
    if not known.any():
        return math.nan, "no usage sample"
    first = int(np.argmax(known))
    seen = known[first:]
    span = len(seen) * step
    missing = int((~seen).sum())
    # A gap is a run of missing steps: count where a known step is followed by a missing one.
    gaps = int((seen[:-1] & ~seen[1:]).sum())
    peak = float(np.max(y[known]))
    gap_text = (
        "no gaps"
        if not missing
        else f"{gaps} gap{'s' if gaps != 1 else ''} ({duration_words(missing * step)} missing)"
    )
    return peak, f"{duration_words(span)} of history, {gap_text}"


EVENT_MESSAGE_MAX = 1024
"""An Event's message is cut at 1,024 characters (client-go's recorder truncates there)."""


def event_line(container: str, resource: str, before: float | None, steps: Iterable[Step]) -> str:
    """One container's resource in a line: the request's move and each step's value."""
    mine = [s for s in steps if s.resource == resource]
    after = mine[-1].value if mine else None
    parts = [f"{s.step} {amount(resource, s.value)}" for s in mine if s.value is not None]
    return (
        f"{container} {resource} {amount(resource, before)} -> {amount(resource, after)}"
        f" ({', '.join(parts)})"
    )


def event_message(lines: Sequence[str]) -> str:
    """The Event of a changed suggestion: one line, every changed request's chain."""
    text = "; ".join(lines)
    if len(text) > EVENT_MESSAGE_MAX:
        text = text[: EVENT_MESSAGE_MAX - 1] + "…"
    return text


def status_entries(explanations: Mapping[str, Explanation]) -> list[dict[str, object]]:
    """`status.explanation.containers`: per container its steps, as JSON-ready dicts."""
    return [
        {"name": name, "steps": [s.as_dict() for s in ex.steps]}
        for name, ex in explanations.items()
    ]


def explain_document(
    requests: Mapping[str, Mapping[str, int]],
    steps: Mapping[str, Sequence[Mapping[str, object]]],
    container: str | None = None,
) -> dict[str, object]:
    """`foresize explain -o json`: {"containers": {NAME: {"request": {"cpu": MILLICORES,
    "memory": BYTES}, "steps": [...]}}} for the containers of a written suggestion
    (`requests`: container -> resource -> canonical int) and their recorded steps."""
    out: dict[str, object] = {}
    for name, req in requests.items():
        if container is not None and name != container:
            continue
        out[name] = {
            "request": {r: int(req[r]) for r in RESOURCES if r in req},
            "steps": [dict(s) for s in steps.get(name, ())],
        }
    return {"containers": out}


def explain_status(
    status: Mapping[str, object] | None, target: str, container: str | None = None
) -> dict[str, object]:
    """`explain_document` from a target's status (what the operator or the simulator
    wrote): the requests of `status.vertical_suggestion`, the steps of
    `status.explanation`. An error names what is missing."""
    from foresize.core.cluster.target_fields import suggestion_from
    from foresize.core.errors import ForesizeError

    status = status or {}
    suggestion = suggestion_from(status.get("vertical_suggestion"))
    if suggestion is None:
        reason = (
            " (status.hasEnoughDataToScale is false)"
            if status.get("hasEnoughDataToScale") is False
            else ""
        )
        raise ForesizeError(f"{target}: status.vertical_suggestion: no suggestion yet{reason}")
    explanation = status.get("explanation")
    entries = explanation.get("containers") if isinstance(explanation, Mapping) else None
    if not isinstance(entries, list):
        raise ForesizeError(
            f"{target}: status.explanation: not written (an operator older than"
            " `foresize explain` wrote this suggestion)"
        )
    steps: dict[str, list[Mapping[str, object]]] = {}
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get("steps"), list):
            steps[str(entry.get("name"))] = [s for s in entry["steps"] if isinstance(s, Mapping)]
    requests = {n: dict(c.requests) for n, c in suggestion.containers.items()}
    for name, held in held_steps(status.get("held_back"), requests).items():
        steps.setdefault(name, []).extend(held)
    if container is not None and container not in requests:
        known = ", ".join(sorted(requests)) or "none"
        raise ForesizeError(f"{target}: container {container!r} not in the suggestion ({known})")
    return explain_document(requests, steps, container)


def held_steps(
    held_back: object, requests: Mapping[str, Mapping[str, int]]
) -> dict[str, list[dict[str, object]]]:
    """The steps of what the vertical worker held back (`status.held_back`, written by
    `vertical.limits`: a maintenance window, a change or disruption budget), one per
    container and resource the held change would have moved. The value is the request
    written (the chain still ends there); the why says it is not on the pods yet and what
    holds it."""
    out: dict[str, list[dict[str, object]]] = {}
    for entry in held_back if isinstance(held_back, list) else []:
        if not isinstance(entry, Mapping):
            continue
        pods = [str(p) for p in entry.get("pods") or []]
        shown = ", ".join(pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
        why = f"not on pod(s) {shown} yet: {entry.get('message', '')}"
        for c in entry.get("containers") or []:
            if not isinstance(c, Mapping) or str(c.get("name")) not in requests:
                continue
            name = str(c.get("name"))
            for resource in RESOURCES:
                if resource in (c.get("resources") or []) and resource in requests[name]:
                    out.setdefault(name, []).append(
                        {
                            "step": str(entry.get("rule", "held")),
                            "resource": resource,
                            "value": int(requests[name][resource]),
                            "why": why,
                        }
                    )
    return out
