"""Reading the fields of a scenario file: every value checked (type, range, name and label
syntax, quantities, durations), every mistake a `ForesizeError` naming the file and the
path inside it; usage generators and containers (`foresize.shells.sim.scenario` reads the rest).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from foresize.adapters.files import field_line
from foresize.core.api.duration import parse_duration, shown
from foresize.core.api.labels import label_key_error, label_value_error
from foresize.core.api.quantity import QuantityError, parse_quantity, to_canonical
from foresize.core.errors import ForesizeError
from foresize.shells.sim.scenario_spec import ContainerSpec
from foresize.shells.sim.usage import GENERATOR_KINDS, GeneratorSpec, load_trace

# Numbers in a scenario (scales, factors, jitter, noise) and integers (seed, priorities) are
# small in any honest file; these only keep absurd values from reaching the arithmetic.
MAX_NUMBER = 1e6
MAX_INTEGER = 2**31 - 1


class FieldReader:
    """Error reporting: every problem names the file, the line when the file's field lines
    are known (`safe_yaml.iter_documents_with_lines`), and the path inside it."""

    def __init__(
        self, source: str, base_dir: Path | None, lines: dict[str, int] | None = None
    ) -> None:
        self.source = source
        self.base_dir = base_dir
        self.lines = lines

    def fail(self, path: str, problem: str) -> ForesizeError:
        where = self.source
        if self.lines:
            where += f":{field_line(self.lines, path)}"
        if path:
            where += f": {path}"
        return ForesizeError(f"{where}: {problem}")

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {type(value).__name__}")
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def known(self, value: dict[str, Any], allowed: set[str], path: str) -> None:
        for key in value:
            if key not in allowed:
                prefix = f"{path}." if path else ""
                # A key with control characters is shown quoted: the error stays one line.
                name = key if isinstance(key, str) and key.isprintable() else shown(key)
                raise self.fail(
                    f"{prefix}{name}", f"unknown field (allowed: {', '.join(sorted(allowed))})"
                )

    def string(self, value: Any, path: str, *, required: bool = True, default: str = "") -> str:
        if value is None:
            if required:
                raise self.fail(path, "required field is missing")
            return default
        if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
            raise self.fail(path, f"expected a non-empty string, got {shown(value)}")
        return str(value)

    def integer(
        self,
        value: Any,
        path: str,
        default: int,
        *,
        minimum: int = 0,
        maximum: int = MAX_INTEGER,
    ) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {shown(value)}")
        if value < minimum:
            raise self.fail(path, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(path, f"must be at most {maximum}, got {shown(value)}")
        return value

    def number(
        self, value: Any, path: str, default: float, *, minimum: float | None = 0.0
    ) -> float:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, f"expected a number, got {shown(value)}")
        if not math.isfinite(value):
            raise self.fail(path, f"expected a finite number, got {shown(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"must be at least {minimum}, got {value}")
        if abs(value) > MAX_NUMBER:
            raise self.fail(path, f"must be at most {MAX_NUMBER:g}, got {shown(value)}")
        return float(value)

    def duration(self, value: Any, path: str, default: float) -> float:
        if value is None:
            return default
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None

    def quantity(self, resource: str, value: Any, path: str) -> int:
        if isinstance(value, bool) or value is None:
            raise self.fail(path, f"expected a quantity, got {shown(value)}")
        try:
            amount = to_canonical(resource, value)
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from None
        if amount < 0:
            raise self.fail(path, f"must not be negative, got {shown(value)}")
        return amount

    def amount(self, resource: str, value: Any, path: str) -> float:
        """A usage level: cpu in cores (float), memory in bytes (float)."""
        if isinstance(value, bool) or value is None:
            raise self.fail(path, f"expected a quantity, got {shown(value)}")
        try:
            q = float(parse_quantity(value))
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from None
        if q < 0:
            raise self.fail(path, f"must not be negative, got {shown(value)}")
        return q

    def labels(self, value: Any, path: str) -> dict[str, str]:
        out = {}
        for k, v in self.mapping(value, path).items():
            text = self.string(v, f"{path}.{k}")
            problem = label_key_error(str(k)) or label_value_error(text)
            if problem:
                raise self.fail(f"{path}.{shown(str(k))}", problem)
            out[str(k)] = text
        return out


GENERATOR_FIELDS = {
    "generator",
    "base",
    "amplitude",
    "peak_hour",
    "weekend_factor",
    "noise",
    "spike_probability",
    "spike_factor",
    "growth_per_hour",
    "max",
    "file",
    "scale",
    "step",
    "offset",
    "select",
    "format",
    "series",
}


def read_generator(
    ctx: FieldReader, resource: str, raw: Any, path: str, default_base: float
) -> GeneratorSpec:
    if raw is None:
        return GeneratorSpec("constant", base=default_base)
    if isinstance(raw, str | int | float) and not isinstance(raw, bool):
        return GeneratorSpec("constant", base=ctx.amount(resource, raw, path))
    m = ctx.mapping(raw, path)
    ctx.known(m, GENERATOR_FIELDS, path)
    kind = ctx.string(m.get("generator"), f"{path}.generator", required=False, default="constant")
    kind = {"memory_leak": "leak", "growth": "leak", "daily": "diurnal"}.get(kind, kind)
    if kind not in GENERATOR_KINDS:
        raise ctx.fail(
            f"{path}.generator",
            f"unknown generator {shown(kind)} (one of {', '.join(GENERATOR_KINDS)})",
        )
    g = GeneratorSpec(kind)
    if kind == "trace":
        _read_trace(ctx, resource, m, path, g)
    else:
        if "base" not in m:
            raise ctx.fail(f"{path}.base", f"required for generator {kind}")
        g.base = ctx.amount(resource, m["base"], f"{path}.base")
    _read_shape(ctx, m, path, g)
    _read_growth(ctx, resource, m, path, g)
    return g


def _read_trace(
    ctx: FieldReader, resource: str, m: dict[str, Any], path: str, g: GeneratorSpec
) -> None:
    """generator: trace: the file (relative to the scenario), its format and series or
    selected labels, step, scale and offset."""
    if "file" not in m:
        raise ctx.fail(f"{path}.file", "required for generator trace")
    file = Path(ctx.string(m["file"], f"{path}.file"))
    if not file.is_absolute() and ctx.base_dir is not None:
        file = ctx.base_dir / file
    if not file.exists():
        raise ctx.fail(f"{path}.file", f"no such file: {file}")
    select = {str(k): str(v) for k, v in ctx.mapping(m.get("select"), f"{path}.select").items()}
    fmt = m.get("format")
    g.trace_step = ctx.duration(m.get("step"), f"{path}.step", 60.0)
    try:
        if fmt is None:
            g.trace = load_trace(file, resource, select=select)
        else:
            series = ctx.integer(m.get("series"), f"{path}.series", 0)
            g.trace, g.trace_step = history_trace(file, str(fmt), resource, series)
    except ForesizeError as exc:
        raise ctx.fail(f"{path}.file", str(exc)) from None
    g.trace_scale = ctx.number(m.get("scale"), f"{path}.scale", 1.0)
    if g.trace_step <= 0:
        raise ctx.fail(f"{path}.step", "must be positive")
    g.trace_offset = ctx.duration(m.get("offset"), f"{path}.offset", 0.0)


def _read_shape(ctx: FieldReader, m: dict[str, Any], path: str, g: GeneratorSpec) -> None:
    """The daily and weekly shape, noise and spikes, with each kind's defaults."""
    kind = g.kind
    g.amplitude = ctx.number(
        m.get("amplitude"), f"{path}.amplitude", 0.6 if kind in ("diurnal", "weekly") else 0.0
    )
    if g.amplitude > 1:
        raise ctx.fail(
            f"{path}.amplitude", f"must be at most 1 (a fraction of base), got {g.amplitude}"
        )
    g.peak_hour = ctx.number(m.get("peak_hour"), f"{path}.peak_hour", 14.0)
    if g.peak_hour >= 24:
        raise ctx.fail(f"{path}.peak_hour", f"must be below 24, got {g.peak_hour}")
    g.weekend_factor = ctx.number(
        m.get("weekend_factor"), f"{path}.weekend_factor", 0.5 if kind == "weekly" else 1.0
    )
    g.noise = ctx.number(m.get("noise"), f"{path}.noise", 0.0)
    g.spike_probability = ctx.number(
        m.get("spike_probability"), f"{path}.spike_probability", 0.02 if kind == "spiky" else 0.0
    )
    if g.spike_probability > 1:
        raise ctx.fail(f"{path}.spike_probability", "must be at most 1")
    g.spike_factor = ctx.number(
        m.get("spike_factor"), f"{path}.spike_factor", 3.0 if kind == "spiky" else 1.0
    )


def _read_growth(
    ctx: FieldReader, resource: str, m: dict[str, Any], path: str, g: GeneratorSpec
) -> None:
    """growth_per_hour (required for a leak) and the cap (max)."""
    kind = g.kind
    if "growth_per_hour" in m:
        g.growth_per_second = (
            ctx.amount(resource, m["growth_per_hour"], f"{path}.growth_per_hour") / 3600.0
        )
    elif kind == "leak":
        raise ctx.fail(f"{path}.growth_per_hour", "required for generator leak")
    g.cap = ctx.amount(resource, m["max"], f"{path}.max") if "max" in m else math.inf


def history_trace(path: Path, fmt: str, resource: str, series: int) -> tuple[Any, float]:
    """A public-format trace (bitbrains, crane, google2011, canonical) read by the history
    readers, resampled onto its median step with gaps interpolated."""
    import numpy as np

    from foresize.adapters.history.traces import load_traces

    found, _ = load_traces(path, fmt)
    if series >= len(found):
        raise ForesizeError(f"{path}: has {len(found)} series, no series {series}")
    s = found[series]
    values = s.cpu if resource == "cpu" else s.memory
    if values is None:
        raise ForesizeError(f"{path}: no {resource} readings in this format")
    ok = np.isfinite(values)
    if ok.sum() < 2:
        raise ForesizeError(f"{path}: fewer than two {resource} readings")
    ts = s.timestamps[ok]
    step = float(np.median(np.diff(ts)))
    grid = np.arange(ts[0], ts[-1] + step / 2, step)
    return np.interp(grid, ts, values[ok]), step


def read_resources(ctx: FieldReader, raw: Any, path: str) -> dict[str, int]:
    out = {}
    for name, value in ctx.mapping(raw, path).items():
        out[str(name)] = ctx.quantity(str(name), value, f"{path}.{name}")
    return out


CONTAINER_FIELDS = {
    "name",
    "requests",
    "limits",
    "resize_policy",
    "usage",
    "command",
    "args",
    "env",
    "startup",
}
# A sidecar is an init container with restartPolicy Always (KEP-753); it runs, uses
# resources and is resized like a regular container. Other init containers run to completion
# before the pod starts: they count in the scheduler's charge at their peak only.
INITCONTAINER_FIELDS = CONTAINER_FIELDS | {"restart_policy"}


def read_container(ctx: FieldReader, raw: Any, path: str, *, init: bool = False) -> ContainerSpec:
    m = ctx.mapping(raw, path)
    ctx.known(m, INITCONTAINER_FIELDS if init else CONTAINER_FIELDS, path)
    c = ContainerSpec(ctx.string(m.get("name"), f"{path}.name"))
    if init and m.get("restart_policy") is not None:
        if m["restart_policy"] != "Always":
            raise ctx.fail(
                f"{path}.restart_policy",
                f"only Always (a sidecar) is allowed, got {m['restart_policy']!r}",
            )
        c.restart_policy = "Always"
    c.requests = read_resources(ctx, m.get("requests"), f"{path}.requests")
    c.limits = read_resources(ctx, m.get("limits"), f"{path}.limits")
    for res in ("cpu", "memory"):
        req, lim = c.requests.get(res), c.limits.get(res)
        if req is not None and lim is not None and req > lim:
            raise ctx.fail(
                f"{path}.requests.{res}", f"must be less than or equal to the {res} limit"
            )
    for res, pol in ctx.mapping(m.get("resize_policy"), f"{path}.resize_policy").items():
        if res not in ("cpu", "memory"):
            raise ctx.fail(
                f"{path}.resize_policy.{res}", "only cpu and memory have a resize policy"
            )
        if pol not in ("NotRequired", "RestartContainer"):
            raise ctx.fail(
                f"{path}.resize_policy.{res}",
                f"must be NotRequired or RestartContainer, got {shown(pol)}",
            )
        c.resize_policy[str(res)] = str(pol)
    c.command = _words(ctx, m.get("command"), f"{path}.command")
    c.args = _words(ctx, m.get("args"), f"{path}.args")
    for name, value in ctx.mapping(m.get("env"), f"{path}.env").items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ctx.fail(f"{path}.env.{name}", f"must be a string, got {shown(value)}")
        c.env[str(name)] = str(value)
    startup = ctx.mapping(m.get("startup"), f"{path}.startup")
    ctx.known(startup, {"work", "cpu"}, f"{path}.startup")
    if startup:
        if "work" not in startup or "cpu" not in startup:
            raise ctx.fail(f"{path}.startup", "needs both work (core-seconds) and cpu (a rate)")
        c.startup_work = ctx.number(startup["work"], f"{path}.startup.work", 0.0)
        c.startup_cpu = ctx.quantity("cpu", startup["cpu"], f"{path}.startup.cpu") / 1000.0
        if c.startup_cpu <= 0:
            raise ctx.fail(f"{path}.startup.cpu", "must be above 0")
    usage = ctx.mapping(m.get("usage"), f"{path}.usage")
    ctx.known(usage, {"cpu", "memory", "heap"}, f"{path}.usage")
    # Without a generator a container uses half its request: a quiet, static workload.
    c.cpu = read_generator(
        ctx, "cpu", usage.get("cpu"), f"{path}.usage.cpu", c.requests.get("cpu", 0) / 2000.0
    )
    c.memory = read_generator(
        ctx,
        "memory",
        usage.get("memory"),
        f"{path}.usage.memory",
        c.requests.get("memory", 0) / 2.0,
    )
    if usage.get("heap") is not None:
        c.heap = read_generator(ctx, "memory", usage["heap"], f"{path}.usage.heap", 0.0)
    return c


def _words(ctx: FieldReader, raw: Any, path: str) -> tuple[str, ...]:
    """A container's `command` or `args`: a list of strings, as a pod spec has them."""
    words = []
    for i, word in enumerate(ctx.seq(raw, path)):
        if not isinstance(word, str):
            raise ctx.fail(f"{path}[{i}]", f"must be a string, got {shown(word)}")
        words.append(word)
    return tuple(words)


WORKLOAD_FIELDS = {
    "policy",
    "kind",
    "name",
    "namespace",
    "replicas",
    "labels",
    "annotations",
    "priority",
    "priority_class",
    "containers",
    "init_containers",
    "resources",
    "overhead",
    "readiness_delay",
    "termination_grace",
    "load_shared",
    "jitter",
    "completions",
    "parallelism",
    "run_time",
    "every",
    "first_run",
}


def budget_value(ctx: FieldReader, value: Any, path: str) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{1,3}%", value) and int(value[:-1]) <= 100:
        return value
    raise ctx.fail(
        path, f"expected a non-negative integer or a percentage like '25%', got {shown(value)}"
    )
