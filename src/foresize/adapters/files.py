"""Reading YAML (and JSON) files that may be hostile: the one loader for every file the
product reads (`foresize validate`, scenario files, the webhook's `--state` file, recommend
inputs).

On top of PyYAML's safe loader (no Python objects):

- aliases (`*name`) are refused: a few hundred bytes of nested aliases expand to gigabytes
  (the "billion laughs" bomb), and no Foresize file needs them;
- nesting deeper than `MAX_DEPTH` is refused (deep flow `[[[...` otherwise ends in a
  RecursionError);
- a key repeated in one mapping is refused (YAML says keys are unique; PyYAML keeps the last
  silently, so a typo'd duplicate would drop a setting);
- files larger than the caller's byte cap are refused before they are read whole;
- errors are one `ForesizeError` line naming the file and line, never echoing the content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from foresize.core.errors import ForesizeError

# Deeper than any Kubernetes object or scenario (a pod template is ~10 levels); far below
# the interpreter's recursion limit, which the composer and constructor recurse into.
MAX_DEPTH = 64
# The default cap for a hand-written file (a scenario, a few manifests): 8 MiB. The webhook's
# `--state` file passes its own, larger cap.
MAX_FILE_BYTES = 8 * 2**20


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader without aliases, with a depth cap and unique keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not accepted", self._mark()
            )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels", self._mark()
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _mark(self) -> Any:
        return self.peek_event().start_mark  # type: ignore[no-untyped-call]

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {_short(key)} appears twice in one mapping",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def read_text(path: Path | str, *, max_bytes: int = MAX_FILE_BYTES, what: str = "file") -> str:
    """The UTF-8 text of `path`, refusing files above `max_bytes` before reading them whole;
    `ForesizeError` naming the file otherwise."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ForesizeError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise ForesizeError(f"{path}: cannot read ({what} larger than {max_bytes} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ForesizeError(f"{path}: cannot read (not UTF-8 text: byte {exc.start})") from None


def _yaml_error(source: str, exc: yaml.YAMLError) -> ForesizeError:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return ForesizeError(f"{where}: not valid YAML ({problem})")


_BRACKETS = re.compile(r"[\[\]{}]")


def _too_deep_flow(text: str) -> int | None:
    """The line where `[`/`{` nesting first passes MAX_DEPTH, or None.

    PyYAML's scanner keeps every unclosed flow bracket of the last 1,024 characters as a
    possible key and rescans them per token, so `[[[[...` costs a second before the
    composer's depth check is reached. This linear pre-pass stops at the first bracket too
    deep. It ignores quoting, so a string holding more than MAX_DEPTH unclosed brackets
    is refused too; no real file has one."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        if match[0] in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, match.start()) + 1
        elif depth:
            depth -= 1
    return None


def _nodes(text: str, source: str) -> Iterator[tuple[Any, Any]]:
    """(composed node, constructed document) for every YAML document in `text`."""
    line = _too_deep_flow(text)
    if line is not None:
        raise ForesizeError(
            f"{source}:{line}: not valid YAML (nested deeper than {MAX_DEPTH} levels)"
        )
    loader = _BoundedLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover - check_node() said there is one
                break
            yield node, loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps this out of reach
        raise ForesizeError(f"{source}: nested too deeply") from None
    finally:
        loader.dispose()


def iter_documents(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """(line where the document starts, document) for every YAML document in `text`;
    `ForesizeError` naming `source` and the line at the first problem."""
    for node, document in _nodes(text, source):
        yield node.start_mark.line + 1, document


def iter_documents_with_lines(text: str, source: str) -> Iterator[tuple[int, Any, dict[str, int]]]:
    """As `iter_documents`, with each document's field lines: {field path: line}, the path
    written as errors name fields (`spec.vertical.containers[0].cpu`) and the line of its
    key (of the item, in a list); the document itself is `""`."""
    for node, document in _nodes(text, source):
        yield node.start_mark.line + 1, document, _field_lines(node)


def _field_lines(root: Any) -> dict[str, int]:
    lines: dict[str, int] = {"": root.start_mark.line + 1}
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    continue
                child = f"{path}.{key.value}" if path else str(key.value)
                lines.setdefault(child, key.start_mark.line + 1)
                stack.append((value, child))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                child = f"{path}[{i}]"
                lines.setdefault(child, item.start_mark.line + 1)
                stack.append((item, child))
    return lines


def field_line(lines: dict[str, int], path: str) -> int:
    """The line of the field `path` (as errors name it) in `lines`, or of its nearest
    enclosing field that is written: a missing field is reported where its parent is."""
    while path not in lines:
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return lines[path]


def load_documents(text: str, source: str) -> list[Any]:
    """Every non-empty document in `text` (see `iter_documents`)."""
    return [doc for _, doc in iter_documents(text, source) if doc is not None]


def load_one(text: str, source: str) -> Any:
    """The single document in `text` (None for an empty file); more than one is an error."""
    docs = list(iter_documents(text, source))
    if len(docs) > 1:
        raise ForesizeError(f"{source}:{docs[1][0]}: expected one YAML document, found more")
    return docs[0][1] if docs else None


def load_one_with_lines(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """As `load_one`, with the document's field lines (see `iter_documents_with_lines`)."""
    docs = list(iter_documents_with_lines(text, source))
    if len(docs) > 1:
        raise ForesizeError(f"{source}:{docs[1][0]}: expected one YAML document, found more")
    return (docs[0][1], docs[0][2]) if docs else (None, {})


def load_json(text: str, source: str) -> Any:
    """JSON text with the same depth cap as YAML; `ForesizeError` naming the line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ForesizeError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ForesizeError(f"{source}: nested too deeply") from None
    if _depth(data) > MAX_DEPTH:
        raise ForesizeError(f"{source}: nested deeper than {MAX_DEPTH} levels")
    return data


def _depth(data: Any) -> int:
    """Nesting depth, iteratively (the data may be deeper than the recursion limit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item)
    return deepest
