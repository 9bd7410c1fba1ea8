"""Modules stay under 600 lines (HELPERS.md's standard, issue 26's housekeeping): a module
past it holds more than one concept and is split along a seam, never allowed by a list
here."""

from __future__ import annotations

from pathlib import Path

from support.paths import ROOT

SOURCE = ROOT / "src"
MAX_LINES = 600
"""Past this a module is read by scrolling, not at a glance, and two concepts share it."""


def oversized(root: Path, limit: int = MAX_LINES) -> list[str]:
    """`path: lines` of every Python module under `root` longer than `limit` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root)}: {lines}")
    return found


def test_no_module_under_src_exceeds_600_lines():
    assert oversized(SOURCE) == []


def test_the_check_sees_a_module_one_line_too_long(tmp_path):
    package = tmp_path / "pkg" / "sub"
    package.mkdir(parents=True)
    (package / "fits.py").write_text("x = 1\n" * MAX_LINES)
    (package / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert oversized(tmp_path) == [f"pkg/sub/long.py: {MAX_LINES + 1}"]
