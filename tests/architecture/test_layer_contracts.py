"""The layering contracts in pyproject.toml can fail: each forbidden import below, planted in
a copy of the tree, must be reported by `lint-imports` (the outside review showed one-line
mutations that every contract of the old tree let through: N-01, N-02). And the core reads
no clock and opens no file, which no import contract can see."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.paths import ROOT

PACKAGE = ROOT / "src" / "foresize"

# (module file, planted import, the contract that must break)
MUTATIONS = [
    (
        "core/recommend/core.py",
        "foresize.adapters.history.sqlite",
        "The core imports nothing outside the core",
    ),
    (
        "core/vertical/planner.py",
        "foresize.adapters.history.traces",
        "The core imports nothing outside the core",
    ),
    (
        "core/cluster/model.py",
        "foresize.testing.ports",
        "The core imports nothing outside the core",
    ),
    (
        "shells/kube/shell.py",
        "foresize.testing.apiserver",
        "The strict test API server is used only by the benchmarks",
    ),
    ("core/recommend/series.py", "os", "The core does no I/O"),
    ("core/forecast/select.py", "time", "The core does no I/O"),
    ("core/api/load.py", "pathlib", "The core does no I/O"),
    ("adapters/history/sqlite.py", "foresize.shells.sim.runner", "Floors"),
    ("shells/sim/runner.py", "foresize.bench.sim", "Floors"),
    ("shells/sim/runner.py", "foresize.shells.kube.shell", "The real and the simulated cluster"),
    ("core/vertical/planner.py", "foresize.core.horizontal.planner", "The planners are unaware"),
    ("core/cluster/model.py", "foresize.core.reconcile", "Inside the core"),
]


def lint_with(tmp: Path, module: str, target: str) -> str:
    """`lint-imports` on a copy of the tree with one planted import; its report."""
    copy = tmp / "src"
    shutil.copytree(PACKAGE, copy / "foresize", ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "foresize" / module).open("a") as f:
        f.write(f"\nimport {target}  # planted by test_layer_contracts\n")
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache", "--no-logo", "--config", str(ROOT / "pyproject.toml")],
        cwd=tmp,
        env={**os.environ, "PYTHONPATH": str(copy), "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    # Two at a time (the machine's cores): each run builds the import graph anew.
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(
            pool.map(lambda m: lint_with(tmp_path_factory.mktemp("layers"), m[0], m[1]), MUTATIONS)
        )


@pytest.mark.parametrize(("index", "mutation"), list(enumerate(MUTATIONS)), ids=lambda v: str(v))
def test_a_forbidden_import_breaks_its_contract(
    reports: list[str], index: int, mutation: tuple[str, str, str]
) -> None:
    module, target, contract = mutation
    report = reports[index]
    source = "foresize." + module.removesuffix(".py").replace("/", ".")
    broken = [line for line in report.splitlines() if " BROKEN" in line]
    assert [line for line in broken if line.startswith(contract)], report
    assert f"{source} -> {target}" in report


# Calls that read the wall clock, touch files or print: none belongs in the core.
IMPURE_CALLS = {"open", "print", "input"}
IMPURE_ATTRIBUTES = {"now", "utcnow", "today", "read_text", "write_text", "read_bytes"}


def test_the_core_reads_no_clock_and_opens_no_file() -> None:
    found = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if (isinstance(func, ast.Name) and name in IMPURE_CALLS) or (
                isinstance(func, ast.Attribute) and name in IMPURE_ATTRIBUTES
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}()")
    assert found == []
