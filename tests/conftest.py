"""Shared fixtures: the strict API server every kube-shell test runs against."""

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
