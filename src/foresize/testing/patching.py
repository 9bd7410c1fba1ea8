"""The three patch formats the API server accepts, applied as it applies them.

- JSON patch (RFC 6902): add, remove, replace, move, copy, test. Any failed operation
  (a `test` that does not match, a path that does not exist) fails the whole patch; the
  API server answers 422 (`apiserver/pkg/endpoints/handlers/patch.go`).
- JSON merge patch (RFC 7386): objects merge, `null` deletes, lists are replaced whole.
- Strategic merge patch (built-in kinds only): like a merge patch, except the lists the
  Kubernetes types mark `patchStrategy: merge` merge item by item on their merge key
  (containers by `name`, conditions by `type`, ...), with the `$patch: replace|delete`,
  `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` directives.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any


class PatchError(Exception):
    """The patch cannot be applied (the API server answers 422)."""


class PatchFormatError(Exception):
    """The patch body is not of the patch type's shape (the API server answers 400)."""


# --------------------------------------------------------------------- JSON patch
def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} does not start with '/'")
    return [_unescape(t) for t in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}")
    i = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if i > limit:
        raise PatchError(f"array index {i} out of bounds in {path}")
    return i


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise PatchError("the whole document cannot be the target of this operation")
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token, path)
    return node, tokens[-1]


def _child(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchError(f"path {path}: member {token!r} not found")
        return node[token]
    if isinstance(node, list):
        return node[_index(node, token, path, allow_end=False)]
    raise PatchError(f"path {path}: {token!r} is inside a scalar")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        node = _child(node, token, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, token = _parent(doc, path)
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, token, path, allow_end=True), value)
    else:
        raise PatchError(f"add {path}: the parent is not an object or array")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parent, token = _parent(doc, path)
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f"remove {path}: member {token!r} not found")
        return doc, parent.pop(token)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, token, path, allow_end=False))
    raise PatchError(f"remove {path}: the parent is not an object or array")


def apply_json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 on a copy of `doc`."""
    if not isinstance(ops, list):
        raise PatchFormatError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchFormatError(f"operation {n}: needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if not isinstance(path, str):
            raise PatchFormatError(f"operation {n}: path must be a string")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {n} ({kind} {path}): missing value")
        apply = _OPERATIONS.get(kind)
        if apply is None:
            raise PatchError(f"operation {n}: unknown op {kind!r}")
        doc = apply(doc, path, op, n)
    return doc


def _op_add(doc: Any, path: str, op: dict[str, Any], n: int) -> Any:
    return _add(doc, path, copy.deepcopy(op.get("value")))


def _op_remove(doc: Any, path: str, op: dict[str, Any], n: int) -> Any:
    doc, _ = _remove(doc, path)
    return doc


def _op_replace(doc: Any, path: str, op: dict[str, Any], n: int) -> Any:
    value = copy.deepcopy(op.get("value"))
    _get(doc, path)  # must exist
    if path == "":
        return value
    doc, _ = _remove(doc, path)
    return _add(doc, path, value)


def _op_move_or_copy(doc: Any, path: str, op: dict[str, Any], n: int) -> Any:
    kind = op["op"]
    source = op.get("from")
    if not isinstance(source, str):
        raise PatchFormatError(f"operation {n} ({kind}): needs 'from'")
    if kind == "move":
        if path.startswith(source + "/"):
            raise PatchError(f"move {source} -> {path}: into its own child")
        doc, moved = _remove(doc, source)
    else:
        moved = copy.deepcopy(_get(doc, source))
    return _add(doc, path, moved)


def _op_test(doc: Any, path: str, op: dict[str, Any], n: int) -> Any:
    if not _json_equal(_get(doc, path), op.get("value")):
        raise PatchError(f"testing value {path} failed: test failed")
    return doc


_OPERATIONS: dict[str, Callable[[Any, str, dict[str, Any], int], Any]] = {
    "add": _op_add,
    "remove": _op_remove,
    "replace": _op_replace,
    "move": _op_move_or_copy,
    "copy": _op_move_or_copy,
    "test": _op_test,
}
"""One function per RFC 6902 operation: (document, path, the operation, its number) ->
the document after it."""


def _json_equal(a: Any, b: Any) -> bool:
    # JSON equality: 1 and 1.0 are equal, True and 1 are not.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b and (type(a) is type(b) or {type(a), type(b)} <= {int, float})


# --------------------------------------------------------------------- merge patch
def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386 on a copy of `doc`."""
    if not isinstance(patch, dict):
        raise PatchFormatError("a merge patch must be a JSON object")
    return _merge(copy.deepcopy(doc), patch)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


# --------------------------------------------------------------- strategic merge patch
# List fields that the Kubernetes Go types mark `patchStrategy: merge`, with their merge
# key (by field name; the fields Foresize and Kopf touch). Lists not named here are
# replaced whole, as with a merge patch (`resizePolicy`, `tolerations`, `containerStatuses`).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "podIPs": "ip",
    "hostAliases": "ip",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
}
# Lists of scalars merged as sets.
PRIMITIVE_MERGE = {"finalizers"}
_PORT_KEYS = ("containerPort", "port")


def apply_strategic_merge_patch(doc: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchFormatError("a strategic merge patch must be a JSON object")
    return _smp(copy.deepcopy(doc), patch)


def _smp(target: Any, patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive is not None:
        raise PatchError(f"unknown $patch directive {directive!r}")
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue  # ordering hints: the merged order is kept as is
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise PatchFormatError(f"{key} must be a list")
            target[field] = [v for v in target.get(field) or [] if v not in value]
            continue
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp(target.get(key), value)
            if merged is None:
                target.pop(key, None)
            else:
                target[key] = merged
        elif isinstance(value, list) and isinstance(target.get(key), list):
            target[key] = _smp_list(key, target[key], value)
        else:
            target[key] = _strip_directives(copy.deepcopy(value))
    return target


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        for candidate in _PORT_KEYS:
            if all(isinstance(i, dict) and candidate in i for i in items):
                return candidate
        return None
    return MERGE_KEYS.get(field)


def _smp_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if field in PRIMITIVE_MERGE:
        out = list(current)
        out += [v for v in patch if v not in out]
        return out
    key = _merge_key(field, [*current, *patch])
    if key is None:
        if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
            return [_strip_directives(p) for p in patch if p.get("$patch") != "replace"]
        return _strip_directives(copy.deepcopy(patch))
    out = [copy.deepcopy(c) for c in current]
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{field}: items must be objects with {key!r}")
        if item.get("$patch") == "replace" and key not in item:
            out = []  # `{$patch: replace}` in a list: the patch's items replace the list
            continue
        if key not in item:
            raise PatchError(f"{field}: an item has no merge key {key!r}")
        at = next((i for i, c in enumerate(out) if c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                out.pop(at)
            continue
        if at is None:
            out.append(_strip_directives(copy.deepcopy(item)))
        else:
            out[at] = _smp(out[at], item)
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
