"""Where the project and the tests' data are, for tests at any depth."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/paths.py -> the project root
DATA = ROOT / "tests" / "data"
