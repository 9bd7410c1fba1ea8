"""`foresize validate FILE...`: offline checks of Foresize objects in YAML files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from foresize.core.errors import ForesizeError
from foresize.front.cli import app

GOOD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: web}
  vertical: {mode: auto}
---
apiVersion: foresize.io/v1
kind: DaemonSetAutoscaler
metadata: {name: agent, namespace: mon}
spec:
  scaleTargetRef: {name: node-agent}
"""

BAD = """\
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: ok, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: ok}
---
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: web}
  vertical:
    disruption: {max_disrupted: 0}
---
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: both, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: both}
  vertical: {mode: auto}
  horizontal: {mode: autonomous}
"""


def run(*args: str):
    return CliRunner().invoke(app, ["validate", *args])


def test_valid_file_reports_objects_and_skips_others(tmp_path: Path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    result = run(str(path))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "2 Foresize objects valid (1 other documents skipped)"


def test_errors_name_file_line_and_field(tmp_path: Path):
    # Audit ux §1: every error named the line where its document starts (`:1:`), not the
    # field's line; a missing field is named on its parent's line (the last, `metadata`).
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    result = run(str(path))
    assert isinstance(result.exception, ForesizeError)
    lines = str(result.exception).splitlines()
    assert lines == [
        f"{path}:13: spec.vertical.disruption.max_disrupted: must be an integer >= 1 or a "
        "percentage (e.g. 3 or 20%), not 0",
        f"{path}:18: spec: only one of vertical.mode and horizontal.mode may be autonomous",
    ]


def test_yaml_syntax_error_and_missing_file(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: foresize.io/v1\nkind: [AIScaleTarget\n")
    result = run(str(path), str(tmp_path / "nope.yaml"))
    message = str(result.exception)
    assert f"{path}:3: not valid YAML" in message
    assert f"{tmp_path / 'nope.yaml'}: cannot read" in message


def test_a_file_that_is_not_text_or_is_a_folder_is_named(tmp_path: Path):
    binary = tmp_path / "image.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    result = run(str(binary), str(tmp_path))
    assert isinstance(result.exception, ForesizeError), result.exception
    assert str(result.exception).splitlines() == [
        f"{binary}: cannot read (not UTF-8 text: byte 0)",
        f"{tmp_path}: cannot read (Is a directory)",
    ]


def test_no_foresize_objects_is_an_error(tmp_path: Path):
    path = tmp_path / "other.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = run(str(path))
    assert "no Foresize objects found" in str(result.exception)


def test_console_script_prints_one_line_and_exits_2(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from foresize.front.cli import main; main()",
            "validate",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {path}:13: spec.vertical.disruption.max_disrupted")
    assert "Traceback" not in proc.stderr


def test_names_the_api_server_refuses_are_refused_naming_the_field(tmp_path: Path):
    long_name = "a" * 300
    path = tmp_path / "names.yaml"
    path.write_text(
        "apiVersion: foresize.io/v1\nkind: AIScaleTarget\n"
        "metadata: {name: Web_Bad!, namespace: shop}\n"
        "spec: {scaleTargetRef: {kind: Deployment, name: web}}\n---\n"
        "apiVersion: foresize.io/v1\nkind: AIScaleTarget\n"
        f"metadata: {{name: {long_name}, namespace: Shop_X}}\n"
        "spec: {scaleTargetRef: {kind: Deployment, name: web}}\n---\n"
        "apiVersion: foresize.io/v1\nkind: AIScaleTarget\n"
        "metadata: {namespace: shop}\n"
        "spec: {scaleTargetRef: {kind: Deployment, name: web}}\n---\n"
        # Dots are allowed in a custom resource's name (a subdomain), and 253 characters.
        "apiVersion: foresize.io/v1\nkind: AIScaleTarget\n"
        f"metadata: {{name: web.v2-{'b' * 246}, namespace: shop}}\n"
        "spec: {scaleTargetRef: {kind: Deployment, name: web}}\n"
    )
    result = run(str(path))
    assert isinstance(result.exception, ForesizeError), result.output
    subdomain = (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character"
    )
    label = (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
        "'-', and must start and end with an alphanumeric character"
    )
    assert str(result.exception).splitlines() == [
        f"{path}:3: metadata.name: 'Web_Bad!' is not a valid name: {subdomain}",
        f"{path}:8: metadata.name: a 300-character string is not a valid name: must be no "
        "more than 253 characters",
        f"{path}:8: metadata.namespace: 'Shop_X' is not a valid namespace: {label}",
        f"{path}:13: metadata.name: required (the API server refuses an object without one)",
    ]


def test_field_lines_follow_block_flow_and_list_items(tmp_path: Path):
    path = tmp_path / "lines.yaml"
    path.write_text(
        "apiVersion: foresize.io/v1\n"
        "kind: AIScaleTarget\n"
        "metadata: {name: web, namespace: shop}\n"
        "spec:\n"
        "  scaleTargetRef: {kind: Deployment, name: web}\n"
        "  vertical:\n"
        "    mode: turbo\n"
        "    containers:\n"
        "      - name: app\n"
        "      - name: side\n"
        "        cpu: {lowerbound: 2, upperbound: 1}\n"
        "    bounds: {}\n"
    )
    result = run(str(path))
    lines = str(result.exception).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{path}:7",  # spec.vertical.mode
        f"{path}:11",  # spec.vertical.containers[1].cpu, a flow mapping on the item's line
        f"{path}:12",  # spec.vertical.bounds: unknown field
    ], lines


WINDOWS = """\
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: zone, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: zone}
  vertical:
    mode: auto
    maintenance:
      windows:
        - {schedule: "0 2 * * *", duration: 2h, timeZone: Europe/Berlim}
---
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: overlap, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: overlap}
  vertical:
    mode: auto
    maintenance:
      windows:
        - {schedule: "0 22 * * *", duration: 4h, timeZone: Europe/Berlin}
        - {schedule: "0 1 * * *", duration: 2h, timeZone: Europe/Berlin}
---
apiVersion: foresize.io/v1
kind: AIScaleTarget
metadata: {name: zero, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: zero}
  vertical:
    mode: auto
    budgets: {changes_per_workload_per_day: 0}
    maintenance:
      windows:
        - {schedule: "0 2 * * 8", duration: 2h}
"""


def test_windows_and_budgets_name_the_field_and_line(tmp_path: Path):
    path = tmp_path / "windows.yaml"
    path.write_text(WINDOWS)
    result = run(str(path))
    assert isinstance(result.exception, ForesizeError)
    lines = str(result.exception).splitlines()
    assert lines[0] == (
        f"{path}:10: spec.vertical.maintenance.windows[0].timeZone: 'Europe/Berlim' is not a"
        " time zone of the zone database (IANA names such as Europe/Berlin,"
        " America/New_York, UTC)"
    )
    assert lines[1].startswith(
        f"{path}:22: spec.vertical.maintenance.windows[1]: overlaps windows[0] ('0 22 * * *'"
        " for 4h Europe/Berlin)"
    )
    assert lines[2].startswith(
        f"{path}:31: spec.vertical.budgets.changes_per_workload_per_day: must be at least 1"
    )
    assert lines[3].startswith(f"{path}:34: spec.vertical.maintenance.windows[0].schedule:")
    assert "day-of-week '8' is outside 0-7" in lines[3]
    assert len(lines) == 4
