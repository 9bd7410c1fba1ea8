"""`foresize webhook` as a process: self-signed TLS, caBundle written into the webhook
configurations, state loaded from a file, graceful exit on SIGTERM; and the state file's
errors naming the document and field."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from foresize.core.errors import ForesizeError
from foresize.shells.webhook.certs import generate_self_signed
from foresize.shells.webhook.configurations import inject_ca_bundle, webhook_configurations
from foresize.shells.webhook.state_file import load_state_file
from foresize.testing.ports import free_port
from support.admission import pod_json, review, target_manifest

SUG = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}


def test_ca_bundle_is_written_into_every_webhook():
    bundle = generate_self_signed(["foresize-webhook.foresize-system.svc"])
    docs = webhook_configurations(ca_pem=bundle.ca_pem)
    hooks = [h for d in docs for h in d["webhooks"]]
    assert {h["clientConfig"]["service"]["path"] for h in hooks} == {
        "/mutate-pods",
        "/mutate-scale",
        "/validate-targets",
    }
    for h in hooks:
        assert base64.b64decode(h["clientConfig"]["caBundle"]) == bundle.ca_pem
        assert h["failurePolicy"] == "Ignore" and h["timeoutSeconds"] == 3
        assert "kube-system" in h["namespaceSelector"]["matchExpressions"][0]["values"]
    # Other documents pass through untouched; the input is not modified.
    plain = webhook_configurations()
    mixed = inject_ca_bundle([*plain, {"kind": "Service", "metadata": {"name": "x"}}], b"CA")
    assert "caBundle" not in plain[0]["webhooks"][0]["clientConfig"]
    assert mixed[-1] == {"kind": "Service", "metadata": {"name": "x"}}


def test_state_file_errors_name_document_and_field(tmp_path: Path):
    bad = target_manifest(suggestion=SUG)
    bad["spec"]["vertical"]["containers"][0]["cpu"]["lowerbound"] = "lots"
    f = tmp_path / "state.yaml"
    f.write_text(yaml.safe_dump_all([target_manifest("ok", ref="ok"), bad]))
    with pytest.raises(ForesizeError) as err:
        load_state_file(f)
    assert "document 2" in str(err.value) and "spec.vertical.containers[0].cpu.lowerbound" in str(
        err.value
    )
    f.write_text("kind: ConfigMap\n")
    with pytest.raises(ForesizeError, match=r"document 1.*ConfigMap"):
        load_state_file(f)


def self_signed_webhook(port: int, *options: str) -> list[str]:
    """The command line of `foresize webhook --self-signed` on loopback at `port`."""
    command = [sys.executable, "-m", "foresize", "webhook", "--self-signed"]
    return [*command, "--host", "127.0.0.1", "--port", str(port), *options]


def test_webhook_command_serves_https_from_a_state_file(tmp_path: Path):
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all([target_manifest(suggestion=SUG)]))
    port = free_port()
    tls = tmp_path / "tls"
    config = tmp_path / "webhooks.yaml"
    proc = subprocess.Popen(
        self_signed_webhook(
            port, "--state", str(state), "--cert-dir", str(tls), "--webhook-config", str(config)
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        ctx = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if (tls / "ca.crt").exists() and ctx is None:
                time.sleep(0.05)
                ctx = ssl.create_default_context(cafile=str(tls / "ca.crt"))
            if ctx is not None:
                try:
                    with urllib.request.urlopen(
                        f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2
                    ) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.1)
        else:
            pytest.fail("webhook did not become ready")
        req = urllib.request.Request(
            f"https://127.0.0.1:{port}/mutate-pods",
            data=json.dumps(review(pod_json())).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            out = json.loads(r.read())
        ops = json.loads(base64.b64decode(out["response"]["patch"]))
        assert ops[0]["value"]["requests"]["cpu"] == "250m"
        docs = list(yaml.safe_load_all(config.read_text()))
        ca = (tls / "ca.crt").read_bytes()
        assert base64.b64decode(docs[0]["webhooks"][0]["clientConfig"]["caBundle"]) == ca
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert rc == 0


def test_a_busy_port_is_one_line_naming_it_and_leaves_nothing_in_the_temp_folder(tmp_path):
    # The console entry point, as a user runs it: one line, exit 2, no traceback; the
    # self-signed key (no --cert-dir) never outlives its loading, so nothing is left.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from foresize.front.cli import main; main()",
                "webhook",
                "--self-signed",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            env={**os.environ, "TMPDIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: --port {port}: 127.0.0.1:{port} is already in use (another webhook, or "
        "choose another --port)"
    ]
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.rglob("*")) == []


def on_disk(folder: Path) -> list[tuple[Path, bool]]:
    """Every file under `folder`, and whether it holds a private key."""
    return [(f, b"PRIVATE KEY" in f.read_bytes()) for f in folder.rglob("*") if f.is_file()]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_self_signed_key_without_cert_dir_is_never_left_on_disk(tmp_path, stop):
    # Without --cert-dir the private key is on disk only while ssl loads it: not while
    # serving, and so not after any exit, even SIGKILL (no cleanup runs). What a user
    # needs is still there: the CA, printed as a caBundle line and in --webhook-config,
    # verifies the server.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    config = tmp_path / "webhooks.yaml"
    proc = subprocess.Popen(
        self_signed_webhook(0, "--webhook-config", str(config)),
        env={**os.environ, "TMPDIR": str(scratch)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        # readline blocks: a server that never says it serves is killed, ending the read.
        watchdog = threading.Timer(30, proc.kill)
        watchdog.start()
        seen = [proc.stderr.readline()]
        while seen[-1] and "webhook serving" not in seen[-1]:
            seen.append(proc.stderr.readline())
        watchdog.cancel()
        assert "webhook serving" in seen[-1], "".join(seen)
        assert on_disk(scratch) == []  # while serving: no key, no folder of it
        port = int(seen[-1].split("webhook serving on 127.0.0.1:", 1)[1].split()[0])
        printed = [line.split("caBundle: ", 1)[1].strip() for line in seen if "caBundle: " in line]
        assert len(printed) == 1
        hooks = [h for d in yaml.safe_load_all(config.read_text()) for h in d["webhooks"]]
        assert {h["clientConfig"]["caBundle"] for h in hooks} == set(printed)
        ca = ssl.create_default_context(cadata=base64.b64decode(printed[0]).decode())
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ca, timeout=5) as r:
            assert r.status == 200
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert on_disk(scratch) == [] and list(scratch.iterdir()) == []
