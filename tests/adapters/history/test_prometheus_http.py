"""`foresize recommend --prometheus` over HTTP: authentication, TLS, timeouts and servers
that are not (or not quite) Prometheus give one error saying what happened.

The servers are small aiohttp apps on loopback in a thread. Each refuses what a real
Prometheus behind an authenticating proxy refuses (a wrong or missing credential is 401),
and otherwise answers the label-values API with an empty list, as a Prometheus without
cAdvisor data does: reaching "holds no cAdvisor container series" proves the request got
through.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web
from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app

EMPTY = {"status": "success", "data": []}
GOT_THROUGH = "holds no cAdvisor container series"


@contextlib.contextmanager
def serve(handler, ssl_context: ssl.SSLContext | None = None) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    started = threading.Event()
    web_app = web.Application()
    web_app.router.add_route("GET", "/{tail:.*}", handler)
    runner = web.AppRunner(web_app)

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.SockSite(runner, sock, ssl_context=ssl_context)
        loop.run_until_complete(site.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    scheme = "https" if ssl_context else "http"
    try:
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def recommend(url: str, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, ["recommend", "--prometheus", url, *args], env=env)


def error_of(result) -> str:
    assert isinstance(result.exception, ForesizeError), result.output
    return str(result.exception)


def test_a_slow_prometheus_is_a_timeout_naming_the_seconds():
    async def slow(request):
        await asyncio.sleep(5)
        return web.json_response(EMPTY)

    with serve(slow) as url:
        message = error_of(recommend(url, "--timeout", "500ms"))
    assert message.startswith(f"Prometheus at {url} did not answer within 0.5 s")


def test_http_errors_say_what_answered():
    async def html(request):
        return web.Response(
            status=404, text="<!DOCTYPE HTML><html>nope</html>", content_type="text/html"
        )

    with serve(html) as url:
        message = error_of(recommend(url))
    assert message == (
        f"Prometheus {url}/api/v1/label/namespace/values answered HTTP 404 with an HTML page "
        "(is this a Prometheus URL?)"
    )

    async def text(request):
        return web.Response(status=500, text="broken\n  try later")

    with serve(text) as url:
        message = error_of(recommend(url))
    assert " answered HTTP 500 to query 'container_memory_working_set_bytes" in message
    assert message.endswith(": broken try later")

    async def overloaded(request):  # 503 is "later": retried (Retry-After: 0), then named
        return web.Response(
            status=503, text="overloaded\n  try later", headers={"Retry-After": "0"}
        )

    with serve(overloaded) as url:
        message = error_of(recommend(url))
    assert " answered HTTP 503 5 times (retried with back-off) to query " in message
    assert message.endswith(": overloaded try later")


def test_a_success_answer_of_the_wrong_shape_is_named_not_a_traceback():
    # JSON with status success but no data (an API gateway's health answer, say) was a
    # KeyError traceback; values that are not a list were read character by character.
    async def no_data(request):
        return web.json_response({"status": "success"})

    async def odd_values(request):
        return web.json_response({"status": "success", "data": "shop"})

    async def no_result(request):
        if request.path.startswith("/api/v1/label/"):
            return web.json_response({"status": "success", "data": ["shop"]})
        return web.json_response({"status": "success", "data": {"resultType": "matrix"}})

    # The range and instant queries go out side by side: whichever answers first is named.
    for handler, paths, what in (
        (no_data, ("/api/v1/label/namespace/values",), "a list of values"),
        (odd_values, ("/api/v1/label/namespace/values",), "a list of values"),
        (no_result, ("/api/v1/query_range", "/api/v1/query"), "a result list"),
    ):
        with serve(handler) as url:
            message = error_of(recommend(url, "-n", "shop"))
        assert message in [
            f"{url}{path} answered success without {what} (is this a Prometheus URL?)"
            for path in paths
        ], handler.__name__


def test_unreachable_prometheus_names_the_reason():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = error_of(recommend(f"http://127.0.0.1:{port}"))
    assert message.startswith(f"cannot reach Prometheus at http://127.0.0.1:{port}: ")
    assert message.split(": ", 1)[1].strip()  # a reason, never empty


def auth_server(expected: str):
    async def handler(request):
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, text="Unauthorized")
        return web.json_response(EMPTY)

    return handler


def test_bearer_token_from_option_or_environment():
    with serve(auth_server("Bearer s3cret")) as url:
        assert "not authorised" in error_of(recommend(url))
        assert "not authorised" in error_of(recommend(url, "--token", "wrong"))
        assert GOT_THROUGH in error_of(recommend(url, "--token", "s3cret"))
        env = {"FORESIZE_PROMETHEUS_TOKEN": "s3cret"}
        assert GOT_THROUGH in error_of(recommend(url, env=env))


def test_basic_auth():
    expected = "Basic " + base64.b64encode(b"ops:pa55").decode()
    with serve(auth_server(expected)) as url:
        assert "not authorised" in error_of(recommend(url, "--username", "ops", "--password", "x"))
        assert GOT_THROUGH in error_of(recommend(url, "--username", "ops", "--password", "pa55"))
        env = {"FORESIZE_PROMETHEUS_USERNAME": "ops", "FORESIZE_PROMETHEUS_PASSWORD": "pa55"}
        assert GOT_THROUGH in error_of(recommend(url, env=env))
        assert error_of(recommend(url, "--username", "ops")) == (
            "--username and --password go together"
        )


@pytest.fixture
def tls(tmp_path):
    from foresize.shells.webhook.certs import generate_self_signed, server_ssl_context

    bundle = generate_self_signed(("127.0.0.1",))
    (tmp_path / "ca.pem").write_bytes(bundle.ca_pem)
    (tmp_path / "tls.crt").write_bytes(bundle.cert_pem)
    (tmp_path / "tls.key").write_bytes(bundle.key_pem)
    return tmp_path / "ca.pem", server_ssl_context(tmp_path / "tls.crt", tmp_path / "tls.key")


def test_tls_needs_the_ca_or_skip_verify(tls, tmp_path):
    ca, context = tls

    async def handler(request):
        return web.json_response(EMPTY)

    with serve(handler, context) as url:
        assert error_of(recommend(url)).startswith(f"cannot verify the TLS certificate of {url}")
        assert GOT_THROUGH in error_of(recommend(url, "--ca-file", str(ca)))
        env = {"FORESIZE_PROMETHEUS_CA_FILE": str(ca)}
        assert GOT_THROUGH in error_of(recommend(url, env=env))
        assert GOT_THROUGH in error_of(recommend(url, "--insecure-skip-verify"))
        missing = tmp_path / "nope.pem"
        assert error_of(recommend(url, "--ca-file", str(missing))).startswith(
            f"--ca-file: cannot read {missing}"
        )
