"""A managed runtime's heap setting kept consistent with the memory limit the pod webhook
writes (`spec.vertical.runtime.keep_heap_consistent`, issue 25; pure: no I/O).

What is rewritten, and what never is (docs/webhooks.md, "Heap settings"):
- A percentage (`-XX:MaxRAMPercentage`, HotSpot's 25% default, .NET's
  `GCHeapHardLimitPercent` and its 75% default): never. The runtime takes its share of the
  limit it sees when it starts, and the webhook writes the limit before the container
  starts, so the heap already follows it; rewriting the share would change what the owner
  chose (how much of the limit is heap), not keep it.
- An absolute heap (`-Xmx` / `-XX:MaxHeapSize`, `GOMEMLIMIT`, `DOTNET_GCHeapHardLimit`):
  set to the new limit minus the non-heap allowance the heap rule learned from usage
  (`status.runtime_notes[].non_heap`; before it has one, the rule's default allowance,
  `recommend.heap`), rounded down to a MiB and kept between half and twice the value the
  spec writes (HEAP_REWRITE_RANGE). Only the setting that wins (the JVM's last `-Xmx`, in
  the order HotSpot reads them: `runtime.heap_ceiling`), and only where the spec writes it
  literally: an `env` entry's `value` (the word inside it, the others kept), or a
  separate token of `command` / `args`. Never a `valueFrom` or `envFrom` value, a word
  built by `$(VAR)` expansion, or a flag inside a `sh -c` script.
- Anything odd leaves the setting as it is, with a warning naming the field; a heap
  setting that does not parse (`HeapCeiling.malformed`) leaves the whole pod as the
  template has it (the caller's rule, `admission.pod`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Literal

from foresize.core.api.quantity import MEMORY, QuantityError, format_quantity, to_canonical
from foresize.core.cluster.model import Container
from foresize.core.cluster.runtime import (
    COMMAND_LINE,
    HeapCeiling,
    command_line_heap_index,
    heap_ceiling,
)
from foresize.core.recommend.heap import heap_floor

MIB = 2**20
HEAP_REWRITE_ANNOTATION = "foresize.io/heap-rewrite"
HEAP_REWRITE_RANGE = (0.5, 2.0)
"""The rewritten heap stays within half and twice the value the spec writes. Why: usage
tells the non-heap memory (what is above the heap) but not what the heap needs, so the
rewrite follows the limit only so far from the size the owner chose: a limit cut never
leaves a tenth of the heap an application was written for, and a limit raised for
non-heap growth never hands the heap an unbounded share."""
_SHOWN = 60  # characters of a setting quoted in a warning (a 5,000-digit value is not)

Place = Literal["env", "command", "args"]


@dataclass(frozen=True, slots=True)
class HeapEdit:
    """One heap setting rewritten: an env var's value, or a token of command / args."""

    place: Place
    key: str | int  # the env var's name, or the token's index
    before: str
    after: str
    why: str

    @property
    def field(self) -> str:
        return f"env[{self.key}].value" if self.place == "env" else f"{self.place}[{self.key}]"


@dataclass(slots=True)
class HeapPlan:
    """What the webhook does to one container's heap setting."""

    edits: list[HeapEdit] = field(default_factory=list)
    warning: str | None = None
    malformed: bool = False  # a heap setting does not parse: admit the pod unchanged


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def plan_heap(container: Container, limit: int, non_heap: int | None) -> HeapPlan:
    """How `container`'s heap setting follows the memory limit `limit` (bytes) the webhook
    writes, with `non_heap` the learned allowance (None: the default one). Never raises."""
    try:
        ceiling = heap_ceiling(container.command, container.args, container.env)
        return _plan(container, ceiling, limit, non_heap)
    except Exception as exc:  # a bug of ours must never block or garble a pod
        return HeapPlan(warning=f"container {container.name}: heap left ({type(exc).__name__})")


def _plan(container: Container, ceiling: HeapCeiling, limit: int, non_heap: int | None) -> HeapPlan:
    name = container.name
    if ceiling.runtime is None or ceiling.follows_limit:
        return HeapPlan()
    if ceiling.unknown is not None:
        text = f"container {name}: {ceiling.runtime} heap setting {_shown(ceiling.unknown)}"
        if ceiling.malformed:
            return HeapPlan(warning=text, malformed=True)
        return HeapPlan(warning=f"{text}; heap not rewritten")
    heap = ceiling.fixed
    if heap is None or not ceiling.origin:
        return HeapPlan(warning=f"container {name}: heap fixed by {ceiling.source}; not rewritten")
    learned = non_heap is not None
    if non_heap is None:
        default = heap_floor(ceiling, None, math.nan)
        non_heap = default.non_heap if default is not None else 0
    low, high = (int(heap * share) for share in HEAP_REWRITE_RANGE)
    room = limit - non_heap
    new = min(max(room, low), high) // MIB * MIB
    how = "learned" if learned else "default allowance"
    why = (
        f"limit {format_quantity(MEMORY, limit)} - non-heap "
        f"{format_quantity(MEMORY, non_heap)} ({how})"
    )
    if new > room or new <= 0:
        return HeapPlan(
            warning=f"container {name}: {why} leaves less than half the heap "
            f"{ceiling.source} sets; heap not rewritten"
        )
    if new // MIB == heap // MIB:
        return HeapPlan()
    if ceiling.initial is not None and new < ceiling.initial:
        return HeapPlan(
            warning=f"container {name}: the heap {new // MIB}Mi would be below -Xms "
            f"{ceiling.initial // MIB}Mi (the JVM does not start); heap not rewritten"
        )
    edit = _edit(container, ceiling, new, why)
    if isinstance(edit, str):
        return HeapPlan(warning=f"container {name}: {edit}; heap not rewritten")
    return HeapPlan(edits=[edit])


_XMX_WORD = re.compile(r"(-Xmx|-XX:MaxHeapSize=)\S*")
_WORD = re.compile(r"\S+")


def _edit(container: Container, ceiling: HeapCeiling, new: int, why: str) -> HeapEdit | str:
    """The edit writing heap `new` where the winning setting is, or why it cannot."""
    origin = ceiling.origin
    if ceiling.runtime == "go":
        return _env_edit(container, origin, f"{new // MIB}MiB", why)
    if ceiling.runtime == "dotnet":
        before = container.env.get(origin) or ""
        hexa = f"0x{new:x}" if before[:2].lower() == "0x" else f"{new:x}"
        return _env_edit(container, origin, hexa, why)
    if origin == COMMAND_LINE:
        at = command_line_heap_index(container.command, container.args, container.env)
        if at is None:
            return "the heap flag is no separate literal token of command or args"
        place: Place = "command" if at < len(container.command) else "args"
        tokens = container.command if place == "command" else container.args
        index = at if place == "command" else at - len(container.command)
        before = tokens[index]
        flag = _XMX_WORD.fullmatch(before)
        if flag is None:
            return f"{place}[{index}] is not a heap flag"
        return HeapEdit(place, index, before, f"{flag.group(1)}{new // MIB}m", why)
    value = container.env.get(origin)
    if value is None:
        return f"{origin} is not set literally"
    words = [m for m in _WORD.finditer(value) if _XMX_WORD.fullmatch(m.group(0))]
    if not words:
        return f"env {origin} holds no heap flag"
    last = words[-1]
    flag = _XMX_WORD.fullmatch(last.group(0))
    assert flag is not None
    after = value[: last.start()] + f"{flag.group(1)}{new // MIB}m" + value[last.end() :]
    return HeapEdit("env", origin, value, after, why)


def _env_edit(container: Container, name: str, after: str, why: str) -> HeapEdit | str:
    before = container.env.get(name)
    if before is None:
        return f"env {name} is not set literally"
    return HeapEdit("env", name, before, after, why)


def apply_edits(container: Container, edits: list[HeapEdit]) -> Container:
    """A copy of `container` with `edits` applied (the simulated cluster's pods)."""
    out = container.copy()
    for e in edits:
        if e.place == "env":
            out.env[str(e.key)] = e.after
        else:
            tokens = list(getattr(out, e.place))
            tokens[int(e.key)] = e.after
            setattr(out, e.place, tuple(tokens))
    return out


def encode_edits(edits: dict[str, list[HeapEdit]]) -> str:
    """The pod annotation `foresize.io/heap-rewrite`: per container, each field rewritten,
    from what, to what and why."""
    return json.dumps(
        {
            name: [
                {"field": e.field, "from": _shown(e.before), "to": _shown(e.after), "why": e.why}
                for e in items
            ]
            for name, items in sorted(edits.items())
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def non_heap_allowances(runtime_notes: object) -> dict[str, int]:
    """container -> the non-heap allowance the recommender published in
    `status.runtime_notes` (bytes); entries that do not read are skipped."""
    out: dict[str, int] = {}
    for item in runtime_notes if isinstance(runtime_notes, list) else ():
        if not isinstance(item, dict):
            continue
        name, value = item.get("container"), item.get("non_heap")
        if isinstance(name, str) and isinstance(value, str | int):
            try:
                out[name] = int(to_canonical(MEMORY, value))
            except (QuantityError, ValueError, TypeError, OverflowError):
                continue
    return out
