"""A shared history store behind authentication (Mimir's tenant, a proxy's bearer token or
basic auth): the operator's reads and remote writes carry the tenant and the secret read
from its file, against a local server that refuses anything else; a rotated token is
used without a restart; bad options are refused at start, naming the option, and no
secret is ever taken on the command line."""

from __future__ import annotations

import asyncio
import base64
import time

import numpy as np
import pytest
from aiohttp import web
from typer.testing import CliRunner

from foresize.adapters.history.remote_write import decode_write_request, snappy_decompress
from foresize.adapters.history.shared import refresh
from foresize.adapters.history.store_auth import StoreAuth
from foresize.core.errors import ForesizeError
from foresize.core.history import SeriesKey
from foresize.shells.kube.components import open_history
from foresize.shells.kube.options import OperatorOptions
from support.http_stub import serve

KEY = SeriesKey("shop", "web", "app")


def checking_store(want: dict[str, str], seen: list[tuple[str, dict[str, str]]]):
    """A Prometheus-compatible store that answers 401 unless every header in `want` is
    there with its value; `seen` gets (path, headers) of each request it accepted (the
    decoded samples' count under "samples" for a write)."""

    async def handler(request: web.Request) -> web.Response:
        if any(request.headers.get(k) != v for k, v in want.items()):
            return web.Response(status=401, text="unauthorized")
        got = {k: request.headers.get(k, "") for k in want}
        if request.path == "/api/v1/write":
            series = decode_write_request(snappy_decompress(await request.read()))
            seen.append((request.path, {**got, "samples": str(sum(len(s) for _, s in series))}))
            return web.Response(status=204)
        seen.append((request.path, got))
        if request.query.get("query") == "time()":
            now = time.time()
            data = {"resultType": "scalar", "result": [now, str(now)]}
        else:
            data = {"resultType": "matrix", "result": []}
        return web.json_response({"status": "success", "data": data})

    return handler


def push_and_read(url: str, auth: StoreAuth | None) -> str | None:
    """One interval of the operator's shared history: a poll written, the store read."""
    history = open_history(OperatorOptions(history_store=url, history_store_auth=auth))
    now = time.time()
    history.write_poll(now - 60.0, [KEY], np.array([0.25]), np.array([2.0**28]))

    async def interval() -> str | None:
        await history.push(history.take_outbox())
        return await refresh(history, history, now)

    return asyncio.run(interval())


def test_tenant_and_bearer_token_go_with_every_read_and_write_and_a_rotated_token_is_used(
    tmp_path,
):
    token = tmp_path / "token"
    token.write_text("first\n")  # as `kubectl create secret --from-file` keeps it
    auth = StoreAuth(tenant="team-a", token_file=str(token))
    seen: list = []
    want = {"X-Scope-OrgID": "team-a", "Authorization": "Bearer first"}
    with serve(checking_store(want, seen)) as url:
        assert push_and_read(url, auth) is None
        writes = [h for path, h in seen if path == "/api/v1/write"]
        reads = [path for path, _ in seen if path != "/api/v1/write"]
        assert writes == [{**want, "samples": "2"}] and len(reads) > 2
    # The Secret's file is rotated: the next interval sends the new token.
    token.write_text("second")
    seen.clear()
    want = {"X-Scope-OrgID": "team-a", "Authorization": "Bearer second"}
    with serve(checking_store(want, seen)) as url:
        assert push_and_read(url, auth) is None
        assert {path for path, _ in seen} >= {"/api/v1/write", "/api/v1/query"}


def test_basic_auth_from_a_password_file(tmp_path):
    password = tmp_path / "password"
    password.write_text("s3cret")
    pair = base64.b64encode(b"foresize:s3cret").decode()
    seen: list = []
    with serve(checking_store({"Authorization": f"Basic {pair}"}, seen)) as url:
        auth = StoreAuth(username="foresize", password_file=str(password))
        assert push_and_read(url, auth) is None
        assert any(path == "/api/v1/write" for path, _ in seen)


def test_without_the_credentials_the_history_is_not_whole_and_the_write_fails(tmp_path):
    seen: list = []
    with serve(checking_store({"X-Scope-OrgID": "team-a"}, seen)) as url:
        history = open_history(OperatorOptions(history_store=url))
        problem = asyncio.run(refresh(history, history, time.time()))
        assert problem is not None and "HTTP 401: not authorised" in problem
        history.write_poll(time.time() - 60.0, [KEY], np.array([0.25]), np.array([2.0**28]))
        with pytest.raises(ForesizeError, match="refused with HTTP 401"):
            asyncio.run(history.push(history.take_outbox()))
    assert seen == []


def test_a_secret_file_that_went_missing_is_a_failed_read_naming_the_option(tmp_path):
    token = tmp_path / "token"
    token.write_text("t")
    auth = StoreAuth(token_file=str(token))
    token.unlink()
    with serve(checking_store({}, [])) as url:
        history = open_history(OperatorOptions(history_store=url, history_store_auth=auth))
        problem = asyncio.run(refresh(history, history, time.time()))
    assert problem == f"--history-store-token-file: cannot read {token}: No such file or directory"


def test_the_operator_command_passes_the_auth_on_and_refuses_bad_options(tmp_path, monkeypatch):
    import foresize.shells.kube.operator as operator_module
    from foresize.front.cli import app

    token = tmp_path / "token"
    token.write_text("t0k3n")
    given: list[OperatorOptions] = []

    async def run(opts: OperatorOptions) -> int:
        given.append(opts)
        return 0

    monkeypatch.setattr(operator_module, "run_operator_process", run)
    store = ["--history-store", "http://mimir/prometheus"]
    token_file = ["--history-store-token-file", str(token)]
    basic = ["--history-store-username", "u", "--history-store-password-file", str(token)]
    ok = CliRunner().invoke(
        app,
        ["operator", *store, "--history-store-tenant", "team-a", *token_file],
    )
    assert ok.exit_code == 0, ok.output
    (opts,) = given
    assert opts.history_store_auth.headers() == {
        "X-Scope-OrgID": "team-a",
        "Authorization": "Bearer t0k3n",
    }
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases = [
        (["--history-store-tenant", "a"], "--history-store-tenant needs --history-store"),
        (
            [*store, "--history-store-token-file", str(tmp_path / "nope")],
            f"--history-store-token-file: cannot read {tmp_path / 'nope'}: No such file",
        ),
        ([*store, "--history-store-token-file", str(empty)], f"{empty} is empty"),
        (
            [*store, "--history-store-username", "u"],
            "--history-store-username and --history-store-password-file go together",
        ),
        (
            [*store, *token_file, *basic],
            "--history-store-token-file: give it or --history-store-username, not both",
        ),
        ([*store, "--history-store-tenant", " "], "--history-store-tenant: empty"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, ["operator", *args])
        assert isinstance(result.exception, ForesizeError), (args, result.output)
        assert message in str(result.exception)
    # There is no option that takes a secret itself.
    help_text = CliRunner().invoke(app, ["operator", "--help"]).output
    assert (
        "--history-store-token " not in help_text and "--history-store-password " not in help_text
    )
