"""Builders shared by the tests (moved out of test_webhook_abuse.py)."""

from __future__ import annotations

import asyncio

from foresize.core.admission.index import AdmissionIndex
from foresize.shells.webhook.server import ServerLimits, WebhookServer, create_app

FAST = ServerLimits(
    handshake_timeout=1.0,
    header_timeout=0.4,
    body_timeout=0.4,
    idle_timeout=0.4,
    max_connections=1200,
    max_body=64 * 1024,
    inline_body=16 * 1024,
)


class Server:
    def __init__(self, limits: ServerLimits = FAST):
        self.reasons: list[str] = []
        self.app = create_app(
            lambda: AdmissionIndex(), limits=limits, on_bad_request=self.reasons.append
        )
        self.server = WebhookServer(self.app, host="127.0.0.1", port=0)

    async def __aenter__(self) -> Server:
        self.port = await self.server.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.server.stop()

    async def connect(self):
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def request(self, path: str, body: bytes = b"", method: str = "POST") -> tuple:
        reader, writer = await self.connect()
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"Content-Type: application/json\r\n\r\n" + body)
        await writer.drain()
        status_line = await reader.readline()
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        data = await reader.readexactly(int(headers.get("content-length", 0)))
        writer.close()
        return int(status_line.split()[1]), data
