"""`.ci/system-deps` installs the system packages without starting their services and
stops nothing it did not start (issue 22: it ended any process named prometheus on the
machine with `pkill -x`).

The script runs for real, on a PATH of stand-ins: an apt-get that records what it installs
and, as invoke-rc.d does for each service a package starts, asks policy-rc.d; and pkill,
killall and systemctl that record being called."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.paths import ROOT

SCRIPT = ROOT / ".ci" / "system-deps"
APT_GET = """#!/bin/bash
echo "apt-get $*" >> "$LOG"
if [ "$1" = install ]; then
  # What invoke-rc.d does before starting a package's service: ask the policy.
  if [ -x "$FORESIZE_POLICY_RC_D" ]; then "$FORESIZE_POLICY_RC_D" prometheus start; fi
  echo "policy answered $?" >> "$LOG"
fi
"""
RECORDER = """#!/bin/bash
echo "$(basename "$0") $*" >> "$LOG"
"""


def run_script(tmp_path: Path, existing_policy: str | None) -> tuple[list[str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("chmod", "rm", "mv"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    for name, text in (
        ("apt-get", APT_GET),
        *((n, RECORDER) for n in ("pkill", "killall", "systemctl")),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    policy = tmp_path / "policy-rc.d"
    if existing_policy is not None:
        policy.write_text(existing_policy)
        policy.chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    env = {"PATH": str(bin_dir), "LOG": str(log), "FORESIZE_POLICY_RC_D": str(policy)}
    done = subprocess.run(
        [shutil.which("bash"), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines(), policy


@pytest.mark.parametrize("existing_policy", [None, "#!/bin/sh\nexit 0\n"], ids=["none", "own"])
def test_system_deps_starts_no_service_and_kills_nothing(tmp_path, existing_policy):
    lines, policy = run_script(tmp_path, existing_policy)
    install = [line for line in lines if line.startswith("apt-get install")]
    assert install and install[0].split()[-3:] == ["prometheus", "victoria-metrics", "chromium"]
    assert "policy answered 101" in lines  # every service start refused during the install
    assert [line for line in lines if not line.startswith(("apt-get", "policy"))] == []
    # The machine's policy is as it was: none, or its own one back.
    if existing_policy is None:
        assert not policy.exists()
    else:
        assert policy.read_text() == existing_policy
    assert not Path(f"{policy}.foresize-saved").exists()
