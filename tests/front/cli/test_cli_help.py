"""Every `--help` names the value to write after an option (`DURATION`, `FILE`, `N`, nothing
for a flag), as kubectl, helm and click do, never a Python type (`<str>`, `<bool>`) as newer
typer prints by default."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from foresize.front.cli import app

# What newer typer shows when an option has no metavar.
PYTHON_TYPES = re.compile(r"<(bool|str|int|float|path|list\[)|\b(int|float) range\b")


def _command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    paths: list[list[str]] = [[]]
    for name, cmd in root.commands.items():
        paths.append([name])
        for sub in getattr(cmd, "commands", {}):
            paths.append([name, sub])
    return paths


COMMANDS = _command_paths()


def _help(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}, color=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_checked():
    names = {" ".join(p) for p in COMMANDS}
    assert {"simulate", "recommend", "operator", "validate", "bench sim", "bench chaos"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "foresize")
def test_help_shows_no_python_type_names(path):
    text = _help(path)
    found = sorted({m.group(0) for m in PYTHON_TYPES.finditer(text)})
    assert not found, f"foresize {' '.join(path)} --help shows {found}"


def _value_column(text: str, option: str) -> str:
    line = next(line for line in text.splitlines() if re.search(rf"{option}\b", line))
    return line.split(option, 1)[1].split()[0:2]


def test_help_names_what_to_write():
    simulate = _help(["simulate"])
    for option, metavar in (
        ("--scenario", "NAME|FILE"),
        ("--duration", "DURATION"),
        ("--seed", "N"),
        ("--events", "FILE"),
        ("--report", "DIR"),
        ("--cpu-price", "NUMBER"),
    ):
        assert metavar in _value_column(simulate, option), option
    # A flag takes no value: its help text follows the name directly.
    assert _value_column(simulate, "--wide")[0] == "One"
    assert _value_column(simulate, "--help")[0] == "Show"
    assert "DURATION" in _value_column(_help(["operator"]), "--lease-duration")
    assert "FILE" in _value_column(_help(["webhook"]), "--cert")
