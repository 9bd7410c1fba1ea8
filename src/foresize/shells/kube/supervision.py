"""Supervision of the operator's tasks (`foresize operator`, see `kube/operator.py`):
every task is meant to run until the stop flag; one that ends on its own is a failure that
stops the process (exit 1, so Kubernetes restarts it). SIGTERM/SIGINT set the stop flag."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import signal
from typing import Any

log = logging.getLogger("foresize.operator")  # the operator's log: these are its lines


class StopOnSignal:
    """SIGTERM/SIGINT set the stop flag (the first one is logged). `install` is run again
    once Kopf has put in its own handlers, which would otherwise stop Kopf alone."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.loop = asyncio.get_running_loop()
        self.received: list[str] = []

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self.loop.add_signal_handler(sig, self._received, sig)

    def _received(self, sig: signal.Signals) -> None:
        if not self.received:
            log.info("%s received: stopping", sig.name)
        self.received.append(sig.name)
        self.stop.set()


class Supervisor:
    """The operator's tasks by name. Each is meant to run until the stop flag: `watch`
    returns at stop or when one ends on its own (a failure); `stop_all` gives them the
    shutdown grace, then cancels the late ones."""

    def __init__(self) -> None:
        self.tasks: dict[asyncio.Task[Any], str] = {}

    def start(self, coro: Any, name: str) -> None:
        self.tasks[asyncio.create_task(coro, name=f"foresize:{name}")] = name

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """A task started elsewhere, named `foresize:<name>`."""
        self.tasks[task] = task.get_name().removeprefix("foresize:")

    async def watch(self, stop: asyncio.Event) -> str | None:
        """Until stop, or until a task ends on its own: then it is logged and its name
        returned (the last one's, if several ended at once)."""
        stopper = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait(
                {stopper, *self.tasks}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopper.cancel()
        failed = [t for t in done if t is not stopper and not stop.is_set()]
        for task in failed:
            error = None if task.cancelled() else task.exception()
            log.error(
                "%s ended unexpectedly (%s): stopping so that Kubernetes restarts the operator",
                self.tasks[task],
                error or "no error",
                exc_info=error,
            )
        return self.tasks[failed[-1]] if failed else None

    async def stop_all(self, grace: float) -> None:
        """Wait up to `grace` s for the tasks to end after stop; cancel those still running."""
        pending = [t for t in self.tasks if not t.done()]
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace)
        for task in late:
            log.warning("%s did not stop within %.0fs; cancelled", self.tasks[task], grace)
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=1.0)


# How long the tasks still running once the operator has stopped get to end on their own.
# Normally there are none; under load, Kopf's (cancelled by `run_kopf`, which waits for them
# 5 s at most, or with it) may still be closing their per-object worker pools. Left to
# asyncio.run, they are cancelled all at once together with the helper task each pool needs to
# see its workers gone, and a Kopf watcher whose worker was still finishing then waits forever
# in its clean-up for a pool that cannot close (Kopf's `Scheduler.close`): the process would
# hang with its Leases released. Waited for here, with the helpers alive, they end within
# Kopf's queueing exit timeout (2 s); three seconds leaves room for a loaded machine.
LEFTOVER_TASKS_GRACE = 3.0


async def drain_other_tasks(grace: float = LEFTOVER_TASKS_GRACE) -> list[str]:
    """Wait up to `grace` s for every other task of the loop to end (including the ones they
    start meanwhile), then cancel those left, and those they start, for one more second.
    Returns each task still running after that, with where it waits: what asyncio.run's
    clean-up would wait on. For the real process only: in a shared loop (tests) the other
    tasks are not the operator's."""
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    cancelled: set[asyncio.Task[Any]] = set()

    async def until(deadline: float, cancel: bool) -> set[asyncio.Task[Any]]:
        while True:
            left = {t for t in asyncio.all_tasks() if t is not current and not t.done()}
            if not left or loop.time() >= deadline:
                return left
            timeout = deadline - loop.time()
            if cancel:  # and look again soon: a task's clean-up may start another
                for task in left - cancelled:
                    task.cancel()
                cancelled.update(left)
                timeout = min(timeout, 0.05)
            await asyncio.wait(left, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)

    left = await until(loop.time() + grace, cancel=False)
    if left:
        left = await until(loop.time() + 1.0, cancel=True)
    return [_where(task) for task in sorted(left, key=lambda t: t.get_name())]


def _where(task: asyncio.Task[Any]) -> str:
    """The task's name and its await chain, innermost first: `wait (file:line) <- ...`."""
    chain = []
    awaiting: Any = task.get_coro()
    while awaiting is not None:
        frame = getattr(awaiting, "cr_frame", None) or getattr(awaiting, "gi_frame", None)
        if frame is None:
            break
        chain.append(f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})")
        awaiting = getattr(awaiting, "cr_await", None) or getattr(awaiting, "gi_yieldfrom", None)
    return f"{task.get_name()}: {' <- '.join(reversed(chain)) or repr(task.get_coro())}"


# What the shutdown may take beyond the tasks' grace: closing the servers and the API client,
# the leftover tasks' `LEFTOVER_TASKS_GRACE` plus one second, then the event loop's own
# cleanup. asyncio.run waits for every cancelled task and every worker thread (a pass in
# `to_thread`) with no bound in Python 3.11, so one stuck task or thread would keep a process
# that has already given up its Leases alive until the kubelet's SIGKILL (and forever when
# nothing sends SIGTERM: Kopf died). Ten seconds is many times what a clean stop takes (under
# 2 s in the fault tests) and, with the default 5 s grace, stays inside Kubernetes' default
# 30 s terminationGracePeriodSeconds.
HUNG_SHUTDOWN_SLACK = 10.0


def exit_if_shutdown_hangs(seconds: float) -> None:
    """From now on, a process still alive after `seconds` writes every thread's stack to
    stderr (what hung, for the bug report) and exits 1. Armed by the real process only, as
    the stop begins: it runs in a C thread, so a blocked event loop cannot hold it up.
    That exit runs no clean-up (no `finally`, no atexit), so the process keeps nothing on
    disk that would need one: the webhook's private key is there only while it is loaded
    (`kube/tls.py`), and the SQLite history is the user's file."""
    faulthandler.dump_traceback_later(seconds, exit=True)
