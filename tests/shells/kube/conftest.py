"""Fixtures of the kube-shell tests: the options of a real operator run in a test (the
strict API server they run against is shared with other folders: `tests/conftest.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from foresize.shells.kube.options import OperatorOptions
from foresize.testing.ports import free_port


@pytest.fixture
def operator_options() -> Callable[..., OperatorOptions]:
    """Options for a real operator in a test, overridable field by field: replica
    foresize-0 in namespace foresize, a pass every 0.2 s, /metrics on a free loopback port,
    no webhook (a test that wants it sets `webhook_port=free_port()`), 1 s shutdown grace."""

    def make(**overrides: Any) -> OperatorOptions:
        fields: dict[str, Any] = {
            "namespace": "foresize",
            "identity": "foresize-0",
            "interval": 0.2,
            "metrics_host": "127.0.0.1",
            "metrics_port": free_port(),
            "webhook": "webhook_port" in overrides,
            "webhook_host": "127.0.0.1",
            "shutdown_grace": 1.0,
        }
        return OperatorOptions(**(fields | overrides))

    return make
