"""Errors that reach users. Each names the file, line or field at fault; the CLI prints them
as one clear message (never a traceback) and exits with status 2."""


class ForesizeError(Exception):
    """A user-facing error: bad input, a file that cannot be read, an unreachable server."""
