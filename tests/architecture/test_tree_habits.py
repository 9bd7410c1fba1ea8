"""Habits that keep the tree's shape (issue 28 step 6, N-09): tests live in the folder that
mirrors the code they test and never import one another (a builder two tests share lives
in `tests/support/`), and no module imports another module's private (`_name`) names (a
name two modules share is public, in its one home).

Ruff's own rule for private imports (PLC2701) skips imports inside one package, so it
cannot see `foresize.core.api.target` importing `_Base` from `foresize.core.api.fields`;
this walk of the syntax trees can."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from support.paths import ROOT

TESTS = ROOT / "tests"
SOURCE = ROOT / "src" / "foresize"


def imported_test_modules(source: str) -> list[str]:
    """`line: module` for each import of a test module (`test_x`, `a.b.test_x`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        else:
            continue
        found += [
            f"{node.lineno}: {m}" for m in modules if m.rsplit(".", 1)[-1].startswith("test_")
        ]
    return found


def imported_private_names(source: str) -> list[str]:
    """`line: module._name` for each `from foresize... import _name`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("foresize"):
            found += [
                f"{node.lineno}: {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def _each_file(root: Path, check) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in sorted(root.rglob("*.py"))
        for hit in check(path.read_text())
    ]


def test_no_test_file_imports_another():
    assert _each_file(TESTS, imported_test_modules) == []


def test_no_test_file_sits_at_the_tests_root():
    """Every test file is in the folder that mirrors its code (`tests/core/vertical/` for
    `src/foresize/core/vertical/`); `tests/architecture/` holds the checks of the tree."""
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_no_module_imports_another_modules_private_names():
    assert _each_file(SOURCE, imported_private_names) == []


def test_the_walks_find_what_they_look_for():
    """The checks can fail: planted imports are found, the allowed ones are not."""
    planted = (
        "import test_other\n"
        "from support.recommend import flat_history\n"
        "from a.test_b import c\n"
        "from foresize.core.api.fields import _Base, OpenModel\n"
        "from foresize.core.api import __version__\n"
    )
    assert imported_test_modules(planted) == ["1: test_other", "3: a.test_b"]
    assert imported_private_names(planted) == ["4: foresize.core.api.fields._Base"]


def fixture_names(source: str) -> list[str]:
    """The fixtures a module defines (`@pytest.fixture` functions)."""
    return [
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    ]


@functools.cache
def _test_trees() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple((path, ast.parse(path.read_text())) for path in sorted(TESTS.rglob("*.py")))


def folders_using(name: str) -> set[str]:
    """The test folders (`shells/kube`, `core/vertical`, ...) with a test or fixture that
    takes `name` as a parameter."""
    folders = set()
    for path, tree in _test_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and name in {
                a.arg for a in node.args.args
            }:
                folders.add(str(path.parent.relative_to(TESTS)))
    return folders


def test_the_root_conftest_holds_only_fixtures_several_folders_share():
    """A fixture one folder uses lives in that folder's `conftest.py` (issue 28 step 6)."""
    root = fixture_names((TESTS / "conftest.py").read_text())
    assert root, "the root conftest defines no fixture: drop it"
    assert {
        name: sorted(folders_using(name)) for name in root if len(folders_using(name)) < 2
    } == {}


def test_the_fixture_walk_finds_fixtures():
    planted = (
        "import pytest\n@pytest.fixture\ndef a(): ...\n"
        "@pytest.fixture(scope='module')\nasync def b(): ...\ndef c(): ...\n"
    )
    assert fixture_names(planted) == ["a", "b"]
    assert "shells/kube" in folders_using("operator_options")
