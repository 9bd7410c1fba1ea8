"""Loopback ports for test servers (the strict API server's peers, Prometheus, webhooks)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port free a moment ago: bound to port 0, read, released. Another process
    could take it before the caller binds; on a test machine that race is rare enough."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
