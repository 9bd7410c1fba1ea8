"""AdmissionReview bodies Python's JSON cannot read (reliability.md R-4, R-5): the answer
still carries the request's uid (the API server matches answers by it, and drops the
`foresize:` warning of an answer with the wrong one), and a body that cannot even be
decoded is a 400, never a 500 with a traceback."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from foresize.core.admission.review import request_uid
from foresize.shells.webhook.server import ServerLimits
from support.admission import pod_json, review
from support.webhook import Server

LIMITS = ServerLimits(header_timeout=2.0, body_timeout=2.0, idle_timeout=2.0)
HUGE = "5" * 5000  # past Python's 4,300-digit int conversion limit


def _pod_with_cpu(cpu: str) -> bytes:
    pod = pod_json(containers=[{"name": "app", "resources": {"requests": {"cpu": "X"}}}])
    return json.dumps(review(pod, uid="big-quantity")).replace('"X"', cpu).encode()


def _scale_with_replicas(replicas: str) -> bytes:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "big-replicas",
            "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "operation": "UPDATE",
            "namespace": "shop",
            "name": "web",
            "object": {"spec": {"replicas": "X"}},
        },
    }
    return json.dumps(body).replace('"X"', replicas).encode()


# The audit's six hand-written bodies answered with uid "" (and the path they went to).
BODIES = {
    "deep-list-object": (
        "/mutate-pods",
        b'{"request":{"uid":"deep1","object":' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
    ),
    "deep-dict-object": (
        "/mutate-pods",
        b'{"request":{"uid":"deep2","object":' + b'{"a":' * 400_000 + b"1" + b"}" * 400_002,
    ),
    "deep-spec": (
        "/validate-targets",
        b'{"request":{"uid":"deep3","object":{"spec":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_003,
    ),
    "5000-digit-quantity": ("/mutate-pods", _pod_with_cpu(HUGE)),
    "5000-digit-replicas": ("/mutate-scale", _scale_with_replicas(HUGE)),
    "invalid-utf8": (
        "/mutate-pods",
        json.dumps(review(pod_json(), uid="utf8")).encode().replace(b'"x"', b'"x\xff"', 1),
    ),
}
UIDS = {
    "deep-list-object": "deep1",
    "deep-dict-object": "deep2",
    "deep-spec": "deep3",
    "5000-digit-quantity": "big-quantity",
    "5000-digit-replicas": "big-replicas",
    "invalid-utf8": "utf8",
}


@pytest.mark.parametrize("case", sorted(BODIES))
async def test_a_body_python_cannot_read_is_answered_with_its_uid(case):
    path, body = BODIES[case]
    async with Server(LIMITS) as srv:
        status, data = await srv.request(path, body)
    assert status == 200
    answer = json.loads(data)
    assert answer["kind"] == "AdmissionReview" and answer["response"]["uid"] == UIDS[case]
    response = answer["response"]
    if path != "/validate-targets":
        assert response["allowed"] is True and "patch" not in response
    assert all(w.startswith("foresize:") for w in response.get("warnings") or ())


async def test_invalid_utf8_is_read_as_go_reads_it_and_the_pod_reviewed():
    # Go's encoding/json replaces invalid UTF-8 with U+FFFD: the review goes on.
    async with Server(LIMITS) as srv:
        status, data = await srv.request("/mutate-pods", BODIES["invalid-utf8"][1])
    response = json.loads(data)["response"]
    assert status == 200 and response["uid"] == "utf8" and response["allowed"] is True
    assert not any("malformed" in w for w in response.get("warnings") or ())


async def test_an_undecodable_gzip_body_is_a_400_not_a_500():
    async with Server(LIMITS) as srv:
        reader, writer = await srv.connect()
        writer.write(
            b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
            b"Content-Type: application/json\r\nContent-Length: 10\r\n\r\n0123456789"
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        # A valid gzip body is still answered normally.
        import gzip

        body = gzip.compress(json.dumps(review(pod_json(), uid="gz")).encode())
        reader, writer = await srv.connect()
        writer.write(
            b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    assert status_line.startswith(b"HTTP/1.1 400"), status_line
    assert "undecodable body" in srv.reasons
    assert raw.startswith(b"HTTP/1.1 200") and b'"uid":"gz"' in raw


@pytest.mark.parametrize(
    "body,uid",
    [
        (b'{"request":{"object":{"metadata":{"uid":"pod-uid"}},"uid":"late",' + b"[" * 9, "late"),
        (b'{"uid":"top","request":{"object":' + b"[" * 9, ""),
        (b'{"request":{"uid":"a\\"b\\u00e9",' + b"[" * 9, 'a"b\u00e9'),
        (b'{"request":{"uid":7,' + b"[" * 9, ""),
        (b'{"request":{"uid":"unterminated' + b"x" * 100_000, ""),
        (base64.b64encode(b"junk"), ""),
    ],
    ids=["after-object", "top-level-only", "escaped", "not-a-string", "unterminated", "junk"],
)
def test_the_uid_is_the_request_s_own_or_none(body, uid):
    assert request_uid(body) == uid
