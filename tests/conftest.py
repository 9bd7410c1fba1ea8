"""The fixtures tests in several folders share: only the strict API server, which the
kube-shell tests (`tests/shells/kube/`), the test server's own (`tests/testing/`), the
metrics-server poller's (`tests/adapters/history/`) and the vertical worker's against a
real cluster (`tests/core/vertical/`) run against. A fixture one folder uses lives in that
folder's `conftest.py` (`tests/shells/kube/conftest.py`: the options of a real operator
run)."""

from __future__ import annotations

import pytest

from foresize.testing.apiserver import StrictApiServer


@pytest.fixture
async def apiserver():
    """A strict API server on a free loopback port, with the Foresize CRDs installed."""
    server = StrictApiServer(bookmark_interval=1.0)
    await server.start()
    yield server
    await server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `slow` first, the rest in their order: pytest-xdist hands tests
    to its workers in this order, and a long test handed out last keeps one worker busy
    after the other has finished (about a minute of the suite's wall time on two cores)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
