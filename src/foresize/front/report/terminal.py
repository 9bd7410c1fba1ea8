"""The terminal the tables are printed on."""

from __future__ import annotations

import os
import shutil


def terminal_width(default: int = 120) -> int:
    """The terminal's width (`COLUMNS` first), or `default` when not a terminal."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return shutil.get_terminal_size((default, 24)).columns
