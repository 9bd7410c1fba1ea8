"""`foresize webhook` as a real process: what it leaves behind when it stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def test_a_self_signed_key_in_a_temporary_folder_is_removed_when_the_server_stops(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "foresize",
            "webhook",
            "--self-signed",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        seen = []
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if "webhook serving" in line or not line:
                break
        assert any("webhook serving" in line for line in seen), "".join(seen)
        folders = list(tmp_path.glob("foresize-tls-*"))
        assert len(folders) == 1 and (folders[0] / "tls.key").exists()  # while serving
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp_path.glob("foresize-tls-*")) == []  # no private key left in /tmp
