"""The webhook's `--state` watcher (reliability.md R-1, R-3, R-9): whatever lands at the
path, the watcher logs it in one line naming the file, keeps serving the last good state
and keeps watching, so the next good edit is served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import pytest
import yaml

from foresize.core.admission.index import AdmissionIndex
from foresize.core.errors import ForesizeError
from foresize.shells.webhook.state_file import load_state_file, watch_state_file
from support.admission import target_manifest

POLL = 0.02


def state(*names: str) -> str:
    return yaml.safe_dump_all([target_manifest(n, ref=n) for n in names])


def served(index: AdmissionIndex | None) -> set[str]:
    """The workloads `index` has a target for (of the ones these tests write)."""
    assert index is not None
    return {n for n in ("web", "api", "db") if index.target_for("Deployment", "shop", n)}


class Watcher:
    """`watch_state_file` on `path`, polling every POLL seconds, installing into `.index`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index: AdmissionIndex | None = load_state_file(path)
        self.task: asyncio.Task[None] | None = None

    def install(self, index: AdmissionIndex) -> None:
        self.index = index

    async def __aenter__(self) -> Watcher:
        self.task = asyncio.create_task(watch_state_file(self.path, self.install, interval=POLL))
        await asyncio.sleep(0)  # the watcher has seen the file as loaded
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def settle(self) -> None:
        """Long enough for several polls and a reload in a worker thread."""
        for _ in range(25):
            await asyncio.sleep(POLL)
        assert self.task is not None and not self.task.done(), "the watcher died"


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_huge_integer_is_logged_and_the_watcher_keeps_watching(tmp_path, caplog):
    # a 5,000-digit maxReplicas raised ValueError in the loader; the watcher task
    # ended without a line and ignored every later edit, good ones included.
    path = tmp_path / "state.yaml"
    path.write_text(state("web"))
    caplog.set_level(logging.INFO, logger="foresize.shells.webhook")
    async with Watcher(path) as w:
        doc = target_manifest("api", ref="api", hmode="recommendation")
        doc["spec"]["horizontal"]["maxReplicas"] = "HUGE"
        path.write_text(yaml.safe_dump(doc).replace("HUGE", "2" * 5000))
        await w.settle()
        assert served(w.index) == {"web"}
        [line] = errors(caplog)
        assert line.startswith(f"keeping previous state: {path}:")
        assert "spec.horizontal.maxReplicas" in line and "5000 characters" in line
        path.write_text(state("web", "api"))
        await w.settle()
        assert served(w.index) == {"web", "api"}


async def test_an_unexpected_error_in_a_reload_is_logged_and_the_watcher_survives(
    tmp_path, caplog, monkeypatch
):
    from foresize.shells.webhook import state_file

    path = tmp_path / "state.yaml"
    path.write_text(state("web"))
    real = state_file.load_state_file

    def broken(p: Path) -> AdmissionIndex:
        raise RuntimeError("a bug")

    async with Watcher(path) as w:
        monkeypatch.setattr(state_file, "load_state_file", broken)
        path.write_text(state("api"))
        await w.settle()
        assert served(w.index) == {"web"}
        assert any("RuntimeError: a bug" in e for e in errors(caplog))
        monkeypatch.setattr(state_file, "load_state_file", real)
        path.write_text(state("db"))
        await w.settle()
        assert served(w.index) == {"db"}


async def test_a_fifo_at_the_state_path_is_refused_without_blocking(tmp_path, caplog):
    # open() of a FIFO waits for a writer: the reload thread hung for good, later
    # edits were never read and SIGTERM waited on that thread forever.
    path = tmp_path / "state.yaml"
    path.write_text(state("web"))
    async with Watcher(path) as w:
        path.unlink()
        os.mkfifo(path)
        try:
            await w.settle()
            assert f"keeping previous state: {path}: cannot read (not a regular file)" in (
                errors(caplog)
            )
        finally:
            # Without the fix a worker thread sits in open(): a writer releases it, so a
            # failing run ends instead of hanging the test session.
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        path.unlink()
        path.write_text(state("api"))
        await w.settle()
        assert served(w.index) == {"api"}


def test_a_device_is_not_a_state_file():
    with pytest.raises(ForesizeError, match="/dev/zero: cannot read \\(not a regular file\\)"):
        load_state_file(Path("/dev/zero"))


async def test_an_empty_state_file_keeps_the_last_good_state(tmp_path, caplog):
    # R-9: a 0-byte file (an editor's or `>`'s truncate, caught before the write) was
    # loaded as "no targets" and every pod went unpatched until the next change.
    path = tmp_path / "state.yaml"
    path.write_text(state("web"))
    async with Watcher(path) as w:
        for empty in ("", "\n  \n", "# nothing yet\n"):
            path.write_text(empty)
            await w.settle()
            assert served(w.index) == {"web"}
        assert sum("the state file is empty" in e for e in errors(caplog)) == 3
        path.write_text(yaml.safe_dump({"kind": "List", "items": []}))  # empty, on purpose
        await w.settle()
        assert served(w.index) == set()
