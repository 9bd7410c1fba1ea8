"""docs/architecture.md's code map matches the tree: every package is in it, and every
module a row names exists (code moves; the map must follow)."""

from __future__ import annotations

import re

import pytest

from support.paths import ROOT

PACKAGE = ROOT / "src" / "foresize"
ROW = re.compile(r"^\| (`[^|]+`(?:, `[^|]+`)*) \| [^|]+ \| (.+) \|$")
MODULE = re.compile(r"`([a-z_]+(?:/[a-z_]+){0,2}/?)`")


def code_map_rows() -> list[tuple[list[str], str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("### Code map", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            rows.append((re.findall(r"`([^`]+)`", m[1]), m[2]))
    return rows


FLOORS = ("core", "adapters", "shells", "bench", "front")


def exists(name: str, packages: list[str]) -> bool:
    """A module or package named in a row: inside one of the row's packages, or a path from
    the package root (`core/admission/`)."""
    name = name.rstrip("/")
    bases = [PACKAGE / p.rstrip("/") for p in packages if p.endswith("/")] + [PACKAGE]
    return any((b / name).is_dir() or (b / f"{name}.py").is_file() for b in bases)


def rooms_on_disk() -> set[str]:
    """Every room of every floor (`core/vertical`, `core/reconcile`, `bench/chaos`, ...) and
    the test server; the floors themselves hold no code of their own."""
    rooms = {"testing"}
    for floor in FLOORS:
        here = PACKAGE / floor
        rooms |= {f"{floor}/{p.name}" for p in here.iterdir() if (p / "__init__.py").is_file()}
        rooms |= {f"{floor}/{p.stem}" for p in here.glob("*.py")} - {f"{floor}/__init__"}
    return rooms


def test_the_floors_are_the_only_top_level_packages():
    top = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert (top, modules) == ({*FLOORS, "testing"}, set())


def test_every_package_is_on_the_map():
    rows = code_map_rows()
    mapped = {p.rstrip("/").removesuffix(".py") for packages, _ in rows for p in packages}
    assert rooms_on_disk() - mapped == set()


def test_every_module_the_map_names_exists():
    missing = [
        (packages, name)
        for packages, text in code_map_rows()
        for name in MODULE.findall(text)
        if not exists(name, packages)
    ]
    assert missing == []


def test_the_install_guides_mode_comment_states_the_modes_quantiles():
    """Audit ux §1: install.md said balanced was "p90 CPU, p99 memory" while the code asks
    for p98 and p99.9; the comment is checked against `mode_quantile`."""
    from foresize.core.recommend.core import mode_quantile

    text = (ROOT / "docs" / "install.md").read_text()
    m = re.search(r"mode: (\w+) +# [^\n]*?p([\d.]+) CPU, p([\d.]+) memory", text)
    assert m, "install.md's example AIScaleTarget no longer states its mode's quantiles"
    mode, cpu, memory = m[1], float(m[2]) / 100, float(m[3]) / 100
    assert (cpu, memory) == pytest.approx(
        (mode_quantile(mode, "cpu"), mode_quantile(mode, "memory"))
    )


def test_each_room_has_one_row():
    # A merge that keeps both sides of an edited row (git's union driver did) leaves two
    # rows for one package, and the reader cannot tell which is current.
    rooms = [p for packages, _ in code_map_rows() for p in packages]
    assert sorted({p for p in rooms if rooms.count(p) > 1}) == []
