"""A container's managed-runtime heap ceiling, read from its spec (pure: no I/O).

A JVM fixes its maximum heap when it starts (`-Xmx`, or a percentage of the memory limit
it sees at start); Go's `GOMEMLIMIT` and .NET's `GCHeapHardLimit` are read once at start
too. Lowering the container's memory below that ceiling plus the runtime's non-heap memory
ends in an OOM kill once the heap fills; raising the limit in place gives the heap nothing.
`heap_ceiling` says what the spec fixes, or "unknown, with the reason" - never a guess
presented as fact (`HeapCeiling.assumed` lists what was assumed).

Upstream semantics followed (named in tests/core/cluster/test_runtime_heap.py):
- JVM (the `java` tool reference, JDK 21+): the VM reads `JAVA_TOOL_OPTIONS` first, the
  `java` launcher then prepends `JDK_JAVA_OPTIONS` to its command-line arguments, and the
  last occurrence of a flag wins; `_JAVA_OPTIONS` is read after the command line. `-Xmx`
  and `-XX:MaxHeapSize` take k/m/g/t suffixes; without them the heap is
  `-XX:MaxRAMPercentage` (default 25) of the container limit (or of `-XX:MaxRAM`).
  `JAVA_OPTS` is no JVM variable: it counts where the command expands it.
- Go (`runtime/debug.SetMemoryLimit`, package runtime docs): `GOMEMLIMIT` is bytes with an
  optional suffix B, KiB, MiB, GiB or TiB; `off` means no limit.
- .NET (runtime-config/garbage-collector): `DOTNET_GCHeapHardLimit` (or `COMPlus_`) is
  hexadecimal, `GCHeapHardLimitPercent` too and is ignored when the hard limit is set;
  unset in a container with a memory limit, the default is max(20 MB, 75% of the limit).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Literal

Runtime = Literal["jvm", "go", "dotnet"]

JVM_DEFAULT_MAX_RAM_PERCENTAGE = 25.0
"""HotSpot's default `-XX:MaxRAMPercentage`: a quarter of the memory it sees."""
DOTNET_DEFAULT_PERCENT = 75.0
"""The .NET GC's default heap hard limit in a container with a memory limit: 75% ..."""
DOTNET_MIN_HARD_LIMIT = 20 * 1000 * 1000
"""... and at least 20 MB (the docs' "20 MB")."""

_JVM_SUFFIX = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_GO_SUFFIX = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_MAX_BYTES = 2**63 - 1
_MAX_DIGITS = 30
"""Longer numbers are out of range whatever they say (an int64 has 19 digits; 30 leaves
room for leading zeros), checked before `int()`, which refuses 4,300 digits and more."""


@dataclass(frozen=True, slots=True)
class HeapCeiling:
    """What a container's spec fixes about its runtime's heap.

    runtime None: no managed runtime detected (no heap rule applies). Otherwise exactly
    one of `fixed` (bytes), `fraction` (of the memory limit seen at start) or `unknown`
    (the reason) is set; `assumed` says what was taken for granted."""

    runtime: Runtime | None = None
    fixed: int | None = None
    fraction: float | None = None
    minimum: int = 0  # a floor under a fraction (.NET's 20 MB)
    source: str = ""
    assumed: tuple[str, ...] = ()
    unknown: str | None = None
    # Where the setting that fixes the heap was read: an environment variable's name, or
    # COMMAND_LINE (`cluster.heap_rewrite` rewrites it there); "" for defaults.
    origin: str = ""
    # The JVM's -Xms / -XX:InitialHeapSize in force (a heap below it does not start).
    initial: int | None = None
    # `unknown` because a setting does not parse or contradicts another (not merely hidden).
    malformed: bool = False

    @property
    def follows_limit(self) -> bool:
        """The heap is a share of the memory limit the process saw at start
        (`-XX:MaxRAMPercentage`, HotSpot's 25% default, .NET's percent): a bigger limit
        gives a bigger heap only once the container restarts, never in place."""
        return self.unknown is None and self.runtime is not None and self.fraction is not None

    def bytes_at(self, limit: int | None) -> int | None:
        """The ceiling in bytes for a container started with memory limit `limit`
        (None: no limit), or None when it is not known."""
        if self.unknown is not None or self.runtime is None:
            return None
        if self.fixed is not None:
            return self.fixed
        if self.fraction is None or not limit:
            return None
        return max(int(self.fraction * limit), self.minimum)


NONE = HeapCeiling()


COMMAND_LINE = "the command line"


class _Bad(ValueError):
    """A setting that cannot be read: the ceiling is unknown, with this reason."""


class _Malformed(_Bad):
    """A setting that does not parse, or contradicts another."""


def _unknown(
    runtime: Runtime, reason: str | _Bad, assumed: list[str], malformed: bool = False
) -> HeapCeiling:
    bad = malformed or isinstance(reason, _Malformed)
    return HeapCeiling(runtime=runtime, unknown=str(reason), assumed=tuple(assumed), malformed=bad)


def heap_ceiling(
    command: list[str] | tuple[str, ...],
    args: list[str] | tuple[str, ...],
    env: dict[str, str | None],
    env_from: bool = False,
) -> HeapCeiling:
    """The heap ceiling a container's spec fixes. `env`: name -> value, None where the
    value comes from `valueFrom` (not visible in the spec); `env_from`: the container
    takes variables from `envFrom` too (which may set any of them)."""
    words = [_expand_k8s(w, env) for w in (*command, *args)]
    assumed: list[str] = []
    if env_from:
        assumed.append("envFrom may set runtime variables not visible in the spec")
    try:
        argv = _argv(words, env)
    except _Bad as exc:
        argv = None
        shell_error = str(exc)
    else:
        shell_error = ""
    java_at = _launcher(argv or [], "java")
    jvm_env = [n for n in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS") if n in env]
    entry_vars = ("JAVA_OPTS", "JDK_JAVA_OPTIONS")
    if java_at is not None or jvm_env or (not words and any(n in env for n in entry_vars)):
        if shell_error:
            return _unknown("jvm", shell_error, assumed)
        return _jvm(argv or [], java_at, env, assumed)
    if "GOMEMLIMIT" in env:
        return _go(env, assumed)
    dotnet = [n for n in _DOTNET_VARS if n in env]
    if dotnet or _launcher(argv or [], "dotnet") is not None:
        return _dotnet(env, assumed)
    return NONE


# --- command lines ------------------------------------------------------------------------

_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand_k8s(word: str, env: dict[str, str | None]) -> str:
    """Kubernetes' `$(VAR)` expansion in command and args (`$$` escapes; an unknown
    variable is left as written, as the kubelet does)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        value = env.get(m.group(1))
        return m.group(0) if value is None else value

    return _K8S_VAR.sub(sub, word)


_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_SH_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _argv(words: list[str], env: dict[str, str | None]) -> list[str]:
    """The words a `sh -c SCRIPT` runs (variables expanded from env, split as the shell
    splits unquoted expansions), else the words themselves."""
    if _shell_script(words):

        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            if name in env and env[name] is None:
                raise _Bad(f"{name} comes from valueFrom: not visible in the spec")
            return env.get(name) or ""

        try:
            return shlex.split(_SH_VAR.sub(sub, words[2]), comments=True)
        except ValueError as exc:
            raise _Bad(f"the shell script of the command does not parse: {exc}") from None
    return words


def _shell_script(words: list[str]) -> bool:
    return len(words) >= 3 and _base(words[0]) in _SHELLS and words[1] == "-c"


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _launcher(argv: list[str], name: str) -> int | None:
    for i, w in enumerate(argv):
        if _base(w) == name:
            return i
    return None


# --- JVM ----------------------------------------------------------------------------------

_XMX = re.compile(r"-Xmx(.*)|-XX:MaxHeapSize=(.*)")
_PCT = re.compile(r"-XX:MaxRAMPercentage=(.*)")
_MAXRAM = re.compile(r"-XX:MaxRAM=(.*)")
_XMS = re.compile(r"-Xms(.*)|-XX:InitialHeapSize=(.*)")


def _env_words(env: dict[str, str | None], name: str) -> list[tuple[str, str]]:
    value = env.get(name)
    if name in env and value is None:
        raise _Bad(f"{name} comes from valueFrom: not visible in the spec")
    return [(w, name) for w in (value or "").split()]


def _jvm_options(
    argv: list[str], java_at: int | None, env: dict[str, str | None], assumed: list[str]
) -> list[tuple[str, str]]:
    """The VM options in HotSpot's order (each with where it came from): JAVA_TOOL_OPTIONS,
    then (launcher `java` only) JDK_JAVA_OPTIONS, then the command line up to the main
    class or -jar, then _JAVA_OPTIONS. The last occurrence of a flag wins."""
    options = _env_words(env, "JAVA_TOOL_OPTIONS")
    if java_at is not None:
        options += _env_words(env, "JDK_JAVA_OPTIONS")
        options += [(w, "the command line") for w in _vm_options(argv[java_at + 1 :])]
    elif not argv:  # the image's own entrypoint: not visible in the spec
        if "JAVA_OPTS" in env:
            assumed.append("the image's entrypoint passes JAVA_OPTS to java")
            options += _env_words(env, "JAVA_OPTS")
        if "JDK_JAVA_OPTIONS" in env:
            assumed.append("the entrypoint is the java launcher (JDK_JAVA_OPTIONS read)")
            options += _env_words(env, "JDK_JAVA_OPTIONS")
    return options + _env_words(env, "_JAVA_OPTIONS")


def _last_flags(
    options: list[tuple[str, str]], assumed: list[str]
) -> tuple[dict[str, tuple[str, str]], bool]:
    """The last value of each heap flag, (value, "FLAG in WHERE"), as the JVM takes them
    (the last one wins; an overruled one is named in `assumed`), and UseContainerSupport."""
    last: dict[str, tuple[str, str]] = {}
    container_support = True
    for word, where in options:
        for key, pattern in (("xmx", _XMX), ("pct", _PCT), ("maxram", _MAXRAM), ("xms", _XMS)):
            if m := pattern.fullmatch(word):
                value = next(g for g in m.groups() if g is not None)
                before = last.get(key)
                if before is not None and before[0] != value:
                    assumed.append(f"{before[1]} overridden by {word} in {where} (the last wins)")
                last[key] = (value, f"{word} in {where}")
        if word in ("-XX:-UseContainerSupport", "-XX:+UseContainerSupport"):
            container_support = word[4] == "+"
    return last, container_support


def _jvm(
    argv: list[str], java_at: int | None, env: dict[str, str | None], assumed: list[str]
) -> HeapCeiling:
    try:
        options = _jvm_options(argv, java_at, env, assumed)
    except _Bad as exc:
        return _unknown("jvm", exc, assumed)
    last, container_support = _last_flags(options, assumed)
    try:
        if "xmx" in last:
            size = _jvm_size(*last["xmx"])
            if "xms" in last and _jvm_size(*last["xms"]) > size:
                # HotSpot refuses to start: "Initial heap size set to a larger value than
                # the maximum heap size".
                raise _Malformed(
                    f"{last['xms'][1]} is above {last['xmx'][1]}: the JVM does not start"
                )
            for key in ("pct", "maxram"):
                if key in last:
                    assumed.append(f"{last[key][1]} ignored: {last['xmx'][1]} sets the heap")
            return HeapCeiling(
                "jvm",
                fixed=size,
                source=last["xmx"][1],
                assumed=tuple(assumed),
                origin=last["xmx"][1].rsplit(" in ", 1)[1],
                initial=_jvm_size(*last["xms"]) if "xms" in last else None,
            )
        percent = JVM_DEFAULT_MAX_RAM_PERCENTAGE
        source = "the JVM default MaxRAMPercentage=25"
        if "pct" in last:
            percent = _percent(*last["pct"])
            source = last["pct"][1]
        if "maxram" in last:
            ram = _jvm_size(*last["maxram"])
            return HeapCeiling(
                "jvm",
                fixed=int(ram * percent / 100.0),
                source=f"{source} of {last['maxram'][1]}",
                assumed=tuple(assumed),
            )
    except _Bad as exc:
        return _unknown("jvm", exc, assumed)
    if not container_support:
        return _unknown(
            "jvm", "-XX:-UseContainerSupport: the heap follows the node's memory", assumed
        )
    if "pct" not in last:
        assumed.append("no heap flag: HotSpot's default of 25% of the limit")
    return HeapCeiling("jvm", fraction=percent / 100.0, source=source, assumed=tuple(assumed))


def _vm_options(words: list[str]) -> list[str]:
    """The launcher's VM options: the words before the main class, `-jar`, `-m` or a
    source file (what follows are the application's arguments)."""
    return [words[i] for i in _vm_option_positions(words)]


def _vm_option_positions(words: list[str], start: int = 0) -> list[int]:
    out: list[int] = []
    takes_value = {"-cp", "-classpath", "--class-path", "-p", "--module-path"}
    skip = False
    for i in range(start, len(words)):
        w = words[i]
        if skip:
            skip = False
            continue
        if w in ("-jar", "-m", "--module") or not w.startswith("-"):
            break
        if w in takes_value:
            skip = True
            continue
        out.append(i)
    return out


def command_line_heap_index(
    command: list[str] | tuple[str, ...],
    args: list[str] | tuple[str, ...],
    env: dict[str, str | None],
) -> int | None:
    """The position in command + args of the -Xmx / -XX:MaxHeapSize the `java` launcher
    takes last, where it is a separate literal token of the spec; None where there is
    none, or it comes from a `$(VAR)` expansion or a `sh -c` script (not a token)."""
    literal = [*command, *args]
    words = [_expand_k8s(w, env) for w in literal]
    if _shell_script(words):
        return None  # its words are not the spec's tokens
    java_at = _launcher(words, "java")
    if java_at is None:
        return None
    found = [i for i in _vm_option_positions(words, java_at + 1) if _XMX.fullmatch(words[i])]
    if not found or literal[found[-1]] != words[found[-1]]:
        return None
    return found[-1]


_JVM_SIZE = re.compile(r"([0-9]+)([kKmMgGtT]?)")


def _jvm_size(text: str, where: str) -> int:
    m = _JVM_SIZE.fullmatch(text)
    if m is None:
        raise _Malformed(f"{where}: not a JVM size (digits with k, m, g or t)")
    if len(m.group(1)) > _MAX_DIGITS:
        raise _Malformed(f"{where}: out of range")
    value = int(m.group(1)) * _JVM_SUFFIX[m.group(2).lower()]
    if value <= 0 or value > _MAX_BYTES:
        raise _Malformed(f"{where}: out of range")
    return value


def _percent(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _Malformed(f"{where}: not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        raise _Malformed(f"{where}: outside 0-100")
    if value == 0.0:
        raise _Malformed(f"{where}: a heap of 0% (the JVM then sizes by other rules)")
    return value


# --- Go -----------------------------------------------------------------------------------

_GO_LIMIT = re.compile(r"([0-9]+)(B|KiB|MiB|GiB|TiB)?")


def _go(env: dict[str, str | None], assumed: list[str]) -> HeapCeiling:
    raw = env["GOMEMLIMIT"]
    if raw is None:
        return _unknown("go", "GOMEMLIMIT comes from valueFrom: not visible", assumed)
    if raw == "off":
        return HeapCeiling("go", unknown="GOMEMLIMIT=off: no limit", assumed=tuple(assumed))
    m = _GO_LIMIT.fullmatch(raw)
    if m is None:
        return _unknown(
            "go", f"GOMEMLIMIT={raw[:40]!r}: not bytes with B, KiB, MiB, GiB or TiB", assumed, True
        )
    if len(m.group(1)) > _MAX_DIGITS:
        return _unknown("go", f"GOMEMLIMIT={raw[:40]!r}...: out of range", assumed, True)
    value = int(m.group(1)) * _GO_SUFFIX[m.group(2) or ""]
    if value > _MAX_BYTES:
        return _unknown("go", f"GOMEMLIMIT={raw!r}: out of range", assumed, True)
    assumed.append("GOMEMLIMIT is a soft limit on all Go runtime memory, not only the heap")
    return HeapCeiling(
        "go", fixed=value, source=f"GOMEMLIMIT={raw}", assumed=tuple(assumed), origin="GOMEMLIMIT"
    )


# --- .NET ---------------------------------------------------------------------------------

_DOTNET_VARS = (
    "DOTNET_GCHeapHardLimit",
    "COMPlus_GCHeapHardLimit",
    "DOTNET_GCHeapHardLimitPercent",
    "COMPlus_GCHeapHardLimitPercent",
)


def _dotnet_var(env: dict[str, str | None], name: str) -> tuple[str, str] | None:
    """DOTNET_ wins over COMPlus_ (the .NET 6+ prefix, the old one still read)."""
    for prefix in ("DOTNET_", "COMPlus_"):
        if prefix + name in env:
            value = env[prefix + name]
            if value is None:
                raise _Bad(f"{prefix}{name} comes from valueFrom: not visible")
            return prefix + name, value
    return None


def _hex(name: str, value: str) -> int:
    text = value[2:] if value[:2].lower() == "0x" else value
    if not re.fullmatch(r"[0-9a-fA-F]+", text):
        raise _Malformed(f"{name}={value[:40]!r}: not hexadecimal (environment values are hex)")
    if len(text) > _MAX_DIGITS:
        raise _Malformed(f"{name}={value[:40]!r}...: out of range")
    return int(text, 16)


def _dotnet(env: dict[str, str | None], assumed: list[str]) -> HeapCeiling:
    try:
        hard = _dotnet_var(env, "GCHeapHardLimit")
        pct = _dotnet_var(env, "GCHeapHardLimitPercent")
        if hard is not None:
            value = _hex(*hard)
            if value <= 0 or value > _MAX_BYTES:
                raise _Malformed(f"{hard[0]}={hard[1]!r}: out of range")
            if pct is not None:
                assumed.append(f"{pct[0]} ignored: {hard[0]} is set")
            return HeapCeiling(
                "dotnet",
                fixed=value,
                source=f"{hard[0]}={hard[1]}",
                assumed=tuple(assumed),
                origin=hard[0],
            )
        if pct is not None:
            percent = _hex(*pct)
            if not 0 < percent <= 100:
                raise _Malformed(f"{pct[0]}={pct[1]!r}: outside 1-100 (0x1-0x64)")
            return HeapCeiling(
                "dotnet",
                fraction=percent / 100.0,
                minimum=DOTNET_MIN_HARD_LIMIT,
                source=f"{pct[0]}={pct[1]}",
                assumed=tuple(assumed),
            )
    except _Bad as exc:
        return _unknown("dotnet", exc, assumed)
    assumed.append("no heap setting: the .NET default of 75% of the limit")
    return HeapCeiling(
        "dotnet",
        fraction=DOTNET_DEFAULT_PERCENT / 100.0,
        minimum=DOTNET_MIN_HARD_LIMIT,
        source="the .NET container default",
        assumed=tuple(assumed),
    )
