"""Bad options of the long-running commands are one-line errors naming the option (a
ForesizeError: exit status 2 from `foresize.front.cli.main`), never a traceback or a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app


def _error(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ForesizeError), (args, result.exception)
    return str(result.exception)


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_webhook_port_out_of_range(port: str) -> None:
    assert _error(["webhook", "--self-signed", "--port", port]).startswith("--port must be 0-65535")


def test_webhook_cert_dir_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    message = _error(["webhook", "--self-signed", "--port", "0", "--cert-dir", str(afile)])
    assert message.startswith(f"--cert-dir {afile}: cannot write")


@pytest.fixture(scope="module")
def serving_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA, certificate and key on disk, for `foresize webhook --cert/--key/--ca`."""
    from foresize.shells.webhook.certs import generate_self_signed

    return generate_self_signed(["localhost"]).write(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize(
    "which,message",
    [
        ("neither", "give either --cert and --key, or --self-signed"),
        ("both", "give either --cert and --key, or --self-signed"),
        ("cert only", "--cert needs --key"),
        ("unreadable ca", "{missing}: cannot read (No such file or directory)"),
        ("config without ca", "--webhook-config needs --self-signed or --ca"),
        ("config unwritable", "--webhook-config {missing}/w.yaml: No such file or directory"),
        ("host not here", "--port 0 / --host 192.0.2.1: cannot listen there"),
    ],
)
def test_webhook_tls_and_config_options(
    serving_pair: tuple[Path, Path, Path], tmp_path: Path, which: str, message: str
) -> None:
    ca, cert, key = serving_pair
    missing = tmp_path / "missing"
    pair = ["--cert", str(cert), "--key", str(key)]
    args = {
        "neither": [],
        "both": ["--self-signed", *pair],
        "cert only": ["--cert", str(cert)],
        "unreadable ca": [*pair, "--ca", str(missing)],
        "config without ca": [*pair, "--webhook-config", str(tmp_path / "w.yaml")],
        "config unwritable": [*pair, "--ca", str(ca), "--webhook-config", f"{missing}/w.yaml"],
        # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this machine.
        "host not here": [*pair, "--host", "192.0.2.1", "--port", "0"],
    }[which]
    assert _error(["webhook", *args]).startswith(message.format(missing=missing))


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--targets", "-1", "--targets must be positive"),
        ("--max-rate", "0", "--max-rate must be positive"),
        # Durations are read by the one duration option parser (foresize.front.cli.options).
        ("--budget", "-1", "--budget: '-1' is not a duration (e.g. 30s, 5m, 1h30m, 14d)"),
        ("--ramp-duration", "0", "--ramp-duration: must be more than 0, got '0'"),
    ],
)
def test_bench_webhook_sizes(option: str, value: str, message: str) -> None:
    assert _error(["bench", "webhook", option, value]) == message


@pytest.mark.parametrize(
    "args,message",
    [
        (["--step", "0"], "--step: must be more than 0, got '0'"),
        (["--duration", "a week"], "--duration: 'a week' is not a duration"),
        (["--repeats", "0"], "--repeats: must be at least 1, got 0"),
        (["--nodes", "0"], "--nodes: must be at least 1, got 0"),
        (["--nodes", "5", "--pods", "4"], "--pods: must be at least --nodes (5), got 4"),
    ],
)
def test_bench_sim_options_are_named(args: list[str], message: str) -> None:
    assert _error(["bench", "sim", *args]).startswith(message)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--step", "-1m"], "--step: '-1m' is not a duration"),
        (["--duration", "0"], "--duration: must be more than 0, got '0'"),
    ],
)
def test_simulate_durations_are_read_by_the_one_duration_option(
    args: list[str], message: str
) -> None:
    assert _error(["simulate", *args]).startswith(message)


def test_operator_kubeconfig_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")  # valid YAML, not a kubeconfig
    message = _error(["operator", "--kubeconfig", str(path), "--no-webhook"])
    assert message.startswith(f"--kubeconfig: {path}: not a kubeconfig")


def test_operator_server_that_is_not_a_url() -> None:
    message = _error(["operator", "--server", "notaurl", "--no-webhook"])
    assert message == "--server: 'notaurl' is not an http:// or https:// URL"


@pytest.mark.parametrize(
    "start,problem",
    [
        ("2020-01-01", "the certificate expired 2020-01-31T00:00:00Z"),
        ("2999-01-01", "the certificate is not valid before 2998-12-31T23:55:00Z"),
    ],
)
def test_webhook_refuses_a_certificate_it_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str, problem: str
) -> None:
    # Audit reliability F-5: an expired --cert was served without a word; the API server's
    # calls then failed their handshake and the fail-open webhooks silently did nothing.
    import datetime as dt

    import foresize.shells.webhook.server
    from foresize.shells.webhook.certs import generate_self_signed

    async def serving(*args: object, **kwargs: object) -> None:
        raise AssertionError("the webhook served a certificate it cannot serve")

    monkeypatch.setattr(foresize.shells.webhook.server, "run_server", serving)

    now = dt.datetime.fromisoformat(start).replace(tzinfo=dt.UTC)
    _, cert, key = generate_self_signed(["localhost"], now=now, days=30).write(tmp_path)
    message = _error(["webhook", "--cert", str(cert), "--key", str(key), "--port", "0"])
    assert message == f"--cert {cert}: {problem}; renew it (or use --self-signed)"
