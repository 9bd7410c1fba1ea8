"""Structured JSON logs: one object per line, with any `extra=` fields kept as keys.

Kopf, aiohttp and Foresize all log through the standard `logging` module; installing
`JsonFormatter` on the root handler makes every line machine-readable (for Loki, Cloud
Logging, `jq`) without changing any call site.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

_STANDARD = set(vars(logging.makeLogRecord({})))
_STANDARD |= {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = (
                    value
                    if isinstance(value, str | int | float | bool | type(None))
                    else str(value)
                )
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, separators=(",", ":"))


def setup_logging(level: str = "info", json_format: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The HTTP clients log every request at INFO ("HTTP Request: PATCH ... 200 OK"): a
    # Lease renewal every few seconds, each poll and status write. Their lines are kept for
    # --log-level debug only; failures reach Foresize's own logs as results.
    quiet = logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING
    for name in CHATTY_HTTP_LOGGERS:
        logging.getLogger(name).setLevel(quiet)


CHATTY_HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")
