"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out (pure).

Each `review_*` function takes the decoded request body, the current `AdmissionIndex` and
`now`, and returns the response body. They never raise: a malformed review, an
unexpected kind or an internal error answers `allowed: true` with a warning, because
Foresize must never block a pod (the webhook configurations also use
`failurePolicy: Ignore`). Only the AIScaleTarget validator ever denies, and only for
problems it found in the object.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeAlias

from foresize.core.admission.heap import HEAP_REWRITE_ANNOTATION, HeapEdit
from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import MANAGED_ANNOTATION, MANAGED_VALUE, PodDecision, decide_pod
from foresize.core.admission.scale import RESOURCE_KINDS, decide_scale
from foresize.core.admission.validate import VALIDATORS
from foresize.core.api.access import JSONValue
from foresize.core.api.quantity import QuantityError, format_quantity
from foresize.core.cluster.kubejson import pod_from
from foresize.core.cluster.model import Pod, ResourceRequirements
from foresize.core.cluster.windows import TimeZones

API_VERSION = "admission.k8s.io/v1"

_P = ParamSpec("_P")
# A review handler: the decoded body (any JSON: `_request` checks it), then its own
# arguments (the index, `now`, ...), and the response body.
_Handler: TypeAlias = Callable[Concatenate[object, _P], dict[str, Any]]
_COMPUTE = ("cpu", "memory")


class ReviewError(ValueError):
    """The request is not an AdmissionReview we can read."""


def _response(
    uid: str,
    *,
    allowed: bool = True,
    patch: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    resp: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    if warnings:
        resp["warnings"] = warnings
    if message is not None:
        resp["status"] = {"code": 422, "reason": "Invalid", "message": message}
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": resp}


def _request(body: object) -> tuple[str, dict[str, Any]]:
    if not isinstance(body, dict):
        raise ReviewError("body is not a JSON object")
    request = body.get("request")
    if not isinstance(request, dict):
        raise ReviewError("no 'request' in the AdmissionReview")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing")
    if body.get("apiVersion") not in (None, API_VERSION):
        raise ReviewError(f"apiVersion {body.get('apiVersion')!r} is not {API_VERSION}")
    return uid, request


def _unexpected_kind(uid: str, webhook: str, kind: JSONValue) -> dict[str, Any]:
    """A kind this webhook does not handle (a misconfigured rule): allowed, with a warning."""
    return _response(
        uid, warnings=[f"foresize: {webhook} webhook got kind {kind!r}; request allowed unchanged"]
    )


def _uid_of(body: object) -> str:
    if isinstance(body, dict) and isinstance(body.get("request"), dict):
        uid = body["request"].get("uid")
        if isinstance(uid, str):
            return uid
    return ""


# --- reading the body --------------------------------------------------------------------

# Python refuses int() beyond 4,300 digits (a ValueError for the whole body); no
# AdmissionReview field holds more than an int64, so a longer integer is read as the float
# it approximates (inf), which every decision refuses as malformed, with the uid kept.
_LONGEST_INT = 4000


def _lenient_int(literal: str) -> int | float:
    return int(literal) if len(literal) <= _LONGEST_INT else float(literal)


def read_review(raw: bytes) -> JSONValue:
    """The JSON of an AdmissionReview body; any exception if it cannot be read at all
    (the caller answers with `request_uid(raw)`). Invalid UTF-8 is replaced by U+FFFD, as
    Go's encoding/json (the API server's decoder) does, rather than refusing the body."""
    try:
        return json.loads(raw, parse_int=_lenient_int)
    except UnicodeDecodeError:
        return json.loads(raw.decode("utf-8", errors="replace"), parse_int=_lenient_int)


# Strings (with escapes) and the structural characters; everything else (numbers, true,
# false, null, blanks) is skipped. Linear: no token can backtrack into another.
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*+"|[{}\[\]:,]')


def request_uid(raw: bytes) -> str:
    """Best effort: the string at `request.uid` of a body JSON cannot decode (nested
    deeper than the decoder's recursion limit, broken further on), found by one linear
    scan of its tokens, so the answer still carries the uid the API server matches it
    by. "" when there is none."""
    stack: list[list[Any]] = []  # per open container: [opening char, key being read]
    last: bytes | None = None
    for match in _JSON_TOKEN.finditer(raw):
        token = match[0]
        if token in (b"{", b"["):
            stack.append([token, None])
        elif token in (b"}", b"]"):
            if stack:
                stack.pop()
        elif token == b":":
            if stack and stack[-1][0] == b"{":
                stack[-1][1] = last
        elif token == b",":
            if stack and stack[-1][0] == b"{":
                stack[-1][1] = None
        elif len(stack) == 2 and stack[0] == [b"{", b'"request"'] and stack[1] == [b"{", b'"uid"']:
            with contextlib.suppress(ValueError):
                uid = json.loads(token.decode("utf-8", errors="replace"))
                return uid if isinstance(uid, str) else ""
            return ""
        last = token if token.startswith(b'"') else None
    return ""


def allow_with_warning(body: object, what: str) -> dict[str, Any]:
    return _response(_uid_of(body), warnings=[f"foresize: {what}; request allowed unchanged"])


def guarded(fn: _Handler[_P]) -> _Handler[_P]:
    """Turn any exception of a review handler into allowed + warning."""

    def wrapper(body: object, /, *args: _P.args, **kwargs: _P.kwargs) -> dict[str, Any]:
        try:
            return fn(body, *args, **kwargs)
        except ReviewError as exc:
            return allow_with_warning(body, f"malformed AdmissionReview ({exc})")
        except Exception as exc:  # a bug of ours must never block a pod
            return allow_with_warning(body, f"internal error ({type(exc).__name__}: {exc})")

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# -- pods ------------------------------------------------------------------------------


def pod_from_json(obj: object, namespace: str = "") -> Pod:
    """The pod of an admission request, read by the one pod converter
    (`foresize.core.cluster.kubejson.pod_from`), strictly: a request that is not a pod, or a
    bad quantity, is a ReviewError (the review is answered allowed, with a warning)."""
    if not isinstance(obj, dict):
        raise ReviewError("request.object is not a pod")
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        raise ReviewError("request.object.spec.containers is missing")
    try:
        return pod_from(obj, namespace or "default", strict=True)
    except (QuantityError, AttributeError, TypeError) as exc:
        raise ReviewError(str(exc)) from None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _merged(original: dict[str, Any] | None, values: dict[str, int]) -> dict[str, Any]:
    """Original quantity map with cpu/memory replaced; other resources kept verbatim."""
    out = dict(original or {})
    for name, qty in values.items():
        if name in _COMPUTE:
            out[name] = format_quantity(name, qty)
    return out


def _heap_ops(obj: dict[str, Any], heap: dict[str, list[HeapEdit]]) -> list[dict[str, Any]] | None:
    """The JSON patch ops of the heap settings rewritten (`admission.heap`): an env entry's
    `value` (the last entry of that name, as the kubelet takes it) or a command / args
    token, each where `obj` holds exactly what the edit replaces; None if one is not."""
    ops: list[dict[str, Any]] = []
    for i, c in enumerate(obj["spec"]["containers"]):
        name = c.get("name") if isinstance(c, dict) else None
        for e in heap.get(name, []) if isinstance(name, str) else ():
            items = c.get(e.place)
            if not isinstance(items, list):
                return None
            if e.place == "env":
                at = [
                    j
                    for j, item in enumerate(items)
                    if isinstance(item, dict) and item.get("name") == e.key
                ]
                entry = items[at[-1]] if at else None
                if not isinstance(entry, dict) or "valueFrom" in entry:
                    return None
                if entry.get("value") != e.before:
                    return None
                path = f"/spec/containers/{i}/env/{at[-1]}/value"
            else:
                index = int(e.key)
                if index >= len(items) or items[index] != e.before:
                    return None
                path = f"/spec/containers/{i}/{e.place}/{index}"
            ops.append({"op": "replace", "path": path, "value": e.after})
    return ops


def pod_patch(
    obj: dict[str, Any],
    new: dict[str, ResourceRequirements],
    annotations: dict[str, str] | None = None,
    heap: dict[str, list[HeapEdit]] | None = None,
) -> list[dict[str, Any]]:
    """JSON patch setting the changed containers' resources (and heap settings) and the
    managed annotation; empty when no container of `obj` is in `new` (e.g. a name that is
    not a string). A heap edit `obj` does not hold as read leaves every heap setting."""
    ops: list[dict[str, Any]] = []
    annotations = dict(annotations or {})
    heap_ops = _heap_ops(obj, heap) if heap else []
    if heap_ops is None:
        heap_ops = []
        annotations.pop(HEAP_REWRITE_ANNOTATION, None)
    for i, c in enumerate(obj["spec"]["containers"]):
        name = c.get("name")
        if name not in new:
            continue
        res = dict(c.get("resources") or {})
        want = new[name]
        if want.requests:
            res["requests"] = _merged(res.get("requests"), want.requests)
        if want.limits:
            res["limits"] = _merged(res.get("limits"), want.limits)
        ops.append({"op": "add", "path": f"/spec/containers/{i}/resources", "value": res})
    if not ops:  # the annotation says the webhook changed resources: never on its own
        return []
    ops.extend(heap_ops)
    meta = obj.get("metadata") or {}
    added = {MANAGED_ANNOTATION: MANAGED_VALUE, **annotations}
    if meta.get("annotations") is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": added})
    else:
        for key, value in added.items():
            ops.append(
                {"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
            )
    return ops


@guarded
def review_pod(
    body: object,
    index: AdmissionIndex,
    now: float,
    on_change: Callable[[Pod, PodDecision], None] | None = None,
) -> dict[str, Any]:
    """Pod mutating webhook: CREATE only; everything else passes untouched. `on_change` is
    told about every pod whose resources the webhook changes (metrics and Events)."""
    uid, request = _request(body)
    kind = (request.get("kind") or {}).get("kind")
    if kind != "Pod":
        return _unexpected_kind(uid, "pod", kind)
    if request.get("operation") != "CREATE" or request.get("subResource"):
        return _response(uid)
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise ReviewError("request.object is not a pod")
    pod = pod_from_json(obj, str(request.get("namespace") or ""))
    decision = decide_pod(pod, None, index, now)
    if not decision.changed:
        return _response(uid, warnings=decision.warnings)
    response = _response(
        uid,
        patch=pod_patch(obj, decision.containers, decision.annotations, decision.heap),
        warnings=decision.warnings,
    )
    if on_change is not None:
        # Recording must never cost the pod its patch (the guard above would drop it).
        with contextlib.suppress(Exception):
            on_change(pod, decision)
    return response


@guarded
def review_scale(body: object, index: AdmissionIndex, now: float) -> dict[str, Any]:
    """`*/scale` mutating webhook: UPDATE of a horizontally autonomous target's workload."""
    uid, request = _request(body)
    kind = (request.get("kind") or {}).get("kind")
    if kind != "Scale":
        return _unexpected_kind(uid, "scale", kind)
    if request.get("operation") != "UPDATE":
        return _response(uid)
    resource = (request.get("resource") or {}).get("resource", "")
    workload_kind = RESOURCE_KINDS.get(resource)
    if workload_kind is None:
        return _response(uid)
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise ReviewError("request.object is not a Scale")
    written = (obj.get("spec") or {}).get("replicas")
    if written is None:
        written = 0
    if not isinstance(written, int) or isinstance(written, bool):
        raise ReviewError("request.object.spec.replicas is not an integer")
    name = str(request.get("name") or (obj.get("metadata") or {}).get("name") or "")
    namespace = str(request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "")
    decision = decide_scale(workload_kind, namespace, name, written, index, now)
    if decision.replicas is None:
        return _response(uid, warnings=decision.warnings)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        op = "replace" if "replicas" in spec else "add"
        patch = [{"op": op, "path": "/spec/replicas", "value": decision.replicas}]
    else:
        patch = [{"op": "add", "path": "/spec", "value": {"replicas": decision.replicas}}]
    return _response(uid, patch=patch, warnings=decision.warnings)


@guarded
def review_target(
    body: object, index: AdmissionIndex, now: float, zones: TimeZones | None = None
) -> dict[str, Any]:
    """The validating webhook of Foresize's objects (CREATE/UPDATE), one validator a kind
    (`validate.VALIDATORS`: AIScaleTarget, DaemonSetAutoscaler, ClusterAIScalePolicy);
    `zones`: the zone database the maintenance windows are checked with."""
    uid, request = _request(body)
    kind = (request.get("kind") or {}).get("kind")
    validator = VALIDATORS.get(kind) if isinstance(kind, str) else None
    if validator is None:
        return _unexpected_kind(uid, "target", kind)
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return _response(uid)
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise ReviewError(f"request.object is not a {kind}")
    if request.get("namespace") and isinstance(obj.get("metadata"), dict):
        obj["metadata"].setdefault("namespace", request["namespace"])
    errors = validator(obj, index, zones)
    if errors:
        return _response(uid, allowed=False, message="; ".join(errors))
    return _response(uid)


@guarded
def review_noop(
    body: object, index: AdmissionIndex | None = None, now: float = 0.0
) -> dict[str, Any]:
    """Allows everything: the benchmark's floor (same server, same parsing, no decision)."""
    uid, _ = _request(body)
    return _response(uid)
